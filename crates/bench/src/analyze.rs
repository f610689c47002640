//! The analysis itself: [`analyze`] turns an [`Inputs`] event log into a [`Report`], and the
//! report's types.
//!
//! Rules:
//! - Only the *first* REMOVE record of a key counts; later ones are duplicates.
//! - Lag = `seen_ms − ttl_ms`, over `Expire` items only. Percentiles come from an HDR histogram
//!   with 3 significant digits (exact for values below 2048 ms) over lags clamped at 0; a negative
//!   lag is also a wrong deletion.
//! - Throughput counts the first removals of `Expire` and `Backlog` items.
//! - With a hot shard, its `Expire` items and the other shards' are also reported apart, each
//!   against its own part of one perfect sweeper's run ([`crate::shards`]).
//! - The deletion rate while behind is defined in [`crate::behind`].

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::input::{Expectation, Inputs};
pub(crate) use crate::lag_stats::lag_stats;
#[cfg(test)]
use crate::lag_stats::{HIST_BUCKETS, nice_width};
pub use crate::lag_stats::{HistBucket, LagStats};
use crate::lag_stats::{histogram, histogram_buckets};

/// How many left-behind keys a report lists (the total is always given).
pub const LEFT_BEHIND_LISTED: usize = 20;

/// The analysis of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// When the run happened.
    pub run: RunInfo,
    /// How many items of each kind, and how many were removed.
    pub counts: Counts,
    /// Deletion lag over `Expire` items; `None` when none was removed.
    pub lag: Option<LagStats>,
    /// Deletions that must not have happened, sorted by time seen.
    pub wrong: Vec<WrongDeletion>,
    /// Items that should have been deleted but were not, and other inconsistencies.
    pub left_behind: LeftBehind,
    /// Deletion rate of `Expire` and `Backlog` items.
    pub throughput: Throughput,
    /// Catch-up of items already expired at start.
    pub backlog: BacklogStats,
    /// One point per removed `Expire` item, sorted by time, for plotting.
    pub lag_points: Vec<LagPoint>,
    /// Per-second deletions and p99 lag: every second of the run, and any second outside it that
    /// holds an `Expire`/`Backlog` deletion.
    pub per_second: Vec<SecondStats>,
    /// Lag histogram over `Expire` items (clamped at 0); the last bucket may be an overflow bucket.
    pub lag_histogram: Vec<HistBucket>,
    /// The physical bound of this workload on this store, and our ratio to it.
    #[serde(default)]
    pub bound: Option<crate::Bound>,
    /// The first seconds of expirations against the rest.
    #[serde(default)]
    pub ramp: Option<Ramp>,
    /// With a hot shard ([`Inputs::hot_shard`]): the lag of its expiring items, with their own
    /// bound; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_shard: Option<crate::ShardGroup>,
    /// With a hot shard: the lag of the other shards' expiring items, with their own bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_shards: Option<crate::ShardGroup>,
    /// The sweeper's deletion rate while it was behind (an item due for more than
    /// [`crate::BEHIND_AFTER_MS`] not yet deleted), against the store's raw rate; absent when
    /// it never was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<crate::Behind>,
    /// The application sharing the table (`bench --app-writes`): its writes, refusals and
    /// latency; absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<crate::AppReport>,
}

/// When the run happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Sweeper start, epoch ms.
    pub started_ms: i64,
    /// Run end, epoch ms.
    pub ended_ms: i64,
    /// `ended_ms − started_ms`, in seconds.
    pub duration_s: f64,
    /// Measured stream observation delay in ms, as given.
    pub observer_error_ms: Option<f64>,
}

/// Counts of planted items and removals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Distinct planted keys.
    pub planted: u64,
    /// Planted `Expire` items.
    pub expire: u64,
    /// Planted `Backlog` items.
    pub backlog: u64,
    /// Planted `Survive` items.
    pub survive: u64,
    /// Planted entries whose key was already planted (the first one wins).
    pub duplicate_planted: u64,
    /// `expire + backlog`: how many deletions the run should produce.
    pub expected_deletions: u64,
    /// REMOVE records seen, duplicates included.
    pub removal_records: u64,
    /// Distinct keys removed.
    pub removed_keys: u64,
    /// Distinct `Expire`/`Backlog` keys removed (early ones included).
    pub deleted: u64,
    /// REMOVE records beyond the first for their key.
    pub duplicate_removals: u64,
}

/// Why a deletion was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WrongKind {
    /// An `Expire` or `Backlog` item removed before its TTL.
    Early {
        /// How long before its TTL.
        by_ms: i64,
    },
    /// A `Survive` item was removed.
    Survivor {
        /// Its label.
        why: String,
    },
    /// A key that was never planted was removed.
    Unknown,
}

/// A deletion that must not have happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrongDeletion {
    /// The removed key.
    pub key: String,
    /// When its (first) REMOVE record was seen, epoch ms.
    pub seen_ms: i64,
    /// Human-readable reason.
    pub reason: String,
    /// Machine-readable reason.
    pub kind: WrongKind,
}

/// Items that should be gone but are not, and inconsistencies with the final scan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftBehind {
    /// `Expire`/`Backlog` items with no REMOVE record.
    pub total: u64,
    /// The first [`LEFT_BEHIND_LISTED`] of them, sorted.
    pub keys: Vec<String>,
    /// `Expire`/`Backlog` items still present in the final scan.
    pub still_present: u64,
    /// Keys with a REMOVE record that are still present in the final scan.
    pub removed_but_present: u64,
    /// `Survive` items absent from the final scan although no REMOVE record was seen for them.
    pub survivors_missing: u64,
}

/// Deletion rate of `Expire` and `Backlog` items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Deletions counted (first removals of `Expire`/`Backlog` keys).
    pub deletions: u64,
    /// First such removal, epoch ms.
    pub first_ms: Option<i64>,
    /// Last such removal, epoch ms.
    pub last_ms: Option<i64>,
    /// `deletions / (last − first)`, per second; `None` under two distinct instants.
    pub per_s: Option<f64>,
    /// Highest count in one second of [`Report::per_second`].
    pub peak_per_s: u64,
}

/// Catch-up of the items already expired at start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BacklogStats {
    /// Planted `Backlog` items.
    pub count: u64,
    /// How many were removed.
    pub removed: u64,
    /// Last backlog removal − run start, ms; `None` unless every backlog item was removed.
    pub time_to_clear_ms: Option<i64>,
    /// `removed / (last backlog removal − run start)`, per second.
    pub per_s: Option<f64>,
    /// The perfect sweeper's time to clear the same backlog beside the same expiring items and
    /// writes by others, on the same store ([`crate::bound::perfect_sweep_by_item`]): its last
    /// commit − run start, ms. `None` without a backlog or a known store capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_time_to_clear_ms: Option<f64>,
    /// Our backlog rate as a share of the perfect sweeper's: its time to clear / ours (1.0: as
    /// fast as physics allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to_bound: Option<f64>,
}

/// One removed `Expire` item, for the scatter plot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LagPoint {
    /// Seconds since the run started.
    pub t_s: f64,
    /// Lag in ms (negative: removed early).
    pub lag_ms: i64,
}

/// One second of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecondStats {
    /// Whole seconds since the run started (`floor`, may be negative).
    pub second: i64,
    /// `Expire`/`Backlog` deletions seen in that second.
    pub deletions: u64,
    /// p99 lag (clamped at 0) of `Expire` items seen in that second.
    pub p99_lag_ms: Option<u64>,
}

/// Analyze one run.
pub fn analyze(inputs: &Inputs) -> Report {
    let start = inputs.run_started_ms;

    // Planted items, first entry per key wins.
    let mut counts = Counts::default();
    let mut planted: HashMap<&str, &Expectation> = HashMap::with_capacity(inputs.planted.len());
    for p in &inputs.planted {
        if planted.contains_key(p.key.as_str()) {
            counts.duplicate_planted += 1;
            continue;
        }
        planted.insert(&p.key, &p.expect);
        match p.expect {
            Expectation::Expire { .. } => counts.expire += 1,
            Expectation::Backlog { .. } => counts.backlog += 1,
            Expectation::Survive { .. } => counts.survive += 1,
        }
    }
    counts.planted = planted.len() as u64;
    counts.expected_deletions = counts.expire + counts.backlog;

    // First removal per key, in time order (stable: ties keep input order).
    let mut removals: Vec<_> = inputs.removals.iter().collect();
    removals.sort_by_key(|r| r.seen_ms);
    let mut first_seen: HashMap<&str, i64> = HashMap::with_capacity(removals.len());
    let mut firsts = Vec::with_capacity(removals.len());
    for r in &removals {
        if first_seen.contains_key(r.key.as_str()) {
            counts.duplicate_removals += 1;
        } else {
            first_seen.insert(&r.key, r.seen_ms);
            firsts.push(*r);
        }
    }
    counts.removal_records = inputs.removals.len() as u64;
    counts.removed_keys = firsts.len() as u64;

    let mut wrong = Vec::new();
    let mut lags_clamped: Vec<u64> = Vec::new();
    let mut by_ttl: Vec<(i64, u64)> = Vec::new();
    let mut lag_points = Vec::new();
    let mut early = 0u64;
    let mut deletion_times = Vec::new();
    let mut backlog_removed = 0u64;
    let mut backlog_last: Option<i64> = None;
    // second -> (deletions, lags clamped)
    let mut seconds: BTreeMap<i64, (u64, Vec<u64>)> = BTreeMap::new();

    let app_prefix = inputs.app.as_ref().map(|a| a.key_prefix.as_str());
    let mut app_deleted = 0u64;
    for r in &firsts {
        let second = (r.seen_ms - start).div_euclid(1000);
        let (ttl_ms, is_expire) = match planted.get(r.key.as_str()).copied() {
            None if app_prefix.is_some_and(|p| r.key.starts_with(p)) => {
                app_deleted += 1;
                wrong.push(WrongDeletion {
                    key: r.key.clone(),
                    seen_ms: r.seen_ms,
                    reason: "the application's item, written during the run (must survive)"
                        .to_owned(),
                    kind: WrongKind::Survivor {
                        why: "application".to_owned(),
                    },
                });
                continue;
            }
            None => {
                wrong.push(WrongDeletion {
                    key: r.key.clone(),
                    seen_ms: r.seen_ms,
                    reason: "deleted but never planted".to_owned(),
                    kind: WrongKind::Unknown,
                });
                continue;
            }
            Some(Expectation::Survive { why }) => {
                wrong.push(WrongDeletion {
                    key: r.key.clone(),
                    seen_ms: r.seen_ms,
                    reason: format!("must survive ({why})"),
                    kind: WrongKind::Survivor { why: why.clone() },
                });
                continue;
            }
            Some(Expectation::Expire { ttl_ms }) => (*ttl_ms, true),
            Some(Expectation::Backlog { ttl_ms }) => (*ttl_ms, false),
        };
        let lag = r.seen_ms - ttl_ms;
        if lag < 0 {
            wrong.push(WrongDeletion {
                key: r.key.clone(),
                seen_ms: r.seen_ms,
                reason: format!("deleted before its TTL (by {} ms)", -lag),
                kind: WrongKind::Early { by_ms: -lag },
            });
        }
        counts.deleted += 1;
        deletion_times.push(r.seen_ms);
        let slot = seconds.entry(second).or_default();
        slot.0 += 1;
        if is_expire {
            let clamped = lag.max(0) as u64;
            if lag < 0 {
                early += 1;
            }
            lags_clamped.push(clamped);
            by_ttl.push((ttl_ms, clamped));
            slot.1.push(clamped);
            lag_points.push(LagPoint {
                t_s: (r.seen_ms - start) as f64 / 1000.0,
                lag_ms: lag,
            });
        } else {
            backlog_removed += 1;
            backlog_last = Some(r.seen_ms);
        }
    }

    let lag = lag_stats(&lags_clamped, early);
    let ramp = ramp(&by_ttl);
    let lag_histogram = lag
        .as_ref()
        .map(|l| histogram_buckets(&lags_clamped, l.p999_ms, l.max_ms))
        .unwrap_or_default();

    // Left behind and scan consistency.
    let mut left_keys: Vec<&str> = Vec::new();
    let mut left_behind = LeftBehind::default();
    let mut survivors_missing = 0u64;
    for (key, expect) in &planted {
        let removed = first_seen.contains_key(key);
        let present = inputs.present_at_end.contains(*key);
        match expect {
            Expectation::Expire { .. } | Expectation::Backlog { .. } => {
                if !removed {
                    left_keys.push(key);
                }
                if present {
                    left_behind.still_present += 1;
                }
            }
            Expectation::Survive { .. } => {
                if !removed && !present {
                    survivors_missing += 1;
                }
            }
        }
    }
    left_keys.sort_unstable();
    left_behind.total = left_keys.len() as u64;
    left_behind.keys = left_keys
        .iter()
        .take(LEFT_BEHIND_LISTED)
        .map(|k| (*k).to_owned())
        .collect();
    left_behind.removed_but_present = first_seen
        .keys()
        .filter(|k| inputs.present_at_end.contains(**k))
        .count() as u64;
    left_behind.survivors_missing = survivors_missing;

    // Per-second series over the whole run, plus any second holding a removal outside it.
    // A run of exactly N seconds spans seconds 0..N-1.
    let end_second = (inputs.run_ended_ms - start - 1).div_euclid(1000).max(0);
    let lo = seconds.keys().next().copied().unwrap_or(0).min(0);
    let hi = seconds
        .keys()
        .next_back()
        .copied()
        .unwrap_or(0)
        .max(end_second);
    let per_second: Vec<SecondStats> = (lo..=hi)
        .map(|second| match seconds.get(&second) {
            Some((deletions, lags)) => SecondStats {
                second,
                deletions: *deletions,
                p99_lag_ms: (!lags.is_empty()).then(|| histogram(lags).value_at_quantile(0.99)),
            },
            None => SecondStats {
                second,
                deletions: 0,
                p99_lag_ms: None,
            },
        })
        .collect();

    let first_ms = deletion_times.first().copied();
    let last_ms = deletion_times.last().copied();
    let throughput = Throughput {
        deletions: deletion_times.len() as u64,
        first_ms,
        last_ms,
        per_s: match (first_ms, last_ms) {
            (Some(f), Some(l)) if l > f => {
                Some(deletion_times.len() as f64 / ((l - f) as f64 / 1000.0))
            }
            _ => None,
        },
        peak_per_s: per_second.iter().map(|s| s.deletions).max().unwrap_or(0),
    };

    let mut backlog = BacklogStats {
        count: counts.backlog,
        removed: backlog_removed,
        time_to_clear_ms: backlog_last
            .filter(|_| backlog_removed == counts.backlog)
            .map(|l| l - start),
        per_s: backlog_last
            .filter(|l| *l > start)
            .map(|l| backlog_removed as f64 / ((l - start) as f64 / 1000.0)),
        ..BacklogStats::default()
    };

    // Every expiring item once (the first planted entry of its key), in planted order: the
    // bound keeps that order among items due at one instant; the backlog's items likewise.
    let mut seen_keys: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut expiring_planted: Vec<(&crate::Planted, i64)> = Vec::new();
    let mut backlog_planted: Vec<(&crate::Planted, i64)> = Vec::new();
    for p in inputs
        .planted
        .iter()
        .filter(|p| seen_keys.insert(p.key.as_str()))
    {
        match p.expect {
            Expectation::Expire { ttl_ms } => expiring_planted.push((p, ttl_ms)),
            Expectation::Backlog { ttl_ms } => backlog_planted.push((p, ttl_ms)),
            Expectation::Survive { .. } => {}
        }
    }
    // Every write by others the store took: the bench's extensions and the application's
    // accepted writes.
    let mut others_writes = inputs.app_writes.clone();
    if let Some(app) = &inputs.app {
        others_writes.extend(app.attempts.iter().filter_map(crate::AppAttempt::as_write));
    }
    // The perfect sweeper runs once, over the whole workload and the backlog; each part's bound
    // is the part of its lags that belongs to the part's items.
    let perfect: Option<crate::PerfectSweep> = inputs.capacity.as_ref().map(|capacity| {
        let at = |(p, ttl_ms): &(&crate::Planted, i64)| crate::Expiring {
            ttl_ms: *ttl_ms,
            partitions: [p.table_partition, p.shard.map(u32::from)],
        };
        let expiring: Vec<crate::Expiring> = expiring_planted.iter().map(at).collect();
        let late: Vec<crate::Expiring> = backlog_planted.iter().map(at).collect();
        let backlog = (!late.is_empty()).then_some(crate::Backlog {
            items: &late,
            from_ms: start,
        });
        crate::bound::perfect_sweep_by_item(&expiring, backlog, &others_writes, capacity)
    });
    backlog.bound_time_to_clear_ms = perfect
        .as_ref()
        .and_then(|p| p.backlog_done_ms)
        .map(|done| done - start as f64);
    backlog.ratio_to_bound = backlog
        .bound_time_to_clear_ms
        .zip(backlog.time_to_clear_ms)
        .filter(|(_, ours)| *ours > 0)
        .map(|(perfect, ours)| (perfect / ours as f64 * 100.0).round() / 100.0);
    let perfect: Option<Vec<f64>> = perfect.map(|p| p.lags);
    let app_writes = others_writes.len() as u64;
    let with_writes = |mut b: crate::Bound| {
        b.app_writes = app_writes;
        b
    };
    let bound = inputs
        .capacity
        .as_ref()
        .zip(perfect.as_ref())
        .map(|(capacity, perfect)| {
            let (p99, max) = lag.as_ref().map_or((0, 0), |l| (l.p99_ms, l.max_ms));
            with_writes(crate::bound::bound_of_lags(
                perfect.clone(),
                capacity,
                p99,
                max,
            ))
        });
    let (hot_shard, other_shards) = match inputs.hot_shard {
        Some(hot) => {
            let items: Vec<crate::shards::ItemLag> = expiring_planted
                .iter()
                .enumerate()
                .map(|(i, (p, ttl_ms))| crate::shards::ItemLag {
                    shard: p.shard,
                    lag_ms: first_seen
                        .get(p.key.as_str())
                        .map(|seen| (seen - ttl_ms).max(0) as u64),
                    perfect_ms: perfect.as_ref().map(|v| v[i]),
                })
                .collect();
            let (mut h, mut o) = crate::shards::split(hot, &items, inputs.capacity.as_ref());
            for g in [&mut h, &mut o] {
                g.bound = g.bound.take().map(with_writes);
            }
            (Some(h), Some(o))
        }
        None => (None, None),
    };
    let due: Vec<crate::behind::Due> = planted
        .iter()
        .filter_map(|(key, expect)| match expect {
            Expectation::Expire { ttl_ms } | Expectation::Backlog { ttl_ms } => {
                Some(crate::behind::Due {
                    ttl_ms: *ttl_ms,
                    seen_ms: first_seen.get(key).copied(),
                })
            }
            Expectation::Survive { .. } => None,
        })
        .collect();
    let behind = crate::behind::behind(
        &due,
        &deletion_times,
        start,
        inputs.run_ended_ms,
        inputs.raw_batch_per_s,
    );
    let app = inputs.app.as_ref().map(|load| {
        let periods = crate::behind::periods(&due, start, inputs.run_ended_ms);
        crate::app::app_report(load, app_deleted, &periods)
    });
    let lag_points = thin(lag_points);

    Report {
        run: RunInfo {
            started_ms: start,
            ended_ms: inputs.run_ended_ms,
            duration_s: (inputs.run_ended_ms - start) as f64 / 1000.0,
            observer_error_ms: inputs.observer_error_ms,
        },
        counts,
        lag,
        wrong,
        left_behind,
        throughput,
        backlog,
        lag_points,
        per_second,
        lag_histogram,
        bound,
        ramp,
        hot_shard,
        other_shards,
        behind,
        app,
    }
}

/// The first seconds of expirations, when a daemon meets load it did not have, against the rest.
pub const RAMP_SECONDS: i64 = 15;

/// Lag of the items due in the first [`RAMP_SECONDS`] after the first TTL against the rest's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ramp {
    pub first_count: u64,
    pub first_p99_ms: u64,
    pub first_max_ms: u64,
    pub rest_count: u64,
    pub rest_p99_ms: u64,
    /// `first_p99_ms / rest_p99_ms` (1.0: the ramp costs nothing).
    pub ratio_p99: Option<f64>,
}

fn ramp(by_ttl: &[(i64, u64)]) -> Option<Ramp> {
    let first_ttl = by_ttl.iter().map(|(t, _)| *t).min()?;
    let split = first_ttl + RAMP_SECONDS * 1000;
    let (mut first, mut rest): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    for &(ttl, lag) in by_ttl {
        if ttl < split {
            first.push(lag);
        } else {
            rest.push(lag);
        }
    }
    let p99 = |v: &mut Vec<u64>| -> u64 {
        if v.is_empty() {
            return 0;
        }
        v.sort_unstable();
        v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1]
    };
    let (first_p99, rest_p99) = (p99(&mut first), p99(&mut rest));
    Some(Ramp {
        first_count: first.len() as u64,
        first_p99_ms: first_p99,
        first_max_ms: first.last().copied().unwrap_or(0),
        rest_count: rest.len() as u64,
        rest_p99_ms: rest_p99,
        ratio_p99: (rest_p99 > 0 && !rest.is_empty())
            .then(|| (first_p99 as f64 / rest_p99 as f64 * 100.0).round() / 100.0),
    })
}

/// Points a report keeps for its plot at most: a run of a million items would otherwise write a
/// report of a hundred megabytes.
pub const LAG_POINTS_KEPT: usize = 50_000;

/// At most [`LAG_POINTS_KEPT`] points: an even sample in time, plus every point of the top 1 %
/// of lags, so the plot still shows the tail.
fn thin(points: Vec<LagPoint>) -> Vec<LagPoint> {
    if points.len() <= LAG_POINTS_KEPT {
        return points;
    }
    let mut lags: Vec<i64> = points.iter().map(|p| p.lag_ms).collect();
    let cut = lags.len() - lags.len() / 100;
    let (_, tail, _) = lags.select_nth_unstable(cut);
    let tail = *tail;
    let stride = points
        .len()
        .div_ceil(LAG_POINTS_KEPT - points.len() / 100 - 1)
        .max(1);
    points
        .into_iter()
        .enumerate()
        .filter(|(i, p)| i % stride == 0 || p.lag_ms >= tail)
        .map(|(_, p)| p)
        .take(LAG_POINTS_KEPT)
        .collect()
}

#[cfg(test)]
mod tests;
