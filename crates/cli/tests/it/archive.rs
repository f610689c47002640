//! Inline capture (`--archive file://DIR`): every item `sweep` or `run` deletes has exactly one
//! record, with its last image, in the shape of a Streams REMOVE record; survivors have none.

use crate::support::{
    archive_command, at, delete_table_if_any, due_items, endpoint, item, later_items, n,
    precise_ttl, s, table_with_index,
};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Every record in the archive folder's JSON Lines files.
fn records(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        assert!(path.to_string_lossy().ends_with(".jsonl"), "{path:?}");
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            out.push(serde_json::from_str(line).expect("one JSON record per line"));
        }
    }
    out
}

fn keys(records: &[serde_json::Value]) -> Vec<String> {
    let mut keys: Vec<String> = records
        .iter()
        .map(|r| {
            r["dynamodb"]["Keys"]["pk"]["S"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    keys.sort();
    keys
}

/// The partition keys of `items`.
fn pks(items: &[HashMap<String, AttributeValue>]) -> BTreeSet<String> {
    items
        .iter()
        .map(|i| i["pk"].as_s().expect("a String key").clone())
        .collect()
}

fn archive_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("precise-ttl-archive-{:016x}", fastrand::u64(..)))
}

/// The archive URL of folder `dir`.
fn url_of(dir: &std::path::Path) -> String {
    format!("file://{}", dir.display())
}

/// `precise-ttl run` of `table` on the shared DynamoDB Local, polling as often as
/// [`archive_command`]'s `archive`: the tests add the archive and where the output goes.
fn run_command(table: &str) -> std::process::Command {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"));
    command
        .args(["run", "--table", table, "--endpoint-url", endpoint()])
        .args(["--poll-interval", "200ms"]);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_archives_exactly_the_items_it_deletes_with_their_last_image() {
    let table = table_with_index().await;
    let mut items = due_items("due", 0..30, |i| -5_000 - i);
    for item in &mut items {
        item.insert("note".into(), s("keep me in the record"));
    }
    let due = pks(&items);
    items.extend(later_items(5));
    table.put_many(items).await;
    let dir = archive_dir();
    precise_ttl()
        .args(["sweep", "--table", &table.name, "--archive"])
        .arg(url_of(&dir))
        .assert()
        .success();
    let recs = records(&dir);
    assert_eq!(keys(&recs), due.iter().cloned().collect::<Vec<_>>());
    for r in &recs {
        assert_eq!(r["eventName"], "REMOVE");
        assert_eq!(r["eventSource"], "aws:dynamodb");
        assert_eq!(r["userIdentity"]["principalId"], "precise-ttl");
        assert_eq!(r["tableName"], table.name.as_str());
        assert_eq!(
            r["dynamodb"]["OldImage"]["note"]["S"],
            "keep me in the record"
        );
        assert!(r["dynamodb"]["OldImage"]["ttl"]["N"].is_string(), "{r}");
        assert!(r["lagMs"].as_i64().unwrap() >= 5_000, "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The daemon (PartiQL batches, `RETURNING ALL OLD *`) with items expiring while it runs and a
/// backlog: after SIGTERM, the records are exactly the deleted items, as many as it reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_archives_every_delete_and_nothing_else() {
    let table = table_with_index().await;
    let mut items = due_items("due", 0..200, |i| {
        if i < 50 { -30_000 - i } else { 500 + i * 10 }
    });
    let due = pks(&items);
    items.extend(later_items(5));
    table.put_many(items).await;
    let dir = archive_dir();
    let child = run_command(&table.name)
        .arg("--archive")
        .arg(url_of(&dir))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    table.drains_to(5, 60, "items left").await;
    crate::support::terminate(&child);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let recs = records(&dir);
    assert_eq!(
        keys(&recs),
        due.iter().cloned().collect::<Vec<_>>(),
        "one record per deleted item"
    );
    assert!(
        stdout.contains("stopped: deleted 200,"),
        "counted as many as archived: {stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_archive_url_is_one_clear_line() {
    let out = precise_ttl()
        .args(["sweep", "--table", "t", "--archive", "ftp://x"])
        .assert()
        .failure();
    let err = crate::support::stderr_of(&out);
    assert!(err.contains("file://DIR"), "{err}");
}

/// The archive folder replaced by a file while the daemon runs: its next records cannot be
/// written, so it stops deleting and exits with the reason instead of dropping them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_archive_stops_the_daemon_with_the_reason() {
    use std::io::Read;
    let table = table_with_index().await;
    table
        .put_many(due_items("due", 0..40, |i| 2_500 + i * 10))
        .await;
    let dir = archive_dir();
    let mut child = run_command(&table.name)
        .arg("--archive")
        .arg(url_of(&dir))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    });
    // The sink created its folder at start; nothing is due for 2.5 s.
    let started = Instant::now();
    while !dir.is_dir() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no archive folder"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, "not a folder").unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(90) {
            crate::support::terminate(&child);
            panic!("the daemon kept running without its archive");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = std::fs::remove_file(&dir);
    let stderr = stderr.join().unwrap();
    assert!(!status.success(), "exits non-zero");
    assert!(stderr.contains("archive"), "says why: {stderr}");
}

fn archive_child(table: &str, dir: &std::path::Path, checkpoints: &str) -> std::process::Child {
    archive_command(table, checkpoints)
        .arg("--to")
        .arg(url_of(dir))
        // Default settings: `auto` knows DynamoDB Local's stream, which dates records to the
        // minute.
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// `archive` tails the stream: every expiry `run` deletes (without inline capture) gets a record
/// with its sequence number; an application's delete of an item not yet due gets none; killed
/// and started again from its checkpoints, it loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_from_the_stream_keeps_every_expiry_and_nothing_else_across_a_kill() {
    let table = crate::support::table_with_stream().await;
    let mut items = due_items("due", 0..80, |i| 1_500 + i * 40);
    let due = pks(&items);
    items.extend(later_items(5));
    items.push(item(
        "app-delete",
        &[("ttl", at(3_600_000)), ("ttl_shard", n(0))],
    ));
    table.put_many(items).await;
    let dir = archive_dir();
    let checkpoints = format!("precise-ttl-test-cp-{:08x}", fastrand::u32(..));
    let mut archiver = archive_child(&table.name, &dir, &checkpoints);
    let mut daemon = run_command(&table.name)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed in the middle of the deletes, then started again.
    tokio::time::sleep(Duration::from_millis(2_800)).await;
    crate::support::signal(&archiver, nix::sys::signal::Signal::SIGKILL);
    let _ = archiver.wait();
    table.delete("app-delete").await;
    let mut archiver = archive_child(&table.name, &dir, &checkpoints);

    let started = Instant::now();
    let archived = loop {
        let found: BTreeSet<String> = if dir.is_dir() {
            keys(&records(&dir)).into_iter().collect()
        } else {
            BTreeSet::new()
        };
        if found.is_superset(&due) || started.elapsed() > Duration::from_secs(40) {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // A moment more for anything that should not be there to show up.
    tokio::time::sleep(Duration::from_millis(600)).await;
    crate::support::terminate(&archiver);
    assert!(archiver.wait().unwrap().success());
    crate::support::terminate(&daemon);
    assert!(daemon.wait().unwrap().success());
    let recs = records(&dir);
    let archived_now: BTreeSet<String> = keys(&recs).into_iter().collect();
    assert_eq!(
        archived_now,
        due,
        "missing: {:?}",
        due.difference(&archived)
    );
    for r in &recs {
        assert!(r["dynamodb"]["SequenceNumber"].is_string(), "{r}");
        assert_eq!(r["userIdentity"]["principalId"], "precise-ttl");
        assert!(r["dynamodb"]["OldImage"]["ttl"]["N"].is_string(), "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    delete_table_if_any(&table.dynamo, &checkpoints).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_of_a_table_without_a_stream_is_one_line_saying_what_to_run() {
    let table = table_with_index().await;
    let out = precise_ttl()
        .args(["archive", "--table", &table.name, "--to", "-"])
        .assert()
        .failure();
    let err = crate::support::stderr_of(&out);
    assert!(err.contains("--stream"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Native TTL's deletes (DynamoDB Local's own TTL job here, whose stream records carry an event
/// name no SDK knows and no userIdentity) are archived too, marked as the service's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_keeps_native_ttl_deletes_marked_as_the_services() {
    let table = table_with_index().await;
    precise_ttl()
        .args(["setup", "--table", &table.name, "--stream"])
        .assert()
        .success();
    // On a shard value no sweeper reads: only native TTL deletes these.
    let natives: BTreeSet<String> = (0..5).map(|i| format!("native-{i}")).collect();
    for key in &natives {
        table
            .put(item(key, &[("ttl", at(-120_000)), ("ttl_shard", n(5000))]))
            .await;
    }
    let dir = archive_dir();
    let checkpoints = format!("precise-ttl-test-cp-{:08x}", fastrand::u32(..));
    let mut archiver = archive_child(&table.name, &dir, &checkpoints);
    // DynamoDB Local's TTL job runs every 10 s.
    let started = Instant::now();
    let recs = loop {
        let recs = if dir.is_dir() {
            records(&dir)
        } else {
            Vec::new()
        };
        let found: BTreeSet<String> = keys(&recs).into_iter().collect();
        if found.is_superset(&natives) || started.elapsed() > Duration::from_secs(90) {
            break recs;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    crate::support::terminate(&archiver);
    assert!(archiver.wait().unwrap().success());
    let found: BTreeSet<String> = keys(&recs).into_iter().collect();
    assert_eq!(found, natives, "{recs:?}");
    for r in &recs {
        assert_eq!(
            r["userIdentity"]["principalId"], "dynamodb.amazonaws.com",
            "{r}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    delete_table_if_any(&table.dynamo, &checkpoints).await;
}

/// `archive` with metrics on a free port and its standard error collected: the child, the base
/// URL of `/metrics` and `/healthz`, and the messages so far.
fn archive_with_metrics(
    table: &str,
    dir: &std::path::Path,
    checkpoints: &str,
    extra: &[&str],
) -> (
    std::process::Child,
    String,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use std::io::BufRead;
    let mut child = archive_command(table, checkpoints)
        .args(["--metrics-addr", "127.0.0.1:0", "--to"])
        .arg(url_of(dir))
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first[first.find("http://").expect("metrics URL printed")..].trim();
    let base = url.trim_end_matches("/metrics").to_string();
    let messages = std::sync::Arc::new(std::sync::Mutex::new(vec![first.clone()]));
    let collected = std::sync::Arc::clone(&messages);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            collected.lock().unwrap().push(line);
        }
    });
    (child, base, messages)
}

/// The value of the sample `name` (with its labels, as `/metrics` writes them) on `page`.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A REMOVE `archive` leaves out is never silent: counted by reason on `/metrics` and logged.
/// Two archives read one stream of DynamoDB Local, which dates records to the minute: by
/// default (`auto`, 1 m here) our on-time deletes are expiries and the application's early
/// delete is counted out; told 1 s, every delete looks early, and it says so at start, in a
/// warning with the way out, and in the counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_counts_and_logs_every_remove_it_leaves_out() {
    let table = crate::support::table_with_stream().await;
    // 10 to 40 s into a minute: the deletes below fall well inside the minute of their TTL,
    // whose start DynamoDB Local dates their records to, more than a second before the TTL.
    loop {
        let into_minute = crate::support::now().as_millis().rem_euclid(60_000);
        if (10_000..40_000).contains(&into_minute) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let due: BTreeSet<String> = (0..3).map(|i| format!("due-{i}")).collect();
    let mut items: Vec<_> = due
        .iter()
        .enumerate()
        .map(|(i, k)| item(k, &[("ttl", at(-1_500)), ("ttl_shard", n(i))]))
        .collect();
    items.push(item(
        "app-delete",
        &[("ttl", at(3_600_000)), ("ttl_shard", n(0))],
    ));
    table.put_many(items).await;
    precise_ttl()
        .args(["sweep", "--table", &table.name])
        .assert()
        .success();
    table.delete("app-delete").await;

    let (auto_dir, fine_dir) = (archive_dir(), archive_dir());
    let checkpoints: Vec<String> = (0..2)
        .map(|_| format!("precise-ttl-test-cp-{:08x}", fastrand::u32(..)))
        .collect();
    let (mut auto, auto_base, auto_log) =
        archive_with_metrics(&table.name, &auto_dir, &checkpoints[0], &[]);
    let (mut fine, fine_base, fine_log) = archive_with_metrics(
        &table.name,
        &fine_dir,
        &checkpoints[1],
        &["--record-time-resolution", "1s"],
    );
    let left_out = "precise_ttl_archive_left_out_removes_total{reason=\"not_due\"}";
    let started = Instant::now();
    let (auto_page, fine_page) = loop {
        let auto_page = crate::daemon::http_get(&format!("{auto_base}/metrics"));
        let fine_page = crate::daemon::http_get(&format!("{fine_base}/metrics"));
        let done = sample(&auto_page, "precise_ttl_archive_records_total") == Some(3.0)
            && sample(&auto_page, left_out) == Some(1.0)
            && sample(&fine_page, left_out) == Some(4.0);
        if done || started.elapsed() > Duration::from_secs(30) {
            break (auto_page, fine_page);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Healthy once a pass over the stream has ended: the counts above may be read while the
    // first pass is still under way.
    let healthz = loop {
        let healthz = crate::daemon::http_get(&format!("{auto_base}/healthz"));
        if healthz.starts_with("HTTP/1.0 200") || started.elapsed() > Duration::from_secs(40) {
            break healthz;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    crate::support::terminate(&auto);
    assert!(auto.wait().unwrap().success());
    crate::support::terminate(&fine);
    assert!(fine.wait().unwrap().success());
    let (auto_log, fine_log) = (
        auto_log.lock().unwrap().join("\n"),
        fine_log.lock().unwrap().join("\n"),
    );

    // auto: the three expiries archived, the application's delete counted out.
    assert_eq!(
        sample(&auto_page, "precise_ttl_archive_records_total"),
        Some(3.0),
        "{auto_page}\n{auto_log}"
    );
    assert_eq!(sample(&auto_page, left_out), Some(1.0), "{auto_page}");
    assert_eq!(
        sample(
            &auto_page,
            "precise_ttl_archive_record_time_resolution_seconds"
        ),
        Some(60.0),
        "{auto_page}"
    );
    assert_eq!(
        keys(&records(&auto_dir)),
        due.iter().cloned().collect::<Vec<_>>()
    );
    assert!(healthz.starts_with("HTTP/1.0 200"), "{healthz}");
    assert!(
        auto_log.contains("record times to 1m (auto: DynamoDB Local"),
        "{auto_log}"
    );
    assert!(
        auto_log.contains("stopped: 3 expiry records archived (0 by native TTL), 1 other"),
        "{auto_log}"
    );

    // 1s: nothing archived, all four counted out, and said so.
    assert_eq!(
        sample(&fine_page, "precise_ttl_archive_records_total"),
        Some(0.0),
        "{fine_page}"
    );
    assert_eq!(
        sample(&fine_page, left_out),
        Some(4.0),
        "{fine_page}\n{fine_log}"
    );
    assert!(
        fine_log.contains("record times to 1s (as given)"),
        "{fine_log}"
    );
    assert!(
        fine_log.contains("this is DynamoDB Local's stream, which dates records to the minute"),
        "{fine_log}"
    );
    // The first left out at once, with the way out; the next three within the minute only in
    // the counter.
    let warnings: Vec<&str> = fine_log
        .lines()
        .filter(|l| l.contains("a stream REMOVE was left out of the archive"))
        .collect();
    assert_eq!(warnings.len(), 1, "{fine_log}");
    assert!(warnings[0].contains("not_due"), "{}", warnings[0]);
    assert!(
        warnings[0].contains("give --record-time-resolution 1m (or auto)"),
        "{}",
        warnings[0]
    );
    assert!(
        fine_log.contains("stopped: 0 expiry records archived (0 by native TTL), 4 other"),
        "{fine_log}"
    );
    for dir in [&auto_dir, &fine_dir] {
        let _ = std::fs::remove_dir_all(dir);
    }
    for cp in &checkpoints {
        delete_table_if_any(&table.dynamo, cp).await;
    }
}
