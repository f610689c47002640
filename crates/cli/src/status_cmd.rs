//! `precise-ttl status`: the index as seen from outside, per shard, with each shard's lease
//! owner when `run` works as a fleet; with `--metrics-url`, each running worker's admission
//! controllers as its `/metrics` shows them (`precise_ttl_ops::probe`). What the table says is read by
//! `precise_ttl_ops::table_status`; this file asks the workers, prints both and picks the exit
//! code.

use crate::wiring::Outcome;
use precise_ttl_core::Timestamp;
use precise_ttl_core::queue::INDEXER_BUCKETS;
use precise_ttl_dynamodb::StoredLease;
use precise_ttl_flags::{Global, IndexLayout, StatusArgs};
use precise_ttl_ops::probe::{self, Admission};
use precise_ttl_ops::queue::QueueCheck;
use precise_ttl_ops::table_status::table_status;

pub async fn run(global: &Global, args: &StatusArgs) -> anyhow::Result<Outcome> {
    // Usage first: a missing table asks no worker.
    let layout = global.layout()?;
    let table = global.table()?;
    // The workers are asked while the store is read, so their pages and the index are seen at
    // about the same moment and a slow worker adds nothing to the store's time.
    let asked: Vec<_> = args
        .metrics_url
        .iter()
        .map(|url| {
            let url = url.clone();
            tokio::spawn(async move { probe::admission(&url).await })
        })
        .collect();
    global.refuse_layout("status", &[IndexLayout::BlogWindow])?;
    let queue = match global.index_layout {
        IndexLayout::StreamQueue => Some(global.queue_table()?),
        _ => None,
    };
    let dynamo = crate::wiring::connect(global).await?;
    let check = queue.as_ref().map(|q| QueueCheck {
        queue_table: q.clone(),
        checkpoint_table: args.indexer.indexer_checkpoint_table.clone(),
    });
    let st = table_status(
        &dynamo,
        table,
        &layout,
        check.as_ref(),
        &args.leases.lease_table,
    )
    .await
    .map_err(crate::wiring::ops_error)?;
    let (shape, parts, shards, leases, indexers) =
        (&st.shape, &st.queue, &st.shards, &st.leases, &st.indexers);
    let now = st.now;
    let index = queue.as_deref().unwrap_or(&layout.index_name);
    let lease_of = |shard: u16| leases.as_ref().and_then(|l| l.get(&shard.to_string()));
    let lease_age = |l: &StoredLease| {
        l.renewed_at_ms
            .map(|ms| now.millis_since(Timestamp::from_millis(ms)) as f64 / 1000.0)
    };
    let workers = st.workers();
    let watermark = st.watermark();
    let advice = st.advice();
    let due = st.due();
    let age = |t: Timestamp| now.millis_since(t) as f64 / 1000.0;
    let (offset, lead) = (st.store_offset_s, st.host_lead_s);
    let mut workers_asked: Vec<(String, Result<Admission, String>)> = Vec::new();
    for (url, task) in args.metrics_url.iter().zip(asked) {
        let answer = task
            .await
            .unwrap_or_else(|e| Err(format!("asking it failed: {e}")));
        workers_asked.push((url.to_string(), answer));
    }
    if args.json {
        let mut json = serde_json::json!({
            "table": table,
            "clock": {
                "store_offset_lower_bound_seconds": offset,
                "host_lead_seconds": lead,
            },
            "key": shape.describe_key(),
            "index_layout": global.index_layout.name(),
            "queue": parts.as_ref().map(|p| serde_json::json!({
                "table": queue,
                "stream_view": p.stream_view,
                "indexer_stream_shards": p.indexer.map(|b| b.shards),
                "indexer_shards_behind": p.indexer.map(|b| b.behind),
                "indexer_oldest_unindexed": p.indexer.and_then(|b| b.oldest_unconsumed),
                "indexer_workers": indexers.as_ref().map(|o| o.iter().map(|(w, n)| serde_json::json!({
                    "worker": w,
                    "stream_buckets": n,
                })).collect::<Vec<_>>()),
            })),
            "now": now.as_secs_f64(),
            "due": due,
            "watermark": watermark.as_secs_f64(),
            "watermark_delay_seconds": age(watermark),
            "sizing": {
                "expiries_per_second_next_minute": advice.expiries_per_s,
                "index_partition_wcu_per_second_mean": advice.mean_partition_wcu,
                "index_partition_wcu_per_second_busiest": advice.busiest_partition_wcu,
                "shards_needed": advice.shards_needed,
                "enough": advice.enough,
            },
            "shards": shards.iter().map(|s| serde_json::json!({
                "shard": s.shard.0,
                "due": s.due,
                "oldest_due": s.oldest_due.map(|t| t.as_secs_f64()),
                "oldest_due_age_seconds": s.oldest_due.map(age),
                "watermark": s.watermark(now).as_secs_f64(),
                "next": s.next.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>(),
                "due_next_minute": s.upcoming,
                "owner": lease_of(s.shard.0).and_then(|l| l.record.owner.clone()),
                "lease_age_seconds": lease_of(s.shard.0).and_then(lease_age),
            })).collect::<Vec<_>>(),
            "workers": leases.as_ref().map(|_| workers.iter().map(|(w, n)| serde_json::json!({
                "worker": w,
                "shards": n,
            })).collect::<Vec<_>>()),
        });
        // Only with --metrics-url, so the document is unchanged without it.
        if !workers_asked.is_empty() {
            json["admission"] = workers_asked
                .iter()
                .map(|(url, answer)| {
                    let mut worker = match answer {
                        Ok(a) => a.to_json(),
                        Err(_) => serde_json::json!({}),
                    };
                    worker["url"] = url.clone().into();
                    worker["error"] = answer.as_ref().err().cloned().into();
                    worker
                })
                .collect();
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
        return none_answered(&workers_asked).map(|()| Outcome::Success);
    }
    let what = match &queue {
        Some(_) => "expiry queue",
        None => "index",
    };
    println!(
        "table {table:?} ({}), {what} {index:?}, {} shards",
        shape.describe_key(),
        layout.shards
    );
    if let Some(p) = parts {
        println!("{}", p.describe(now.as_secs_f64()));
    }
    if let Some(owners) = indexers {
        let held: Vec<String> = owners
            .iter()
            .map(|(w, n)| format!("{w} ({n} of {INDEXER_BUCKETS} stream buckets)"))
            .collect();
        match held.is_empty() {
            true => println!("indexers: none holds a stream bucket"),
            false => println!("indexers: {}", held.join(", ")),
        }
    }
    println!(
        "{:>5}  {:>9}  {:>12}  {:<24} {:>9}  next expiries (seconds from now)",
        "shard", "due", "oldest age", "lease owner", "lease age"
    );
    for s in shards {
        let oldest = s
            .oldest_due
            .map_or("-".to_string(), |t| format!("{:.1} s", age(t)));
        let next: Vec<String> = s.next.iter().map(|t| format!("{:+.1}", -age(*t))).collect();
        let lease = lease_of(s.shard.0);
        let owner = lease
            .and_then(|l| l.record.owner.clone())
            .unwrap_or_else(|| "-".into());
        let lease_age = lease
            .and_then(lease_age)
            .map_or("-".to_string(), |a| format!("{a:.1} s"));
        println!(
            "{:>5}  {:>9}  {:>12}  {:<24} {:>9}  {}",
            s.shard.0,
            s.due,
            oldest,
            owner,
            lease_age,
            next.join(", ")
        );
    }
    match leases {
        None => println!("no lease table {:?}: no fleet", args.leases.lease_table),
        Some(_) if workers.is_empty() => println!("workers: none holds a lease"),
        Some(_) => println!(
            "workers: {}",
            workers
                .iter()
                .map(|(w, n)| format!("{w} ({n} shards)"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    match offset {
        None => println!("clock: the store's answers were not dated; this host's clock is used"),
        Some(_) if lead >= 1.0 => println!(
            "clock: this host's clock is up to {lead:.3} s ahead of the store's (by the Date headers of its answers); run holds deletes back by that: fix the host's time sync"
        ),
        Some(o) => println!(
            "clock: no lead over the store beyond the 1 s resolution of its Date headers (store − host ≥ {o:+.3} s)"
        ),
    }
    println!(
        "shards: {}",
        advice.describe(u64::from(layout.shards.get()))
    );
    println!(
        "due and not yet deleted: {due}; watermark {} ({:.1} s behind now: every due item with an older TTL is gone)",
        watermark,
        age(watermark)
    );
    if !workers_asked.is_empty() {
        println!("admission control, from each worker's /metrics:");
    }
    for (url, answer) in &workers_asked {
        match answer {
            Ok(admission) => {
                println!("  {url}");
                for line in admission.describe() {
                    println!("    {line}");
                }
            }
            Err(why) => println!("  {url}: not reachable: {why}"),
        }
    }
    none_answered(&workers_asked).map(|()| Outcome::Success)
}

/// An error when workers were asked and none answered: then the flag was surely wrong (a port,
/// a host), which one line on standard error and the exit status should say. One worker down
/// among several is what `status` is for, and is only reported.
fn none_answered(asked: &[(String, Result<Admission, String>)]) -> anyhow::Result<()> {
    if !asked.is_empty() && asked.iter().all(|(_, answer)| answer.is_err()) {
        anyhow::bail!(
            "no worker answered on /metrics ({} asked with --metrics-url; each one's reason is above)",
            asked.len()
        );
    }
    Ok(())
}
