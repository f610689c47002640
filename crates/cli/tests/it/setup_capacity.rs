//! The expiry index's capacity on provisioned tables, against DynamoDB Local: `setup` stops,
//! changing nothing, until the capacity is chosen, then gives the index exactly that and prints
//! the plan; `doctor` warns when the index's writes fall short of the items due soon.

use crate::support::{
    TestTable, at, attribute_def, delete_table_if_any, item, key_element, n, precise_ttl,
};
use aws_sdk_dynamodb::types::{BillingMode, KeyType, ProvisionedThroughput, ScalarAttributeType};
use precise_ttl_core::ShardCount;
use std::process::Output;

/// A provisioned table keyed by `pk` (S) with `read` and `write` units, without the index.
async fn provisioned_table(read: i64, write: i64) -> TestTable {
    let table = TestTable::named();
    table
        .dynamo
        .query
        .create_table()
        .table_name(&table.name)
        .billing_mode(BillingMode::Provisioned)
        .attribute_definitions(attribute_def("pk", ScalarAttributeType::S))
        .key_schema(key_element("pk", KeyType::Hash))
        .provisioned_throughput(
            ProvisionedThroughput::builder()
                .read_capacity_units(read)
                .write_capacity_units(write)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("create provisioned table");
    table
}

/// The index's provisioned (read, write), `None` when the table has no index of that name.
async fn index_capacity(table: &TestTable) -> Option<(i64, i64)> {
    table
        .describe()
        .await
        .global_secondary_indexes()
        .iter()
        .find(|g| g.index_name() == Some("precise-ttl"))
        .map(|g| {
            let p = g.provisioned_throughput().unwrap();
            (
                p.read_capacity_units().unwrap(),
                p.write_capacity_units().unwrap(),
            )
        })
}

async fn native_ttl_status(table: &TestTable) -> String {
    table
        .dynamo
        .query
        .describe_time_to_live()
        .table_name(&table.name)
        .send()
        .await
        .unwrap()
        .time_to_live_description()
        .and_then(|d| d.time_to_live_status())
        .map(|s| s.as_str().to_string())
        .unwrap_or_default()
}

async fn table_exists(table: &TestTable, name: &str) -> bool {
    table
        .dynamo
        .query
        .describe_table()
        .table_name(name)
        .send()
        .await
        .is_ok()
}

fn setup(table: &str, extra: &[&str]) -> Output {
    let out = precise_ttl()
        .args(["setup", "--table", table])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_on_a_provisioned_table_stops_until_the_index_capacity_is_chosen() {
    let table = provisioned_table(20, 30).await;
    let leases = format!("{}-leases", table.name);

    let refused = setup(&table.name, &["--lease-table", &leases]);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.lines().count(),
        2,
        "one error line and one hint: {stderr}"
    );
    assert!(
        stderr.contains("is provisioned (20 read, 30 write units/s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Suggested: 30 write units") && stderr.contains("and 16 read units"),
        "{stderr}"
    );
    assert!(
        stderr.contains("pass --index-read-capacity 16 --index-write-capacity 30"),
        "{stderr}"
    );
    assert!(
        text(&refused.stdout).is_empty(),
        "{}",
        text(&refused.stdout)
    );
    // Nothing changed: no index, native TTL off, no lease table.
    assert_eq!(index_capacity(&table).await, None);
    assert_eq!(native_ttl_status(&table).await, "DISABLED");
    assert!(!table_exists(&table, &leases).await);

    // One of the two flags alone is bad usage.
    let half = setup(&table.name, &["--index-write-capacity", "7"]);
    assert_eq!(half.status.code(), Some(2), "{}", text(&half.stderr));
    let zero = setup(
        &table.name,
        &["--index-read-capacity", "0", "--index-write-capacity", "7"],
    );
    assert_eq!(zero.status.code(), Some(2), "{}", text(&zero.stderr));
    assert_eq!(index_capacity(&table).await, None);

    // `setup` with the index capacity given; it must succeed: what it printed.
    let with_capacity = |read: &str, write: &str| {
        let out = setup(
            &table.name,
            &["--lease-table", &leases, "--index-read-capacity", read]
                .into_iter()
                .chain(["--index-write-capacity", write])
                .collect::<Vec<_>>(),
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let stdout = with_capacity("3", "7");
    assert_eq!(index_capacity(&table).await, Some((3, 7)));
    let plan: Vec<&str> = stdout.lines().take(2).collect();
    assert!(
        plan[0].starts_with("index capacity: ")
            && plan[0].contains("gets 3 read and 7 write units/s")
            && plan[0].contains("the table's 20 read and 30 write"),
        "{stdout}"
    );
    let resource = format!("table/{}/index/precise-ttl", table.name);
    assert!(
        plan[1].starts_with("auto scaling: ")
            && plan[1].contains("dynamodb:index:ReadCapacityUnits")
            && plan[1].contains(&format!(
                "aws application-autoscaling register-scalable-target --service-namespace dynamodb --resource-id {resource} --scalable-dimension dynamodb:index:WriteCapacityUnits --min-capacity 7 --max-capacity 28"
            )),
        "{stdout}"
    );
    // The plan comes before what setup did.
    assert!(
        stdout.find("register-scalable-target") < stdout.find("added the expiry index"),
        "{stdout}"
    );
    assert_eq!(native_ttl_status(&table).await, "ENABLED");

    // Again: the index is there, needs no flags, and keeps its capacity even if others are given.
    let again = setup(&table.name, &["--lease-table", &leases]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("nothing changed"));
    let stdout = with_capacity("50", "50");
    assert!(
        stdout.contains("exists with 3 read and 7 write units/s; setup leaves it as it is"),
        "{stdout}"
    );
    assert_eq!(index_capacity(&table).await, Some((3, 7)));
    delete_table_if_any(&table.dynamo, &leases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_capacity_on_an_on_demand_table_is_refused() {
    let table = TestTable::bare().await;
    let refused = setup(
        &table.name,
        &["--index-read-capacity", "5", "--index-write-capacity", "5"],
    );
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is on demand"), "{stderr}");
    assert!(
        stderr.contains("leave out --index-read-capacity and --index-write-capacity"),
        "{stderr}"
    );
    assert_eq!(index_capacity(&table).await, None);
    assert_eq!(native_ttl_status(&table).await, "DISABLED");

    // A table --create-table would make is on demand too: refused before it is created.
    let named = TestTable::named();
    let refused = setup(
        &named.name,
        &[
            "--create-table",
            "--partition-key",
            "pk",
            "--index-read-capacity",
            "5",
            "--index-write-capacity",
            "5",
        ],
    );
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("would be created on demand"), "{stderr}");
    assert!(!table_exists(&named, &named.name).await);
}

/// A provisioned table whose index has `write` units, with 300 items due 20 to 50 s from now
/// (5/s over the next minute: the index needs about 10 write units).
async fn table_with_items_due_soon(write: &str) -> TestTable {
    let table = provisioned_table(10, 100).await;
    let out = setup(
        &table.name,
        &[
            "--index-read-capacity",
            "10",
            "--index-write-capacity",
            write,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shards = ShardCount::new(16).unwrap();
    let items = (0..300)
        .map(|i| {
            let pk = format!("due-{i:04}");
            let shard = shards.shard_for_key(pk.as_bytes()).0;
            item(
                &pk,
                &[("ttl", at(20_000 + i * 100)), ("ttl_shard", n(shard))],
            )
        })
        .collect();
    table.put_many(items).await;
    table
}

fn doctor(table: &str) -> (Option<i32>, String, serde_json::Value) {
    let text_out = precise_ttl()
        .args(["doctor", "--table", table])
        .output()
        .unwrap();
    let json_out = precise_ttl()
        .args(["doctor", "--table", table, "--json"])
        .output()
        .unwrap();
    let stderr = text(&json_out.stderr) + &text(&text_out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        text_out.status.code(),
        text(&text_out.stdout),
        serde_json::from_slice(&json_out.stdout).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_warns_when_the_index_writes_fall_short_of_the_items_due() {
    let table = table_with_items_due_soon("2").await;
    let (code, stdout, json) = doctor(&table.name);
    assert_eq!(code, Some(4), "{stdout}");
    let warning: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("write units/s provisioned"))
        .collect();
    assert_eq!(warning.len(), 1, "{stdout}");
    assert!(
        warning[0].contains("has 2 write units/s provisioned")
            && warning[0].contains("(5.0/s, counted in the index) need ~10")
            && warning[0].contains("aws dynamodb update-table")
            && warning[0].contains(r#""WriteCapacityUnits":10}"#),
        "{stdout}"
    );
    let finding = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "index_write_capacity_low")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(finding["count"], 10, "{json}");
    assert_eq!(json["index_write_capacity"]["provisioned"], 2, "{json}");
    assert_eq!(json["index_write_capacity"]["enough"], false, "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_is_quiet_when_the_index_writes_are_enough_or_on_demand() {
    let table = table_with_items_due_soon("25").await;
    let (code, stdout, json) = doctor(&table.name);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("✗"), "{stdout}");
    assert!(
        stdout.contains("index write capacity: 25 units/s provisioned, the next minute's expirations need ~10: enough"),
        "{stdout}"
    );
    assert_eq!(json["index_write_capacity"]["enough"], true, "{json}");

    // On demand: no capacity to check, nothing said.
    let on_demand = crate::support::table_with_index().await;
    let (_, stdout, json) = doctor(&on_demand.name);
    assert!(!stdout.contains("index write capacity"), "{stdout}");
    assert!(json["index_write_capacity"].is_null(), "{json}");
}
