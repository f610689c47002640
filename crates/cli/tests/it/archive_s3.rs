//! The `s3://` archive against a real local S3 server (moto, `scripts/s3-local`): objects are
//! listed and read back; they hold the same records as the file archive of the same stream;
//! a killed archiver's spool is uploaded by the next one under the same names; a bucket that
//! cannot be used is one line.

use crate::support::{
    archive_command, at, create_bucket, delete_table_if_any, item, later_items, n, precise_ttl, s3,
    s3_endpoint,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn temp(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("precise-ttl-{what}-{:016x}", fastrand::u64(..)))
}

async fn new_bucket() -> String {
    create_bucket(format!("precise-ttl-test-{:08x}", fastrand::u32(..))).await
}

/// Every object under `prefix/`, by key: its records (gunzipped when `.gz`), one per line.
async fn objects(bucket: &str, prefix: &str) -> BTreeMap<String, Vec<String>> {
    let client = s3().await;
    let listed = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(format!("{prefix}/"))
        .send()
        .await
        .expect("list objects");
    let mut out = BTreeMap::new();
    for object in listed.contents() {
        let key = object.key().unwrap().to_string();
        let body = client
            .get_object()
            .bucket(bucket)
            .key(&key)
            .send()
            .await
            .expect("get object")
            .body
            .collect()
            .await
            .unwrap()
            .into_bytes();
        let mut text = String::new();
        if key.ends_with(".gz") {
            std::io::Read::read_to_string(
                &mut flate2::read::MultiGzDecoder::new(&body[..]),
                &mut text,
            )
            .expect("gzip");
        } else {
            text = String::from_utf8(body.to_vec()).unwrap();
        }
        out.insert(key, text.lines().map(str::to_string).collect());
    }
    out
}

fn key_of(line: &str) -> String {
    let r: serde_json::Value = serde_json::from_str(line).expect("one JSON record per line");
    r["dynamodb"]["Keys"]["pk"]["S"]
        .as_str()
        .unwrap()
        .to_string()
}

fn file_lines(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            out.extend(text.lines().map(str::to_string));
        }
    }
    out
}

fn spooled_files(spool: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dest in std::fs::read_dir(spool).into_iter().flatten() {
        for f in std::fs::read_dir(dest.unwrap().path())
            .into_iter()
            .flatten()
        {
            out.push(f.unwrap().path());
        }
    }
    out
}

fn archive_child(table: &str, checkpoints: &str, to: &str, extra: &[&str]) -> std::process::Child {
    archive_command(table, checkpoints)
        .args(["--record-time-resolution", "1m", "--to", to])
        .args(["--archive-endpoint-url", s3_endpoint()])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

async fn table_with_due_items(count: i64) -> (crate::support::TestTable, BTreeSet<String>) {
    let table = crate::support::table_with_stream().await;
    let mut items = Vec::new();
    let mut due = BTreeSet::new();
    for i in 0..count {
        let key = format!("due-{i:03}");
        items.push(item(
            &key,
            &[("ttl", at(-5_000 - i)), ("ttl_shard", n(i % 16))],
        ));
        due.insert(key);
    }
    items.extend(later_items(3));
    table.put_many(items).await;
    (table, due)
}

/// `sweep --archive s3://` uploads one gzipped object holding exactly the deleted items and
/// leaves nothing in the spool; `archive` of the table's stream writes the same records to S3
/// as to a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_objects_hold_the_records_the_file_archive_holds() {
    let (table, due) = table_with_due_items(40).await;
    let bucket = new_bucket().await;
    let spool = temp("spool");
    precise_ttl()
        .args(["sweep", "--table", &table.name, "--archive"])
        .arg(format!("s3://{bucket}/inline"))
        .args(["--archive-endpoint-url", s3_endpoint(), "--archive-spool"])
        .arg(&spool)
        .assert()
        .success();
    let inline = objects(&bucket, "inline").await;
    assert_eq!(inline.len(), 1, "{inline:?}");
    let (name, lines) = inline.iter().next().unwrap();
    let file = name.strip_prefix("inline/precise-ttl-").expect(name);
    assert!(file.ends_with(".jsonl.gz"), "{name}");
    let inline_keys: BTreeSet<String> = lines.iter().map(|l| key_of(l)).collect();
    assert_eq!(inline_keys, due);
    assert_eq!(lines.len(), due.len(), "one record per item");
    assert!(
        spooled_files(&spool).is_empty(),
        "uploaded segments leave the spool"
    );

    // The same stream archived twice: to a folder and to S3.
    let dir = temp("archive");
    let (cp_file, cp_s3) = (
        format!("precise-ttl-test-cp-{:08x}", fastrand::u32(..)),
        format!("precise-ttl-test-cp-{:08x}", fastrand::u32(..)),
    );
    let to_file = archive_child(
        &table.name,
        &cp_file,
        &format!("file://{}", dir.display()),
        &[],
    );
    let spool_stream = temp("spool");
    let to_s3 = archive_child(
        &table.name,
        &cp_s3,
        &format!("s3://{bucket}/stream"),
        &["--archive-spool", spool_stream.to_str().unwrap()],
    );
    let started = Instant::now();
    while file_lines(&dir).len() < due.len() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the file archive did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The S3 archiver has read the same stream by now; give it a moment, then stop it: its
    // segment is uploaded on the way out.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for mut child in [to_file, to_s3] {
        crate::support::terminate(&child);
        assert!(child.wait().unwrap().success());
    }
    let from_file: BTreeSet<String> = file_lines(&dir).into_iter().collect();
    let from_s3: BTreeSet<String> = objects(&bucket, "stream")
        .await
        .into_values()
        .flatten()
        .collect();
    assert_eq!(from_s3.len(), due.len());
    assert_eq!(from_s3, from_file, "the same records, byte for byte");
    assert!(spooled_files(&spool_stream).is_empty());
    for path in [&dir, &spool, &spool_stream] {
        let _ = std::fs::remove_dir_all(path);
    }
    delete_table_if_any(&table.dynamo, &cp_file).await;
    delete_table_if_any(&table.dynamo, &cp_s3).await;
}

/// An archiver killed with records in its spool: nothing is in S3 yet; the next archiver on the
/// same spool uploads them under the segment's own name, so a retry overwrites, never duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_archivers_spool_is_uploaded_by_the_next_under_the_same_name() {
    let (table, due) = table_with_due_items(20).await;
    let bucket = new_bucket().await;
    let spool = temp("spool");
    let checkpoints = format!("precise-ttl-test-cp-{:08x}", fastrand::u32(..));
    let to = format!("s3://{bucket}/kill");
    let spool_arg = spool.to_str().unwrap().to_string();
    // Segments rotate hourly: the records stay spooled until the process ends.
    let tuning = [
        "--archive-spool",
        &spool_arg,
        "--archive-rotate-every",
        "1h",
    ];
    let mut first = archive_child(&table.name, &checkpoints, &to, &tuning);
    precise_ttl()
        .args(["sweep", "--table", &table.name])
        .assert()
        .success();
    let started = Instant::now();
    let segment = loop {
        let spooled = spooled_files(&spool);
        let lines: usize = spooled
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
            .sum();
        if lines >= due.len() {
            assert_eq!(spooled.len(), 1, "{spooled:?}");
            break spooled[0].clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "records never reached the spool"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    crate::support::signal(&first, nix::sys::signal::Signal::SIGKILL);
    let _ = first.wait();
    assert!(
        objects(&bucket, "kill").await.is_empty(),
        "nothing uploaded yet"
    );

    let next = archive_child(&table.name, &checkpoints, &to, &tuning);
    let stem = segment.file_stem().unwrap().to_string_lossy().into_owned();
    let expected = format!("kill/{stem}.jsonl.gz");
    let started = Instant::now();
    let uploaded = loop {
        let found = objects(&bucket, "kill").await;
        if found.contains_key(&expected) {
            break found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the dead archiver's segment was not uploaded: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let keys: BTreeSet<String> = uploaded[&expected].iter().map(|l| key_of(l)).collect();
    assert_eq!(keys, due);
    assert!(!segment.exists(), "an uploaded segment leaves the spool");
    crate::support::terminate(&next);
    let mut next = next;
    assert!(next.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&spool);
    delete_table_if_any(&table.dynamo, &checkpoints).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_that_cannot_be_used_is_one_line_and_nothing_is_deleted() {
    let (table, due) = table_with_due_items(5).await;
    let out = precise_ttl()
        .args(["sweep", "--table", &table.name, "--archive"])
        .arg("s3://precise-ttl-no-such-bucket/x")
        .args(["--archive-endpoint-url", s3_endpoint(), "--archive-spool"])
        .arg(temp("spool"))
        .assert()
        .failure();
    let err = crate::support::stderr_of(&out);
    assert!(err.contains("s3://precise-ttl-no-such-bucket/x"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(table.count().await, due.len() + 3, "nothing deleted");
}
