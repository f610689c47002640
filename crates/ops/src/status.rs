//! What the expiry index says right now, per shard: how much is due, how old, what comes next.
//!
//! Read from the outside, so it works whether or not a daemon runs, and says what a reader of
//! the table would see: the watermark here is the instant just before the oldest due item still
//! in the index (every due item with an older TTL is gone).

use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{DueWindow, Expiry, Shard, Timestamp, TtlLayout};
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::count::{DueCount, count_query};
use precise_ttl_dynamodb::error::store_error;
use precise_ttl_engine::StoreError;
use std::collections::HashMap;

/// How many upcoming expiries to show per shard.
pub const NEXT_EXPIRIES: i32 = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardStatus {
    pub shard: Shard,
    /// Items in the index that are due and not yet deleted.
    pub due: u64,
    /// The TTL of the oldest of them.
    pub oldest_due: Option<Timestamp>,
    /// The next expiries after `now`.
    pub next: Vec<Timestamp>,
    /// Items due in the [`UPCOMING`] after `now`: the expiry rate ahead.
    pub upcoming: u64,
}

/// How far ahead `status` counts expiries for the rate it sizes shards by.
pub const UPCOMING: std::time::Duration = std::time::Duration::from_secs(60);

impl ShardStatus {
    /// Every due item of this shard with TTL ≤ this is deleted.
    pub fn watermark(&self, now: Timestamp) -> Timestamp {
        match self.oldest_due {
            Some(t) => Timestamp::from_millis(t.as_millis().saturating_sub(1)),
            None => now,
        }
    }
}

/// Items of `shard` due in the [`UPCOMING`] after `now` (from the index alone: what `doctor`
/// sizes shards by without the rest of a shard's status).
pub async fn upcoming(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    shard: Shard,
    now: Timestamp,
) -> Result<u64, StoreError> {
    let from = DueWindow::at(now).until;
    let to = now.saturating_add(UPCOMING);
    Ok(count_between(dynamo, table, layout, shard, from, to, None)
        .await?
        .due)
}

/// Items of `shard` whose TTL is between `from` and `to`, both included (Select COUNT). COUNT
/// is paged by 1 MB too: the pages are followed, `max_pages` at most (`None`: all). Each page
/// reads up to 1 MB of the index (at most 128 read units, half a unit when the range is
/// empty), so a cap bounds the cost whatever is due; a count stopped by it is `capped`, a lower
/// bound.
pub async fn count_between(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    shard: Shard,
    from: Timestamp,
    to: Timestamp,
    max_pages: Option<u64>,
) -> Result<DueCount, StoreError> {
    count_query(
        |start| {
            dynamo
                .query
                .query()
                .table_name(table)
                .index_name(&layout.index_name)
                .key_condition_expression("#shard = :shard AND #ttl BETWEEN :from AND :to")
                .expression_attribute_names("#shard", &layout.shard_attribute)
                .expression_attribute_names("#ttl", &layout.ttl_attribute)
                .expression_attribute_values(":shard", AttributeValue::N(shard.0.to_string()))
                .expression_attribute_values(
                    ":from",
                    AttributeValue::N(from.to_epoch_seconds_text()),
                )
                .expression_attribute_values(":to", AttributeValue::N(to.to_epoch_seconds_text()))
                .set_exclusive_start_key(start)
        },
        max_pages,
    )
    .await
}

pub async fn shard_status(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    shard: Shard,
    now: Timestamp,
) -> Result<ShardStatus, StoreError> {
    let window = DueWindow::at(now);
    let names = HashMap::from([
        ("#shard".to_string(), layout.shard_attribute.clone()),
        ("#ttl".to_string(), layout.ttl_attribute.clone()),
    ]);
    let query = |condition: &'static str| {
        dynamo
            .query
            .query()
            .table_name(table)
            .index_name(&layout.index_name)
            .key_condition_expression(condition)
            .set_expression_attribute_names(Some(names.clone()))
            .expression_attribute_values(":shard", AttributeValue::N(shard.0.to_string()))
    };
    let due_condition = "#shard = :shard AND #ttl BETWEEN :oldest AND :now";
    let oldest = AttributeValue::N(window.oldest.to_epoch_seconds_text());
    let until = AttributeValue::N(window.until.to_epoch_seconds_text());

    let due = count_between(
        dynamo,
        table,
        layout,
        shard,
        window.oldest,
        window.until,
        None,
    )
    .await?
    .due;
    let upcoming = upcoming(dynamo, table, layout, shard, now).await?;
    let ttl_of = |items: &[HashMap<String, AttributeValue>]| -> Vec<Timestamp> {
        items
            .iter()
            .filter_map(|i| match i.get(&layout.ttl_attribute) {
                Some(AttributeValue::N(n)) => Expiry::parse_number(n).ok().map(|e| e.at()),
                _ => None,
            })
            .collect()
    };
    let oldest_due = if due == 0 {
        None
    } else {
        let out = query(due_condition)
            .expression_attribute_values(":oldest", oldest.clone())
            .expression_attribute_values(":now", until.clone())
            .limit(1)
            .send()
            .await
            .map_err(|e| store_error("Query", e))?;
        ttl_of(out.items()).first().copied()
    };
    let out = query("#shard = :shard AND #ttl > :now")
        .expression_attribute_values(":now", until)
        .limit(NEXT_EXPIRIES)
        .send()
        .await
        .map_err(|e| store_error("Query", e))?;
    Ok(ShardStatus {
        shard,
        due,
        oldest_due,
        next: ttl_of(out.items()),
        upcoming,
    })
}
