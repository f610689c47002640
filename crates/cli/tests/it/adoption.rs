//! Adoption on an existing table: `backfill` (interrupted and resumed, with a writer racing it),
//! `doctor` against planted problems, and sweeping the 2022 blog's window index after downtime.

use crate::support::{
    TestTable, attribute_def, endpoint, item, key_element, keys_only, n, now, precise_ttl, s,
};
use aws_sdk_dynamodb::types::{AttributeValue, KeyType, ScalarAttributeType};
use precise_ttl_core::{ShardCount, Timestamp, WindowFormat, WindowSpec};
use precise_ttl_dynamodb::CheckpointTable;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every item's `pk` → its `ttl_shard` (None when absent) and whether it has a TTL.
async fn shards_of(table: &TestTable) -> HashMap<String, (Option<String>, bool)> {
    let mut out = HashMap::new();
    table
        .scan_all(
            |scan| scan,
            |page| {
                for i in page.items() {
                    let pk = match i.get("pk") {
                        Some(AttributeValue::S(s)) => s.clone(),
                        _ => continue,
                    };
                    let shard = match i.get("ttl_shard") {
                        Some(AttributeValue::N(n)) => Some(n.clone()),
                        _ => None,
                    };
                    out.insert(pk, (shard, i.contains_key("ttl")));
                }
            },
        )
        .await;
    out
}

/// The `precise-ttl backfill` binary with a checkpoint file and a JSON summary, run as a child
/// process so a test can interrupt it.
fn backfill_command(table: &str, checkpoint: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"));
    cmd.args(["backfill", "--table", table, "--json"])
        .args(extra)
        .arg("--checkpoint")
        .arg(checkpoint)
        .env("PRECISE_TTL_ENDPOINT_URL", endpoint())
        .env_remove("PRECISE_TTL_TABLE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn summary(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON summary in {text}"));
    serde_json::from_str(line).unwrap()
}

/// What is checked does not depend on the count, only how long it runs: 10 000 items, and
/// 50 000 in the full form (`PRECISE_TTL_CHAOS_FULL=1`, as the chaos scenarios; the scale that
/// docs/adoption.md measures), with 200 items raced by a writer either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_interrupted_and_resumed_indexes_each_item_exactly_once() {
    let size: usize = if std::env::var_os("PRECISE_TTL_CHAOS_FULL").is_some() {
        50_000
    } else {
        10_000
    };
    let table = TestTable::bare().await;
    crate::support::set_up_index(&table, &crate::support::layout(16)).await;
    let t = now().as_millis() / 1000;
    let mut items = Vec::with_capacity(size + 500);
    for i in 0..size {
        items.push(item(
            &format!("item-{i:05}"),
            &[("ttl", n(t + 86_400 + i as i64))],
        ));
    }
    for i in 0..500 {
        items.push(item(&format!("no-ttl-{i}"), &[("body", s("x"))]));
    }
    table.put_many(items).await;

    let dir = std::env::temp_dir().join(format!("precise-ttl-backfill-{:x}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let checkpoint = dir.join("checkpoint.json");
    let backfill = || backfill_command(&table.name, &checkpoint, &["--segments", "4"]);

    // First run: interrupted once its checkpoint shows progress, while a writer races it. Capped
    // (at least 40 s for its items) so that it cannot finish before the writer's 200 calls and the
    // signal: uncapped, DynamoDB Local once finished it first (the run exited 0), and at 1,000
    // writes/s, with DynamoDB Local slowed, the progress check once found no checkpoint (most
    // likely the writer's loop outlasted the run). Small pages show progress after a few hundred
    // writes.
    let mut first = backfill_command(
        &table.name,
        &checkpoint,
        &[
            "--segments",
            "4",
            "--max-writes-per-second",
            "250",
            "--scan-page-size",
            "250",
        ],
    )
    .spawn()
    .unwrap();
    let started = Instant::now();
    let shards = ShardCount::new(16).unwrap();
    let writer_shard = |pk: &str| (shards.shard_for_key(pk.as_bytes()).0 + 1) % 16;
    let mut written_by_writer = Vec::new();
    let mut deleted = Vec::new();
    for i in (0..size).step_by(size / 200) {
        let pk = format!("item-{i:05}");
        if i % (size / 100) == 0 {
            // The writer sets its own shard: backfill must never overwrite it.
            table
                .update(&pk)
                .update_expression("SET ttl_shard = :s")
                .expression_attribute_values(":s", n(writer_shard(&pk)))
                .send()
                .await
                .unwrap();
            written_by_writer.push(pk);
        } else {
            // Deleted while backfill runs: must not come back as a shard-only item.
            table.delete(&pk).await;
            deleted.push(pk);
        }
    }
    loop {
        if let Some(status) = first.try_wait().unwrap() {
            let out = first.wait_with_output().unwrap();
            panic!(
                "the first run ended ({status}) before it was interrupted: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let text = std::fs::read_to_string(&checkpoint).unwrap_or_default();
        let progressed = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["segments"].as_array().cloned())
            .is_some_and(|segs| {
                segs.iter()
                    .filter(|s| s["cursor"].as_array().is_some_and(|c| !c.is_empty()))
                    .count()
                    >= 2
            });
        if progressed {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no progress: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    crate::support::signal(&first, nix::sys::signal::Signal::SIGINT);
    let out = first.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stopped early: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let one = summary(&out.stdout);
    assert_eq!(one["complete"], false, "{one}");
    assert!(checkpoint.exists(), "the checkpoint stays for the resume");

    // Second run: resumes, completes, removes the checkpoint.
    let out = backfill().output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resuming from"), "{stderr}");
    let two = summary(&out.stdout);
    assert_eq!(two["complete"], true, "{two}");
    assert!(!checkpoint.exists(), "removed once complete");
    let scanned = one["scanned"].as_u64().unwrap() + two["scanned"].as_u64().unwrap();
    assert!(
        scanned < (size as u64) * 3 / 2,
        "the resume continued rather than starting over: {one} {two}"
    );

    eprintln!("backfill, interrupted: {one}\nbackfill, resumed: {two}");
    let added = one["shard_added"].as_u64().unwrap() + two["shard_added"].as_u64().unwrap();
    let state = shards_of(&table).await;
    let mut by_backfill = 0;
    for i in 0..size {
        let pk = format!("item-{i:05}");
        let got = state.get(&pk);
        if deleted.contains(&pk) {
            assert!(got.is_none(), "{pk} was deleted and came back: {got:?}");
        } else if written_by_writer.contains(&pk) {
            assert_eq!(
                got.unwrap().0.as_deref(),
                Some(writer_shard(&pk).to_string().as_str()),
                "{pk}: the writer's shard was overwritten"
            );
        } else {
            let expected = shards.shard_for_key(pk.as_bytes()).0.to_string();
            assert_eq!(got.unwrap().0.as_deref(), Some(expected.as_str()), "{pk}");
            by_backfill += 1;
        }
    }
    for i in 0..500 {
        assert_eq!(
            state[&format!("no-ttl-{i}")],
            (None, false),
            "no TTL, no shard"
        );
    }
    // Each item got its shard from exactly one successful write: the raced items may have been
    // written by backfill before the writer came (then the writer's value replaced it).
    let raced = (written_by_writer.len() + deleted.len()) as u64;
    assert!(
        added >= by_backfill && added <= by_backfill + raced,
        "writes {added}, items indexed by backfill {by_backfill}, raced {raced}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_killed_with_sigkill_resumes_from_its_checkpoint() {
    const ITEMS: usize = 6_000;
    let table = TestTable::bare().await;
    crate::support::set_up_index(&table, &crate::support::layout(16)).await;
    let t = now().as_millis() / 1000;
    let items: Vec<_> = (0..ITEMS)
        .map(|i| item(&format!("k{i:05}"), &[("ttl", n(t + 86_400))]))
        .collect();
    table.put_many(items).await;
    let dir = std::env::temp_dir().join(format!("precise-ttl-kill-{:x}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let checkpoint = dir.join("c.json");
    let backfill = || {
        backfill_command(
            &table.name,
            &checkpoint,
            &["--scan-page-size", "200", "--max-writes-per-second", "1500"],
        )
    };
    let mut first = backfill().spawn().unwrap();
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&checkpoint).unwrap_or_default();
        if text.contains("\"S\"") {
            break; // a segment has saved a position
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill().unwrap(); // SIGKILL: no summary, no clean-up
    let _ = first.wait();
    assert!(checkpoint.exists());
    let out = backfill().output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let two = summary(&out.stdout);
    assert_eq!(two["complete"], true);
    assert!(
        two["scanned"].as_u64().unwrap() < ITEMS as u64,
        "resumed, not restarted: {two}"
    );
    let state = shards_of(&table).await;
    let shards = ShardCount::new(16).unwrap();
    for i in 0..ITEMS {
        let pk = format!("k{i:05}");
        let expected = shards.shard_for_key(pk.as_bytes()).0.to_string();
        assert_eq!(state[&pk].0.as_deref(), Some(expected.as_str()), "{pk}");
    }
    assert!(!checkpoint.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

fn doctor_json(table: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let out = precise_ttl()
        .args(["doctor", "--table", table, "--json"])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap(), summary(&out.stdout))
}

fn finding(report: &serde_json::Value, kind: &str) -> Option<u64> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .map(|f| f["count"].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_finds_each_planted_problem() {
    let table = TestTable::bare().await;
    let t = now().as_millis() / 1000;
    let good = |pk: &str| {
        let shard = ShardCount::new(16).unwrap().shard_for_key(pk.as_bytes()).0;
        item(pk, &[("ttl", n(t + 3600)), ("ttl_shard", n(shard))])
    };
    // Written before the index exists, as an old table would hold them.
    table
        .put_many(vec![
            good("good-1"),
            good("good-2"),
            item("no-ttl", &[("body", s("x"))]),
            item(
                "string-ttl",
                &[("ttl", s("1700000000")), ("ttl_shard", n(1))],
            ),
            item("string-ttl-2", &[("ttl", s("soon")), ("ttl_shard", n(1))]),
            item(
                "millis",
                &[("ttl", n((t + 3600) * 1000)), ("ttl_shard", n(2))],
            ),
            item(
                "too-old",
                &[("ttl", n(t - 6 * 365 * 86_400)), ("ttl_shard", n(3))],
            ),
            item("no-shard-1", &[("ttl", n(t + 3600))]),
            item("no-shard-2", &[("ttl", n(t + 7200))]),
            item("no-shard-3", &[("ttl", n(t + 7200))]),
            item("stray", &[("ttl", n(t + 3600)), ("ttl_shard", n(40))]),
            item(
                "negative-shard",
                &[("ttl", n(t + 3600)), ("ttl_shard", n(-1))],
            ),
            item(
                "string-shard",
                &[("ttl", n(t + 3600)), ("ttl_shard", s("3"))],
            ),
        ])
        .await;

    let (code, report) = doctor_json(&table.name, &[]);
    assert_eq!(code, 4, "{report}");
    assert_eq!(report["scanned"], 13, "{report}");
    for (kind, count) in [
        ("index_missing", 1),
        ("native_ttl_off", 1),
        ("ttl_not_a_number", 2),
        ("ttl_in_milliseconds", 1),
        ("ttl_more_than_5_years_old", 1),
        ("ttl_without_shard", 3),
        ("shard_out_of_range", 1),
        ("shard_invalid", 2),
    ] {
        assert_eq!(finding(&report, kind), Some(count), "{kind}: {report}");
    }

    // With the index and native TTL in place, only the item problems remain.
    precise_ttl()
        .args(["setup", "--table", &table.name])
        .assert()
        .success();
    let (code, report) = doctor_json(&table.name, &["--sample", "5"]);
    assert_eq!(code, 4);
    assert_eq!(finding(&report, "index_missing"), None, "{report}");
    assert_eq!(finding(&report, "native_ttl_off"), None, "{report}");
    assert_eq!(report["sample"], true);

    // Native TTL on another attribute is found too; a clean table passes.
    let other = TestTable::bare().await;
    other.put_many(vec![good("a"), good("b")]).await;
    precise_ttl()
        .args(["setup", "--table", &other.name])
        .assert()
        .success();
    let (code, report) = doctor_json(&other.name, &[]);
    assert_eq!(
        (code, report["findings"].as_array().unwrap().len()),
        (0, 0),
        "{report}"
    );
    let (code, report) = doctor_json(&other.name, &["--ttl-attribute", "expires_at"]);
    assert_eq!(code, 4);
    assert_eq!(
        finding(&report, "native_ttl_other_attribute"),
        Some(1),
        "{report}"
    );
    assert_eq!(finding(&report, "index_wrong_schema"), Some(1), "{report}");
}

/// A table in the blog's layout: items carry `expirationWindow` and an index on it and the TTL.
async fn blog_table() -> TestTable {
    let table = TestTable::bare().await;
    // DynamoDB Local builds a few indexes at a time and refuses more with LimitExceeded.
    while let Err(e) = table
        .dynamo
        .query
        .update_table()
        .table_name(&table.name)
        .attribute_definitions(attribute_def("expirationWindow", ScalarAttributeType::S))
        .attribute_definitions(attribute_def("ttl", ScalarAttributeType::N))
        .global_secondary_index_updates(
            aws_sdk_dynamodb::types::GlobalSecondaryIndexUpdate::builder()
                .create(
                    aws_sdk_dynamodb::types::CreateGlobalSecondaryIndexAction::builder()
                        .index_name("expiration-window")
                        .key_schema(key_element("expirationWindow", KeyType::Hash))
                        .key_schema(key_element("ttl", KeyType::Range))
                        .projection(keys_only())
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
    {
        let text = format!("{e:?}");
        assert!(
            text.contains("LimitExceeded"),
            "create the blog's index: {text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    loop {
        let active = table
            .describe()
            .await
            .global_secondary_indexes()
            .first()
            .and_then(|i| i.index_status())
            .is_some_and(|s| s.as_str() == "ACTIVE");
        if active {
            return table;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blog_layout_is_swept_including_every_window_missed_during_downtime() {
    let table = blog_table().await;
    let spec = WindowSpec::new(Duration::from_secs(60), WindowFormat::Millis).unwrap();
    let blog_item = |pk: &str, ttl_ms: i64| {
        let at = Timestamp::from_millis(ttl_ms);
        item(
            pk,
            &[
                ("ttl", n(at.to_epoch_seconds_text())),
                ("expirationWindow", s(&spec.label(spec.index_of(at)))),
            ],
        )
    };
    let checkpoint_table =
        TestTable::called(format!("precise-ttl-test-ckpt-{:016x}", fastrand::u64(..)));
    // The last run before the downtime swept up to 25 minutes ago.
    let t = now().as_millis();
    let checkpoints = CheckpointTable::open_or_create(table.dynamo.clone(), &checkpoint_table.name)
        .await
        .unwrap();
    checkpoints
        .advance(
            &format!("{}/expiration-window", table.name),
            Timestamp::from_millis(t - 25 * 60_000),
        )
        .await
        .unwrap();
    let mut items = Vec::new();
    // Missed during the downtime: one item every 7 s over the last 24 minutes, 200 in all.
    for i in 0..200 {
        items.push(blog_item(
            &format!("missed-{i}"),
            t - 24 * 60_000 + i * 7_000,
        ));
    }
    for i in 0..20 {
        items.push(blog_item(
            &format!("future-{i}"),
            t + 3_600_000 + i * 60_000,
        ));
    }
    // Extended after the writer labelled it: the label is stale, the TTL is not due.
    let mut extended = blog_item("extended", t - 60_000);
    extended.insert("ttl".into(), n((t + 3_600_000) / 1000));
    items.push(extended);
    table.put_many(items).await;

    let blog_args = [
        "--index-layout",
        "blog-window",
        "--index-name",
        "expiration-window",
        "--checkpoint-table",
        &checkpoint_table.name,
    ];
    let out = precise_ttl()
        .args(["sweep", "--table", &table.name, "--json"])
        .args(blog_args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = summary(&out.stdout);
    assert_eq!(report["deleted"], 200, "{report}");
    assert_eq!(table.count().await, 21);
    assert!(table.get("extended").await.is_some());
    // Where the sweeper saves how far it swept the window index.
    let window_key = format!("{}/expiration-window", table.name);
    let swept_until = checkpoints.load(&window_key).await.unwrap().unwrap();
    assert!(
        swept_until.as_millis() > t - 60_000,
        "checkpoint advanced: {swept_until}"
    );

    // The daemon form, through the same engine as our layout: read-ahead timers, /metrics with
    // the windows' watermark, a clean stop on SIGTERM that saves the watermark as checkpoint.
    let t = now().as_millis();
    let soon: Vec<_> = (0..30)
        .map(|i| blog_item(&format!("soon-{i}"), t + 1500 + i * 50))
        .collect();
    table.put_many(soon).await;
    let (mut child, lines, base) =
        crate::daemon::daemon_with_metrics(&table.name, crate::support::endpoint(), &blog_args);
    // The metrics below are awaited within the same 30 s.
    let started = std::time::Instant::now();
    table
        .drains_to(21, 30, "the items due soon were not deleted")
        .await;
    let last_ttl_ms = t + 1500 + 29 * 50;
    let metrics = loop {
        // The watermark passes the last item once a backlog pass and the head reads join up.
        let metrics = crate::daemon::http_get(&format!("{base}/metrics"));
        let watermark = metrics
            .lines()
            .find_map(|l| l.strip_prefix("precise_ttl_watermark_seconds{shard=\"windows\"} "))
            .and_then(|v| v.trim().parse::<f64>().ok());
        if watermark.is_some_and(|w| w * 1000.0 >= last_ttl_ms as f64) {
            break metrics;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(metrics.contains("precise_ttl_deleted_total"), "{metrics}");
    crate::support::terminate(&child);
    assert!(child.wait().unwrap().success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|l| l.starts_with("stopped: deleted 30,")),
        "{rest:?}"
    );
    assert!(table.get("extended").await.is_some());
    let saved = checkpoints.load(&window_key).await.unwrap().unwrap();
    assert!(
        saved.as_millis() >= last_ttl_ms,
        "the watermark past the last deleted item is the checkpoint: {saved}"
    );
}
