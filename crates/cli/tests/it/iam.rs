//! Each policy of deploy/iam/ is exactly what its command calls: every command runs through its
//! real paths against DynamoDB Local (and the local S3 server for `s3://` archives) behind a
//! recording proxy ([`crate::recorder`]); every request it made must be allowed by its policy
//! (action, resource and `dynamodb:LeadingKeys` condition, [`crate::iam_policy`]), and every
//! action of every policy statement must have been needed by some request: a policy that
//! allows more than the command calls fails as surely as one that allows less.
//!
//! The paths: `setup` creating a table with its stream and the lease table, and adding the index
//! to a bare table with native TTL; `run` with leases, PartiQL batch deletes and an `s3://`
//! archive, then with `--delete-mode single`; `sweep`; `status` with leases; `doctor`;
//! `backfill`; `archive` to `file://` and to `s3://`, each creating its checkpoint table. Every
//! table and bucket is new, so each "create if missing" path runs.

use crate::iam_policy::{Statement, allowing, needs, policy};
use crate::recorder::{Recorder, Request};
use crate::support::{
    TestTable, at, create_bucket, due_items, endpoint, item, n, precise_ttl, s3_endpoint, terminate,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The (statement, action) pairs of each policy file that some request needed.
#[derive(Default)]
pub(crate) struct Used(BTreeMap<&'static str, BTreeSet<(String, String)>>);

impl Used {
    /// Fails unless every action of every statement of `files` was needed by some request
    /// [`check`] saw: a policy that allows more than its command calls is as wrong as one that
    /// allows less.
    pub(crate) fn assert_every_action_needed(&self, files: &[&'static str]) {
        let mut unused = Vec::new();
        for file in files {
            for statement in policy(file, &BTreeMap::new()) {
                for action in &statement.actions {
                    let pair = (statement.sid.clone(), action.clone());
                    if !self.0.get(file).is_some_and(|u| u.contains(&pair)) {
                        unused.push(format!("{file}: {} {action}", statement.sid));
                    }
                }
            }
        }
        assert!(
            unused.is_empty(),
            "policy actions no command path needed: {unused:#?}"
        );
    }
}

impl Used {
    /// Checks that `policies` (together) allow every request `command` made, and notes which
    /// of their actions the requests needed.
    pub(crate) fn check(
        &mut self,
        command: &str,
        requests: &[Request],
        policies: &[&'static str],
        fill: &BTreeMap<&str, String>,
    ) {
        assert!(!requests.is_empty(), "`{command}`: no request recorded");
        let docs: Vec<(&'static str, Vec<Statement>)> =
            policies.iter().map(|f| (*f, policy(f, fill))).collect();
        let mut missing = BTreeSet::new();
        for request in requests {
            for need in needs(request) {
                let found = docs.iter().find_map(|(file, statements)| {
                    allowing(statements, &need)
                        .map(|(sid, action)| (*file, sid.to_string(), action))
                });
                match found {
                    Some((file, sid, action)) => {
                        self.0.entry(file).or_default().insert((sid, action));
                    }
                    None => {
                        missing.insert(need.to_string());
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "`{command}` made calls {policies:?} does not allow: {missing:#?}"
        );
    }

    /// [`Used::check`] of a command that writes to S3 too: its DynamoDB requests (`rec`) and
    /// its S3 requests (`s3`), each against the same `policies`.
    fn check_with_s3(
        &mut self,
        command: &str,
        (rec, s3): (&Recorder, &Recorder),
        policies: &[&'static str],
        fill: &BTreeMap<&str, String>,
    ) {
        self.check(command, &rec.take(), policies, fill);
        self.check(&format!("{command} (S3)"), &s3.take(), policies, fill);
    }
}

/// The placeholders of deploy/iam/ for this test: any region and account, `TABLE` as `table`,
/// and each `extra` (a control table's default name, `BUCKET`) as the test's own value.
pub(crate) fn fill(table: &str, extra: &[(&'static str, &str)]) -> BTreeMap<&'static str, String> {
    let mut map = BTreeMap::from([
        ("REGION", "*".to_string()),
        ("ACCOUNT", "*".to_string()),
        ("TABLE", table.to_string()),
    ]);
    for (k, v) in extra {
        map.insert(*k, (*v).to_string());
    }
    map
}

pub(crate) fn temp(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("precise-ttl-iam-{what}-{:016x}", fastrand::u64(..)))
}

/// Whether any file under `dir` has content (a spooled segment, an archive file).
fn holds_records(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let path = e.path();
            if path.is_dir() {
                holds_records(&path)
            } else {
                e.metadata().is_ok_and(|m| m.len() > 0)
            }
        })
}

/// `archive` of `table` through `rec` to `to`, checkpointed in `checkpoints`, with `extra`
/// arguments, until `dir` holds records and their checkpoint was saved (at most 60 s), then
/// stopped as a service manager stops it; it must exit 0.
async fn archive_until_checkpointed(
    rec: &Recorder,
    table: &str,
    (to, checkpoints): (&str, &str),
    extra: &[&str],
    dir: &Path,
) {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["archive", "--poll-interval", "200ms"])
        .args(["--endpoint-url", &rec.url, "--table", table, "--to", to])
        .args(["--checkpoint-table", checkpoints])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(holds_records(dir) && rec.saw("PutItem")) && started.elapsed() < Duration::from_secs(60)
    {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("archive exited early ({status})");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(holds_records(dir), "archive wrote no record within 60 s");
    terminate(&child);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "archive: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_calls_exactly_what_its_policy_allows() {
    let rec = Recorder::start(endpoint()).await;
    let s3rec = Recorder::start(s3_endpoint()).await;
    let cmd = || {
        let mut c = precise_ttl();
        c.env("PRECISE_TTL_ENDPOINT_URL", &rec.url);
        c
    };
    // Control tables of their own: each "create if missing" path runs, and they go at the end.
    let id = format!("{:08x}", fastrand::u32(..));
    let leases = TestTable::called(format!("precise-ttl-iam-leases-{id}"));
    let file_checkpoints = TestTable::called(format!("precise-ttl-iam-checkpoints-file-{id}"));
    let s3_checkpoints = TestTable::called(format!("precise-ttl-iam-checkpoints-s3-{id}"));
    let bucket = create_bucket(format!("precise-ttl-iam-{id}")).await;
    let prefix = "expiries";
    let s3_url = format!("s3://{bucket}/{prefix}");
    let mut used = Used::default();
    let lease_fill = [("precise-ttl-leases", leases.name.as_str())];

    // setup: a new table with its stream (native TTL left alone, so that the items below are
    // deleted by `run`, not by DynamoDB Local's own TTL), and the lease table.
    let table = TestTable::named();
    let t = table.name.clone();
    // The policies filled in for the table alone (no lease, checkpoint or S3 names).
    let table_only = fill(&t, &[]);
    cmd()
        .args([
            "setup",
            "--table",
            &t,
            "--create-table",
            "--partition-key",
            "pk",
        ])
        .args(["--stream", "--no-native-ttl", "--lease-table", &leases.name])
        .assert()
        .success();
    used.check(
        "setup --create-table --stream",
        &rec.take(),
        &["setup-policy.json"],
        &fill(&t, &lease_fill),
    );
    // setup of a bare table: the index added, native TTL enabled.
    let bare = TestTable::bare().await;
    cmd()
        .args([
            "setup",
            "--table",
            &bare.name,
            "--lease-table",
            &leases.name,
        ])
        .assert()
        .success();
    used.check(
        "setup",
        &rec.take(),
        &["setup-policy.json"],
        &fill(&bare.name, &lease_fill),
    );

    // `run` with the lease table, for six seconds: the rest of its command line varies.
    let run_for_6s = || {
        let mut c = cmd();
        c.args(["run", "--table", &t, "--lease-table", &leases.name])
            .args(["--for", "6s"]);
        c
    };

    // run with leases, PartiQL batches (40 items due at once) and an s3:// archive.
    let due = |from: i64, count: i64| due_items("due", from..from + count, |_| -3_000);
    table.put_many(due(0, 40)).await;
    table
        .put(item(
            "later",
            &[("ttl", at(3_600_000)), ("ttl_shard", n(3))],
        ))
        .await;
    let spool = temp("spool");
    let s3_fill = [("BUCKET", bucket.as_str()), ("PREFIX", prefix)];
    let run_fill: Vec<_> = lease_fill.iter().chain(&s3_fill).copied().collect();
    run_for_6s()
        .args([
            "--archive",
            &s3_url,
            "--archive-endpoint-url",
            &s3rec.url,
            "--archive-spool",
        ])
        .arg(&spool)
        .assert()
        .success();
    assert_eq!(table.count().await, 1, "run deleted every due item");
    let both = ["run-policy.json", "s3-archive-policy.json"];
    used.check_with_s3(
        "run --archive s3://",
        (&rec, &s3rec),
        &both,
        &fill(&t, &run_fill),
    );

    // run deleting one item per DeleteItem.
    table.put_many(due(100, 3)).await;
    run_for_6s()
        .args(["--delete-mode", "single"])
        .assert()
        .success();
    assert_eq!(table.count().await, 1, "run deleted every due item");
    used.check(
        "run --delete-mode single",
        &rec.take(),
        &["run-policy.json"],
        &fill(&t, &lease_fill),
    );

    // sweep, status (with the leases `run` left), doctor.
    table.put_many(due(200, 2)).await;
    cmd().args(["sweep", "--table", &t]).assert().success();
    used.check("sweep", &rec.take(), &["sweep-policy.json"], &table_only);
    cmd()
        .args(["status", "--table", &t, "--lease-table", &leases.name])
        .assert()
        .success();
    used.check(
        "status",
        &rec.take(),
        &["status-policy.json"],
        &fill(&t, &lease_fill),
    );
    // Exit 4: doctor finds native TTL off (and the item without a shard below, later).
    table.put(item("no-shard", &[("ttl", at(3_600_000))])).await;
    let doctor = cmd().args(["doctor", "--table", &t]).output().unwrap();
    assert!(
        matches!(doctor.status.code(), Some(0 | 4)),
        "doctor: {}",
        String::from_utf8_lossy(&doctor.stderr)
    );
    used.check("doctor", &rec.take(), &["doctor-policy.json"], &table_only);

    // backfill: the item without a shard gets one.
    let progress = temp("backfill.json");
    cmd()
        .args(["backfill", "--table", &t, "--checkpoint"])
        .arg(&progress)
        .assert()
        .success();
    let _ = std::fs::remove_file(&progress);
    used.check(
        "backfill",
        &rec.take(),
        &["backfill-policy.json"],
        &table_only,
    );

    // archive of the stream's expiries, to a folder and to S3.
    let dir = temp("archive");
    let to = format!("file://{}", dir.display());
    let file_archive = (to.as_str(), file_checkpoints.name.as_str());
    archive_until_checkpointed(&rec, &t, file_archive, &[], &dir).await;
    let checkpoints = [(
        "precise-ttl-archive-checkpoints",
        file_checkpoints.name.as_str(),
    )];
    used.check(
        "archive --to file://",
        &rec.take(),
        &["archive-policy.json"],
        &fill(&t, &checkpoints),
    );
    let spool_stream = temp("spool");
    let s3_archive = (s3_url.as_str(), s3_checkpoints.name.as_str());
    let to_s3 = [
        "--archive-endpoint-url",
        s3rec.url.as_str(),
        "--archive-spool",
        spool_stream.to_str().unwrap(),
    ];
    archive_until_checkpointed(&rec, &t, s3_archive, &to_s3, &spool_stream).await;
    let archive_fill: Vec<_> = [(
        "precise-ttl-archive-checkpoints",
        s3_checkpoints.name.as_str(),
    )]
    .iter()
    .chain(&s3_fill)
    .copied()
    .collect();
    let both = ["archive-policy.json", "s3-archive-policy.json"];
    used.check_with_s3(
        "archive --to s3://",
        (&rec, &s3rec),
        &both,
        &fill(&t, &archive_fill),
    );
    for path in [&dir, &spool, &spool_stream] {
        let _ = std::fs::remove_dir_all(path);
    }

    // No statement allows an action that no path above needed.
    used.assert_every_action_needed(&[
        "setup-policy.json",
        "run-policy.json",
        "sweep-policy.json",
        "status-policy.json",
        "doctor-policy.json",
        "backfill-policy.json",
        "archive-policy.json",
        "s3-archive-policy.json",
    ]);
}
