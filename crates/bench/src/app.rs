//! The application sharing the bench table (`bench --app-writes`): what its writes met.
//!
//! Native TTL never competes with the application; our deletes do, on the same table and index
//! partitions. So the bench plays the application too: it writes new items at a steady rate for
//! the whole run, without retries, and every attempt is recorded ([`AppAttempt`]). From those
//! records this module computes what an application owner would ask: how many writes were
//! refused (throttled), how many failed otherwise, how long the accepted ones took, and how many
//! were refused while the sweeper was behind (the catch-up, when its deletes press hardest).
//! The driver writes; nothing here reads a clock or the network.
//!
//! The application's items must never be deleted: [`crate::analyze`] counts a removal of one of
//! its keys (they all start with [`AppLoad::key_prefix`]) as a wrong deletion and in
//! [`AppReport::deleted`]. Its accepted writes are also capacity the perfect sweeper of the
//! bound shares the store with ([`AppAttempt::as_write`]).

use serde::{Deserialize, Serialize};

/// How the store answered one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppOutcome {
    Accepted,
    /// Throttled: the store refused it for lack of capacity (`ThrottlingException`,
    /// `ProvisionedThroughputExceededException`, `RequestLimitExceeded`).
    Refused,
    /// Any other failure (a timeout, a connection error, a validation error).
    Failed,
}

/// One write the application sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppAttempt {
    /// When it was sent, epoch ms.
    pub at_ms: i64,
    /// From sending to the answer, microseconds.
    pub latency_us: u32,
    pub outcome: AppOutcome,
    /// The item's table partition, when the run knows where the store keeps it (the
    /// simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_partition: Option<u32>,
    /// The shard it was written with when it has a TTL (it then lands in the expiry index, on
    /// that shard's index partition); `None`: no TTL, the index is untouched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u16>,
}

impl AppAttempt {
    /// An accepted write as capacity the bound counts: one table unit (the items are far below
    /// 1 KB) and, for an item with a TTL, one unit on its index partition (a new index entry).
    /// Refused and failed writes took nothing.
    pub fn as_write(&self) -> Option<crate::AppWrite> {
        (self.outcome == AppOutcome::Accepted).then(|| crate::AppWrite {
            at_ms: self.at_ms,
            partitions: [self.table_partition, self.shard.map(u32::from)],
            units: [1, u32::from(self.shard.is_some())],
        })
    }
}

/// Everything the application did in a run, the input of [`app_report`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppLoad {
    /// The rate asked for, writes per second.
    pub asked_per_s: f64,
    /// When it started and stopped writing, epoch ms.
    pub from_ms: i64,
    pub to_ms: i64,
    /// Every key it wrote starts with this (no planted key does).
    pub key_prefix: String,
    /// Every write it sent, in any order.
    pub attempts: Vec<AppAttempt>,
    /// Writes it was due to send but did not: as many as it allows in flight were already
    /// waiting for answers (the bench, not the store, could not keep up).
    pub missed: u64,
}

/// What the application's writes met.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppReport {
    /// The rate asked for (`--app-writes`), writes per second.
    pub asked_per_s: f64,
    /// The rate achieved: writes sent over the time it wrote.
    pub per_s: f64,
    /// How long it wrote, seconds.
    pub seconds: f64,
    /// Writes sent (attempted).
    pub writes: u64,
    pub accepted: u64,
    /// Writes the store refused for lack of capacity.
    pub refused: u64,
    /// `refused / writes` (0 with no writes).
    pub refused_ratio: f64,
    /// Writes that failed otherwise.
    pub errors: u64,
    /// Writes due but not sent (see [`AppLoad::missed`]).
    pub missed: u64,
    /// Latency of the accepted writes, ms (0 with none).
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Application items the sweeper deleted: each is also a wrong deletion; must be 0.
    pub deleted: u64,
    /// The writes sent while the sweeper was behind ([`crate::Behind`]'s periods: an item due
    /// longer than a second and not yet deleted); `None` when it never was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub while_behind: Option<AppWindow>,
}

/// The application's writes within some periods of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppWindow {
    /// The periods' total length, seconds.
    pub seconds: f64,
    pub writes: u64,
    pub refused: u64,
    /// `refused / writes` (0 with no writes).
    pub refused_ratio: f64,
}

/// The report of `load`, with `deleted` of its items deleted and the sweeper behind during
/// `behind` (sorted, disjoint `(from, to)` epoch-ms periods).
pub fn app_report(load: &AppLoad, deleted: u64, behind: &[(i64, i64)]) -> AppReport {
    let writes = load.attempts.len() as u64;
    let count = |o: AppOutcome| load.attempts.iter().filter(|a| a.outcome == o).count() as u64;
    let (accepted, refused, errors) = (
        count(AppOutcome::Accepted),
        count(AppOutcome::Refused),
        count(AppOutcome::Failed),
    );
    let mut latencies: Vec<u32> = load
        .attempts
        .iter()
        .filter(|a| a.outcome == AppOutcome::Accepted)
        .map(|a| a.latency_us)
        .collect();
    latencies.sort_unstable();
    let at = |q: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let i = ((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len()) - 1;
        // Microseconds to ms, to a hundredth.
        (f64::from(latencies[i]) / 10.0).round() / 100.0
    };
    let seconds = (load.to_ms - load.from_ms).max(0) as f64 / 1000.0;
    let while_behind = (!behind.is_empty()).then(|| {
        let inside = |t: i64| behind.iter().any(|&(from, to)| from <= t && t <= to);
        let (mut w, mut r) = (0u64, 0u64);
        for a in load.attempts.iter().filter(|a| inside(a.at_ms)) {
            w += 1;
            r += u64::from(a.outcome == AppOutcome::Refused);
        }
        AppWindow {
            seconds: behind.iter().map(|(f, t)| (t - f) as f64).sum::<f64>() / 1000.0,
            writes: w,
            refused: r,
            refused_ratio: ratio(r, w),
        }
    });
    AppReport {
        asked_per_s: load.asked_per_s,
        per_s: if seconds > 0.0 {
            (writes as f64 / seconds * 10.0).round() / 10.0
        } else {
            0.0
        },
        seconds,
        writes,
        accepted,
        refused,
        refused_ratio: ratio(refused, writes),
        errors,
        missed: load.missed,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
        deleted,
        while_behind,
    }
}

/// `part / whole` to six decimals (0 when `whole` is 0): a refused ratio of 0.1 % must read as
/// such, not round to 0.
fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 / whole as f64 * 1e6).round() / 1e6
    }
}

impl AppReport {
    /// The report's Markdown section.
    pub fn to_markdown(&self) -> String {
        let pct = |r: f64| format!("{:.3} %", r * 100.0);
        let mut md = format!(
            "\n#### The application (`--app-writes {:.0}`): new items on the same table, half with a far TTL (in the expiry index), half without; no retries\n\n| measure | value |\n|---|---|\n",
            self.asked_per_s
        );
        md.push_str(&format!(
            "| writes sent | {} in {:.1} s = {:.1}/s (asked {:.0}/s){} |\n",
            self.writes,
            self.seconds,
            self.per_s,
            self.asked_per_s,
            if self.missed > 0 {
                format!(
                    "; {} due but not sent, the bench could not keep up",
                    self.missed
                )
            } else {
                String::new()
            }
        ));
        md.push_str(&format!(
            "| refused (throttled) | {} = {} of its writes |\n",
            self.refused,
            pct(self.refused_ratio)
        ));
        if let Some(w) = &self.while_behind {
            md.push_str(&format!(
                "| refused while the sweeper was behind ({:.1} s) | {} of {} = {} |\n",
                w.seconds,
                w.refused,
                w.writes,
                pct(w.refused_ratio)
            ));
        }
        md.push_str(&format!("| other errors | {} |\n", self.errors));
        md.push_str(&format!(
            "| accepted writes' latency p50 / p99 / max | {:.2} / {:.2} / {:.2} ms |\n",
            self.p50_ms, self.p99_ms, self.max_ms
        ));
        md.push_str(&format!(
            "| application items deleted by the sweeper | {}{} |\n",
            self.deleted,
            if self.deleted > 0 {
                " (wrong deletions)"
            } else {
                ""
            }
        ));
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(at_ms: i64, latency_ms: u32, outcome: AppOutcome) -> AppAttempt {
        AppAttempt {
            at_ms,
            latency_us: latency_ms * 1000,
            outcome,
            table_partition: Some(3),
            shard: (at_ms % 2 == 0).then_some(5),
        }
    }

    fn load() -> AppLoad {
        // 1 000 writes over 10 s: every 50th refused, every 250th failed (a refusal wins where
        // both fall), latencies 1..=10 ms.
        let attempts = (0..1000)
            .map(|i| {
                let outcome = if i % 50 == 0 {
                    AppOutcome::Refused
                } else if i % 250 == 1 {
                    AppOutcome::Failed
                } else {
                    AppOutcome::Accepted
                };
                attempt(1_000 + i * 10, (i % 10 + 1) as u32, outcome)
            })
            .collect();
        AppLoad {
            asked_per_s: 100.0,
            from_ms: 1_000,
            to_ms: 11_000,
            key_prefix: "app-".into(),
            attempts,
            missed: 2,
        }
    }

    #[test]
    fn counts_refusals_errors_and_the_achieved_rate() {
        let r = app_report(&load(), 0, &[]);
        assert_eq!(
            (r.writes, r.refused, r.errors, r.accepted),
            (1000, 20, 4, 976)
        );
        assert_eq!(r.refused_ratio, 0.02);
        assert_eq!((r.per_s, r.seconds, r.missed), (100.0, 10.0, 2));
        // Accepted latencies: 80 of 1 ms, 96 of 2 ms, 100 each of 3..=10 ms.
        assert_eq!((r.p50_ms, r.max_ms), (6.0, 10.0));
        assert_eq!(r.p99_ms, 10.0);
        assert_eq!(r.while_behind, None);
    }

    #[test]
    fn refusals_while_behind_count_only_the_writes_inside_the_periods() {
        // Behind from 2 s to 3 s and from 6 s to 6.5 s (inclusive ends): writes at 10 ms steps
        // from 1 s, so 101 + 51 inside; refused are those at multiples of 500 ms there: 2 000,
        // 2 500, 3 000, 6 000, 6 500.
        let r = app_report(&load(), 1, &[(2_000, 3_000), (6_000, 6_500)]);
        let w = r.while_behind.unwrap();
        assert_eq!((w.writes, w.refused, w.seconds), (152, 5, 1.5));
        assert_eq!(w.refused_ratio, (5.0f64 / 152.0 * 1e6).round() / 1e6);
        assert_eq!(r.deleted, 1);
    }

    #[test]
    fn only_accepted_writes_take_capacity_one_index_unit_with_a_ttl() {
        let with_ttl = attempt(10, 1, AppOutcome::Accepted);
        let w = with_ttl.as_write().unwrap();
        assert_eq!(
            (w.at_ms, w.partitions, w.units),
            (10, [Some(3), Some(5)], [1, 1])
        );
        let no_ttl = attempt(11, 1, AppOutcome::Accepted).as_write().unwrap();
        assert_eq!((no_ttl.partitions, no_ttl.units), ([Some(3), None], [1, 0]));
        assert_eq!(attempt(10, 1, AppOutcome::Refused).as_write(), None);
        assert_eq!(attempt(10, 1, AppOutcome::Failed).as_write(), None);
    }

    #[test]
    fn no_writes_no_ratios_and_a_small_ratio_is_not_rounded_away() {
        let r = app_report(&AppLoad::default(), 0, &[(0, 1)]);
        assert_eq!(
            (r.writes, r.refused_ratio, r.per_s, r.p99_ms),
            (0, 0.0, 0.0, 0.0)
        );
        assert_eq!(r.while_behind.unwrap().refused_ratio, 0.0);
        assert_eq!(ratio(1, 1000), 0.001);
        assert_eq!(ratio(3, 100_000), 0.00003);
    }

    #[test]
    fn the_markdown_says_what_was_refused_and_deleted() {
        let md = app_report(&load(), 0, &[(2_000, 3_000)]).to_markdown();
        assert!(
            md.contains("| refused (throttled) | 20 = 2.000 % of its writes |"),
            "{md}"
        );
        assert!(md.contains("refused while the sweeper was behind"), "{md}");
        assert!(md.contains("2 due but not sent"), "{md}");
        assert!(
            md.contains("| application items deleted by the sweeper | 0 |"),
            "{md}"
        );
    }

    /// A workload at its partition's limit: 1 000 items over 1 s, all on table partition 0 and
    /// index partition (shard) 0, on a store of 1 000 deletes/s per partition and no burst.
    fn at_the_limit(app: Option<AppLoad>) -> crate::Report {
        let planted = (0..1000)
            .map(|i| crate::Planted {
                key: format!("item-{i}"),
                expect: crate::Expectation::Expire { ttl_ms: 10_000 + i },
                shard: Some(0),
                table_partition: Some(0),
            })
            .collect();
        let removals = (0..1000)
            .map(|i| crate::Removal {
                key: format!("item-{i}"),
                seen_ms: 10_001 + i,
            })
            .collect();
        crate::analyze(&crate::Inputs {
            planted,
            removals,
            run_started_ms: 9_000,
            run_ended_ms: 12_000,
            capacity: Some(crate::StoreCapacity {
                per_second: 10_000.0,
                burst_items: 0.0,
                floor_ms: 0.0,
                source: "test".into(),
                partition: Some(crate::PartitionLimit {
                    per_second: 1000.0,
                    burst_items: 0.0,
                }),
            }),
            app,
            ..crate::Inputs::default()
        })
    }

    fn writes_on(partition: u32, outcome: AppOutcome) -> AppLoad {
        // 500 writes over the workload's second, each with a TTL on shard 0's index partition.
        let attempts = (0..500)
            .map(|i| AppAttempt {
                at_ms: 10_000 + i * 2,
                latency_us: 4000,
                outcome,
                table_partition: Some(partition),
                shard: Some(0),
            })
            .collect();
        AppLoad {
            asked_per_s: 500.0,
            from_ms: 10_000,
            to_ms: 11_000,
            key_prefix: "app-".into(),
            attempts,
            missed: 0,
        }
    }

    #[test]
    fn the_bound_counts_the_applications_accepted_writes_on_their_partitions() {
        let alone = at_the_limit(None).bound.unwrap();
        assert!(alone.max_ms <= 1.0, "{alone:?}");
        assert_eq!(alone.app_writes, 0);
        // 500 accepted writes on the same partitions: the partition takes 1 500 units in a
        // second at 1 000/s, and the last delete waits about half a second.
        let shared = at_the_limit(Some(writes_on(0, AppOutcome::Accepted)));
        let bound = shared.bound.unwrap();
        assert_eq!(bound.app_writes, 500);
        assert!((bound.max_ms - 500.0).abs() < 5.0, "{bound:?}");
        assert_eq!(shared.app.unwrap().accepted, 500);
        // Refused writes took nothing.
        let refused = at_the_limit(Some(writes_on(0, AppOutcome::Refused)));
        assert_eq!(refused.bound.unwrap(), alone);
    }

    #[test]
    fn a_deleted_application_item_is_a_wrong_deletion() {
        let mut inputs = crate::Inputs {
            planted: vec![crate::Planted {
                key: "item-1".into(),
                expect: crate::Expectation::Expire { ttl_ms: 1_000 },
                shard: None,
                table_partition: None,
            }],
            removals: vec![
                crate::Removal {
                    key: "item-1".into(),
                    seen_ms: 1_010,
                },
                crate::Removal {
                    key: "app-00ff".into(),
                    seen_ms: 1_020,
                },
            ],
            run_started_ms: 0,
            run_ended_ms: 2_000,
            ..crate::Inputs::default()
        };
        // Without the application the key is merely unknown; with it, the application's.
        let unknown = crate::analyze(&inputs);
        assert_eq!(unknown.wrong[0].kind, crate::WrongKind::Unknown);
        inputs.app = Some(writes_on(0, AppOutcome::Accepted));
        let report = crate::analyze(&inputs);
        assert_eq!(report.wrong.len(), 1);
        assert_eq!(
            report.wrong[0].kind,
            crate::WrongKind::Survivor {
                why: "application".into()
            }
        );
        assert_eq!(report.app.unwrap().deleted, 1);
        assert_eq!(report.counts.deleted, 1);
    }
}
