//! `precise-ttl run` as users run it, against DynamoDB Local.

use crate::support::{TestTable, at, due_items, item, n, precise_ttl, table_with_index};
use predicates::prelude::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_deletes_backlog_and_expirations_and_spares_an_extended_item() {
    let table = table_with_index().await;
    table
        .put_many(due_items("backlog", 0..200, |i| -3_600_000 + i))
        .await;
    table
        .put_many(due_items("soon", 0..50, |i| 1500 + 40 * i))
        .await;
    table
        .put(item("extended", &[("ttl", at(3000)), ("ttl_shard", n(5))]))
        .await;
    table
        .put(item(
            "later",
            &[("ttl", at(3_600_000)), ("ttl_shard", n(6))],
        ))
        .await;

    let exe = assert_cmd::cargo::cargo_bin("precise-ttl");
    let child = Command::new(exe)
        .args([
            "run",
            "--table",
            &table.name,
            "--endpoint-url",
            crate::support::endpoint(),
        ])
        .args([
            "--poll-interval",
            "200ms",
            "--for",
            "6s",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // One second before its expiry, a writer extends it.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    crate::support::set_ttl(&table.dynamo, &table.name, "extended", at(3_600_000)).await;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("deleted 250,"), "{stdout}");
    assert!(table.get("extended").await.is_some());
    assert!(table.get("later").await.is_some());
    assert_eq!(table.count().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_daemon_cleanly_and_metrics_are_served() {
    let table = table_with_index().await;
    let (mut child, lines, base) =
        daemon_with_metrics(&table.name, crate::support::endpoint(), &[]);
    let url = format!("{base}/metrics");

    // Let a few polls happen, then look at /healthz and /metrics.
    tokio::time::sleep(Duration::from_millis(800)).await;
    table
        .put(item("k", &[("ttl", at(-1000)), ("ttl_shard", n(0))]))
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let health = http_get(&format!("{base}/healthz"));
    assert!(
        health.starts_with("HTTP/1.1 200") || health.starts_with("HTTP/1.0 200"),
        "{health}"
    );
    let metrics = http_get(&url);
    for name in [
        "precise_ttl_deleted_total 1",
        "precise_ttl_lag_seconds_bucket",
        "precise_ttl_watermark_seconds{shard=\"all\"}",
        "precise_ttl_backlog_items 0",
    ] {
        assert!(metrics.contains(name), "{name} missing from:\n{metrics}");
    }

    let stopping = Instant::now();
    crate::support::terminate(&child);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(stopping.elapsed() < Duration::from_secs(5));
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|l| l.starts_with("stopped: deleted 1,")),
        "{rest:?}"
    );
}

pub(crate) type Lines = std::io::Lines<BufReader<std::process::ChildStdout>>;

/// `precise-ttl run` polling every 100 ms with metrics on a free port: the child, the rest of its
/// standard output, and the base URL of `/metrics` and `/healthz`.
pub(crate) fn daemon_with_metrics(
    table: &str,
    endpoint: &str,
    extra: &[&str],
) -> (std::process::Child, Lines, String) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"))
        .args(["run", "--table", table, "--endpoint-url", endpoint])
        .args(["--poll-interval", "100ms", "--metrics-addr", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first[first.find("http://").expect("metrics URL printed")..].trim();
    let base = url.trim_end_matches("/metrics").to_string();
    (child, lines, base)
}

/// `/healthz` is what a liveness probe watches: 200 while index reads succeed, 503 once they
/// have failed for `--unhealthy-after`, 200 again when the store is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_turns_503_while_the_store_is_unreachable_and_recovers() {
    let table = table_with_index().await;
    let proxy = crate::proxy::FaultProxy::start(crate::support::endpoint()).await;
    let (mut child, _lines, base) = daemon_with_metrics(
        &table.name,
        &proxy.url,
        &["--unhealthy-after", "1s", "--attempt-timeout", "500ms"],
    );
    let healthz = format!("{base}/healthz");
    let status_becomes = |code: &'static str| {
        let healthz = healthz.clone();
        async move {
            let started = Instant::now();
            loop {
                let answer = http_get(&healthz);
                let status = answer.split(' ').nth(1).unwrap_or_default();
                if status == code {
                    return;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "/healthz never answered {code}: {answer}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    status_becomes("200").await;
    proxy.set(crate::proxy::Faults {
        down: true,
        ..Default::default()
    });
    status_becomes("503").await;
    proxy.set(crate::proxy::Faults::default());
    status_becomes("200").await;
    let _ = child.kill();
    let _ = child.wait();
}

pub(crate) fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_what_is_due_per_shard() {
    let table = table_with_index().await;
    for i in 0..7 {
        table
            .put(item(
                &format!("due-{i}"),
                &[("ttl", at(-60_000)), ("ttl_shard", n(2))],
            ))
            .await;
    }
    table
        .put(item("next", &[("ttl", at(600_000)), ("ttl_shard", n(3))]))
        .await;
    let json = crate::support::json_report("status", &table);
    assert_eq!(json["due"], 7);
    assert_eq!(json["shards"][2]["due"], 7);
    assert!(
        json["shards"][2]["oldest_due_age_seconds"]
            .as_f64()
            .unwrap()
            >= 59.0
    );
    assert_eq!(json["shards"][3]["next"].as_array().unwrap().len(), 1);
    // Measured against the store's clock as this host estimates it: the host's clock held back
    // by its lead bound (up to a second or so early in a process), so a little under 60 s.
    assert!(
        json["watermark_delay_seconds"].as_f64().unwrap() >= 58.0,
        "{json}"
    );
    precise_ttl()
        .args(["status", "--table", &table.name])
        .assert()
        .success()
        .stdout(predicate::str::contains("due and not yet deleted: 7"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_sets_what_flags_do_not() {
    let table = table_with_index().await;
    table
        .put(item("k", &[("ttl", at(-1000)), ("ttl_shard", n(0))]))
        .await;
    let dir = std::env::temp_dir().join(format!("precise-ttl-config-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        format!(
            "table = \"{}\"\npoll-interval = \"200ms\"\nshards = 16\n",
            table.name
        ),
    )
    .unwrap();
    precise_ttl()
        .args(["run", "--config", good.to_str().unwrap(), "--for", "1500ms"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("poll every 200ms")
                .and(predicate::str::contains("deleted 1,")),
        );

    let unknown = dir.join("unknown.toml");
    std::fs::write(&unknown, "tabel = \"x\"\n").unwrap();
    precise_ttl()
        .args(["run", "--config", unknown.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown key `tabel`"));
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "poll-interval = \"10ms\"\n").unwrap();
    precise_ttl()
        .args(["run", "--table", "abc", "--config", bad.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("poll-interval")
                .and(predicate::str::contains("minimum poll interval")),
        );
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(feature = "bench")]
#[test]
fn bench_runs_end_to_end_on_a_small_load_with_batch_deletes() {
    let out = std::env::temp_dir().join(format!("precise-ttl-bench-{}", fastrand::u64(..)));
    small_bench(
        &out,
        "small",
        &[
            "--spread",
            "2s",
            "--raw-items",
            "200",
            "--grace",
            "2s",
            "--delete-mode",
            "batch",
        ],
    );
    for ext in ["json", "md", "svg"] {
        assert!(out.join(format!("small.{ext}")).is_file(), "{ext}");
    }
    std::fs::remove_dir_all(&out).ok();
}

#[cfg(feature = "bench")]
/// A 300-item bench into `out/<name>.*` that must delete all 300 and nothing wrong.
fn small_bench(out: &std::path::Path, name: &str, extra: &[&str]) {
    precise_ttl()
        .args(["bench", "--items", "300", "--poll-interval", "250ms"])
        .args(extra)
        .args(["--name", name, "--out", out.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "| deleted / expected | 300 / 300 |",
        ))
        .stdout(predicate::str::contains("| wrong deletions | 0 |"));
}

#[cfg(feature = "bench")]
#[test]
fn bench_with_other_attribute_names_deletes_everything() {
    let out = std::env::temp_dir().join(format!("precise-ttl-bench-{}", fastrand::u64(..)));
    small_bench(
        &out,
        "names",
        &[
            "--spread",
            "3s",
            "--raw-items",
            "0",
            "--ttl-attribute",
            "expires_at",
            "--shard-attribute",
            "bucket",
            "--timeout",
            "20s",
        ],
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("names.json")).unwrap()).unwrap();
    assert_eq!(json["report"]["left_behind"]["total"], 0);
    assert!(
        json["argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "expires_at")
    );
    assert!(json["git_revision"].is_object() || json["git_revision"] == "unknown");
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn demo_runs_from_an_empty_folder_and_leaves_it_empty() {
    let dir = std::env::temp_dir().join(format!("precise-ttl-demo-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let install = precise_ttl_local::install_dir().unwrap();
    precise_ttl()
        .env_remove("PRECISE_TTL_ENDPOINT_URL")
        .env(precise_ttl_local::DIR_ENV, &install)
        .current_dir(&dir)
        .args([
            "demo",
            "--items",
            "20",
            "--spread",
            "1s",
            "--interval",
            "200ms",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("deleted 20 of 20 expired items"));
    // DynamoDB Local's metadata file goes to the install folder, not where the user stands.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A daemon started while the store drops every connection waits for it, answers 503
/// ("starting") meanwhile, and deletes as soon as the store is back, instead of exiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_started_during_an_outage_waits_for_the_store_and_then_deletes() {
    let table = table_with_index().await;
    table.put_many(due_items("due", 0..20, |_| -1_000)).await;
    let proxy = crate::proxy::FaultProxy::start(crate::support::endpoint()).await;
    proxy.set(crate::proxy::Faults {
        down: true,
        ..Default::default()
    });
    let (mut child, _lines, base) = daemon_with_metrics(&table.name, &proxy.url, &[]);
    let healthz = format!("{base}/healthz");
    let answer = http_get(&healthz);
    assert!(
        answer.contains(" 503 ") && answer.contains("starting"),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "still waiting, not exited"
    );
    proxy.set(crate::proxy::Faults::default());
    table
        .drains_to(0, 20, "nothing deleted after the store came back")
        .await;
    assert!(http_get(&healthz).contains(" 200 "));
    crate::support::terminate(&child);
    assert!(child.wait().unwrap().success());
}

/// A role with `dynamodb:DeleteItem` but not `dynamodb:PartiQLDelete`: `auto` (the default)
/// falls back to DeleteItem and says so once; `batch` stops with the store's refusal.
/// `run --delete-mode auto` met a store that refuses PartiQL: it went on with DeleteItem,
/// deleted every due item and said so once.
async fn fell_back_once(out: std::process::Output, table: &TestTable) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(table.count().await, 0, "every due item deleted");
    assert_eq!(
        stderr.matches("refuses PartiQL").count(),
        1,
        "said once: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_delete_mode_falls_back_to_delete_item_when_partiql_is_refused() {
    let table = table_with_index().await;
    let put_due = |prefix: &'static str| {
        let table = &table;
        async move {
            for i in 0..40 {
                table
                    .put(item(
                        &format!("{prefix}-{i}"),
                        &[("ttl", at(-1_000)), ("ttl_shard", n(i % 4))],
                    ))
                    .await;
            }
        }
    };
    put_due("due").await;
    let proxy = crate::proxy::FaultProxy::start(crate::support::endpoint()).await;
    proxy.set(crate::proxy::Faults {
        refuse_partiql: true,
        ..Default::default()
    });
    let run = |mode: &str| {
        precise_ttl()
            .args(["run", "--table", &table.name, "--endpoint-url", &proxy.url])
            .args(["--delete-mode", mode, "--for", "4s", "--no-leases"])
            .output()
            .unwrap()
    };
    fell_back_once(run("auto"), &table).await;

    put_due("again").await;
    let out = run("batch");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "batch is strict");
    assert!(stderr.contains("AccessDeniedException"), "{stderr}");

    // An implementation without PartiQL, answering 500 to every batch: the same fallback.
    proxy.set(crate::proxy::Faults {
        partiql_500: true,
        ..Default::default()
    });
    fell_back_once(run("auto"), &table).await;
}
