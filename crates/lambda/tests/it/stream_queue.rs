//! The stream-queue layout (issue 29) through the real function on DynamoDB Local: a stream
//! batch of the application table indexed into the queue table (the event source mapping's
//! part), then a scheduled invocation sweeping the queue.

use super::{FUNCTION, local};
use precise_ttl_bench_driver::{Function, LocalLambda};
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_stream::queue::QueueTable;
use serde_json::{Value, json};
use std::time::Duration;

/// An application table (partition key `pk`) and its queue table, both empty.
async fn tables() -> (Dynamo, String, String) {
    let dynamo = Dynamo::local(local());
    let table = format!("precise-ttl-lambda-queue-{:08x}", fastrand::u32(..));
    precise_ttl_bench_driver::load::create_bare(&dynamo, &table, "pk")
        .await
        .unwrap();
    let queue = precise_ttl_stream::queue::default_queue_table(&table);
    QueueTable::new(dynamo.clone(), &queue)
        .create()
        .await
        .unwrap();
    (dynamo, table, queue)
}

fn function(table: &str, extra: &[(&str, &str)]) -> LocalLambda {
    let mut variables = vec![
        ("PRECISE_TTL_TABLE".to_string(), table.to_string()),
        ("PRECISE_TTL_INDEX_LAYOUT".into(), "stream-queue".into()),
        ("AWS_ENDPOINT_URL_DYNAMODB".into(), local().into()),
    ];
    variables.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    LocalLambda::new(Function {
        program: FUNCTION.into(),
        name: "precise-ttl-it".into(),
        memory_mb: 128,
        variables,
    })
}

/// Invokes and waits for the answer.
async fn call(lambda: &mut LocalLambda, event: Value, timeout: Duration) -> Result<Value, Value> {
    let before = lambda.records().len();
    lambda.invoke(event, timeout).await.unwrap();
    while lambda.records().len() == before {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    lambda.records().pop().unwrap().result
}

/// A stream record of `table` for item `pk`; a TTL of `None` leaves the attribute out.
fn record(table: &str, name: &str, pk: &str, old: Option<i64>, new: Option<i64>) -> Value {
    crate::stream_record::stream_record(table, name, pk, None, old, new)
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The queue's entries as (pk of the item, expiry in ms).
async fn entries(dynamo: &Dynamo, queue: &str) -> Vec<(String, i64)> {
    let out = dynamo
        .query
        .scan()
        .table_name(queue)
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    let mut found: Vec<(String, i64)> = out
        .items()
        .iter()
        .map(|i| {
            let key = i["key"].as_m().unwrap();
            let due = i["due"].as_s().unwrap();
            (
                key["pk"].as_s().unwrap().clone(),
                due.split('#').next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    found.sort();
    found
}

/// INSERT with a TTL, MODIFY extending it, MODIFY leaving it, REMOVE: two entries (the first
/// expiry's stays, for the sweeper to drop when it finds the item not due), the same two when
/// the mapping delivers the batch again; a batch of another table's stream is refused in one
/// line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_batch_writes_the_queue_entries_of_its_new_expiries() {
    let (dynamo, table, queue) = tables().await;
    let t1 = now_s() + 3_600;
    let t2 = t1 + 3_600;
    let event = json!({"Records": [
        record(&table, "INSERT", "a", None, Some(t1)),
        record(&table, "MODIFY", "a", Some(t1), Some(t2)),
        record(&table, "MODIFY", "b", Some(t1), Some(t1)),
        record(&table, "MODIFY", "c", Some(t1), None),
        record(&table, "REMOVE", "d", Some(t1), None),
    ]});
    let mut lambda = function(&table, &[]);
    let answer = call(&mut lambda, event.clone(), Duration::from_secs(10))
        .await
        .expect("the batch is indexed");
    assert_eq!(answer["records"], 5, "{answer}");
    assert_eq!(answer["entries"], 2, "{answer}");
    assert_eq!(answer["unchanged"], 1, "{answer}");
    assert_eq!(answer["no_ttl"], 1, "{answer}");
    assert_eq!(answer["removes"], 1, "{answer}");
    let expected = vec![("a".to_string(), t1 * 1000), ("a".to_string(), t2 * 1000)];
    assert_eq!(entries(&dynamo, &queue).await, expected);

    // Delivered again (a retry): the same entries, no more.
    call(&mut lambda, event, Duration::from_secs(10))
        .await
        .expect("indexed again");
    assert_eq!(entries(&dynamo, &queue).await, expected);

    let other = json!({"Records": [record("other-table", "INSERT", "z", None, Some(t1))]});
    let error = call(&mut lambda, other, Duration::from_secs(10))
        .await
        .unwrap_err();
    let message = error["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("other-table"), "{error}");
    assert!(!message.contains('\n'), "one line: {message}");
    assert_eq!(entries(&dynamo, &queue).await, expected);
    lambda.shut_down(Duration::from_secs(10)).await;
    for name in [&table, &queue] {
        let _ = dynamo.query.delete_table().table_name(name).send().await;
    }
}

/// Items due now, their entries written by the function from their INSERT records, then a
/// scheduled invocation on the stream-queue layout (with leases under the queue's scope):
/// every item deleted and every entry removed. A queue table that does not exist fails a batch
/// with its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_invocation_sweeps_the_queue_the_stream_filled() {
    let (dynamo, table, queue) = tables().await;
    let leases = format!("precise-ttl-lambda-leases-{:08x}", fastrand::u32(..));
    precise_ttl_dynamodb::create_lease_table(&dynamo, &leases)
        .await
        .unwrap();
    let due = now_s() - 5;
    let items = (0..20)
        .map(|i| {
            std::collections::HashMap::from([
                (
                    "pk".to_string(),
                    aws_sdk_dynamodb::types::AttributeValue::S(format!("due-{i}")),
                ),
                (
                    "ttl".to_string(),
                    aws_sdk_dynamodb::types::AttributeValue::N(due.to_string()),
                ),
            ])
        })
        .collect();
    precise_ttl_bench_driver::put_all(&dynamo, &table, items, |_| {})
        .await
        .unwrap();
    let records: Vec<Value> = (0..20)
        .map(|i| record(&table, "INSERT", &format!("due-{i}"), None, Some(due)))
        .collect();
    let mut lambda = function(&table, &[("PRECISE_TTL_LEASE_TABLE", &leases)]);
    let answer = call(
        &mut lambda,
        json!({ "Records": records }),
        Duration::from_secs(10),
    )
    .await
    .expect("the batch is indexed");
    assert_eq!(answer["entries"], 20, "{answer}");
    assert_eq!(entries(&dynamo, &queue).await.len(), 20);

    let report = call(&mut lambda, json!({}), Duration::from_secs(6))
        .await
        .expect("the sweep succeeds");
    assert_eq!(report["deleted"], 20, "{report}");
    assert!(entries(&dynamo, &queue).await.is_empty());
    let left = dynamo.query.scan().table_name(&table).send().await.unwrap();
    assert_eq!(left.count(), 0);
    let scopes = dynamo
        .query
        .scan()
        .table_name(&leases)
        .send()
        .await
        .unwrap();
    assert!(scopes.count() > 0, "the leases were taken");
    assert!(
        scopes.items().iter().all(|l| l
            .values()
            .any(|v| v.as_s().is_ok_and(|s| s == &format!("{table}/{queue}")))),
        "{:?}",
        scopes.items()
    );
    lambda.shut_down(Duration::from_secs(10)).await;

    let mut lost = function(&table, &[("PRECISE_TTL_QUEUE_TABLE", "no-such-queue")]);
    let error = call(
        &mut lost,
        json!({"Records": [record(&table, "INSERT", "x", None, Some(due))]}),
        Duration::from_secs(10),
    )
    .await
    .unwrap_err();
    let message = error["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("no-such-queue"), "{error}");
    lost.shut_down(Duration::from_secs(10)).await;
    for name in [&table, &queue, &leases] {
        let _ = dynamo.query.delete_table().table_name(name).send().await;
    }
}
