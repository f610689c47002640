//! The stream-queue layout's policies of deploy/iam/ (`<command>-stream-queue-policy.json`, issue
//! 29) are exactly what its commands call, proven as [`crate::iam`] proves the sharded layout's,
//! with its helpers: every command runs behind the recording proxy, each request must be allowed
//! by its command's policy, and each action of each statement must have been needed.
//!
//! The paths, on new tables so that each "create if missing" runs: `setup` of a bare table
//! without a stream (the stream turned on, the queue and lease tables created), with and without
//! native TTL; `backfill` of the items written since; `sweep` of them; `run` with leases (the
//! indexer beside the daemon, a new checkpoint table) deleting a backlog in PartiQL batches, then
//! with `--delete-mode single`; `status` with the leases and checkpoints `run` left; `doctor`.
//! The queue table keeps its default name, `<table>-precise-ttl-queue`, which the policies'
//! `TABLE-precise-ttl-queue` stands for.

use crate::iam::{Used, fill, temp};
use crate::recorder::Recorder;
use crate::support::{TestTable, at, endpoint, item, precise_ttl};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

const SETUP: &str = "setup-stream-queue-policy.json";
const BACKFILL: &str = "backfill-stream-queue-policy.json";
const SWEEP: &str = "sweep-stream-queue-policy.json";
const RUN: &str = "run-stream-queue-policy.json";
const STATUS: &str = "status-stream-queue-policy.json";
const DOCTOR: &str = "doctor-stream-queue-policy.json";

/// A bare application table and its queue table under the default name, which `setup` creates
/// and this guard deletes.
async fn app_and_queue() -> (TestTable, TestTable) {
    let app = TestTable::bare().await;
    let queue = TestTable::called(format!("{}-precise-ttl-queue", app.name));
    (app, queue)
}

/// `count` items of `prefix` that came due three seconds ago.
fn due(prefix: &str, count: usize) -> Vec<HashMap<String, AttributeValue>> {
    (0..count)
        .map(|i| item(&format!("{prefix}-{i}"), &[("ttl", at(-3_000))]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_queue_command_calls_exactly_what_its_policy_allows() {
    let rec = Recorder::start(endpoint()).await;
    // `precise-ttl <command> --table <table> --index-layout stream-queue`, through the proxy.
    let cmd = |command: &str, table: &str| {
        let mut c = precise_ttl();
        c.env("PRECISE_TTL_ENDPOINT_URL", &rec.url).args([
            command,
            "--table",
            table,
            "--index-layout",
            "stream-queue",
        ]);
        c
    };
    // Control tables of their own: created by the commands below, deleted at the end.
    let id = format!("{:08x}", fastrand::u32(..));
    let leases = TestTable::called(format!("precise-ttl-iam-q-leases-{id}"));
    let checkpoints = TestTable::called(format!("precise-ttl-iam-q-checkpoints-{id}"));
    let (app, queue) = app_and_queue().await;
    let t = app.name.clone();
    let filled = fill(
        &t,
        &[
            ("TABLE-precise-ttl-queue", queue.name.as_str()),
            ("precise-ttl-leases", leases.name.as_str()),
            ("precise-ttl-queue-checkpoints", checkpoints.name.as_str()),
        ],
    );
    let mut used = Used::default();
    let lease_flag = ["--lease-table", leases.name.as_str()];
    let checkpoint_flag = ["--indexer-checkpoint-table", checkpoints.name.as_str()];

    // setup of a bare table: its stream turned on, the queue and lease tables created. Native
    // TTL is left alone here so that `run` below, not DynamoDB Local's own TTL, deletes the
    // items; the second table's setup enables it.
    crate::queue_cli::made_the_stream_and_the_queue(
        cmd("setup", &t).args(lease_flag).arg("--no-native-ttl"),
    );
    used.check("setup", &rec.take(), &[SETUP], &filled);
    let (other, other_queue) = app_and_queue().await;
    cmd("setup", &other.name)
        .args(lease_flag)
        .assert()
        .success();
    used.check(
        "setup (native TTL)",
        &rec.take(),
        &[SETUP],
        &fill(
            &other.name,
            &[
                ("TABLE-precise-ttl-queue", other_queue.name.as_str()),
                ("precise-ttl-leases", leases.name.as_str()),
            ],
        ),
    );

    // backfill writes the entries of items already there; sweep deletes the due ones.
    app.put_many(due("swept", 3)).await;
    app.put(item("later", &[("ttl", at(3_600_000))])).await;
    let progress = temp("queue-backfill.json");
    let out = cmd("backfill", &t)
        .arg("--checkpoint")
        .arg(&progress)
        .assert()
        .success();
    let _ = std::fs::remove_file(&progress);
    let stdout = crate::support::stdout_of(&out);
    assert!(stdout.contains("queue entries written 4"), "{stdout}");
    used.check("backfill", &rec.take(), &[BACKFILL], &filled);
    cmd("sweep", &t).assert().success();
    assert_eq!(app.count().await, 1, "sweep deleted every due item");
    used.check("sweep", &rec.take(), &[SWEEP], &filled);

    // run with leases: the indexer queues the stream's inserts (a new checkpoint table), the
    // daemon deletes 40 items due at once in PartiQL batches and removes their entries.
    app.put_many(due("due", 40)).await;
    let run = |more: &[&str]| {
        let mut c = cmd("run", &t);
        c.args(lease_flag)
            .args(checkpoint_flag)
            .args(["--for", "9s", "--poll-interval", "200ms"])
            .args(["--indexer-poll-interval", "200ms"])
            .args(more);
        c
    };
    let out = run(&[]).assert().success();
    let stdout = crate::support::stdout_of(&out);
    assert_eq!(app.count().await, 1, "run deleted every due item: {stdout}");
    used.check("run", &rec.take(), &[RUN], &filled);
    // run deleting one item per DeleteItem, from the checkpoints the first run left.
    app.put_many(due("single", 3)).await;
    let out = run(&["--delete-mode", "single"]).assert().success();
    let stdout = crate::support::stdout_of(&out);
    assert_eq!(app.count().await, 1, "run deleted every due item: {stdout}");
    used.check("run --delete-mode single", &rec.take(), &[RUN], &filled);

    // status with the leases and checkpoints run left; doctor with the entry of "later" to
    // check against its item (exit 4: native TTL is off).
    cmd("status", &t)
        .args(lease_flag)
        .args(checkpoint_flag)
        .assert()
        .success();
    used.check("status", &rec.take(), &[STATUS], &filled);
    let doctor = cmd("doctor", &t).args(checkpoint_flag).output().unwrap();
    let stdout = String::from_utf8_lossy(&doctor.stdout).to_string();
    assert!(
        matches!(doctor.status.code(), Some(0 | 4)),
        "doctor: {stdout}{}",
        String::from_utf8_lossy(&doctor.stderr)
    );
    assert!(stdout.contains("have their item"), "{stdout}");
    used.check("doctor", &rec.take(), &[DOCTOR], &filled);

    used.assert_every_action_needed(&[SETUP, BACKFILL, SWEEP, RUN, STATUS, DOCTOR]);
}
