//! Deterministic load tests (issue 26, item 3): the daemon over the partitioned store
//! (`precise_ttl_engine::partitioned`) on tokio's paused clock, a workload of fractional TTLs at
//! a share of the table's capacity, each item's lag against the perfect-knowledge bound
//! (`precise_ttl_bench::bound`) computed with the same capacities.
//!
//! Everything is seeded (the workload, the key hash, the daemon's random source), and
//! time moves only when the runtime is idle, so a run gives the same figures on every machine.
//! Their assertion messages carry every seed's measured ratios.

use super::NOW_S;
use precise_ttl_bench::bound::{
    Bucket as BoundBucket, Expiring, PartitionLimit, StoreCapacity, perfect_lags_of,
};
use precise_ttl_core::{Expiry, ShardCount, Timestamp};
use precise_ttl_engine::memory::{MemItem, MemTtl};
use precise_ttl_engine::partitioned::{Bucket, PartitionedConfig, PartitionedStore};
use precise_ttl_engine::{Daemon, DaemonConfig, DaemonReport, Observer, TokioClock};
use precise_ttl_sim::capacity::Bucket as SimBucket;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SHARDS: u16 = 32;
/// The first TTL, from the start: the daemon's first reads come before it.
const FIRST_TTL_MS: i64 = 1_000;

/// What a run writes: `load` of the table's capacity on all shards for `seconds`, plus `hot`
/// items/s on one shard.
#[derive(Debug, Clone, Copy)]
struct Workload {
    seed: u64,
    load: f64,
    seconds: i64,
    hot: Option<(u16, f64)>,
    /// Every `n`th item has its TTL extended by an hour `extend_ahead_ms` before it is due.
    extend_every: Option<usize>,
    extend_ahead_ms: i64,
    /// Round trips drawn as the simulator's ([`jittered`]), not a fixed 5 ms.
    jitter: bool,
    /// Shards (lanes), and the table's partitions (the table takes what they take together).
    shards: u16,
    table_partitions: u32,
}

impl Workload {
    fn at(seed: u64, load: f64) -> Self {
        Workload {
            seed,
            load,
            seconds: 10,
            hot: None,
            extend_every: None,
            extend_ahead_ms: 20,
            jitter: false,
            shards: SHARDS,
            table_partitions: 10,
        }
    }
}

struct Planned {
    key: String,
    /// From the start, ms; fractional TTLs are whole milliseconds here, not whole seconds.
    ttl_ms: i64,
    shard: u16,
    extended: bool,
}

fn config() -> PartitionedConfig {
    PartitionedConfig::default()
}

/// Round trips as the simulator's: log-normal, median 4 ms, 99th percentile 15 ms
/// (`precise_ttl_sim::defaults`).
fn jittered() -> PartitionedConfig {
    PartitionedConfig {
        latency: precise_ttl_sim::defaults::LATENCY_P50,
        latency_p99: precise_ttl_sim::defaults::LATENCY_P99,
        ..config()
    }
}

fn plan(w: &Workload, store: &PartitionedConfig) -> Vec<Planned> {
    let mut rng = fastrand::Rng::with_seed(w.seed);
    let table = store
        .table_wcu
        .min(store.table_partition_wcu * f64::from(store.table_partitions));
    let span = w.seconds * 1000;
    let spread = (w.load * table * w.seconds as f64) as usize;
    let hot = w
        .hot
        .map_or(0, |(_, rate)| (rate * w.seconds as f64) as usize);
    let mut items: Vec<Planned> = (0..spread + hot)
        .map(|i| {
            let ttl_ms = FIRST_TTL_MS + rng.i64(0..span);
            Planned {
                key: format!("s{}-{i}", w.seed),
                ttl_ms,
                shard: match w.hot {
                    Some((shard, _)) if i >= spread => shard,
                    _ => rng.u16(0..w.shards),
                },
                // Extended after the run starts, so the daemon's first read lists it first.
                extended: w.extend_every.is_some_and(|n| i % n == n - 1)
                    && ttl_ms - w.extend_ahead_ms > 0,
            }
        })
        .collect();
    items.sort_by_key(|p| p.ttl_ms);
    items
}

fn ttl_text(offset_ms: i64) -> String {
    Timestamp::from_millis(NOW_S * 1000 + offset_ms).to_epoch_seconds_text()
}

#[derive(Default)]
struct Deletions(Mutex<HashMap<String, (Expiry, Timestamp)>>);
impl Observer<String> for Deletions {
    fn deleted(&self, key: &String, expiry: Expiry, at: Timestamp) {
        self.0.lock().unwrap().insert(key.clone(), (expiry, at));
    }
}

/// One item's lag and where it lived.
struct Lag {
    shard: u16,
    ms: f64,
}

struct Run {
    lags: Vec<Lag>,
    bound: Vec<f64>,
    report: DaemonReport,
    /// Extended items deleted, or items deleted before their TTL: must stay empty.
    wrong: Vec<String>,
    /// Items never deleted (lag counted to the run's end).
    left: usize,
    extended_alive: usize,
    /// Items planned to be extended.
    extended: usize,
    store: Arc<PartitionedStore>,
}

impl Run {
    /// What a run's figures end with: what it left, and how often the store refused.
    fn leftovers(&self) -> String {
        format!(
            "{} left undeleted; {} throttled; refused {:?}",
            self.left,
            self.report.throttled,
            self.store.counts().refused
        )
    }
}

/// Writes the workload, runs the daemon until every due item is gone (or 30 s after the last
/// TTL), and measures each item's lag and the bound's.
async fn run(w: Workload) -> Run {
    // The daemon's own source is seeded by its configuration; the thread-local one too, for
    // anything that still draws from it.
    fastrand::seed(w.seed);
    let base = if w.jitter { jittered() } else { config() };
    let store_config = PartitionedConfig {
        hash_seed: w.seed,
        table_partitions: w.table_partitions,
        table_wcu: base.table_partition_wcu * f64::from(w.table_partitions),
        ..base
    };
    let planned = plan(&w, &store_config);
    let store = Arc::new(PartitionedStore::new(store_config.clone()));
    for p in &planned {
        store.put(
            p.key.clone(),
            MemItem {
                ttl: MemTtl::Number(ttl_text(p.ttl_ms)),
                shard: Some(p.shard),
            },
        );
    }
    let extended: Vec<(i64, String, u16)> = planned
        .iter()
        .filter(|p| p.extended)
        .map(|p| (p.ttl_ms - w.extend_ahead_ms, p.key.clone(), p.shard))
        .collect();
    let expected_left = extended.len();
    let clock = Arc::new(TokioClock::starting_at(Timestamp::from_secs(NOW_S)));
    let start = tokio::time::Instant::now();
    let deletions = Arc::new(Deletions::default());
    let daemon = Daemon::new(
        Arc::clone(&store),
        clock,
        Arc::new(ShardCount::new(u64::from(w.shards)).unwrap()),
        DaemonConfig {
            stray_check_interval: None,
            seed: Some(w.seed),
            ..DaemonConfig::default()
        },
    )
    .with_observer(deletions.clone());
    let last_ttl = planned.last().map_or(0, |p| p.ttl_ms);
    let writer_store = Arc::clone(&store);
    let until_done = async move {
        // The application extends some TTLs just before they are due (after the read-ahead
        // has scheduled them)...
        for (at, key, shard) in extended {
            tokio::time::sleep_until(start + Duration::from_millis(at as u64)).await;
            writer_store.put(
                key,
                MemItem {
                    ttl: MemTtl::Number(ttl_text(at + 3_600_000)),
                    shard: Some(shard),
                },
            );
        }
        // ...and the run ends once only those are left.
        let deadline = start + Duration::from_millis((last_ttl + 30_000) as u64);
        while writer_store.len() > expected_left && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let report = daemon.run(until_done).await.unwrap();
    let end_ms = start.elapsed().as_millis() as f64;
    let deleted = deletions.0.lock().unwrap();
    let mut wrong = Vec::new();
    let mut left = 0;
    let mut lags = Vec::new();
    let mut expiring = Vec::new();
    for p in &planned {
        let got = deleted.get(&p.key);
        if p.extended {
            if got.is_some() {
                wrong.push(p.key.clone());
            }
            continue;
        }
        let ms = match got {
            Some((_, at)) => {
                let lag = at.millis_since(Timestamp::from_millis(NOW_S * 1000 + p.ttl_ms));
                if lag < 0 {
                    wrong.push(p.key.clone());
                }
                lag as f64
            }
            None => {
                left += 1;
                end_ms - p.ttl_ms as f64
            }
        };
        lags.push(Lag { shard: p.shard, ms });
        expiring.push(Expiring {
            ttl_ms: p.ttl_ms,
            partitions: [
                Some(store.table_partition(&p.key)),
                Some(u32::from(p.shard)),
            ],
        });
    }
    let extended_alive = planned
        .iter()
        .filter(|p| p.extended && store.get(&p.key).is_some())
        .count();
    let bound = perfect_lags_of(&expiring, &capacity(&store_config));
    drop(deleted);
    Run {
        lags,
        bound,
        report,
        wrong,
        left,
        extended_alive,
        extended: planned.iter().filter(|p| p.extended).count(),
        store,
    }
}

/// The store's capacities as the bound takes them. The bound holds table and index partitions
/// to one limit, so the store's two must agree.
fn capacity(c: &PartitionedConfig) -> StoreCapacity {
    assert_eq!(c.table_partition_wcu, c.index_partition_wcu);
    let table = c
        .table_wcu
        .min(c.table_partition_wcu * f64::from(c.table_partitions));
    StoreCapacity {
        per_second: table,
        burst_items: table * c.burst_seconds,
        floor_ms: c.latency.as_secs_f64() * 1000.0,
        source: "partitioned test store".into(),
        partition: Some(PartitionLimit {
            per_second: c.table_partition_wcu,
            burst_items: c.table_partition_wcu * c.burst_seconds,
        }),
    }
}

/// The `q` quantile, as `precise_ttl_bench::bound::bound` takes it.
fn quantile(values: impl IntoIterator<Item = f64>, q: f64) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Our p99 and max, the bound's, and the ratios, for assertion messages.
struct Ratios {
    ours: (f64, f64),
    bound: (f64, f64),
    p99: f64,
    max: f64,
}

impl Ratios {
    fn of(run: &Run) -> Ratios {
        let ours = (
            quantile(run.lags.iter().map(|l| l.ms), 0.99),
            quantile(run.lags.iter().map(|l| l.ms), 1.0),
        );
        let bound = (
            quantile(run.bound.iter().copied(), 0.99),
            quantile(run.bound.iter().copied(), 1.0),
        );
        Ratios {
            ours,
            bound,
            p99: ours.0 / bound.0,
            max: ours.1 / bound.1,
        }
    }
}

impl std::fmt::Display for Ratios {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p99 {} ms vs bound {} ms (x{:.2}), max {} ms vs bound {} ms (x{:.2})",
            self.ours.0, self.bound.0, self.p99, self.ours.1, self.bound.1, self.max
        )
    }
}

/// Each seed's run of `w`, held to `p99` and `max` times the bound; the assertion names every
/// seed's figures, not only the first failing one's.
async fn lag_within_the_bound(w: Workload, p99: f64, max: f64) {
    let mut figures = Vec::new();
    let mut pass = true;
    for seed in [11, 12, 13] {
        let run = run(Workload { seed, ..w }).await;
        let r = Ratios::of(&run);
        pass &= run.left == 0
            && run.wrong.is_empty()
            && run.extended_alive == run.extended
            && r.max <= max
            && r.p99 <= p99;
        figures.push(format!("seed {seed}: {r}; {}", run.leftovers()));
    }
    verdict(
        &format!(
            "load {}{}",
            w.load,
            if w.jitter { ", jittered" } else { "" }
        ),
        &format!("max <= x{max} and p99 <= x{p99} of the bound"),
        pass,
        &figures,
    );
}

fn verdict(what: &str, claim: &str, pass: bool, figures: &[String]) {
    println!("{what}: {figures:#?}");
    assert!(pass, "{what}, {claim}: {figures:#?}");
}

/// At the daemon's defaults (what users run). The figures over time are in
/// docs/benchmarks.md, "Admission on the deterministic store".
#[tokio::test(start_paused = true)]
async fn at_three_quarters_of_capacity_lag_stays_near_the_bound() {
    lag_within_the_bound(Workload::at(0, 0.75), 1.15, 1.5).await;
}

/// At the daemon's defaults; figures in docs/benchmarks.md, "Admission on the deterministic
/// store". Thirty seconds, as the simulator's runs: at full capacity a partition's queue grows
/// for as long as its share of the keys is over its limit, and capacity left unused early shows
/// only late (10 s passed a policy that 30 s showed at 1.4-2.1 times the bound).
#[tokio::test(start_paused = true)]
async fn at_full_capacity_lag_stays_near_the_bound() {
    let w = Workload {
        seconds: 30,
        ..Workload::at(0, 1.0)
    };
    lag_within_the_bound(w, 1.15, 1.5).await;
}

/// As above with the simulator's round trips (median 4 ms, p99 15 ms). Requests overtake one
/// another, so a full partition serves its items in an order the daemon does not choose, and
/// not every seed meets the targets (p99 1.15, max 1.5 times the bound; figures in
/// docs/benchmarks.md): this holds them against regressions, with a margin.
#[tokio::test(start_paused = true)]
async fn at_full_capacity_with_the_simulators_round_trips_lag_stays_near_the_bound() {
    let w = Workload {
        seconds: 30,
        jitter: true,
        ..Workload::at(0, 1.0)
    };
    lag_within_the_bound(w, 1.3, 1.8).await;
}

/// As above with every 300th item's TTL extended 1.5 s before it is due: a perfect sweeper
/// never spends a write on those items, and ours withdraws them unsent (the near re-read no
/// longer lists them), so at full capacity no write is lost to them. Figures in
/// docs/benchmarks.md, "At capacity, measured apart".
#[tokio::test(start_paused = true)]
async fn at_full_capacity_with_extensions_a_second_ahead_lag_stays_near_the_bound() {
    let w = Workload {
        seconds: 30,
        extend_every: Some(300),
        extend_ahead_ms: 1_500,
        ..Workload::at(0, 1.0)
    };
    lag_within_the_bound(w, 1.15, 1.5).await;
}

/// Every lane over its index partition (8 lanes at 2.5 times their 1,000 WCU/s, the table with
/// room): each lane is limited by its own refusals and must still run its partition full, or the
/// lane that runs slowest is the run's tail. Figures in docs/benchmarks.md, "Every lane over its
/// index partition".
#[tokio::test(start_paused = true)]
async fn with_every_lane_over_its_index_partition_each_still_runs_it_full() {
    let w = Workload {
        seconds: 3,
        jitter: true,
        shards: 8,
        table_partitions: 20,
        ..Workload::at(0, 1.0)
    };
    lag_within_the_bound(w, 1.15, 1.15).await;
}

/// A lane whose index partition refuses is limited alone; figures in docs/benchmarks.md,
/// "Admission on the deterministic store".
#[tokio::test(start_paused = true)]
async fn a_hot_lane_leaves_the_other_lanes_lag_alone() {
    const HOT: u16 = 0;
    let mut figures = Vec::new();
    let mut pass = true;
    for seed in [21, 22] {
        let calm = Workload {
            seconds: 8,
            ..Workload::at(seed, 0.5)
        };
        // 1,500/s more on one shard: 1,656/s with its share of the rest, two thirds more than
        // its index partition takes. The table partitions keep room (500/s + 150/s each of
        // their 1,000/s).
        let hot = Workload {
            hot: Some((HOT, 1500.0)),
            ..calm
        };
        let others = |run: &Run| {
            quantile(
                run.lags.iter().filter(|l| l.shard != HOT).map(|l| l.ms),
                0.99,
            )
        };
        let without = run(calm).await;
        let with = run(hot).await;
        let (p99_without, p99_with) = (others(&without), others(&with));
        pass &= with.left == 0 && p99_with <= 1.1 * p99_without;
        figures.push(format!(
            "seed {seed}: the other lanes' p99 {p99_with} ms with the hot lane, {p99_without} ms \
             without (x{:.2}); all lanes, hot run: {}; calm run: {}; {}",
            p99_with / p99_without,
            Ratios::of(&with),
            Ratios::of(&without),
            with.leftovers(),
        ));
    }
    verdict(
        "hot lane",
        "other lanes' p99 within x1.1 of the run without the hot lane",
        pass,
        &figures,
    );
}

#[tokio::test(start_paused = true)]
async fn under_full_load_an_item_extended_just_before_its_expiry_survives() {
    let w = Workload {
        extend_every: Some(50),
        seconds: 5,
        ..Workload::at(31, 1.0)
    };
    let run = run(w).await;
    let extended = run.report.skipped;
    assert!(
        run.wrong.is_empty(),
        "wrong deletes (extended, or before their TTL): {:?}",
        run.wrong
    );
    let planted = run.extended;
    assert_eq!(
        run.extended_alive, planted,
        "every extended item is still there ({extended} skipped by the daemon)"
    );
    // The read-ahead had scheduled them before the extension: the daemon did send their
    // deletes, and the condition refused them.
    assert!(
        extended as usize == planted && run.left == 0,
        "{extended} of {planted} extended items tried and skipped; {} due items left",
        run.left
    );
}

/// An extension a second or more ahead is seen by the next read of the near future, which no
/// longer lists the item at the expiry it is held for: its delete, bound to fail, is never sent
/// (at full capacity each one would cost a write the table never gets back).
#[tokio::test(start_paused = true)]
async fn an_item_extended_a_second_before_its_expiry_is_withdrawn_unsent() {
    let w = Workload {
        extend_every: Some(50),
        extend_ahead_ms: 1_500,
        seconds: 5,
        ..Workload::at(32, 0.75)
    };
    let run = run(w).await;
    let planted = run.extended;
    assert!(planted > 0);
    assert!(run.wrong.is_empty(), "wrong deletes: {:?}", run.wrong);
    assert_eq!(run.extended_alive, planted);
    assert_eq!(run.left, 0);
    // Skipped, unless the first read already saw the extension (extended within 1.5 s of the
    // start, when that read takes place).
    let skipped = run.report.skipped as usize;
    assert!(
        (planted * 9 / 10..=planted).contains(&skipped),
        "{skipped} of {planted} skipped"
    );
    let writes: u64 = run.store.counts().table_partition_writes.iter().sum();
    assert_eq!(
        writes, run.report.deleted,
        "one write per item deleted: no conditional delete of an extended item was sent"
    );
}

/// The same request sequence (a seeded number of requests every millisecond, each bucket
/// admitting what it can) through the partitioned store's bucket, the simulator's and the
/// bound's: the store's and the simulator's admit exactly the same at every step, the bound's
/// within one token but for what follows, so a ratio to the bound measures the sweeper, not a difference in metering.
///
/// The bound's bucket holds one millisecond's refill on top of its burst (it steps in whole
/// milliseconds, see its documentation), so each time it refills to full it admits that much
/// more than the others (`rate / 1000` tokens, at least one): its total may lead theirs by that
/// per refill, never more, never less. For a table of 10,000/s with 0.1 s of burst that is 10
/// tokens on 1,000, 1 %: the bound is that much kinder than the store, never harsher.
#[test]
fn the_three_token_buckets_admit_the_same() {
    for (rate, burst_seconds) in [(1000.0, 0.1), (10_000.0, 0.1), (647.0, 0.5)] {
        let mut rng = fastrand::Rng::with_seed(7);
        let t0 = std::time::Instant::now();
        let tokio0 = tokio::time::Instant::from_std(t0);
        let mut ours = Bucket::new(rate, burst_seconds, tokio0);
        let mut sim = SimBucket::new(rate, burst_seconds, t0);
        let mut bound = BoundBucket::full(rate, rate * burst_seconds, 0);
        let mean = rate / 1000.0;
        let mut totals = [0u64; 3];
        // What the bound holds on top of the others' burst, in whole admitted requests.
        let extra = (rate / 1000.0).ceil().max(1.0) as u64;
        let (mut refills, mut was_full) = (0u64, true);
        for ms in 0..20_000i64 {
            // Bursts of up to 4x the rate, then 2x, then idle stretches, so both the burst
            // credit and the steady refill are exercised.
            let asked = match (ms / 500) % 3 {
                0 => rng.u64(0..=(4.0 * mean).ceil() as u64),
                1 => rng.u64(0..=(2.0 * mean).ceil() as u64),
                _ => 0,
            };
            let d = Duration::from_millis(ms as u64);
            let (t, tt) = (t0 + d, tokio0 + d);
            let full = sim.tokens(t) >= rate * burst_seconds - 1e-6;
            refills += u64::from(full && !was_full);
            was_full = full;
            let mut step = [0u64; 3];
            for _ in 0..asked {
                if ours.has_token(tt) {
                    ours.take();
                    step[0] += 1;
                }
                if sim.admits(Some(1.0), t) {
                    sim.take(1.0);
                    step[1] += 1;
                }
                if bound.has_token(ms) {
                    bound.take(ms);
                    step[2] += 1;
                }
            }
            let (lo, hi) = (step.iter().min().unwrap(), step.iter().max().unwrap());
            // Within one token, or after a refill to full, the bound's extra millisecond.
            assert!(
                step[0] == step[1] && hi - lo <= extra,
                "rate {rate}, burst {burst_seconds} s, at {ms} ms: admitted {step:?} of {asked}"
            );
            for i in 0..3 {
                totals[i] += step[i];
            }
            assert!(
                totals[0] == totals[1] && (0..=refills * extra).contains(&(totals[2] - totals[1])),
                "rate {rate}, burst {burst_seconds} s, at {ms} ms: totals {totals:?} \
                 (ours, simulator, bound) after {refills} refills to full"
            );
        }
        assert!(
            refills > 5 && totals[1] > 10_000,
            "{totals:?}, {refills} refills"
        );
    }
}
