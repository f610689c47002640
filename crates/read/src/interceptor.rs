//! [`HideExpired`], the SDK interceptor that hides expired items from every read of a DynamoDB
//! client, and [`ShowExpired`], which switches it off for one call.
//!
//! The SDK runs each hook for all interceptors before moving to the next hook, and gives each
//! call its own config bag, which is where a call's state lives:
//! - `read_before_execution`: [`ShowExpired`] marks the call.
//! - `modify_before_serialization`: [`HideExpired`] changes the typed input (unless marked) and
//!   stores what the response owes. It runs once per call, not per retry, so a retried request is
//!   the same request.
//! - `modify_before_completion`: [`HideExpired`] settles the typed output, once per call, after
//!   the last attempt. Errors pass through untouched.

use crate::clock::Clock;
use crate::request::{self, Owed};
use crate::response;
use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextMut, BeforeSerializationInterceptorContextRef,
    FinalizerInterceptorContextMut,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use precise_ttl_core::Timestamp;

/// Hides expired items from every read made through a DynamoDB client, by the rule precise-ttl
/// and native TTL delete by (a Number TTL within the last five years, up to now).
///
/// - Query and Scan: the filter is added server side, combined with the request's own, so
///   `Count` (also with `Select=COUNT`) and pagination stay right; items that expire while the
///   request is in flight are removed client side too, and `Count` lowered by as many. Requests
///   with legacy parameters (`KeyConditions`, `QueryFilter`, `ScanFilter`, `ConditionalOperator`,
///   `AttributesToGet`) get the client-side check only, since DynamoDB refuses to mix them with
///   expressions.
/// - GetItem, BatchGetItem, TransactGetItems: an expired item comes back as absent (no `Item`;
///   missing from `Responses[table]`; an entry without `Item`, positions kept). A projection
///   that leaves out the TTL attribute gets it added and the response has it stripped again.
/// - ExecuteStatement `SELECT`: expired items removed. A `SELECT` that does not return the TTL
///   attribute cannot be judged and its items stay visible: use `SELECT *` or name the attribute.
///   BatchExecuteStatement, ExecuteTransaction: an expired entry's `Item` removed.
/// - Everything else (writes, DescribeTable, ...) is untouched.
///
/// A request that already binds one of the `#precise_ttl_*`/`:precise_ttl_*` placeholders fails
/// with [`PlaceholderInUse`](crate::PlaceholderInUse), and so does a Query or Scan on a client
/// with two `HideExpired`: add one per client. On a global secondary index the TTL
/// attribute must be projected into the index, or nothing read from it is hidden.
///
/// Add it to the client's config: `aws_sdk_dynamodb::config::Builder::from(&sdk_config)` (an
/// `SdkConfig` from `aws_config::load_defaults`), `aws_sdk_dynamodb::Config::builder()`, or an
/// existing client's `config().to_builder()`:
///
/// ```no_run
/// use precise_ttl_read::{HideExpired, ShowExpired};
///
/// # async fn example(client: aws_sdk_dynamodb::Client) -> Result<(), aws_sdk_dynamodb::Error> {
/// let config = client.config().to_builder().interceptor(HideExpired::new("ttl")).build();
/// let client = aws_sdk_dynamodb::Client::from_conf(config);
/// // Only unexpired sessions:
/// let live = client.scan().table_name("sessions").send().await?;
/// // Every item, expired or not, for this one call:
/// let all = client
///     .scan()
///     .table_name("sessions")
///     .customize()
///     .interceptor(ShowExpired)
///     .send()
///     .await?;
/// # let _ = (live, all);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct HideExpired {
    ttl_attribute: String,
    clock: Clock,
}

impl HideExpired {
    /// Hides items by their `ttl_attribute` (the table's TTL attribute), judged by the system
    /// clock.
    pub fn new(ttl_attribute: impl Into<String>) -> Self {
        HideExpired {
            ttl_attribute: ttl_attribute.into(),
            clock: Clock::system(),
        }
    }

    /// Judges by `clock` instead of the system clock (for tests). It is read when a request
    /// leaves (Query's and Scan's filter) and again when its response arrives.
    pub fn with_clock(mut self, clock: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        self.clock = Clock::from_fn(clock);
        self
    }

    pub fn ttl_attribute(&self) -> &str {
        &self.ttl_attribute
    }
}

/// The TTL attribute `ttl`.
impl Default for HideExpired {
    fn default() -> Self {
        HideExpired::new("ttl")
    }
}

impl Intercept for HideExpired {
    fn name(&self) -> &'static str {
        "HideExpired"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Shown>().is_some() {
            return Ok(());
        }
        let owed = request::prepare(context, &self.ttl_attribute, self.clock.now())?;
        if let Some(owed) = owed {
            cfg.interceptor_state().store_put(owed);
        }
        Ok(())
    }

    fn modify_before_completion(
        &self,
        context: &mut FinalizerInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(owed) = cfg.load::<Owed>() else {
            return Ok(());
        };
        response::settle(context, owed, &self.ttl_attribute, self.clock.now());
        Ok(())
    }
}

impl Storable for Owed {
    type Storer = StoreReplace<Self>;
}

/// Switches [`HideExpired`] off for one call: the call sees expired items as DynamoDB returns
/// them. Add it through the call's `customize()`. Paginators have no `customize()`: to page
/// through expired items too, use a client built without [`HideExpired`].
///
/// ```no_run
/// # async fn example(client: aws_sdk_dynamodb::Client) -> Result<(), aws_sdk_dynamodb::Error> {
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use precise_ttl_read::ShowExpired;
/// let everything = client
///     .query()
///     .table_name("sessions")
///     .key_condition_expression("pk = :pk")
///     .expression_attribute_values(":pk", AttributeValue::S("user#42".into()))
///     .customize()
///     .interceptor(ShowExpired)
///     .send()
///     .await?;
/// # let _ = everything;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ShowExpired;

/// The mark [`ShowExpired`] leaves in a call's config bag.
#[derive(Debug)]
struct Shown;

impl Storable for Shown {
    type Storer = StoreReplace<Self>;
}

impl Intercept for ShowExpired {
    fn name(&self) -> &'static str {
        "ShowExpired"
    }

    // Every interceptor's `read_before_execution` runs before any `modify_before_serialization`,
    // whether it was added to the client or to the call.
    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(Shown);
        Ok(())
    }
}
