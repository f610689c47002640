//! The engine's [`ExpiryStore`] on DynamoDB: a Query on the sparse expiry index and a
//! conditional DeleteItem per item (or PartiQL batches of them). The index's partition key is a
//! shard number in our layout, a window label in the 2022 blog's: [`IndexPartition`].

use crate::connect::Dynamo;
use crate::error::{AdapterError, store_error};
use crate::item::ItemKey;
use crate::table::TableShape;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, BatchStatementError, BatchStatementErrorCodeEnum, BatchStatementRequest,
    ReturnConsumedCapacity, ReturnValue,
};
use precise_ttl_core::due_rule::{self, CONDITION_TOKENS};
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Shard, TtlLayout, WindowLabel};
use precise_ttl_engine::{
    DeleteOutcome, DueItem, DuePage, DuePageOf, DueQueryOf, ExpiryStore, StoreError,
};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

// `ttl` is a reserved word in DynamoDB expressions, so every name goes through a placeholder.
const KEY_CONDITION: &str = "#shard = :shard AND #ttl BETWEEN :oldest AND :now";
// BETWEEN on Number operands is false for a String or missing attribute; `attribute_type` says
// the rule out loud rather than leaning on that.

/// How deletes are sent: a setting's value, defined with its name and parser in the engine's
/// settings (`run` and the Lambda read it alike).
pub use precise_ttl_engine::settings::DeleteMode;

/// Whole batch calls that failed with 5xx in a row before `Auto` tries `DeleteItem` instead.
const BATCH_5XX_BEFORE_PROBE: u32 = 3;

/// A partition key value of the expiry index, as DynamoDB holds it.
pub trait IndexPartition:
    Clone + Send + Sync + std::fmt::Debug + std::fmt::Display + 'static
{
    /// The type the index's partition key attribute must have ("N" or "S").
    const ATTRIBUTE_TYPE: &'static str;
    fn attribute_value(&self) -> AttributeValue;
}

/// Our layout: a shard number.
impl IndexPartition for Shard {
    const ATTRIBUTE_TYPE: &'static str = "N";
    fn attribute_value(&self) -> AttributeValue {
        AttributeValue::N(self.0.to_string())
    }
}

/// The 2022 blog's layout: a window label.
impl IndexPartition for WindowLabel {
    const ATTRIBUTE_TYPE: &'static str = "S";
    fn attribute_value(&self) -> AttributeValue {
        AttributeValue::S(self.0.clone())
    }
}

/// The most statements DynamoDB takes in one `BatchExecuteStatement`.
const MAX_BATCH_STATEMENTS: usize = 25;

/// Sweeps one table through its expiry index, whose partitions are `P`s.
#[derive(Debug, Clone)]
pub struct DynamoStore<P: IndexPartition = Shard> {
    dynamo: Dynamo,
    table: String,
    layout: TtlLayout,
    key_names: Vec<String>,
    mode: DeleteMode,
    /// The PartiQL delete for this table's key, built once.
    statement: String,
    /// `Auto` only: PartiQL was refused and single deletes took over (shared by clones).
    fallen_back: Arc<AtomicBool>,
    /// `Auto` only: whole batch calls answered with 5xx in a row.
    batch_5xx: Arc<AtomicU32>,
    /// Inline capture: each delete returns the old image and its record goes here first.
    archive: Option<crate::capture::Archive>,
    /// The table's write capacity when it was opened (for the backlog's budget).
    write_capacity: precise_ttl_core::capacity::WriteCapacity,
    partition: PhantomData<fn() -> P>,
}

impl DynamoStore<Shard> {
    /// Checks the table and its expiry index, then returns a store ready to sweep.
    pub async fn open(
        dynamo: Dynamo,
        table: &str,
        layout: TtlLayout,
    ) -> Result<Self, AdapterError> {
        Self::open_index(dynamo, table, layout).await
    }
}

impl DynamoStore<Shard> {
    /// A store that deletes `table`'s items by key under the expiry rule, for a layout that
    /// finds them elsewhere than in an index of the table (the expiry queue): the table must
    /// exist; no index is asked for.
    pub async fn open_for_deletes(
        dynamo: Dynamo,
        table: &str,
        layout: TtlLayout,
    ) -> Result<Self, AdapterError> {
        let shape = TableShape::require(&dynamo, table).await?;
        Ok(Self::from_shape(dynamo, table, &shape, layout))
    }
}

impl DynamoStore<WindowLabel> {
    /// Checks the table and its blog window index (`layout.shard_attribute` names the window
    /// attribute, a String), then returns a store ready to sweep it.
    pub async fn open_blog_windows(
        dynamo: Dynamo,
        table: &str,
        layout: TtlLayout,
    ) -> Result<Self, AdapterError> {
        Self::open_index(dynamo, table, layout).await
    }
}

impl<P: IndexPartition> DynamoStore<P> {
    async fn open_index(
        dynamo: Dynamo,
        table: &str,
        layout: TtlLayout,
    ) -> Result<Self, AdapterError> {
        // TableShape retries a throttled or failed DescribeTable; an unreachable endpoint or a
        // missing table fails at once with a clear message.
        let shape = TableShape::require(&dynamo, table).await?;
        shape.ensure_sweepable_keyed(&layout, P::ATTRIBUTE_TYPE)?;
        Ok(Self::from_shape(dynamo, table, &shape, layout))
    }

    /// `table` as the caller named it (a name or an ARN), not as DescribeTable answers.
    pub fn from_shape(dynamo: Dynamo, table: &str, shape: &TableShape, layout: TtlLayout) -> Self {
        let key_names = shape.key_names();
        let statement = partiql_delete(table, &key_names, &layout.ttl_attribute);
        let write_capacity = shape.write_capacity();
        DynamoStore {
            dynamo,
            table: table.to_string(),
            key_names,
            layout,
            mode: DeleteMode::Single,
            statement,
            fallen_back: Arc::new(AtomicBool::new(false)),
            batch_5xx: Arc::new(AtomicU32::new(0)),
            archive: None,
            write_capacity,
            partition: PhantomData,
        }
    }

    /// The table's write capacity as DescribeTable said when the store was opened.
    pub fn write_capacity(&self) -> precise_ttl_core::capacity::WriteCapacity {
        self.write_capacity
    }

    pub fn with_delete_mode(mut self, mode: DeleteMode) -> Self {
        self.mode = mode;
        self
    }

    /// Captures every expiry delete's record into `sink` (`--archive`).
    pub fn with_archive(mut self, sink: precise_ttl_archive::Sink) -> Self {
        self.archive = Some(crate::capture::Archive::new(
            sink,
            &self.table,
            &self.layout.ttl_attribute,
            self.dynamo.store_clock.clone(),
        ));
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn layout(&self) -> &TtlLayout {
        &self.layout
    }

    fn names(&self) -> HashMap<String, String> {
        HashMap::from([(
            CONDITION_TOKENS.attribute.to_string(),
            self.layout.ttl_attribute.clone(),
        )])
    }
}

/// `DELETE FROM "t" WHERE "pk" = ? [AND "sk" = ?] AND <the expiry rule> RETURNING ALL OLD *`
///
/// A PartiQL `DELETE` of an item that is already gone succeeds with nothing deleted (unlike a
/// conditional `DeleteItem`, whose condition fails); `RETURNING ALL OLD *` tells the two apart:
/// a statement that deleted nothing returns no item. Without it, two workers (or overlapping
/// Lambda invocations) deleting one item would both count it.
fn partiql_delete(table: &str, key_names: &[String], ttl: &str) -> String {
    let mut sql = format!("DELETE FROM {} WHERE ", due_rule::partiql_identifier(table));
    for name in key_names {
        sql.push_str(&format!("{} = ? AND ", due_rule::partiql_identifier(name)));
    }
    sql.push_str(&due_rule::partiql_condition(ttl));
    sql.push_str(" RETURNING ALL OLD *");
    sql
}

/// The class of one statement's error in a `BatchExecuteStatement` answer. A throttled
/// statement's scope stays [`precise_ttl_core::ThrottleScope::Unknown`]: DynamoDB's
/// `BatchStatementError` has only `Code`, `Message` and `Item` (API reference, and the SDK's
/// model as of aws-sdk-dynamodb 1.136), no `ThrottlingReasons`, and its `Message` is not
/// documented to name what refused; guessing from the message's wording would take a table-wide
/// limit for a partition's the day the wording changes.
fn batch_error_class(code: Option<&BatchStatementErrorCodeEnum>) -> ErrorClass {
    match code {
        Some(BatchStatementErrorCodeEnum::ConditionalCheckFailed) => ErrorClass::ConditionFailed,
        Some(
            BatchStatementErrorCodeEnum::ThrottlingError
            | BatchStatementErrorCodeEnum::ProvisionedThroughputExceeded
            | BatchStatementErrorCodeEnum::RequestLimitExceeded,
        ) => ErrorClass::Throttled,
        Some(
            BatchStatementErrorCodeEnum::InternalServerError
            | BatchStatementErrorCodeEnum::TransactionConflict,
        ) => ErrorClass::Transient,
        _ => ErrorClass::Fatal,
    }
}

/// The outcome of a key whose statement failed: a failed condition means not due, every other
/// code is an error of [`batch_error_class`] (a throttle of unknown scope).
fn statement_outcome(e: &BatchStatementError) -> Result<DeleteOutcome, StoreError> {
    match batch_error_class(e.code()) {
        ErrorClass::ConditionFailed => Ok(DeleteOutcome::NotDue),
        class => Err(StoreError::new(
            class,
            format!(
                "BatchExecuteStatement: {}: {}",
                e.code().map(|c| c.as_str()).unwrap_or("error"),
                e.message().unwrap_or_default()
            ),
        )),
    }
}

pub fn record_capacity(op: &'static str, units: Option<f64>) {
    if let Some(units) = units {
        precise_ttl_engine::capacity_rate::record(op, units, std::time::Instant::now());
    }
}

/// Sends `request`, a Query of an expiry index, for one page: from `cursor` on, at most `limit`
/// items, its read capacity counted. The table's own index and the stream queue page alike.
pub async fn send_page(
    request: QueryFluentBuilder,
    cursor: Option<HashMap<String, AttributeValue>>,
    limit: u32,
) -> Result<QueryOutput, StoreError> {
    let out = request
        .set_exclusive_start_key(cursor)
        .limit(i32::try_from(limit).unwrap_or(i32::MAX))
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .map_err(|e| store_error("Query", e))?;
    record_capacity(
        "query",
        out.consumed_capacity().and_then(|c| c.capacity_units()),
    );
    Ok(out)
}

pub fn number(text: String) -> AttributeValue {
    AttributeValue::N(text)
}

impl<P: IndexPartition> ExpiryStore for DynamoStore<P> {
    type Key = ItemKey;
    type Cursor = HashMap<String, AttributeValue>;
    type Partition = P;

    async fn due_page(&self, query: DueQueryOf<'_, Self>) -> Result<DuePageOf<Self>, StoreError> {
        let window = query.window;
        let mut names = self.names();
        names.insert("#shard".into(), self.layout.shard_attribute.clone());
        let request = self
            .dynamo
            .query
            .query()
            .table_name(&self.table)
            .index_name(&self.layout.index_name)
            .key_condition_expression(KEY_CONDITION)
            .set_expression_attribute_names(Some(names))
            .expression_attribute_values(":shard", query.partition.attribute_value())
            .expression_attribute_values(":oldest", number(window.oldest.to_epoch_seconds_text()))
            .expression_attribute_values(":now", number(window.until.to_epoch_seconds_text()));
        let out = send_page(request, query.cursor, query.limit).await?;
        let mut items = Vec::with_capacity(out.items().len());
        for mut raw in out.items.unwrap_or_default() {
            let expiry = match raw.get(&self.layout.ttl_attribute) {
                Some(AttributeValue::N(n)) => Expiry::parse_number(n).ok(),
                _ => None,
            };
            // Moved out of the answer, not cloned: a busy daemon reads every item two or three
            // times (the near window is read again at each poll).
            let key: Option<Vec<_>> = self
                .key_names
                .iter()
                .map(|name| raw.remove(name).map(|v| (name.clone(), v)))
                .collect();
            match (key, expiry) {
                (Some(key), Some(expiry)) => items.push(DueItem {
                    key: ItemKey::new(key),
                    expiry,
                }),
                _ => {
                    // The index only holds Number sort keys, so this means the index's key
                    // schema is not what we checked at open: refuse to guess.
                    return Err(StoreError::new(
                        ErrorClass::Fatal,
                        format!(
                            "index {:?} returned an entry without the table key or a Number {:?}",
                            self.layout.index_name, self.layout.ttl_attribute
                        ),
                    ));
                }
            }
        }
        Ok(DuePage {
            items,
            next: out.last_evaluated_key,
        })
    }

    async fn delete_if_due(
        &self,
        key: &ItemKey,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        let result = self
            .dynamo
            .write
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key.to_map()))
            .condition_expression(due_rule::condition_expression())
            .set_expression_attribute_names(Some(self.names()))
            .expression_attribute_values(
                CONDITION_TOKENS.number_type,
                AttributeValue::S("N".into()),
            )
            .expression_attribute_values(
                CONDITION_TOKENS.oldest,
                number(window.oldest.to_epoch_seconds_text()),
            )
            .expression_attribute_values(
                CONDITION_TOKENS.now,
                number(window.until.to_epoch_seconds_text()),
            )
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .set_return_values(self.archive.as_ref().map(|_| ReturnValue::AllOld))
            .send()
            .await;
        match result {
            Ok(out) => {
                record_capacity(
                    "delete",
                    out.consumed_capacity().and_then(|c| c.capacity_units()),
                );
                if let Some(archive) = &self.archive {
                    let old = out.attributes.unwrap_or_default();
                    archive.record(vec![(key.to_map(), old)]).await?;
                }
                Ok(DeleteOutcome::Deleted)
            }
            Err(e) => {
                let err = store_error("DeleteItem", e);
                if err.class == ErrorClass::ConditionFailed {
                    Ok(DeleteOutcome::NotDue)
                } else {
                    Err(err)
                }
            }
        }
    }

    async fn delete_many_if_due(
        &self,
        keys: &[ItemKey],
        window: DueWindow,
    ) -> Vec<Result<DeleteOutcome, StoreError>> {
        if !self.batching() || keys.len() == 1 {
            return self.delete_each(keys, window).await;
        }
        let oldest = number(window.oldest.to_epoch_seconds_text());
        let until = number(window.until.to_epoch_seconds_text());
        let statements: Vec<BatchStatementRequest> = keys
            .iter()
            .map(|key| {
                let mut params: Vec<AttributeValue> =
                    key.attributes().iter().map(|(_, v)| v.clone()).collect();
                params.push(oldest.clone());
                params.push(until.clone());
                BatchStatementRequest::builder()
                    .statement(&self.statement)
                    .set_parameters(Some(params))
                    .build()
                    .expect("statement is set")
            })
            .collect();
        let result = self
            .dynamo
            .write
            .batch_execute_statement()
            .set_statements(Some(statements))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Err(e) => {
                // The service answered 5xx, as opposed to a connection that failed.
                let server_error = e
                    .raw_response()
                    .is_some_and(|r| r.status().is_server_error());
                let err = store_error("BatchExecuteStatement", e);
                if let Some(singles) = self.maybe_fall_back(&err, server_error, keys, window).await
                {
                    return singles;
                }
                // Every key fails as the whole call did, throttle scope included.
                keys.iter()
                    .map(|_| {
                        let mut each = StoreError::new(err.class, err.message.clone());
                        each.throttle = err.throttle;
                        Err(each)
                    })
                    .collect()
            }
            Ok(out) => {
                self.batch_5xx.store(0, Ordering::Relaxed);
                let units: f64 = out
                    .consumed_capacity()
                    .iter()
                    .filter_map(|c| c.capacity_units())
                    .sum();
                record_capacity("delete", Some(units));
                let responses = out.responses();
                let outcomes: Vec<Result<DeleteOutcome, StoreError>> = (0..keys.len())
                    .map(|i| match responses.get(i).and_then(|r| r.error()) {
                        // No old item: it was already gone, deleted by someone else.
                        None if responses.get(i).is_some_and(|r| r.item().is_none()) => {
                            Ok(DeleteOutcome::NotDue)
                        }
                        None if i < responses.len() => Ok(DeleteOutcome::Deleted),
                        None => Err(StoreError::new(
                            ErrorClass::Transient,
                            "BatchExecuteStatement: missing response",
                        )),
                        Some(e) => statement_outcome(e),
                    })
                    .collect();
                match &self.archive {
                    None => outcomes,
                    Some(archive) => {
                        let deleted = keys
                            .iter()
                            .zip(&outcomes)
                            .zip(responses)
                            .filter(|((_, o), _)| matches!(o, Ok(DeleteOutcome::Deleted)))
                            .map(|((k, _), r)| (k.to_map(), r.item().cloned().unwrap_or_default()))
                            .collect();
                        match archive.record(deleted).await {
                            Ok(()) => outcomes,
                            // Deleted but not recorded: the run must stop and say so.
                            Err(e) => outcomes
                                .into_iter()
                                .map(|o| match o {
                                    Ok(DeleteOutcome::Deleted) => {
                                        Err(StoreError::new(e.class, e.message.clone()))
                                    }
                                    other => other,
                                })
                                .collect(),
                        }
                    }
                }
            }
        }
    }

    fn max_batch(&self) -> usize {
        if self.batching() {
            MAX_BATCH_STATEMENTS
        } else {
            1
        }
    }
}

impl<P: IndexPartition> DynamoStore<P> {
    fn batching(&self) -> bool {
        match self.mode {
            DeleteMode::Single => false,
            DeleteMode::Batch => true,
            DeleteMode::Auto => !self.fallen_back.load(Ordering::Relaxed),
        }
    }

    async fn delete_each(
        &self,
        keys: &[ItemKey],
        window: DueWindow,
    ) -> Vec<Result<DeleteOutcome, StoreError>> {
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            out.push(self.delete_if_due(key, window).await);
        }
        out
    }

    /// In `Auto` mode, decides whether `err` (a whole batch call failing) means the store
    /// refuses PartiQL; if so, deletes `keys` one by one and returns their outcomes. A run of
    /// 5xx answers only counts once a `DeleteItem` gets an answer: a store that is down for
    /// both must not switch modes.
    async fn maybe_fall_back(
        &self,
        err: &StoreError,
        server_error: bool,
        keys: &[ItemKey],
        window: DueWindow,
    ) -> Option<Vec<Result<DeleteOutcome, StoreError>>> {
        if self.mode != DeleteMode::Auto {
            return None;
        }
        let run = if err.class == ErrorClass::Transient && server_error {
            self.batch_5xx.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            0
        };
        if !may_refuse_partiql(err.class, server_error, run) {
            return None;
        }
        let singles = self.delete_each(keys, window).await;
        let single_works = singles.iter().any(|r| r.is_ok());
        if err.class == ErrorClass::Fatal && !single_works {
            // DeleteItem fails too: the trouble is not PartiQL; report it as it is.
            return Some(singles);
        }
        if single_works && !self.fallen_back.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %err,
                "the store refuses PartiQL batch deletes; deleting one item per DeleteItem from now on"
            );
            metrics::counter!(precise_ttl_engine::metrics::DELETE_MODE_FALLBACKS).increment(1);
        }
        Some(singles)
    }
}

/// Whether a whole batch call's failure may mean the store refuses PartiQL (to be confirmed by a
/// `DeleteItem` that works): a fatal answer (access denied, validation), or the
/// [`BATCH_5XX_BEFORE_PROBE`]th 5xx answer in a row (`run` counts them, this one included).
/// Throttling and failed connections never do.
fn may_refuse_partiql(class: ErrorClass, server_error: bool, run: u32) -> bool {
    match class {
        ErrorClass::Fatal => true,
        ErrorClass::Transient => server_error && run >= BATCH_5XX_BEFORE_PROBE,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::ThrottleScope;

    #[test]
    fn auto_mode_suspects_partiql_on_refusals_and_on_a_run_of_5xx_only() {
        assert!(may_refuse_partiql(ErrorClass::Fatal, false, 0));
        for run in 1..BATCH_5XX_BEFORE_PROBE {
            assert!(!may_refuse_partiql(ErrorClass::Transient, true, run));
        }
        assert!(may_refuse_partiql(
            ErrorClass::Transient,
            true,
            BATCH_5XX_BEFORE_PROBE
        ));
        // A connection that failed is an outage, not a refusal, however long it lasts.
        assert!(!may_refuse_partiql(ErrorClass::Transient, false, 1_000));
        assert!(!may_refuse_partiql(ErrorClass::Throttled, true, 1_000));
        assert!(!may_refuse_partiql(ErrorClass::ConditionFailed, false, 0));
    }

    #[test]
    fn per_statement_batch_errors_are_classified_like_whole_calls() {
        use BatchStatementErrorCodeEnum as C;
        for (code, class) in [
            (C::ConditionalCheckFailed, ErrorClass::ConditionFailed),
            (C::ThrottlingError, ErrorClass::Throttled),
            (C::ProvisionedThroughputExceeded, ErrorClass::Throttled),
            (C::RequestLimitExceeded, ErrorClass::Throttled),
            (C::InternalServerError, ErrorClass::Transient),
            (C::TransactionConflict, ErrorClass::Transient),
            (C::ValidationError, ErrorClass::Fatal),
            (C::AccessDenied, ErrorClass::Fatal),
            (C::ResourceNotFound, ErrorClass::Fatal),
        ] {
            assert_eq!(batch_error_class(Some(&code)), class, "{code:?}");
            let error = BatchStatementError::builder()
                .code(code.clone())
                .message("m")
                .build();
            match statement_outcome(&error) {
                Ok(outcome) => {
                    assert_eq!(class, ErrorClass::ConditionFailed, "{code:?}");
                    assert_eq!(outcome, DeleteOutcome::NotDue);
                }
                Err(e) => {
                    assert_eq!(e.class, class, "{code:?}");
                    // No reasons on a statement's error: a throttle's scope is unknown.
                    let scope = (class == ErrorClass::Throttled).then_some(ThrottleScope::Unknown);
                    assert_eq!(e.throttle, scope, "{code:?}");
                }
            }
        }
    }

    #[test]
    fn the_partiql_delete_names_every_key_and_ends_with_the_expiry_rule() {
        assert_eq!(
            partiql_delete("t", &["pk".into(), "sk".into()], "ttl"),
            "DELETE FROM \"t\" WHERE \"pk\" = ? AND \"sk\" = ? AND \
             attribute_type(\"ttl\", 'N') AND \"ttl\" BETWEEN ? AND ? RETURNING ALL OLD *"
        );
    }
}
