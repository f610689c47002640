//! Watching a table's DynamoDB Stream for deletions: how the benchmark sees, from outside the
//! sweeper, when each item really disappeared. One poll is one pass over the shards; retrying
//! (and pausing between retries) is the caller's policy.

use aws_sdk_dynamodb::types::{StreamSpecification, StreamViewType, TableDescription};
use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType, ShardIteratorType};
use precise_ttl_core::ErrorClass;
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::AdapterError;

/// One change seen on the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    pub kind: EventKind,
    /// The partition key's value as text (a String key as is, a Number as its digits).
    pub partition_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    Insert,
    Modify,
    Remove,
    /// DynamoDB Local labels its own TTL deletes with an event name the SDK does not know.
    Other(String),
}

/// The table's full description (stream settings are not part of [`precise_ttl_dynamodb::TableShape`]).
pub async fn describe_table(
    dynamo: &Dynamo,
    table: &str,
) -> Result<TableDescription, AdapterError> {
    let out = dynamo
        .query
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| AdapterError::from_sdk("DescribeTable", &dynamo.describe_endpoint(), e))?;
    Ok(out
        .table
        .unwrap_or_else(|| TableDescription::builder().build()))
}

/// The table's stream as DescribeTable says: its view type (`None`: no stream on) and the ARN of
/// its latest stream.
pub async fn current_stream(
    dynamo: &Dynamo,
    table: &str,
) -> Result<(Option<StreamViewType>, Option<String>), AdapterError> {
    let description = describe_table(dynamo, table).await?;
    let view = description
        .stream_specification()
        .filter(|s| s.stream_enabled())
        .and_then(|s| s.stream_view_type())
        .cloned();
    Ok((view, description.latest_stream_arn().map(str::to_string)))
}

/// Turns the table's stream on (keys only), if it is not on already.
pub async fn enable_keys_stream(dynamo: &Dynamo, table: &str) -> Result<(), AdapterError> {
    let on = describe_table(dynamo, table)
        .await?
        .stream_specification()
        .is_some_and(|s| s.stream_enabled());
    if on {
        return Ok(());
    }
    turn_on_stream(dynamo, table, StreamViewType::KeysOnly).await
}

pub async fn turn_on_stream(
    dynamo: &Dynamo,
    table: &str,
    view: StreamViewType,
) -> Result<(), AdapterError> {
    dynamo
        .query
        .update_table()
        .table_name(table)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view)
                .build()
                .expect("enabled is set"),
        )
        .send()
        .await
        .map_err(|e| AdapterError::from_sdk("UpdateTable", &dynamo.describe_endpoint(), e))?;
    Ok(())
}

/// Reads a table's stream from "now" on, across all its shards.
#[derive(Debug)]
pub struct RemovalStream {
    client: aws_sdk_dynamodbstreams::Client,
    iterators: Vec<Option<String>>,
}

pub(crate) fn stream_error(operation: &'static str, e: impl std::fmt::Display) -> AdapterError {
    AdapterError::Call {
        operation,
        class: ErrorClass::Transient,
        message: e.to_string(),
    }
}

/// A failed stream call: transient (the caller reads again), unless the stream refused access:
/// no retry brings a missing `dynamodb:GetRecords` (or `DescribeStream`, `GetShardIterator`),
/// so that one is fatal and names the action.
pub(crate) fn stream_call_error<E>(
    operation: &'static str,
    endpoint: &str,
    e: aws_sdk_dynamodbstreams::error::SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> AdapterError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    // Credentials that cannot be had are for good too (an expired SSO session, a refused role).
    if let Some(failure) = precise_ttl_dynamodb::error::credentials_failure(endpoint, &e) {
        return failure;
    }
    match precise_ttl_dynamodb::error::denial(&e) {
        Some(denial) => AdapterError::PermissionDenied {
            denial,
            endpoint: endpoint.to_string(),
        },
        None => stream_error(operation, aws_sdk_dynamodb::error::DisplayErrorContext(e)),
    }
}

/// `map_err` for a bench stream call: any failure is transient, with the SDK's whole context.
fn sdk_error<E: std::error::Error>(operation: &'static str) -> impl FnOnce(E) -> AdapterError {
    move |e| stream_error(operation, aws_sdk_dynamodb::error::DisplayErrorContext(e))
}

impl RemovalStream {
    /// Opens every shard of the table's latest stream at LATEST: only changes from now on.
    pub async fn open_latest(dynamo: &Dynamo, table: &str) -> Result<Self, AdapterError> {
        let arn = describe_table(dynamo, table)
            .await?
            .latest_stream_arn()
            .ok_or_else(|| stream_error("DescribeTable", format!("table {table:?} has no stream")))?
            .to_string();
        let stream = dynamo
            .streams
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await
            .map_err(sdk_error("DescribeStream"))?;
        let mut iterators = Vec::new();
        for shard in stream
            .stream_description()
            .map(|d| d.shards())
            .unwrap_or_default()
        {
            let Some(id) = shard.shard_id() else { continue };
            let it = dynamo
                .streams
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(id)
                .shard_iterator_type(ShardIteratorType::Latest)
                .send()
                .await
                .map_err(sdk_error("GetShardIterator"))?;
            iterators.push(it.shard_iterator().map(str::to_string));
        }
        Ok(RemovalStream {
            client: dynamo.streams.clone(),
            iterators,
        })
    }

    /// One `GetRecords` per open shard; the events in order.
    pub async fn poll(&mut self) -> Result<Vec<StreamEvent>, AdapterError> {
        let mut events = Vec::new();
        for slot in &mut self.iterators {
            let Some(it) = slot.clone() else { continue };
            // A failed read leaves the shard's iterator where it was; the caller decides how long
            // to wait before the next poll.
            let out = self
                .client
                .get_records()
                .shard_iterator(it)
                .limit(1000)
                .send()
                .await
                .map_err(sdk_error("GetRecords"))?;
            *slot = out.next_shard_iterator().map(str::to_string);
            for record in out.records() {
                let kind = match record.event_name() {
                    Some(OperationType::Insert) => EventKind::Insert,
                    Some(OperationType::Modify) => EventKind::Modify,
                    Some(OperationType::Remove) => EventKind::Remove,
                    Some(other) => EventKind::Other(other.as_str().to_string()),
                    None => EventKind::Other(String::new()),
                };
                let partition_key = record
                    .dynamodb()
                    .and_then(|d| d.keys())
                    .and_then(|k| {
                        // One key attribute for our bench tables; take any scalar.
                        k.values().find_map(|v| match v {
                            AttributeValue::S(s) => Some(s.clone()),
                            AttributeValue::N(n) => Some(n.clone()),
                            _ => None,
                        })
                    })
                    .unwrap_or_default();
                events.push(StreamEvent {
                    kind,
                    partition_key,
                });
            }
        }
        Ok(events)
    }
}
