//! `status` for the expiry queue: per shard of the queue, what is due, the oldest due, the next
//! expiries and the minute ahead — the shard index's [`ShardStatus`], read from the queue table.
//! An entry counted here may belong to an item extended or gone since (the sweeper removes it
//! without touching the item), so the counts are an upper bound of what will be deleted.

use crate::status::{NEXT_EXPIRIES, ShardStatus, UPCOMING};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::queue::EntryKey;
use precise_ttl_core::{DueWindow, Shard, Timestamp};
use precise_ttl_dynamodb::error::store_error;
use precise_ttl_engine::StoreError;
use precise_ttl_stream::queue::{DUE, QueueTable};
use std::collections::HashMap;

/// The status of `queue`'s `shard` at `now`.
pub async fn shard_status(
    queue: &QueueTable,
    shard: Shard,
    now: Timestamp,
) -> Result<ShardStatus, StoreError> {
    let due_window = DueWindow::at(now);
    let after = now.saturating_add(std::time::Duration::from_millis(1));
    let due = queue.count_between(shard, due_window, None).await?.due;
    let upcoming = queue
        .count_between(
            shard,
            DueWindow::between(after, now.saturating_add(UPCOMING)),
            None,
        )
        .await?
        .due;
    let first = |window: DueWindow, limit: i32| async move {
        let out = queue
            .due_query(shard, window)
            .limit(limit)
            .send()
            .await
            .map_err(|e| store_error("Query", e))?;
        Ok::<_, StoreError>(expiries(out.items()))
    };
    let oldest_due = match due {
        0 => None,
        _ => first(due_window, 1).await?.first().copied(),
    };
    // The largest expiry a sort key holds (16 digits of milliseconds).
    let far = Timestamp::from_millis(9_999_999_999_999_999);
    let next = first(DueWindow::between(after, far), NEXT_EXPIRIES).await?;
    Ok(ShardStatus {
        shard,
        due,
        oldest_due,
        next,
        upcoming,
    })
}

fn expiries(items: &[HashMap<String, AttributeValue>]) -> Vec<Timestamp> {
    items
        .iter()
        .filter_map(|i| match i.get(DUE) {
            Some(AttributeValue::S(sort)) => EntryKey::expiry_of(sort).map(|e| e.at()),
            _ => None,
        })
        .collect()
}
