//! The stream-queue layout through the command line (issue 29): `setup`, `backfill`, `run` (its
//! indexer and daemon in one process, with leases), `status` and `doctor` on a table whose
//! writers set only the TTL, against DynamoDB Local.

use crate::support::{TestTable, at, item, n, precise_ttl, s};
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

/// An UpdateItem of `pk` with `expression` on `#a`, the attribute `attribute` (`:v` its value).
async fn update(
    app: &TestTable,
    pk: &str,
    attribute: &str,
    expression: &str,
    value: Option<AttributeValue>,
) {
    app.dynamo
        .write
        .update_item()
        .table_name(&app.name)
        .key("pk", s(pk))
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
    let out = queue_cmd("setup", &app, &queue, &lease_flag)
        .arg("--no-native-ttl")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(stdout.contains("turned the table's stream on"), "{stdout}");
    assert!(
        stdout.contains("created the expiry queue table"),
        "{stdout}"
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
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
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
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
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
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(stdout.contains("expiry queue"), "{stdout}");
    assert!(stdout.contains("indexer caught up"), "{stdout}");
    let out = queue_cmd("doctor", &app, &queue, &checkpoint_flag).assert();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
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
    precise_ttl_dynamodb::stream::enable_keys_stream(&app.dynamo, &app.name)
        .await
        .unwrap();
    let out = queue_cmd("setup", &app, &queue, &["--no-native-ttl"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
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
