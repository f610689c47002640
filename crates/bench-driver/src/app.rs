//! The application sharing the bench table (`bench --app-writes RATE`): while the sweeper
//! works, the bench also writes new items to the same table at a steady rate, as the service
//! that owns the table would, and records how the store answered each write.
//!
//! Decisions:
//! - New random keys (a prefix no planted item has, then 64 random bits), so the writes spread
//!   over every table partition as the sweeper's deletes do. Half carry a TTL a day ahead and a
//!   shard drawn like a writer using precise-ttl draws it (they land in the expiry index, on the
//!   index partitions the deletes write); half have no TTL at all. Neither half is ever due, so
//!   the sweeper must never delete one.
//! - Its own SDK client with retries off (one attempt): a refused write is seen, counted and
//!   dropped, as an application with no retry budget would see it. The SDK's retries would
//!   hide refusals behind latency.
//! - A steady schedule: a tick every [`TICK`] sends the writes whose slots have passed
//!   ([`Pacer`]), each in its own task, at most [`max_in_flight`] waiting for answers at once. A
//!   write due when that many wait is not sent and counted as missed, so a bench that cannot
//!   keep up reports the rate it achieved instead of bursting later.

use crate::error::BenchError;
use crate::items::{ItemWriter, epoch_seconds};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use precise_ttl_bench::{AppAttempt, AppLoad, AppOutcome};
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_engine::{Clock, SystemClock};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// Every application key starts with this; no planted key does.
pub const KEY_PREFIX: &str = "app-";

/// How often the schedule sends the writes that fell due.
const TICK: Duration = Duration::from_millis(5);

/// The longest stretch of slots one tick sends: after a stall of the bench's own (a busy
/// machine), slots older than this are missed rather than sent at once, a burst the application
/// would not have sent.
const MOST_BEHIND: Duration = Duration::from_millis(100);

/// Where the store keeps a key: its table partition, when the run knows it (the simulator).
pub type PartitionOf = Arc<dyn Fn(&str) -> Option<u32> + Send + Sync>;

/// Writes allowed to wait for answers at once: a quarter second of the rate (a store answering
/// within that never holds the schedule back), at least 16 and at most 4 096.
pub fn max_in_flight(rate_per_s: f64) -> usize {
    ((rate_per_s / 4.0).ceil() as usize).clamp(16, 4096)
}

/// The steady schedule: slot `i` falls at `i / rate` seconds after the start.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate_per_s: f64,
    /// Slots handed out or missed so far.
    passed: u64,
}

impl Pacer {
    pub fn new(rate_per_s: f64) -> Self {
        Pacer {
            rate_per_s,
            passed: 0,
        }
    }

    /// At `elapsed` since the start: (writes to send now, slots missed because they are older
    /// than [`MOST_BEHIND`]).
    pub fn due(&mut self, elapsed: Duration) -> (u64, u64) {
        // From whole microseconds, so a slot boundary lands exactly where it falls.
        let slots_by = |d: Duration| d.as_micros() as f64 * self.rate_per_s / 1e6;
        let slots = slots_by(elapsed).floor() as u64 + 1;
        let new = slots.saturating_sub(self.passed);
        self.passed = self.passed.max(slots);
        let most = (slots_by(MOST_BEHIND).ceil() as u64).max(1);
        (new.min(most), new.saturating_sub(most))
    }
}

/// Whether a service error code is the store refusing for lack of capacity.
pub fn is_refusal(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "ThrottlingException"
                | "ProvisionedThroughputExceededException"
                | "RequestLimitExceeded"
        )
    )
}

/// The application, writing until [`AppWriter::stop`].
#[derive(Debug)]
pub struct AppWriter {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<AppLoad>,
}

impl AppWriter {
    /// Starts writing to `table` at `rate_per_s` (positive) with `items`' attribute names,
    /// shards drawn in `0..shards`; `seed` draws the keys, shards and nothing else.
    pub fn start(
        dynamo: &Dynamo,
        table: &str,
        items: ItemWriter,
        shards: u16,
        rate_per_s: f64,
        seed: u64,
        partition_of: PartitionOf,
    ) -> AppWriter {
        let client = aws_sdk_dynamodb::Client::from_conf(
            dynamo
                .write
                .config()
                .to_builder()
                .retry_config(RetryConfig::disabled())
                .build(),
        );
        let (stop, stopped) = watch::channel(false);
        let table = table.to_string();
        let task = tokio::spawn(write_until(
            Writer {
                client,
                table,
                items,
                shards: shards.max(1),
                partition_of,
            },
            rate_per_s,
            seed,
            stopped,
        ));
        AppWriter { stop, task }
    }

    /// Stops sending, waits for the writes in flight, and returns every attempt.
    pub async fn stop(self) -> Result<AppLoad, BenchError> {
        let _ = self.stop.send(true);
        Ok(self.task.await?)
    }
}

/// What one write needs.
struct Writer {
    client: aws_sdk_dynamodb::Client,
    table: String,
    items: ItemWriter,
    shards: u16,
    partition_of: PartitionOf,
}

async fn write_until(
    writer: Writer,
    rate_per_s: f64,
    seed: u64,
    mut stopped: watch::Receiver<bool>,
) -> AppLoad {
    let writer = Arc::new(writer);
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xa991_1ca7_1000);
    let permits = Arc::new(Semaphore::new(max_in_flight(rate_per_s)));
    let mut pacer = Pacer::new(rate_per_s);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut tasks = JoinSet::new();
    let mut attempts = Vec::new();
    let mut missed = 0u64;
    let mut sent = 0u64;
    let from_ms = SystemClock.now().as_millis();
    let started = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => break,
        }
        let (due, too_old) = pacer.due(started.elapsed());
        missed += too_old;
        for _ in 0..due {
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                missed += 1;
                continue;
            };
            // Alternate: exactly half with a TTL.
            let shard = sent.is_multiple_of(2).then(|| rng.u16(0..writer.shards));
            let key = format!("{KEY_PREFIX}{:016x}", rng.u64(..));
            sent += 1;
            let writer = writer.clone();
            tasks.spawn(async move {
                let attempt = write_one(&writer, key, shard).await;
                drop(permit);
                attempt
            });
        }
        while let Some(done) = tasks.try_join_next() {
            // A write task only fails by panicking, which it has no reason to: drop it.
            if let Ok(a) = done {
                attempts.push(a);
            }
        }
    }
    let to_ms = SystemClock.now().as_millis();
    while let Some(done) = tasks.join_next().await {
        if let Ok(a) = done {
            attempts.push(a);
        }
    }
    AppLoad {
        asked_per_s: rate_per_s,
        from_ms,
        to_ms,
        key_prefix: KEY_PREFIX.into(),
        attempts,
        missed,
    }
}

async fn write_one(w: &Writer, key: String, shard: Option<u16>) -> AppAttempt {
    let now = SystemClock.now();
    let ttl = shard.map(|_| epoch_seconds(now.saturating_add(Duration::from_secs(86_400))));
    let item = w.items.item(&key, ttl, shard);
    let table_partition = (w.partition_of)(&key);
    let sent = Instant::now();
    let result = w
        .client
        .put_item()
        .table_name(&w.table)
        .set_item(Some(item))
        .send()
        .await;
    let latency_us = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
    let outcome = match result {
        Ok(_) => AppOutcome::Accepted,
        Err(e) if is_refusal(e.as_service_error().and_then(|s| s.meta().code())) => {
            AppOutcome::Refused
        }
        Err(_) => AppOutcome::Failed,
    };
    AppAttempt {
        at_ms: now.as_millis(),
        latency_us,
        outcome,
        table_partition,
        shard,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: a rate, then the slots (sent, missed) the pacer hands out at each time, in µs
    /// from its start.
    #[test]
    fn the_pacer_hands_out_its_slots_on_time() {
        type Steps = &'static [(u64, (u64, u64))];
        let cases: [(&str, f64, Steps); 3] = [
            (
                "one slot per period, the first at once",
                1000.0,
                &[
                    (0, (1, 0)),
                    (500, (0, 0)),
                    (5_000, (5, 0)),
                    (5_000, (0, 0)),
                    (15_000, (10, 0)),
                ],
            ),
            // A 1 s stall: 1 000 slots passed; 100 ms of them are sent, the rest missed,
            // instead of a burst.
            (
                "after a stall",
                1000.0,
                &[(0, (1, 0)), (1_000_000, (100, 900)), (1_001_000, (1, 0))],
            ),
            (
                "a slow rate still sends",
                2.0,
                &[(0, (1, 0)), (499_000, (0, 0)), (500_000, (1, 0))],
            ),
        ];
        for (name, rate, steps) in cases {
            let mut p = Pacer::new(rate);
            for &(at_us, slots) in steps {
                assert_eq!(
                    p.due(Duration::from_micros(at_us)),
                    slots,
                    "{name} at {at_us} µs"
                );
            }
        }
        // Over a second: exactly the rate.
        let mut q = Pacer::new(5000.0);
        let total: u64 = (0..=200)
            .map(|i| q.due(Duration::from_millis(i * 5)).0)
            .sum();
        assert_eq!(total, 5001, "slots 0..=5000 at 5 000/s over 1 s");
    }

    #[test]
    fn refusals_are_the_capacity_errors_only() {
        for code in [
            "ThrottlingException",
            "ProvisionedThroughputExceededException",
            "RequestLimitExceeded",
        ] {
            assert!(is_refusal(Some(code)), "{code}");
        }
        for code in [
            Some("ValidationException"),
            Some("InternalServerError"),
            None,
        ] {
            assert!(!is_refusal(code), "{code:?}");
        }
    }

    #[test]
    fn in_flight_is_a_quarter_second_of_the_rate_within_bounds() {
        assert_eq!(max_in_flight(1.0), 16);
        assert_eq!(max_in_flight(5000.0), 1250);
        assert_eq!(max_in_flight(1e9), 4096);
    }
}
