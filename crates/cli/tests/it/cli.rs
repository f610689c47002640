//! The `precise-ttl` binary as users run it: output, exit codes, errors.

use crate::support::{TestTable, create_with_setup, item, n, now, precise_ttl};
use predicates::prelude::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_and_sweep_from_the_command_line() {
    let table = TestTable::named();
    create_with_setup(&table, "pk:S").stdout(predicate::str::contains("created the table"));
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
            "deleted 30, skipped (changed) 0, unconfirmed 0, errors 0",
        ));
    let json = crate::support::json_report("sweep", &table);
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
    let pk_x = [
        "setup",
        "--table",
        "t",
        "--create-table",
        "--partition-key",
        "pk:X",
    ];
    let same = [
        "sweep",
        "--table",
        "t",
        "--ttl-attribute",
        "same",
        "--shard-attribute",
        "same",
    ];
    for (args, says) in [
        (&["sweep"][..], "no table given"),
        // A shard count of 0: the exit code is all that is asked of it.
        (&["sweep", "--table", "t", "--shards", "0"], ""),
        (
            &["setup", "--table", "t", "--wait-timeout", "soon"],
            "invalid duration",
        ),
        (&pk_x, "not one of S, N, B"),
        (&same, "must differ"),
    ] {
        crate::usage::usage_error(precise_ttl(), args, says);
    }
    precise_ttl()
        .args(["--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("PRECISE_TTL_TABLE"));
}

/// The SDK's own rendering of a missing credential spans a dozen lines; ours is one.
/// One error line, and at most one hint line after it.
/// The standard error of `cmd`, which must exit 1 with one line and at most a hint.
fn fails_in_one_line(cmd: &mut assert_cmd::Command) -> String {
    let text = crate::support::stderr_of(&cmd.assert().code(1));
    let lines: Vec<&str> = text.trim_end().lines().collect();
    assert!(lines[0].starts_with("error: "), "{text}");
    assert!(
        lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("hint: ")),
        "one line and at most a hint: {text}"
    );
    text
}

#[test]
fn missing_credentials_or_region_are_one_clear_line_and_a_hint_without_a_network_call() {
    let home = std::env::temp_dir().join(format!("precise-ttl-home-{}", fastrand::u32(..)));
    std::fs::create_dir_all(&home).unwrap();
    // No instance metadata lookup: the test must not depend on what 169.254.169.254 does here.
    let bare = || {
        let mut cmd = precise_ttl();
        cmd.env_remove("PRECISE_TTL_ENDPOINT_URL")
            .env("HOME", &home)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .timeout(Duration::from_secs(20));
        cmd
    };
    let started = Instant::now();
    let text = fails_in_one_line(
        bare()
            .env("AWS_REGION", "eu-west-1")
            .args(["sweep", "--table", "t"]),
    );
    assert!(text.contains("no AWS credentials found"), "{text}");
    assert!(text.contains("AWS_PROFILE"), "{text}");
    assert!(
        fails_in_one_line(bare().args(["status", "--table", "t"])).contains("no AWS region set")
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn malformed_addresses_and_durations_are_refused_up_front() {
    for (args, needle) in [
        (
            &["run", "--table", "t", "--metrics-addr", "localhost"][..],
            "--metrics-addr",
        ),
        (
            &["run", "--table", "t", "--poll-interval", "1 sec"][..],
            "invalid duration",
        ),
        (&["run", "--table", "t", "--for=-5s"][..], "--for"),
        (
            &["sweep", "--table", "t", "--endpoint-url", "not a url"][..],
            "endpoint",
        ),
    ] {
        crate::usage::usage_error(precise_ttl(), args, needle);
    }
}

/// One config file may carry every command's settings: each command takes the keys that are its
/// flags (as their defaults, which `--help` shows) and leaves the others to their commands.
#[test]
fn a_config_file_accepts_every_commands_keys() {
    let dir = std::env::temp_dir().join(format!("precise-ttl-keys-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("all.toml");
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "setup",
            &[
                ("wait-timeout", "\"17m\""),
                ("shards", "24"),
                ("index-name", "\"idx\""),
            ],
        ),
        (
            "sweep",
            &[
                ("concurrency", "7"),
                ("page-size", "123"),
                ("shard-parallelism", "3"),
                ("max-attempts", "4"),
            ],
        ),
        (
            "run",
            &[
                ("poll-interval", "\"300ms\""),
                ("horizon", "\"9s\""),
                ("lookback", "\"3s\""),
                ("delete-mode", "\"single\""),
                ("stray-check-interval", "\"11m\""),
                ("batch-linger", "\"2ms\""),
            ],
        ),
        (
            "backfill",
            &[
                ("segments", "9"),
                ("writes-in-flight", "5"),
                ("scan-page-size", "321"),
            ],
        ),
        ("doctor", &[("examples", "6")]),
        ("demo", &[("spread", "\"8s\""), ("interval", "\"2s\"")]),
        ("bench", &[("grace", "\"13s\""), ("raw-items", "1234")]),
    ];
    // `bench` is a command only of a binary built with the `bench` feature.
    let cases: Vec<(&str, &[(&str, &str)])> = cases
        .iter()
        .copied()
        .filter(|(command, _)| cfg!(feature = "bench") || *command != "bench")
        .collect();
    let text: String = cases
        .iter()
        .flat_map(|(_, keys)| keys.iter())
        .map(|(k, v)| format!("{k} = {v}\n"))
        .collect();
    std::fs::write(&file, &text).unwrap();
    for (command, keys) in cases {
        let help = precise_ttl()
            .args(["--config", file.to_str().unwrap(), command, "--help"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let help = String::from_utf8_lossy(&help);
        for (key, value) in keys.iter() {
            let shown = format!("[default: {}]", value.trim_matches('"'));
            let flag = help
                .split(&format!("--{key} "))
                .nth(1)
                .unwrap_or_else(|| panic!("{command} has no --{key}"));
            let block = flag.split("\n      --").next().unwrap();
            assert!(block.contains(&shown), "{command} --{key}: {block}");
        }
    }
    // The same key means the same thing everywhere: a value one command would refuse is refused
    // for all of them, before anything runs.
    std::fs::write(&file, "concurrency = 5000\n").unwrap();
    precise_ttl()
        .args(["--config", file.to_str().unwrap(), "status", "--table", "t"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("concurrency").and(predicate::str::contains("1..=1024")));
    std::fs::remove_dir_all(&dir).ok();
}
