//! The application sharing the table (`bench --app-writes`) on the simulator, with no sweeper
//! (`--no-sweeper`), so no daemon binary is needed: its writes are counted and reported, a run
//! without a sweeper is clean though everything stays, and a provisioned table refuses what is
//! over its units.

use precise_ttl_bench_driver::{BenchConfig, DaemonCommand, NoProgress, Provisioned};
use precise_ttl_core::TtlLayout;
use precise_ttl_sim::SimConfig;
use std::time::Duration;

fn config(app_writes_per_s: f64) -> BenchConfig {
    let mut c = BenchConfig::new(
        "app",
        TtlLayout::default(),
        DaemonCommand {
            // Never started: no sweeper.
            program: "/nonexistent/precise-ttl".into(),
            extra_args: Vec::new(),
        },
    );
    c.items = 200;
    c.spread = Duration::from_secs(1);
    c.grace = Duration::from_millis(500);
    c.raw_items = 0;
    c.seed = 7;
    c.no_sweeper = true;
    c.app_writes_per_s = app_writes_per_s;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_sweeper_the_application_writes_and_nothing_is_judged_left_behind() {
    let sim = SimConfig::default().without_latency();
    let run = precise_ttl_bench_driver::run_simulated(sim, &config(400.0), &NoProgress)
        .await
        .unwrap();
    let s = &run.summary;
    assert!(s.no_sweeper);
    assert!(run.is_clean(), "{}", run.markdown);
    assert_eq!(s.report.counts.deleted, 0);
    assert!(s.report.left_behind.total > 0);
    assert!(s.report.bound.is_none());
    assert!(s.report.behind.is_none(), "n/a without a sweeper");
    let app = s.report.app.as_ref().expect("the application ran");
    // It wrote for at least the load's span (1 s of TTLs and 0.5 s of grace).
    assert!(app.writes >= 400, "{app:?}");
    assert_eq!((app.refused, app.errors, app.deleted), (0, 0, 0), "{app:?}");
    assert_eq!(app.accepted, app.writes);
    assert!(app.per_s > 300.0 && app.per_s < 450.0, "{app:?}");
    assert!(app.max_ms >= app.p99_ms && app.p99_ms >= app.p50_ms);
    assert_eq!(app.while_behind, None, "n/a without a sweeper");
    assert!(run.markdown.contains("**off**"), "{}", run.markdown);
    assert!(run.markdown.contains("The application"), "{}", run.markdown);
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["no_sweeper"], true);
    assert!(json["report"]["app"]["refused_ratio"].is_number());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_table_refuses_the_writes_over_its_units() {
    // 1 000 writes/s on a table provisioned for 200 (and no burst to speak of): most refused,
    // none an error, and the refusals are visible because nothing retries them.
    let mut sim = SimConfig::default().without_latency();
    sim.limits.burst_seconds = 0.01;
    let mut c = config(1000.0);
    c.provisioned = Some(Provisioned {
        read: 1000,
        write: 200,
    });
    let run = precise_ttl_bench_driver::run_simulated(sim, &c, &NoProgress)
        .await
        .unwrap();
    let app = run.summary.report.app.as_ref().unwrap();
    assert_eq!(run.summary.provisioned_wcu, Some(200));
    assert_eq!(app.errors, 0, "{app:?}");
    assert!(app.refused_ratio > 0.5, "{app:?}");
    assert!(app.accepted > 0, "{app:?}");
    assert!(
        run.markdown.contains("provisioned, 200 WCU"),
        "{}",
        run.markdown
    );
}
