//! The deployment files under `deploy/` name only metrics the daemon exports: a dashboard panel
//! or an alert on a misspelt or retired metric would stay empty or silent, never red.

use crate::support::{endpoint, table_with_index};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Every `precise_ttl_*` name in `text`, histogram series (`_bucket`, `_sum`, `_count`) folded
/// into their metric.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("precise_ttl_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let name = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        names.insert(name.to_string());
        rest = &tail[end..];
    }
    names
}

/// What `/metrics` exports, by metric name (from its `# TYPE` lines and samples).
fn exported(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|l| match l.strip_prefix("# TYPE ") {
            Some(t) => t.split(' ').next(),
            None if !l.starts_with('#') => l.split(['{', ' ']).next(),
            None => None,
        })
        .flat_map(names_in)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_the_alerts_name_is_exported() {
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let mut named = BTreeSet::new();
    for file in ["grafana/precise-ttl.json", "prometheus/alerts.yaml"] {
        let text = std::fs::read_to_string(deploy.join(file)).expect(file);
        let found = names_in(&text);
        assert!(!found.is_empty(), "{file} names no precise_ttl_ metric");
        named.extend(found);
    }

    // A fresh daemon that has done nothing yet exports them all, so a dashboard or an alert
    // works from the first scrape (a counter that appears only at its first event reads as "no
    // data", and `rate` over it misses the first increase).
    let table = table_with_index().await;
    let (mut child, _lines, base) =
        crate::daemon::daemon_with_metrics(&table.name, endpoint(), &[]);
    let started = Instant::now();
    let missing = loop {
        let page = crate::daemon::http_get(&format!("{base}/metrics"));
        let missing: Vec<_> = named.difference(&exported(&page)).cloned().collect();
        if missing.is_empty() || started.elapsed() > Duration::from_secs(10) {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    crate::support::terminate(&child);
    assert!(child.wait().unwrap().success());
    assert!(
        missing.is_empty(),
        "named in deploy/ but not exported by `run`: {missing:?}"
    );
}

#[test]
fn names_are_found_with_histogram_series_folded() {
    let found = names_in(
        r#"histogram_quantile(0.99, sum(rate(precise_ttl_lag_seconds_bucket[5m])) by (le)) > 1
        and max(precise_ttl_watermark_delay_seconds{shard="all"})"#,
    );
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        [
            "precise_ttl_lag_seconds",
            "precise_ttl_watermark_delay_seconds"
        ]
    );
}
