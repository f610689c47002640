//! The `precise-ttl` binary as users run it: output, exit codes, errors.

use crate::support::{TestTable, item, n, now, precise_ttl};
use predicates::prelude::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_and_sweep_from_the_command_line() {
    let table = TestTable::named();
    precise_ttl()
        .args([
            "setup",
            "--table",
            &table.name,
            "--create-table",
            "--partition-key",
            "pk:S",
            "--no-native-ttl",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("created the table"));
    precise_ttl()
        .args(["setup", "--table", &table.name, "--no-native-ttl"])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing changed"));

    let t = now().as_millis() / 1000;
    for i in 0..30 {
        table
            .put(item(
                &format!("due-{i}"),
                &[("ttl", n(t - 2)), ("ttl_shard", n(i % 16))],
            ))
            .await;
    }
    table
        .put(item("later", &[("ttl", n(t + 3600)), ("ttl_shard", n(3))]))
        .await;
    precise_ttl()
        .env("PRECISE_TTL_TABLE", &table.name)
        .args(["sweep"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "deleted 30, skipped (changed) 0, errors 0",
        ));
    let out = precise_ttl()
        .args(["sweep", "--table", &table.name, "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["deleted"], 0);
    assert_eq!(table.count().await, 1);
}

#[test]
fn a_missing_table_or_index_fails_with_one_clear_line() {
    let missing = format!("no-such-table-{}", fastrand::u32(..));
    precise_ttl()
        .args(["sweep", "--table", &missing])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "table \"{missing}\" was not found"
        )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_without_the_index_is_refused_with_a_hint() {
    let table = TestTable::bare().await;
    precise_ttl()
        .args(["sweep", "--table", &table.name])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "has no index named \"precise-ttl\"",
        ))
        .stderr(predicate::str::contains("precise-ttl setup"));
}

#[test]
fn an_unreachable_endpoint_fails_within_seconds() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    precise_ttl()
        .env(
            "PRECISE_TTL_ENDPOINT_URL",
            format!("http://127.0.0.1:{port}"),
        )
        .args(["sweep", "--table", "t"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot reach http://127.0.0.1"));
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn bad_usage_is_explained() {
    precise_ttl()
        .args(["sweep"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no table given"));
    precise_ttl()
        .args(["sweep", "--table", "t", "--shards", "0"])
        .assert()
        .code(2);
    precise_ttl()
        .args(["setup", "--table", "t", "--wait-timeout", "soon"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid duration"));
    precise_ttl()
        .args([
            "setup",
            "--table",
            "t",
            "--create-table",
            "--partition-key",
            "pk:X",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not one of S, N, B"));
    precise_ttl()
        .args([
            "sweep",
            "--table",
            "t",
            "--ttl-attribute",
            "same",
            "--shard-attribute",
            "same",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("must differ"));
    precise_ttl()
        .args(["--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("PRECISE_TTL_TABLE"));
}
