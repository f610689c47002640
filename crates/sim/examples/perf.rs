//! The simulator's own CPU at the target load: conditional PartiQL deletes in batches of 25 at a
//! steady rate, plus a sweeper-like query load (every shard's due page polled), sent by the real
//! SDK client from another thread. Prints the rate reached and the simulator's CPU per 1,000
//! deletes.
//!
//! `cargo run --release -p precise-ttl-sim --example perf -- [seconds] [deletes/s] [poll ms] [shards] [latency]`
//! (defaults: 10 s, 40000/s, 50 ms, 128 shards, latency 1 (the default model; 0: none); poll 0:
//! no queries).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
use aws_sdk_dynamodb::types::{AttributeValue as Av, BatchStatementRequest};
use precise_ttl_sim::{
    IndexSpec, Item, KeySpec, ScalarType, SimConfig, Simulator, TableSpec, Value,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TABLE: &str = "perf";
const DELETE: &str = "DELETE FROM \"perf\" WHERE \"pk\" = ? AND attribute_type(\"ttl\", 'N') AND \"ttl\" BETWEEN ? AND ? RETURNING ALL OLD *";

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let seconds = arg(1, 10);
    let rate = arg(2, 40_000);
    let poll_ms = arg(3, 50);
    let shards = arg(4, 128).max(1);
    let latency = arg(5, 1) != 0;

    // Capacity limits off: this measures the simulator's CPU, not DynamoDB's limits.
    let config = SimConfig::default().unlimited();
    let config = if latency {
        config
    } else {
        config.without_latency()
    };
    let sim = Simulator::start(config).expect("simulator starts");
    sim.create_table(&TableSpec {
        name: TABLE.into(),
        partition_key: KeySpec::new("pk", ScalarType::S),
        sort_key: None,
        indexes: vec![IndexSpec {
            name: "precise-ttl".into(),
            partition_key: KeySpec::new("ttl_shard", ScalarType::N),
            sort_key: Some(KeySpec::new("ttl", ScalarType::N)),
            all_attributes: false,
        }],
    })
    .expect("table");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let total = rate * seconds;
    let rss_before = rss_bytes();
    let planting = Instant::now();
    sim.plant(
        TABLE,
        (0..total).map(|i| {
            Item::new()
                .with("pk", Value::s(format!("item-{i:09}")))
                .with("ttl", Value::int(now - 60 + (i % 50) as i64))
                .with("ttl_shard", Value::int((i % shards) as i64))
                .with("payload", Value::s("p".repeat(40)))
        }),
    )
    .expect("plant");
    println!(
        "planted {total} items in {:.1} s, {:.0} bytes of memory each (table, index, keys)",
        planting.elapsed().as_secs_f64(),
        rss_bytes().saturating_sub(rss_before) as f64 / total.max(1) as f64
    );

    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(sim.endpoint())
        .credentials_provider(Credentials::new("perf", "perf", None, None, "perf"))
        .retry_config(RetryConfig::disabled())
        .build();
    let client = Client::from_conf(config);
    let deleted = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let queries = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    let mut pollers = tokio::task::JoinSet::new();
    if poll_ms > 0 {
        for shard in 0..shards {
            let (client, queries, stop) = (client.clone(), queries.clone(), stop.clone());
            pollers.spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(poll_ms));
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let out = client
                        .query()
                        .table_name(TABLE)
                        .index_name("precise-ttl")
                        .key_condition_expression(
                            "#shard = :shard AND #ttl BETWEEN :oldest AND :now",
                        )
                        .expression_attribute_names("#shard", "ttl_shard")
                        .expression_attribute_names("#ttl", "ttl")
                        .expression_attribute_values(":shard", Av::N(shard.to_string()))
                        .expression_attribute_values(":oldest", Av::N((now - 1000).to_string()))
                        .expression_attribute_values(":now", Av::N(now.to_string()))
                        // About what a sweeper polling every 50 ms finds per shard at 40k/s.
                        .limit(16)
                        .send()
                        .await;
                    if out.is_ok() {
                        queries.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    }

    let cpu_before = sim.stats().cpu_seconds.unwrap_or(0.0);
    let started = Instant::now();
    let batches = total.div_ceil(25);
    let in_flight = Arc::new(tokio::sync::Semaphore::new(512));
    let mut tasks = tokio::task::JoinSet::new();
    let mut sent = 0u64;
    while sent < batches {
        // Start as many batches as the rate allows by now.
        let due = ((started.elapsed().as_secs_f64() * rate as f64 / 25.0) as u64).min(batches);
        while sent < due {
            let permit = in_flight.clone().acquire_owned().await.unwrap();
            let (client, deleted, failed) = (client.clone(), deleted.clone(), failed.clone());
            let first = sent * 25;
            tasks.spawn(async move {
                let mut call = client.batch_execute_statement();
                for i in first..(first + 25).min(total) {
                    call = call.statements(
                        BatchStatementRequest::builder()
                            .statement(DELETE)
                            .parameters(Av::S(format!("item-{i:09}")))
                            .parameters(Av::N((now - 1000).to_string()))
                            .parameters(Av::N(now.to_string()))
                            .build()
                            .unwrap(),
                    );
                }
                match call.send().await {
                    Ok(out) => {
                        for r in out.responses() {
                            if r.item().is_some() {
                                deleted.fetch_add(1, Ordering::Relaxed);
                            } else {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(_) => {
                        failed.fetch_add(25, Ordering::Relaxed);
                    }
                }
                drop(permit);
            });
            sent += 1;
        }
        while tasks.try_join_next().is_some() {}
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while tasks.join_next().await.is_some() {}
    let wall = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let cpu = sim.stats().cpu_seconds.unwrap_or(0.0) - cpu_before;
    while pollers.join_next().await.is_some() {}

    let deleted = deleted.load(Ordering::Relaxed);
    let queries = queries.load(Ordering::Relaxed);
    println!(
        "deleted {deleted} (failed {}) in {wall:.2} s: {:.0} deletes/s in {:.0} batches/s, {:.0} queries/s",
        failed.load(Ordering::Relaxed),
        deleted as f64 / wall,
        deleted as f64 / 25.0 / wall,
        queries as f64 / wall
    );
    println!(
        "simulator CPU: {cpu:.2} s over {wall:.2} s ({:.0} % of one core), {:.1} ms per 1,000 deletes (queries included)",
        100.0 * cpu / wall,
        1000.0 * cpu / (deleted.max(1) as f64 / 1000.0)
    );
    let stats = sim.stats();
    println!(
        "deletion log: {} entries, {:.1} MB",
        stats.deletions_logged,
        stats.deletion_log_bytes as f64 / 1e6
    );
}

/// This process's resident memory (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
