//! An `AccessDeniedException` answered as DynamoDB answers it (HTTP 400, the
//! `com.amazon.coral.service#AccessDeniedException` type, a `Message` naming the action in the
//! IAM User Guide's format), injected by [`crate::recorder`] for one operation: the command
//! exits 1 with one line naming the refused action and a hint naming the policy file of that
//! command to fix, whichever path met it (a control-plane call, a store call of the engine, the
//! daemon's reads, the stream). The daemon stops: no retry brings a permission.

use crate::recorder::Recorder;
use crate::support::{at, endpoint, item, n, precise_ttl, table_with_index};
use std::time::{Duration, Instant};

/// Checks stderr: the error line names `action`, the hint names the command's policy file.
fn assert_named(stderr: &str, action: &str, policy: &str) {
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert!(
        error.starts_with(&format!(
            "error: access denied: {action} on arn:aws:dynamodb:"
        )),
        "{stderr}"
    );
    assert!(
        error.contains("because no identity-based policy allows"),
        "{stderr}"
    );
    let hint = stderr
        .lines()
        .find(|l| l.starts_with("hint: "))
        .unwrap_or_else(|| panic!("no hint: {stderr}"));
    assert!(hint.contains(action) && hint.contains(policy), "{stderr}");
}

/// `precise-ttl ARGS` through a recorder that refuses `operation`: it must exit 1. Its
/// standard error.
async fn refused(operation: &str, args: &[&str]) -> String {
    let rec = Recorder::start(endpoint()).await;
    rec.deny(operation);
    let out = precise_ttl()
        .env("PRECISE_TTL_ENDPOINT_URL", &rec.url)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    stderr
}

/// A store call of the engine (`sweep`'s index query).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_names_the_refused_query_and_its_policy() {
    let table = table_with_index().await;
    table
        .put(item("a", &[("ttl", at(-2_000)), ("ttl_shard", n(1))]))
        .await;
    let stderr = refused("Query", &["sweep", "--table", &table.name]).await;
    assert_named(&stderr, "dynamodb:Query", "deploy/iam/sweep-policy.json");
}

/// A control-plane call (`status`'s DescribeTable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_the_refused_describe_table_and_its_policy() {
    let table = table_with_index().await;
    let stderr = refused("DescribeTable", &["status", "--table", &table.name]).await;
    assert_named(
        &stderr,
        "dynamodb:DescribeTable",
        "deploy/iam/status-policy.json",
    );
}

/// The daemon: a refused index read stops `run` at once with exit 1 (not a retry until `--for`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stops_on_a_refused_read_and_names_it() {
    let table = table_with_index().await;
    let started = Instant::now();
    let stderr = refused(
        "Query",
        &["run", "--table", &table.name, "--no-leases", "--for", "60s"],
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "stopped at the refusal, not at --for: {:?}",
        started.elapsed()
    );
    assert_named(&stderr, "dynamodb:Query", "deploy/iam/run-policy.json");
}

/// The stream: a refused GetRecords stops `archive` (it used to be read again for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_stops_on_refused_stream_reads_and_names_them() {
    let table = crate::support::table_with_stream().await;
    table
        .put(item("a", &[("ttl", at(600_000)), ("ttl_shard", n(1))]))
        .await;
    let rec = Recorder::start(endpoint()).await;
    rec.deny("GetRecords");
    let checkpoints = crate::support::TestTable::called(format!(
        "precise-ttl-denied-checkpoints-{:08x}",
        fastrand::u32(..)
    ));
    let out = precise_ttl()
        .env("PRECISE_TTL_ENDPOINT_URL", &rec.url)
        .args(["archive", "--table", &table.name, "--to", "-"])
        .args([
            "--checkpoint-table",
            &checkpoints.name,
            "--poll-interval",
            "200ms",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(
        error.starts_with("error: access denied: dynamodb:GetRecords on arn:aws:dynamodb:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("deploy/iam/archive-policy.json"),
        "{stderr}"
    );
}

/// The lease table: a refused lease write stops `run` with exit 1 (it used to stop the daemon
/// and exit 0, as if `--for` had ended it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stops_on_a_refused_lease_write_and_names_it() {
    let table = table_with_index().await;
    let leases = crate::support::TestTable::called(format!(
        "precise-ttl-denied-leases-{:08x}",
        fastrand::u32(..)
    ));
    precise_ttl()
        .args(["setup", "--table", &table.name, "--no-native-ttl"])
        .args(["--lease-table", &leases.name])
        .assert()
        .success();
    let stderr = refused(
        "PutItem",
        &[
            "run",
            "--table",
            &table.name,
            "--lease-table",
            &leases.name,
            "--for",
            "60s",
        ],
    )
    .await;
    assert_named(&stderr, "dynamodb:PutItem", "deploy/iam/run-policy.json");
}
