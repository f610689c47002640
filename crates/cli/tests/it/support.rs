//! Shared test bed: the DynamoDB Local instance, table guards and their reads, item writers and
//! the usual loads, hand-made table schemas, the commands the tests start and what they print;
//! in submodules, the local S3 server (`s3`), which heavy tests may run at once (`heavy`) and
//! what the fault proxy and the recorder are built on (`local_proxy`).

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, PutRequest, ScalarAttributeType, WriteRequest,
};
use precise_ttl_core::{ShardCount, Timestamp, TtlLayout};
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_engine::{Clock, SystemClock};
use precise_ttl_local::DynamoDbLocal;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

mod heavy;
mod local_proxy;
mod s3;
#[cfg(feature = "bench")]
pub use heavy::alone;
pub use heavy::{shared, shared_blocking};
pub use local_proxy::{LocalProxy, Serves};
pub use s3::{create_bucket, s3, s3_endpoint};

pub const ENDPOINT_ENV: &str = "PRECISE_TTL_TEST_ENDPOINT";

/// The endpoint of the shared DynamoDB Local. The instance lives as long as this process: its
/// launcher stops the JVM when our end of its stdin pipe closes at exit.
pub fn endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    static LOCAL: OnceLock<DynamoDbLocal> = OnceLock::new();
    ENDPOINT.get_or_init(|| match std::env::var(ENDPOINT_ENV) {
        Ok(url) if !url.is_empty() => url,
        _ => {
            let local = DynamoDbLocal::start().expect("DynamoDB Local starts");
            let url = local.endpoint().to_string();
            let _ = LOCAL.set(local);
            warm_up(&url);
            url
        }
    })
}

/// DynamoDB Local answers its first few thousand operations several times slower, before the JVM
/// has compiled its paths; on a loaded machine, tests that met a cold instance measured that (a
/// CI run had every batch of two racing daemons time out). So the shared instance first takes
/// 3 000 due items through `setup`, the index and `sweep`'s PartiQL batches, once per run.
fn warm_up(url: &str) {
    const ITEMS: i64 = 3_000;
    let table = format!("precise-ttl-warm-up-{:016x}", fastrand::u64(..));
    let binary = || {
        let mut cmd = assert_cmd::Command::cargo_bin("precise-ttl").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PRECISE_TTL_ENDPOINT_URL", url)
            .env("PRECISE_TTL_TABLE", &table)
            .timeout(std::time::Duration::from_secs(300));
        cmd
    };
    binary()
        .args(["setup", "--create-table", "--partition-key", "pk"])
        .args(["--no-native-ttl"])
        .assert()
        .success();
    let (url, name) = (url.to_string(), table.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let warm = TestTable {
                name,
                dynamo: Dynamo::local(&url),
            };
            let past = Timestamp::from_millis(now().as_millis() - 60_000);
            let items = (0..ITEMS)
                .map(|i| {
                    item(
                        &format!("warm-{i}"),
                        &[
                            ("ttl", n(past.to_epoch_seconds_text())),
                            ("ttl_shard", n(i % 16)),
                        ],
                    )
                })
                .collect();
            warm.put_many(items).await;
            // The table outlives this guard: `sweep` below still needs it.
            std::mem::forget(warm);
        });
    })
    .join()
    .expect("warm-up items written");
    binary().args(["sweep"]).assert().success();
}

pub fn dynamo() -> Dynamo {
    Dynamo::local(endpoint())
}

pub fn now() -> Timestamp {
    SystemClock.now()
}

pub fn layout(shards: u64) -> TtlLayout {
    TtlLayout {
        shards: ShardCount::new(shards).unwrap(),
        ..TtlLayout::default()
    }
}

/// Makes `table`'s expiry index for `layout` with the library's `setup`, native TTL left off
/// (DynamoDB Local would delete items itself; the tests check our deletes), the index polled for
/// every 100 ms.
pub async fn set_up_index(table: &TestTable, layout: &TtlLayout) {
    let options = precise_ttl_ops::SetupOptions {
        native_ttl: false,
        poll_interval: Duration::from_millis(100),
        ..precise_ttl_ops::SetupOptions::default()
    };
    precise_ttl_ops::setup::setup(&table.dynamo, &table.name, layout, &options)
        .await
        .expect("setup");
}

/// A table with a random name, deleted when dropped.
pub struct TestTable {
    pub name: String,
    pub dynamo: Dynamo,
}

impl TestTable {
    /// A bare table keyed by `pk` (S), without the expiry index.
    pub async fn bare() -> TestTable {
        Self::bare_with_key(&[("pk", ScalarAttributeType::S, KeyType::Hash)]).await
    }

    /// A bare table keyed by `pk` and `sk` (both S), without the expiry index.
    pub async fn bare_with_sort_key() -> TestTable {
        Self::bare_with_key(&[
            ("pk", ScalarAttributeType::S, KeyType::Hash),
            ("sk", ScalarAttributeType::S, KeyType::Range),
        ])
        .await
    }

    pub async fn bare_with_key(keys: &[(&str, ScalarAttributeType, KeyType)]) -> TestTable {
        let table = TestTable::named();
        let mut req = table
            .dynamo
            .query
            .create_table()
            .table_name(&table.name)
            .billing_mode(BillingMode::PayPerRequest);
        for (name, t, role) in keys {
            req = req
                .attribute_definitions(attribute_def(name, t.clone()))
                .key_schema(key_element(name, role.clone()));
        }
        req.send().await.expect("create table");
        table
    }

    /// A name only, for tests that let `setup --create-table` make it.
    pub fn named() -> TestTable {
        TestTable::called(format!("precise-ttl-test-{:016x}", fastrand::u64(..)))
    }

    /// The table `name`, made by the test's commands (leases, checkpoints) or by the test.
    pub fn called(name: String) -> TestTable {
        TestTable {
            name,
            dynamo: dynamo(),
        }
    }

    /// The table as DynamoDB describes it now.
    pub async fn describe(&self) -> aws_sdk_dynamodb::types::TableDescription {
        self.dynamo
            .query
            .describe_table()
            .table_name(&self.name)
            .send()
            .await
            .expect("describe the table")
            .table
            .expect("a table description")
    }

    /// Turns DynamoDB's own TTL on for `attribute` (DynamoDB Local then deletes expired items too).
    pub async fn enable_native_ttl(&self, attribute: &str) {
        self.dynamo
            .query
            .update_time_to_live()
            .table_name(&self.name)
            .time_to_live_specification(
                aws_sdk_dynamodb::types::TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name(attribute)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .expect("update time to live");
    }

    pub async fn put(&self, item: HashMap<String, AttributeValue>) {
        self.dynamo
            .write
            .put_item()
            .table_name(&self.name)
            .set_item(Some(item))
            .send()
            .await
            .expect("put item");
    }

    /// Writes `items` in batches of 25, four batches in flight: planting tens of thousands of
    /// items waits on round trips, not on DynamoDB Local's one writer.
    pub async fn put_many(&self, items: Vec<HashMap<String, AttributeValue>>) {
        const IN_FLIGHT: usize = 4;
        for window in items.chunks(25 * IN_FLIGHT) {
            let mut batches = tokio::task::JoinSet::new();
            for chunk in window.chunks(25) {
                let requests: Vec<_> = chunk
                    .iter()
                    .map(|i| {
                        WriteRequest::builder()
                            .put_request(
                                PutRequest::builder()
                                    .set_item(Some(i.clone()))
                                    .build()
                                    .unwrap(),
                            )
                            .build()
                    })
                    .collect();
                let batch = self
                    .dynamo
                    .write
                    .batch_write_item()
                    .request_items(&self.name, requests);
                batches.spawn(batch.send());
            }
            while let Some(sent) = batches.join_next().await {
                sent.expect("a batch write's task").expect("batch write");
            }
        }
    }

    /// An UpdateItem of the item `pk`, for the test to shape and send.
    pub fn update(
        &self,
        pk: &str,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        update_item(&self.dynamo, &self.name, pk)
    }

    /// Deletes the item `pk`, as an application does (not an expiry).
    pub async fn delete(&self, pk: &str) {
        self.dynamo
            .write
            .delete_item()
            .table_name(&self.name)
            .key("pk", s(pk))
            .send()
            .await
            .expect("delete an item");
    }

    pub async fn get(&self, pk: &str) -> Option<HashMap<String, AttributeValue>> {
        self.dynamo
            .query
            .get_item()
            .table_name(&self.name)
            .key("pk", s(pk))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }

    /// How many of these partition keys are in the table: 100 per request, so polling a test's
    /// keys does not load DynamoDB Local as one read per key would.
    pub async fn present(&self, pks: &[String]) -> usize {
        let mut found = 0;
        for chunk in pks.chunks(100) {
            let mut keys: Vec<HashMap<String, AttributeValue>> = chunk
                .iter()
                .map(|pk| HashMap::from([("pk".to_string(), s(pk))]))
                .collect();
            while !keys.is_empty() {
                let request = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .projection_expression("pk")
                    .build()
                    .expect("keys are set");
                let out = self
                    .dynamo
                    .query
                    .batch_get_item()
                    .request_items(&self.name, request)
                    .send()
                    .await
                    .expect("batch get");
                found += out
                    .responses
                    .as_ref()
                    .and_then(|r| r.get(&self.name))
                    .map_or(0, Vec::len);
                keys = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.name))
                    .map(|k| k.keys)
                    .unwrap_or_default();
            }
        }
        found
    }

    pub async fn count(&self) -> usize {
        let mut total = 0;
        self.scan_all(
            |scan| scan.select(aws_sdk_dynamodb::types::Select::Count),
            |page| total += page.count as usize,
        )
        .await;
        total
    }

    /// Waits until at most `left` items remain; fails with `what` after `within_s` seconds. The
    /// count is a Scan: read every 200 ms, often enough for waits of seconds, and rarely
    /// enough not to slow the daemons under test down.
    pub async fn drains_to(&self, left: usize, within_s: u64, what: &str) {
        let started = std::time::Instant::now();
        while self.count().await > left {
            assert!(started.elapsed() < Duration::from_secs(within_s), "{what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A Scan of the table, for the test to shape and send.
    pub fn scan(&self) -> aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder {
        self.dynamo.query.scan().table_name(&self.name)
    }

    /// A consistent Query of the table, for the test to shape and send.
    pub fn query(&self) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.dynamo
            .query
            .query()
            .table_name(&self.name)
            .consistent_read(true)
    }

    /// Scans the whole table page by page: `shape` adds to each page's request (a projection,
    /// a count), `each` takes each page.
    pub async fn scan_all(
        &self,
        shape: impl Fn(
            aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder,
        ) -> aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder,
        mut each: impl FnMut(aws_sdk_dynamodb::operation::scan::ScanOutput),
    ) {
        let mut start = None;
        loop {
            let page = shape(self.scan())
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            start = page.last_evaluated_key.clone();
            each(page);
            if start.is_none() {
                return;
            }
        }
    }
}

impl Drop for TestTable {
    fn drop(&mut self) {
        let name = self.name.clone();
        let endpoint = endpoint().to_string();
        // Drop cannot await, and the test's runtime may be shutting down: use a thread of our own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(delete_table_if_any(&Dynamo::local(&endpoint), &name));
        })
        .join();
    }
}

/// Deletes table `name` if it is there: the tables a test's commands make besides its
/// [`TestTable`] (checkpoints, leases). Best effort, as at the end of a test that passed.
pub async fn delete_table_if_any(dynamo: &Dynamo, name: &str) {
    let _ = dynamo.query.delete_table().table_name(name).send().await;
}

/// An UpdateItem of the item `pk` of `table`, for the test to shape and send.
pub fn update_item(
    dynamo: &Dynamo,
    table: &str,
    pk: &str,
) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
    dynamo
        .write
        .update_item()
        .table_name(table)
        .key("pk", s(pk))
}

/// Sets the TTL of the item `pk` of `table` to `ttl`, as a writer extending it does.
pub async fn set_ttl(dynamo: &Dynamo, table: &str, pk: &str, ttl: AttributeValue) {
    update_item(dynamo, table, pk)
        .update_expression("SET #t = :t")
        .expression_attribute_names("#t", "ttl")
        .expression_attribute_values(":t", ttl)
        .send()
        .await
        .expect("set the TTL");
}

/// Items `{prefix}-{i}` for each `i` of `range`, each due `offset_ms(i)` from now on shard
/// `i % 16`: the load of most tests, for [`TestTable::put_many`].
pub fn due_items(
    prefix: &str,
    range: std::ops::Range<i64>,
    offset_ms: impl Fn(i64) -> i64,
) -> Vec<HashMap<String, AttributeValue>> {
    range
        .map(|i| {
            item(
                &format!("{prefix}-{i}"),
                &[("ttl", at(offset_ms(i))), ("ttl_shard", n(i % 16))],
            )
        })
        .collect()
}

/// `count` items that are not due for ten minutes, `later-0` up, on shards 0 to 15: what a
/// test's commands must leave alone.
pub fn later_items(count: i64) -> Vec<HashMap<String, AttributeValue>> {
    due_items("later", 0..count, |_| 600_000)
}

pub fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

pub fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

// The schema pieces of the tables that tests create by hand (the ones `setup` refuses, or that
// must exist before it runs): the SDK's builders take four lines for each, and only fail on a
// missing name, which these always give.

/// The definition of attribute `name`, of type `t`.
pub fn attribute_def(name: &str, t: ScalarAttributeType) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(t)
        .build()
        .unwrap()
}

/// `name` as a key of a table or index, in `role` (hash or range).
pub fn key_element(name: &str, role: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(role)
        .build()
        .unwrap()
}

/// The projection of the expiry index: keys only.
pub fn keys_only() -> Projection {
    Projection::builder()
        .projection_type(ProjectionType::KeysOnly)
        .build()
}

/// A keys-only index `name` with `hash` and `range` as its key, as `setup` makes the expiry
/// index (the caller defines the two attributes).
pub fn keys_only_index(name: &str, hash: &str, range: &str) -> GlobalSecondaryIndex {
    GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key_element(hash, KeyType::Hash))
        .key_schema(key_element(range, KeyType::Range))
        .projection(keys_only())
        .build()
        .unwrap()
}

/// Creates `table` (on demand) keyed by `pk` (S), with a keys-only index `precise-ttl` on
/// (`partition` of type `t`, `ttl` N): the layout `setup` makes, made by hand, so that `setup`
/// meets it as an existing table, or so that it can stand before any `setup` runs.
pub async fn create_indexed_table(
    dynamo: &Dynamo,
    table: &str,
    partition: &str,
    t: ScalarAttributeType,
) {
    dynamo
        .query
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute_def("pk", ScalarAttributeType::S))
        .attribute_definitions(attribute_def(partition, t))
        .attribute_definitions(attribute_def("ttl", ScalarAttributeType::N))
        .key_schema(key_element("pk", KeyType::Hash))
        .global_secondary_indexes(keys_only_index("precise-ttl", partition, "ttl"))
        .send()
        .await
        .expect("create a table with an index");
}

/// An item keyed by `pk` with the given extra attributes.
pub fn item(pk: &str, attrs: &[(&str, AttributeValue)]) -> HashMap<String, AttributeValue> {
    let mut m = HashMap::from([("pk".to_string(), s(pk))]);
    for (k, v) in attrs {
        m.insert((*k).to_string(), v.clone());
    }
    m
}

/// A command for the built binary, pointed at the shared DynamoDB Local.
pub fn precise_ttl() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("precise-ttl").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PRECISE_TTL_ENDPOINT_URL", endpoint())
        .timeout(std::time::Duration::from_secs(120));
    cmd
}

/// What a finished command wrote on standard output, as text.
pub fn stdout_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

/// What a finished command wrote on standard error, as text.
pub fn stderr_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

/// A finished command's standard output, read as one JSON value (`--json`).
pub fn json_of(out: &assert_cmd::assert::Assert) -> serde_json::Value {
    serde_json::from_slice(&out.get_output().stdout).expect("JSON on standard output")
}

/// `precise-ttl <command> --table <table> --json`, which must succeed: its JSON report.
pub fn json_report(command: &str, table: &TestTable) -> serde_json::Value {
    json_of(
        &precise_ttl()
            .args([command, "--table", &table.name, "--json"])
            .assert()
            .success(),
    )
}

/// `precise-ttl archive` of `table`'s stream on the shared DynamoDB Local, checkpointed in
/// `checkpoints` and polling every 200 ms: the tests add where it writes and what its output
/// goes to.
pub fn archive_command(table: &str, checkpoints: &str) -> std::process::Command {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"));
    command
        .args(["archive", "--table", table, "--endpoint-url", endpoint()])
        .args(["--checkpoint-table", checkpoints])
        .args(["--poll-interval", "200ms"]);
    command
}

/// A TTL `offset_ms` from now, as a DynamoDB Number.
pub fn at(offset_ms: i64) -> AttributeValue {
    n(Timestamp::from_millis(now().as_millis() + offset_ms).to_epoch_seconds_text())
}

/// `precise-ttl setup --create-table` of `table` keyed by `partition_key` (`pk`, `pk:S`),
/// native TTL left off; it must succeed, and the caller may check what it printed.
pub fn create_with_setup(table: &TestTable, partition_key: &str) -> assert_cmd::assert::Assert {
    precise_ttl()
        .args(["setup", "--table", &table.name, "--create-table"])
        .args(["--partition-key", partition_key, "--no-native-ttl"])
        .assert()
        .success()
}

/// A new table with the expiry index, made by `precise-ttl setup --create-table`.
pub async fn table_with_index() -> TestTable {
    let table = TestTable::named();
    create_with_setup(&table, "pk");
    table
}

/// [`table_with_index`], then a stream with old images (`setup --stream`), for the archive's
/// tests.
pub async fn table_with_stream() -> TestTable {
    let table = table_with_index().await;
    precise_ttl()
        .args([
            "setup",
            "--table",
            &table.name,
            "--no-native-ttl",
            "--stream",
        ])
        .assert()
        .success();
    table
}

/// SIGTERM, as a service manager stops the daemon.
pub fn terminate(child: &std::process::Child) {
    signal(child, nix::sys::signal::Signal::SIGTERM);
}

/// Sends `signal`; a child that already exited is not an error (its wait says how it ended).
pub fn signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid fits i32"));
    let _ = nix::sys::signal::kill(pid, signal);
}

/// With `PRECISE_TTL_ARTIFACT_DIR` set, writes `<dir>/<name>.json`: the figures a test
/// measured, the revision it ran from and the command that reruns it, so a figure quoted in the
/// docs can be traced (`PRECISE_TTL_ARTIFACT_DIR=docs/bench cargo test -p precise-ttl-cli --test
/// it -- <test>`, a relative folder taken from the checkout's root). Without it, nothing is
/// written.
pub fn artifact(name: &str, test: &str, figures: serde_json::Value) {
    let Some(dir) = std::env::var_os("PRECISE_TTL_ARTIFACT_DIR") else {
        return;
    };
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // Tests run in the crate's folder; a relative folder means one in the checkout's root.
    let root = checkout.join("../..");
    let dir = match std::path::Path::new(&dir) {
        d if d.is_relative() => root.join(d),
        d => d.to_path_buf(),
    };
    let shown = std::env::var("PRECISE_TTL_ARTIFACT_DIR").unwrap_or_default();
    // The bench's tests (`crash_loop`) are in the test binary only with the `bench` feature.
    let features = if cfg!(feature = "bench") {
        " --features bench"
    } else {
        ""
    };
    let json = serde_json::json!({
        "name": name,
        "revision": precise_ttl_bench_driver::Revision::of_checkout(checkout),
        "command": format!(
            "PRECISE_TTL_ARTIFACT_DIR={shown} cargo test -p precise-ttl-cli{features} --test it -- {test} --exact"
        ),
        "daemon_build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "figures": figures,
    });
    let path = std::path::Path::new(&dir).join(format!("{name}.json"));
    std::fs::create_dir_all(&dir).expect("artifact folder");
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap() + "\n")
        .expect("write the artifact");
}
