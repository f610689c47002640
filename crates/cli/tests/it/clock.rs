//! A host whose clock runs ahead of the store's: the fault proxy moves the `Date` header of every
//! answer 5 s back, so to the daemon its own clock looks 5 s ahead. Nothing may be deleted before
//! its TTL by the store's clock, and the lead shows in `/metrics` and `status`.

use crate::daemon::{daemon_with_metrics, http_get};
use crate::proxy::{FaultProxy, Faults};
use crate::support::{at, endpoint, item, n, now, precise_ttl, table_with_index};
use std::collections::HashMap;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_clock_five_seconds_ahead_deletes_nothing_before_its_ttl_by_the_stores_clock() {
    let table = table_with_index().await;
    let mut due: HashMap<String, i64> = HashMap::new();
    let mut items = Vec::new();
    let start = now().as_millis();
    for i in 0..40i64 {
        let key = format!("due-{i}");
        let offset = 1_500 + i * 100;
        items.push(item(&key, &[("ttl", at(offset)), ("ttl_shard", n(i % 16))]));
        due.insert(key, start + offset);
    }
    table.put_many(items).await;
    let proxy = FaultProxy::start(endpoint()).await;
    proxy.set(Faults {
        date_shift_secs: -5,
        ..Default::default()
    });
    let (mut child, _lines, base) = daemon_with_metrics(&table.name, &proxy.url, &["--no-leases"]);

    // When each item disappeared, by this host's clock (the store's clock, here: the proxy lies
    // only to the daemon): the end of the first scan that no longer saw it, at most one scan
    // (a few ms) after the delete.
    let mut gone_at: HashMap<String, i64> = HashMap::new();
    while gone_at.len() < due.len() {
        let present = crate::recovery::present(&table).await;
        let seen = now().as_millis();
        for key in due.keys() {
            if !present.contains(key) {
                gone_at.entry(key.clone()).or_insert(seen);
            }
        }
        assert!(
            seen - start < 30_000,
            "{} of {} deleted after 30 s",
            gone_at.len(),
            due.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let earliest = due
        .iter()
        .map(|(key, ttl)| gone_at[key] - ttl)
        .min()
        .unwrap();
    for (key, ttl) in &due {
        let gone = gone_at[key];
        // Held back by at least the 5 s the host's clock looks ahead.
        assert!(
            gone >= ttl + 5_000,
            "{key} deleted {} ms after its TTL, before the store's clock reached it",
            gone - ttl
        );
    }
    let metrics = http_get(&format!("{base}/metrics"));
    let lead: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("precise_ttl_clock_lead_seconds "))
        .expect("the lead is exported")
        .trim()
        .parse()
        .unwrap();
    assert!((5.0..6.0).contains(&lead), "lead {lead}");
    crate::support::terminate(&child);
    assert!(child.wait().unwrap().success());

    let status = precise_ttl()
        .args([
            "status",
            "--table",
            &table.name,
            "--endpoint-url",
            &proxy.url,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("s ahead of the store's"), "{text}");
    crate::support::artifact(
        "clock-5s-ahead",
        "clock::a_host_clock_five_seconds_ahead_deletes_nothing_before_its_ttl_by_the_stores_clock",
        serde_json::json!({
            "scenario": "every answer's Date header moved 5 s back by the fault proxy (this host's clock 5 s ahead of the store's, as the daemon sees it); 40 items due every 100 ms from 1.5 s; table scanned every ~10 ms",
            "items": due.len(),
            "deleted_before_ttl_by_store_clock": 0,
            "earliest_disappearance_after_ttl_ms": earliest,
            "exported_clock_lead_seconds": lead,
            "status_says": text.lines().find(|l| l.starts_with("clock:")),
        }),
    );
}
