//! The analysis of a run against hand-made event logs: lag statistics, thin runs, ramps, the
//! application's writes and a backlog against the perfect sweeper.

/// Event logs on a store with one limit: every planted item and when it was seen removed.
mod logs {
    use super::super::*;
    use crate::{Planted, Removal};

    /// `key`, expected to be `expect`ed, on no shard or partition of its own.
    pub fn planted(key: String, expect: Expectation) -> Planted {
        Planted {
            key,
            expect,
            shard: None,
            table_partition: None,
        }
    }

    /// A run from `started_ms` to `ended_ms` on a store of 1 000 deletes/s with no burst,
    /// round trip or partitions, every planted item removed at `seen_ms(item)`.
    pub fn on_a_store_of_1000_per_s(
        planted: Vec<Planted>,
        seen_ms: impl Fn(&Planted) -> i64,
        (started_ms, ended_ms): (i64, i64),
    ) -> Inputs {
        let removals = planted
            .iter()
            .map(|p| Removal {
                key: p.key.clone(),
                seen_ms: seen_ms(p),
            })
            .collect();
        Inputs {
            planted,
            removals,
            run_started_ms: started_ms,
            run_ended_ms: ended_ms,
            capacity: Some(crate::StoreCapacity {
                per_second: 1000.0,
                burst_items: 0.0,
                floor_ms: 0.0,
                source: "test".into(),
                partition: None,
            }),
            ..Inputs::default()
        }
    }
}

mod lag_and_histogram {
    use super::super::*;

    #[test]
    fn nice_widths() {
        assert_eq!(nice_width(0), 1);
        assert_eq!(nice_width(1), 1);
        assert_eq!(nice_width(3), 5);
        assert_eq!(nice_width(6), 10);
        assert_eq!(nice_width(11), 20);
        assert_eq!(nice_width(201), 500);
    }

    #[test]
    fn buckets_cover_every_lag_once() {
        let lags: Vec<u64> = (0..=1000).chain([50_000]).collect();
        let buckets = histogram_buckets(&lags, 1000, 50_000);
        let total: u64 = buckets.iter().map(|b| b.count).sum();
        assert_eq!(total, lags.len() as u64);
        let last = buckets.last().unwrap();
        assert!(last.overflow);
        assert_eq!((last.lo_ms, last.hi_ms, last.count), (1050, 50_000, 1));
        assert!(buckets.len() <= HIST_BUCKETS as usize + 2);
    }
}

mod thin_tests {
    use super::super::*;

    #[test]
    fn a_million_points_are_thinned_to_a_sample_that_keeps_the_tail() {
        let points: Vec<LagPoint> = (0..1_000_000)
            .map(|i| LagPoint {
                t_s: i as f64 / 1000.0,
                lag_ms: if i == 777_777 { 9_999 } else { i % 100 },
            })
            .collect();
        let kept = thin(points);
        assert!(kept.len() <= LAG_POINTS_KEPT, "{}", kept.len());
        assert!(kept.len() > LAG_POINTS_KEPT / 2, "{}", kept.len());
        assert!(
            kept.iter().any(|p| p.lag_ms == 9_999),
            "the worst point is kept"
        );
        assert!(
            kept.windows(2).all(|w| w[0].t_s <= w[1].t_s),
            "still in time order"
        );
    }
}

mod ramp_tests {
    use super::super::*;

    #[test]
    fn the_first_fifteen_seconds_are_weighed_against_the_rest() {
        // TTLs over 60 s; the first 15 s lag 300 ms, the rest 100 ms.
        let by_ttl: Vec<(i64, u64)> = (0..6000)
            .map(|i| {
                let ttl = 1_000_000 + i * 10;
                (ttl, if i < 1500 { 300 } else { 100 })
            })
            .collect();
        let r = ramp(&by_ttl).unwrap();
        assert_eq!((r.first_count, r.rest_count), (1500, 4500));
        assert_eq!((r.first_p99_ms, r.rest_p99_ms), (300, 100));
        assert_eq!(r.ratio_p99, Some(3.0));
        assert!(ramp(&[]).is_none());
    }
}

mod app_write_tests {
    use super::super::*;
    use super::logs::{on_a_store_of_1000_per_s, planted};
    use crate::AppWrite;

    #[test]
    fn the_benchs_own_writes_raise_the_bound_and_the_report_says_so() {
        // 1 000 items due in one second on a 1 000/s store; the bench writes 500 more in it.
        let items = (0..1000)
            .map(|i| planted(format!("k{i}"), Expectation::Expire { ttl_ms: 10_000 + i }))
            .collect();
        let inputs = on_a_store_of_1000_per_s(items, |_| 12_000, (0, 20_000));
        let without = analyze(&inputs).bound.unwrap();
        assert_eq!(without.app_writes, 0);
        let with_writes = Inputs {
            app_writes: (0..500)
                .map(|i| AppWrite {
                    at_ms: 10_000 + 2 * i,
                    partitions: [None; 2],
                    units: [1, 2],
                })
                .collect(),
            ..inputs
        };
        let report = analyze(&with_writes);
        let with = report.bound.clone().unwrap();
        assert_eq!(with.app_writes, 500);
        assert!(with.max_ms > without.max_ms + 400.0, "{with:?} {without:?}");
        assert!(
            report.to_markdown().contains(
                "including 500 writes by others during the run (the bench's TTL extensions)"
            ),
            "{}",
            report.to_markdown()
        );
    }
}

mod backlog_bound_tests {
    use super::super::*;
    use super::logs::{on_a_store_of_1000_per_s, planted};

    #[test]
    fn a_backlog_is_judged_against_the_perfect_sweepers_time_to_clear() {
        // 2 000 items expired before the start (at 1 000 ms), 500/s expiring from then on for 4
        // s, a store of 1 000/s: the perfect sweeper clears the backlog in the 500/s the others
        // leave, in about 4 s. Ours took 5 s: 0.8 × its rate.
        let backlog =
            (0..2000).map(|i| planted(format!("b{i}"), Expectation::Backlog { ttl_ms: 500 }));
        let expiring = (0..2000).map(|i| {
            planted(
                format!("e{i}"),
                Expectation::Expire {
                    ttl_ms: 1_000 + 2 * i,
                },
            )
        });
        let seen = |p: &crate::Planted| match p.expect {
            Expectation::Backlog { .. } => 6_000,
            _ => 5_010,
        };
        let inputs =
            on_a_store_of_1000_per_s(backlog.chain(expiring).collect(), seen, (1_000, 8_000));
        let report = analyze(&inputs);
        let b = &report.backlog;
        assert_eq!(b.time_to_clear_ms, Some(5_000));
        let perfect = b.bound_time_to_clear_ms.unwrap();
        assert!((perfect - 4_000.0).abs() < 5.0, "{b:?}");
        assert_eq!(b.ratio_to_bound, Some(0.8));
        assert!(
            report
                .to_markdown()
                .contains("; the perfect sweeper 3999 ms, ours at 0.80 × its rate"),
            "{}",
            report.to_markdown()
        );
        let unknown = Inputs {
            capacity: None,
            ..inputs
        };
        assert_eq!(analyze(&unknown).backlog.bound_time_to_clear_ms, None);
    }
}
