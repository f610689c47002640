//! `precise-ttl status`: the index as seen from outside, per shard.

use crate::args::{Global, StatusArgs};
use crate::wiring::Outcome;
use precise_ttl_core::Timestamp;
use precise_ttl_dynamodb::status::shard_status;
use precise_ttl_dynamodb::{DynamoStore, TableShape};
use precise_ttl_engine::{Clock, SystemClock};

pub async fn run(global: &Global, args: &StatusArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    let dynamo = crate::wiring::connect(global).await?;
    // Same checks as the sweeper: a clear error for a missing table or index.
    DynamoStore::open(dynamo.clone(), table, layout.clone()).await?;
    let shape = TableShape::require(&dynamo, table).await?;
    let now = SystemClock.now();
    let mut shards = Vec::new();
    for shard in layout.shards.all() {
        shards.push(shard_status(&dynamo, table, &layout, shard, now).await?);
    }
    let watermark = shards.iter().map(|s| s.watermark(now)).min().unwrap_or(now);
    let due: u64 = shards.iter().map(|s| s.due).sum();
    let age = |t: Timestamp| now.millis_since(t) as f64 / 1000.0;
    if args.json {
        let json = serde_json::json!({
            "table": table,
            "key": shape.describe_key(),
            "now": now.as_secs_f64(),
            "due": due,
            "watermark": watermark.as_secs_f64(),
            "watermark_delay_seconds": age(watermark),
            "shards": shards.iter().map(|s| serde_json::json!({
                "shard": s.shard.0,
                "due": s.due,
                "oldest_due": s.oldest_due.map(|t| t.as_secs_f64()),
                "oldest_due_age_seconds": s.oldest_due.map(age),
                "watermark": s.watermark(now).as_secs_f64(),
                "next": s.next.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(Outcome::Success);
    }
    println!(
        "table {table:?} ({}), index {:?}, {} shards",
        shape.describe_key(),
        layout.index_name,
        layout.shards
    );
    println!(
        "{:>5}  {:>9}  {:>12}  next expiries (seconds from now)",
        "shard", "due", "oldest age"
    );
    for s in &shards {
        let oldest = s
            .oldest_due
            .map_or("-".to_string(), |t| format!("{:.1} s", age(t)));
        let next: Vec<String> = s.next.iter().map(|t| format!("{:+.1}", -age(*t))).collect();
        println!(
            "{:>5}  {:>9}  {:>12}  {}",
            s.shard.0,
            s.due,
            oldest,
            next.join(", ")
        );
    }
    println!(
        "due and not yet deleted: {due}; watermark {} ({:.1} s behind now: every due item with an older TTL is gone)",
        watermark,
        age(watermark)
    );
    Ok(Outcome::Success)
}
