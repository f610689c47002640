//! The stream-queue layout through the command line (issue 29): `setup`, `backfill`, `run` (its
//! indexer and daemon in one process, with leases), `status` and `doctor` on a table whose
//! writers set only the TTL, against DynamoDB Local.

use crate::support::{TestTable, at, item, n, precise_ttl, s, stderr_of, stdout_of};
use aws_sdk_dynamodb::types::AttributeValue;

/// `precise-ttl <command> --table <app> --index-layout stream-queue ...` with the test's tables.
fn queue_cmd(
    command: &str,
    app: &TestTable,
    queue: &TestTable,
    more: &[&str],
) -> assert_cmd::Command {
    let mut cmd = precise_ttl();
    cmd.args([
        command,
        "--table",
        &app.name,
        "--index-layout",
        "stream-queue",
        "--queue-table",
        &queue.name,
    ])
    .args(more);
    cmd
}

/// `precise-ttl run` on the stream-queue layout with the test's tables, in the background.
fn spawn_run(
    app: &TestTable,
    queue: &TestTable,
    checkpoints: &TestTable,
    leases: &TestTable,
    more: &[&str],
) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PRECISE_TTL_ENDPOINT_URL", crate::support::endpoint())
        .args([
            "run",
            "--table",
            &app.name,
            "--index-layout",
            "stream-queue",
        ])
        .args(["--queue-table", &queue.name])
        .args(["--indexer-checkpoint-table", &checkpoints.name])
        .args(["--lease-table", &leases.name, "--poll-interval", "200ms"])
        .args(more)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A bare application table set up for the stream-queue layout (its stream on, the queue and
/// lease tables made), and a name for the indexer's checkpoint table.
async fn set_up() -> (TestTable, TestTable, TestTable, TestTable) {
    let app = TestTable::bare().await;
    let (queue, leases, checkpoints) = (TestTable::named(), TestTable::named(), TestTable::named());
    queue_cmd("setup", &app, &queue, &["--lease-table", &leases.name])
        .arg("--no-native-ttl")
        .assert()
        .success();
    (app, queue, leases, checkpoints)
}

/// Runs `setup` of a bare table on the stream-queue layout: it must succeed and say that it
/// turned the table's stream on and created the queue table.
pub(crate) fn made_the_stream_and_the_queue(setup: &mut assert_cmd::Command) {
    let out = setup.assert().success();
    let stdout = stdout_of(&out);
    assert!(stdout.contains("turned the table's stream on"), "{stdout}");
    assert!(
        stdout.contains("created the expiry queue table"),
        "{stdout}"
    );
}

/// Waits for a background `run`; its standard output, once it has succeeded.
async fn succeeded(child: std::process::Child) -> String {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Stops background runs with SIGTERM once `done` holds (read every 200 ms), or lets them end
/// by their own `--for` when it never does; their standard outputs, once each exited cleanly.
/// The tests wait for what they check rather than for a fixed run.
async fn stopped_once(
    children: Vec<std::process::Child>,
    done: impl AsyncFn() -> bool,
) -> Vec<String> {
    let started = std::time::Instant::now();
    while !done().await && started.elapsed() < std::time::Duration::from_secs(60) {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let mut outs = Vec::new();
    for child in children {
        crate::support::terminate(&child);
        outs.push(succeeded(child).await);
    }
    outs
}

/// How many stream buckets the indexer has leases for in `leases`, and who holds them.
async fn indexer_owners(
    app: &TestTable,
    leases: &TestTable,
) -> (usize, std::collections::BTreeSet<String>) {
    let all = precise_ttl_dynamodb::LeaseTable::open(
        app.dynamo.clone(),
        &leases.name,
        &app.name,
        "#stream-indexer",
    )
    .await
    .unwrap()
    .all()
    .await
    .unwrap();
    let owners = all.iter().filter_map(|l| l.record.owner.clone()).collect();
    (all.len(), owners)
}

/// An UpdateItem of `pk` with `expression` on `#a`, the attribute `attribute` (`:v` its value).
async fn update(
    app: &TestTable,
    pk: &str,
    attribute: &str,
    expression: &str,
    value: Option<AttributeValue>,
) {
    app.update(pk)
        .update_expression(expression)
        .expression_attribute_names("#a", attribute)
        .set_expression_attribute_values(value.map(|v| [(":v".to_string(), v)].into()))
        .send()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_is_adopted_without_changing_its_writers() {
    let app = TestTable::bare().await;
    let (queue, leases, checkpoints) = (TestTable::named(), TestTable::named(), TestTable::named());
    // Written before any stream: only backfill queues them.
    app.put(item("old-due", &[("ttl", at(-60_000))])).await;
    app.put(item("old-later", &[("ttl", at(3_600_000))])).await;

    let lease_flag = ["--lease-table", leases.name.as_str()];
    made_the_stream_and_the_queue(
        queue_cmd("setup", &app, &queue, &lease_flag).arg("--no-native-ttl"),
    );
    let again = queue_cmd("setup", &app, &queue, &lease_flag)
        .arg("--no-native-ttl")
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&again.get_output().stdout).contains("nothing changed"));

    let dir = std::env::temp_dir().join(format!("precise-ttl-qcli-{:x}.json", fastrand::u64(..)));
    let out = queue_cmd(
        "backfill",
        &app,
        &queue,
        &["--checkpoint", dir.to_str().unwrap()],
    )
    .assert()
    .success();
    let stdout = stdout_of(&out);
    assert!(stdout.contains("queue entries written 2"), "{stdout}");

    // Writers set only the TTL: due soon; extended; TTL removed; a String TTL; later; touched
    // (another attribute changed, the TTL as it was).
    for pk in ["soon", "extended", "removed"] {
        app.put(item(pk, &[("ttl", at(2_500))])).await;
    }
    app.put(item("text", &[("ttl", s("1700000000"))])).await;
    app.put(item("later", &[("ttl", at(3_600_000))])).await;
    app.put(item("touched", &[("ttl", at(3_600_000))])).await;
    update(&app, "extended", "ttl", "SET #a = :v", Some(at(3_600_000))).await;
    update(&app, "removed", "ttl", "REMOVE #a", None).await;
    update(&app, "touched", "seen", "SET #a = :v", Some(n(1))).await;

    let checkpoint_flag = ["--indexer-checkpoint-table", checkpoints.name.as_str()];
    let out = queue_cmd("run", &app, &queue, &lease_flag)
        .args(checkpoint_flag)
        .args(["--for", "9s", "--poll-interval", "200ms"])
        .assert()
        .success();
    let stdout = stdout_of(&out);
    // soon, extended twice, removed's first TTL, later, touched (once: its TTL did not change).
    assert!(stdout.contains("indexer: entries written 6"), "{stdout}");
    assert!(
        stdout.contains("changes leaving the TTL as it was 1"),
        "{stdout}"
    );
    for gone in ["old-due", "soon"] {
        assert!(
            app.get(gone).await.is_none(),
            "{gone} should be deleted: {stdout}"
        );
    }
    for kept in [
        "old-later",
        "extended",
        "removed",
        "text",
        "later",
        "touched",
    ] {
        assert!(app.get(kept).await.is_some(), "{kept} must stay: {stdout}");
    }
    // The entries of what can still come due: old-later, extended (its new TTL), later, touched.
    assert_eq!(queue.count().await, 4, "{stdout}");

    let out = queue_cmd("status", &app, &queue, &lease_flag)
        .args(checkpoint_flag)
        .assert()
        .success();
    let stdout = stdout_of(&out);
    assert!(stdout.contains("expiry queue"), "{stdout}");
    assert!(stdout.contains("indexer caught up"), "{stdout}");
    // The run released its leases on the way out.
    assert!(
        stdout.contains("indexers: none holds a stream bucket"),
        "{stdout}"
    );
    let out = queue_cmd("doctor", &app, &queue, &checkpoint_flag).assert();
    let stdout = stdout_of(&out);
    assert!(
        stdout.contains("of 4 queue entries read, 4 have their item"),
        "{stdout}"
    );
    let _ = std::fs::remove_file(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_new_images_stops_setup_with_what_to_do() {
    let app = TestTable::bare().await;
    let queue = TestTable::named();
    precise_ttl_stream::stream::enable_keys_stream(&app.dynamo, &app.name)
        .await
        .unwrap();
    let out = queue_cmd("setup", &app, &queue, &["--no-native-ttl"])
        .assert()
        .failure();
    let stderr = stderr_of(&out);
    assert!(stderr.contains("KEYS_ONLY"), "{stderr}");
    assert!(
        stderr.contains("StreamViewType=NEW_AND_OLD_IMAGES"),
        "{stderr}"
    );
    assert!(stderr.contains("must be moved"), "{stderr}");
    // Nothing was created.
    assert!(
        precise_ttl_dynamodb::TableShape::describe(&app.dynamo, &queue.name)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_splits_the_indexers_leases_and_indexes_each_change_once() {
    let (app, queue, leases, checkpoints) = set_up().await;
    let worker = |id: &str| {
        let more = ["--worker-id", id, "--lease-duration", "3s", "--for", "14s"];
        spawn_run(&app, &queue, &checkpoints, &leases, &more)
    };
    let (a, b) = (worker("a"), worker("b"));
    // Both hold some of the indexer's 16 buckets once the leases have settled.
    let both: std::collections::BTreeSet<_> = ["a".to_string(), "b".to_string()].into();
    let started = std::time::Instant::now();
    let (buckets, owners) = loop {
        let (buckets, owners) = indexer_owners(&app, &leases).await;
        if (buckets == 16 && owners == both) || started.elapsed().as_secs() >= 10 {
            break (buckets, owners);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(buckets, 16);
    assert_eq!(owners, both);
    for i in 0..40 {
        app.put(item(&format!("due-{i}"), &[("ttl", at(2_000))]))
            .await;
    }
    for i in 0..10 {
        app.put(item(&format!("later-{i}"), &[("ttl", at(3_600_000))]))
            .await;
    }
    // Stopped once every due item and its entry are gone (the runs' `--for` bounds the wait).
    let outs = stopped_once(vec![a, b], async || {
        app.count().await == 10 && queue.count().await == 10
    })
    .await;
    let mut written = 0;
    for stdout in outs {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix("indexer: entries written "))
            .unwrap_or_else(|| panic!("no indexer line: {stdout}"));
        written += line.split(',').next().unwrap().parse::<u64>().unwrap();
    }
    // Each change indexed by the one worker holding its stream shard's bucket (a bucket that
    // moved between the two would be read again from its checkpoint: more, never fewer).
    assert!((50..=100).contains(&written), "{written}");
    for i in 0..40 {
        assert!(app.get(&format!("due-{i}")).await.is_none(), "due-{i}");
    }
    assert_eq!(app.count().await, 10);
    assert_eq!(queue.count().await, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_due_before_their_entry_exists_go_once_it_is_read() {
    let (app, queue, leases, checkpoints) = set_up().await;
    let child = spawn_run(&app, &queue, &checkpoints, &leases, &["--for", "25s"]);
    // Written while the daemon runs (its indexer holds the stream's buckets), each already due
    // (long ago, a minute ago, just now) or due sooner than the indexer can write its entry.
    let started = std::time::Instant::now();
    while indexer_owners(&app, &leases).await.1.is_empty() {
        assert!(
            started.elapsed().as_secs() < 20,
            "the run never took its leases"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for (i, offset) in [-86_400_000, -60_000, -5_000, -1_000, 0, 100, 300]
        .iter()
        .enumerate()
    {
        for j in 0..10 {
            app.put(item(&format!("late-{i}-{j}"), &[("ttl", at(*offset))]))
                .await;
        }
    }
    // Stopped once both tables are empty, and a second later: nothing may come back.
    let empty = async || app.count().await == 0 && queue.count().await == 0;
    let stdout = stopped_once(vec![child], async || {
        empty().await && {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            empty().await
        }
    })
    .await
    .remove(0);
    assert_eq!(app.count().await, 0, "{stdout}");
    assert_eq!(queue.count().await, 0, "{stdout}");
}
