//! The deployment files under `deploy/` name only metrics the daemon exports: a dashboard panel
//! or an alert on a misspelt or retired metric would stay empty or silent, never red. And the
//! health check the ECS task definition runs, `precise-ttl health`, tells a 200 from anything
//! else in one line and its exit status.

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
    // The shard count the alerts compare lease counts with, whatever the leases say yet.
    let page = crate::daemon::http_get(&format!("{base}/metrics"));
    crate::support::terminate(&child);
    assert!(child.wait().unwrap().success());
    assert!(
        missing.is_empty(),
        "named in deploy/ but not exported by `run`: {missing:?}"
    );
    assert!(
        page.lines().any(|l| l == "precise_ttl_shards 16"),
        "precise_ttl_shards is not the default --shards 16:\n{page}"
    );
}

/// `precise-ttl` with nothing in its environment (no endpoint, no credentials: `health` needs
/// none).
fn health() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("precise-ttl").unwrap();
    cmd.env_clear()
        .arg("health")
        .timeout(Duration::from_secs(30));
    cmd
}

/// The ECS task definition's health check against a fresh `run`: 503 "starting" until its first
/// index read, then 200, asked by URL or, as `run` is configured, by PRECISE_TTL_METRICS_ADDR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_check_passes_once_the_daemon_reads() {
    let table = table_with_index().await;
    let (mut child, _lines, base) =
        crate::daemon::daemon_with_metrics(&table.name, endpoint(), &[]);
    let url = format!("{base}/healthz");
    let started = Instant::now();
    let out = loop {
        let out = health().args(["--url", &url]).output().unwrap();
        if out.status.success() || started.elapsed() > Duration::from_secs(20) {
            break out;
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("503 starting"), "{stderr}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, format!("healthy: {url}: 200 ok\n"));
    // No --url: /healthz on the address `run` reads, 0.0.0.0 asked on loopback.
    let port = base.rsplit(':').next().unwrap();
    health()
        .env("PRECISE_TTL_METRICS_ADDR", format!("0.0.0.0:{port}"))
        .assert()
        .success()
        .stdout(format!(
            "healthy: http://127.0.0.1:{port}/healthz: 200 ok\n"
        ));
    crate::support::terminate(&child);
    assert!(child.wait().unwrap().success());
}

/// A server on a free loopback port that answers every connection with `answer` (`None`: reads
/// the request and never answers); its `/healthz` URL.
fn server(answer: Option<&'static str>) -> String {
    server_at("/healthz", answer)
}

/// [`server`], its URL with `path` (`status --metrics-url` asks it for `/metrics`).
pub(crate) fn server_at(path: &str, answer: Option<&'static str>) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            match answer {
                Some(a) => {
                    let _ = stream.write_all(a.as_bytes());
                }
                None => std::thread::sleep(Duration::from_secs(60)),
            }
        }
    });
    format!("http://{addr}{path}")
}

#[test]
fn the_health_check_fails_in_one_line_for_anything_but_200() {
    let ok = server(Some("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n"));
    health()
        .args(["--url", &ok])
        .assert()
        .success()
        .stdout(format!("healthy: {ok}: 200 ok\n"));
    let stalled = server(Some(
        "HTTP/1.1 503 Service Unavailable\r\n\r\nstalled: shard(s) 3 hold due items\n",
    ));
    let garbage = server(Some("SSH-2.0-OpenSSH_9.2\r\n"));
    let silent = server(None);
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/healthz", l.local_addr().unwrap())
    };
    for (args, says) in [
        (
            vec!["--url", &stalled],
            format!("unhealthy: {stalled}: 503 stalled: shard(s) 3 hold due items"),
        ),
        (
            vec!["--url", &garbage],
            format!("unhealthy: {garbage} did not answer in HTTP"),
        ),
        (
            vec!["--url", &silent, "--timeout", "300ms"],
            format!("unhealthy: {silent} gave no answer within 300ms"),
        ),
        (vec!["--url", &closed], format!("unhealthy: {closed}: ")),
        (vec![], "no address to ask".to_string()),
    ] {
        let out = health().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(&says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Bad usage: clap's exit status 2, the reason in its first line, no panic.
    for (url, says) in [
        ("https://127.0.0.1:9464/healthz", "not an http:// URL"),
        ("http://127.0.0.1:99999/healthz", "is not a port"),
    ] {
        let out = health().args(["--url", url]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert!(
            stderr.lines().next().unwrap_or("").contains(says),
            "{url}: {stderr}"
        );
    }
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
