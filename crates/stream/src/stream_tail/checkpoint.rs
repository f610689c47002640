//! A stream consumer's checkpoints: per stream and shard, the sequence number consumed up to and
//! whether the shard is finished, in a small DynamoDB table keyed (stream, shard). Written only
//! once the consumer has made the records before it durable (archived, or indexed).

use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::AdapterError;
use std::collections::HashMap;

pub(crate) const STREAM: &str = "stream";
pub(crate) const SHARD: &str = "shard";
const SEQUENCE: &str = "sequence";
const FINISHED: &str = "finished";

/// Where one shard was consumed up to.
#[derive(Debug, Clone, Default)]
pub(super) struct Checkpoint {
    pub(super) sequence: Option<String>,
    pub(super) finished: bool,
}

pub(super) async fn load_checkpoints(
    dynamo: &Dynamo,
    checkpoint_table: &str,
    arn: &str,
) -> Result<HashMap<String, Checkpoint>, AdapterError> {
    let mut out = HashMap::new();
    let stream = AttributeValue::S(arn.to_string());
    let items =
        precise_ttl_dynamodb::control::read_partition(dynamo, checkpoint_table, STREAM, stream)
            .await
            .map_err(|e| AdapterError::from_sdk("Query", &dynamo.describe_endpoint(), e))?;
    for item in &items {
        let Some(AttributeValue::S(shard)) = item.get(SHARD) else {
            continue;
        };
        out.insert(
            shard.clone(),
            Checkpoint {
                sequence: match item.get(SEQUENCE) {
                    Some(AttributeValue::S(s)) => Some(s.clone()),
                    _ => None,
                },
                finished: matches!(item.get(FINISHED), Some(AttributeValue::Bool(true))),
            },
        );
    }
    Ok(out)
}

pub(super) async fn save_checkpoint(
    dynamo: &Dynamo,
    checkpoint_table: &str,
    arn: &str,
    shard: &str,
    cp: &Checkpoint,
) -> Result<(), AdapterError> {
    let mut put = dynamo
        .write
        .put_item()
        .table_name(checkpoint_table)
        .item(STREAM, AttributeValue::S(arn.to_string()))
        .item(SHARD, AttributeValue::S(shard.to_string()))
        .item(FINISHED, AttributeValue::Bool(cp.finished));
    if let Some(seq) = &cp.sequence {
        put = put.item(SEQUENCE, AttributeValue::S(seq.clone()));
    }
    put.send()
        .await
        .map_err(|e| AdapterError::from_sdk("PutItem", &dynamo.describe_endpoint(), e))?;
    Ok(())
}
