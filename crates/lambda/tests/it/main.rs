//! The real `precise-ttl-lambda` binary on a local Lambda Runtime API (the bench driver's
//! [`LocalLambda`]) against DynamoDB Local: scheduled, overlapping invocations, and a
//! misconfigured function; the stream-queue layout in [`stream_queue`].

mod stream_queue;
// The unit tests' stream record, so the function gets the same records here.
#[path = "../../src/stream_record.rs"]
mod stream_record;

use precise_ttl_bench_driver::{
    BenchConfig, DaemonCommand, Function, LambdaPlan, LocalLambda, NoProgress,
};
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_local::DynamoDbLocal;
use std::sync::OnceLock;
use std::time::Duration;

const FUNCTION: &str = env!("CARGO_BIN_EXE_precise-ttl-lambda");

fn local() -> &'static str {
    static LOCAL: OnceLock<DynamoDbLocal> = OnceLock::new();
    LOCAL
        .get_or_init(|| DynamoDbLocal::start().expect("DynamoDB Local starts"))
        .endpoint()
}

/// The function under test, as `precise-ttl-it` with 128 MB, and these environment `variables`.
fn function_with(variables: Vec<(String, String)>) -> LocalLambda {
    LocalLambda::new(Function {
        program: FUNCTION.into(),
        name: "precise-ttl-it".into(),
        memory_mb: 128,
        variables,
    })
}

/// Invokes `lambda` once with `event`, `deadline_s` to run, shuts it down (within
/// `shut_down_s`) and gives back that invocation's answer: its report, or its error.
async fn invoke_once(
    mut lambda: LocalLambda,
    event: serde_json::Value,
    deadline_s: u64,
    shut_down_s: u64,
) -> Result<serde_json::Value, serde_json::Value> {
    lambda
        .invoke(event, Duration::from_secs(deadline_s))
        .await
        .unwrap();
    let mut records = lambda.shut_down(Duration::from_secs(shut_down_s)).await;
    records.remove(0).result
}

/// Three invocations of 6 s starting 5 s apart (each stops 2 s before its deadline, so each
/// hands over to the next inside a 1 s overlap), items due every second at 100 /s with integer
/// TTLs: every item deleted, nothing wrong, and the invocations' reports add up to the REMOVE
/// records on the table's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_invocations_delete_every_item_and_their_reports_add_up() {
    let endpoint = local();
    let mut config = BenchConfig::new(
        "lambda-it",
        TtlLayout::default(),
        DaemonCommand {
            program: FUNCTION.into(),
            extra_args: Vec::new(),
        },
    );
    config.items = 800;
    config.spread = Duration::from_secs(8);
    config.ttl_granularity = Duration::from_secs(1);
    config.raw_items = 0;
    config.timeout = Duration::from_secs(20);
    config.lambda = Some(LambdaPlan {
        program: FUNCTION.into(),
        invocations: 3,
        length: Duration::from_secs(6),
        every: Duration::from_secs(5),
    });
    let run =
        precise_ttl_bench_driver::run(&Dynamo::local(endpoint), endpoint, &config, &NoProgress)
            .await
            .expect("the bench runs");
    let s = &run.summary;
    let lambda = s.lambda.as_ref().expect("a Lambda report");
    assert!(run.is_clean(), "{}", run.markdown);
    assert_eq!(lambda.invocations.len(), 3, "{}", run.markdown);
    assert!(
        lambda.invocations.iter().all(|i| i.result.is_ok()),
        "{}",
        run.markdown
    );
    assert_eq!(
        lambda.reported_deleted, s.report.counts.deleted,
        "the reports add up to the stream's REMOVE records\n{}",
        run.markdown
    );
    // Overlapping invocations ran in two environments; the third reused the first, warm.
    assert!(lambda.invocations.iter().any(|i| i.cold));
    assert!(
        lambda.invocations.iter().any(|i| !i.cold),
        "{}",
        run.markdown
    );
    for i in &lambda.invocations {
        let r = i.result.as_ref().unwrap();
        for field in [
            "deleted",
            "skipped",
            "errors",
            "throttled",
            "watermark",
            "lag",
        ] {
            assert!(r.get(field).is_some(), "{field} missing from {r}");
        }
    }
}

/// A function whose table does not exist fails its invocation at once, with one line that
/// names the table, instead of retrying until its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_fails_the_invocation_with_a_clear_message() {
    let lambda = function_with(vec![
        ("PRECISE_TTL_TABLE".into(), "no-such-table".into()),
        ("AWS_ENDPOINT_URL_DYNAMODB".into(), local().into()),
    ]);
    let started = std::time::Instant::now();
    let answer = invoke_once(lambda, serde_json::json!({}), 30, 30).await;
    assert!(started.elapsed() < Duration::from_secs(10), "failed fast");
    let error = answer.as_ref().unwrap_err();
    let message = error["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("no-such-table"), "{error}");
    assert!(!message.contains('\n'), "one line: {message}");

    // A bad setting in the event is named too.
    let lambda = function_with(vec![("AWS_ENDPOINT_URL_DYNAMODB".into(), local().into())]);
    let event = serde_json::json!({"table": "t", "shards": "many"});
    let answer = invoke_once(lambda, event, 30, 30).await;
    let error = answer.as_ref().unwrap_err();
    assert!(
        error["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("shards"),
        "{error}"
    );
}

/// Forwards connections on a port that opens only after `closed_for` (connection refused
/// until then: the store unreachable at the start of an invocation) to `target`.
async fn late_port(target: &'static str, closed_for: Duration) -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let target = target.trim_start_matches("http://").to_string();
    tokio::spawn(async move {
        tokio::time::sleep(closed_for).await;
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

/// The store unreachable for the first 3 s of an invocation: the function waits for it within
/// the invocation (it does not fail), then deletes what is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_rides_out_a_store_unreachable_at_its_start() {
    let (dynamo, table) = table_with_due_items(50).await;
    let endpoint = late_port(local(), Duration::from_secs(3)).await;
    let lambda = function_with(vec![
        ("PRECISE_TTL_TABLE".into(), table.clone()),
        ("AWS_ENDPOINT_URL_DYNAMODB".into(), endpoint),
    ]);
    let answer = invoke_once(lambda, serde_json::json!({}), 10, 15).await;
    let report = answer.as_ref().expect("the invocation succeeds");
    assert_eq!(report["deleted"], 50, "{report}");
    let _ = dynamo.query.delete_table().table_name(&table).send().await;
}

/// As the table stream's consumer the function needs no table settings: it answers a batch with
/// its counts and writes each expiry record as a log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_batch_is_answered_with_its_expiry_records() {
    let mut lambda = function_with(vec![]);
    let record = |id: &str, ttl: &str| {
        serde_json::json!({
            "eventID": id, "eventName": "REMOVE", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "dynamodb": {
                "ApproximateCreationDateTime": 1_800_000_000.0,
                "Keys": {"pk": {"S": id}},
                "OldImage": {"pk": {"S": id}, "ttl": {"N": ttl}},
                "SequenceNumber": id, "SizeBytes": 20, "StreamViewType": "OLD_IMAGE"
            },
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/x"
        })
    };
    let event = serde_json::json!({"Records": [
        record("expired", "1799999999"),
        record("deleted-early", "1800000600"),
    ]});
    lambda.invoke(event, Duration::from_secs(10)).await.unwrap();
    let output = std::sync::Arc::clone(&lambda.output);
    let records = lambda.shut_down(Duration::from_secs(10)).await;
    let answer = records[0].result.as_ref().expect("answered");
    assert_eq!(answer["records"], 1, "{answer}");
    assert_eq!(answer["other_removes"], 1, "{answer}");
    let lines = output.lock().unwrap().clone();
    let archived: Vec<&String> = lines.iter().filter(|l| l.contains("\"expired\"")).collect();
    assert_eq!(archived.len(), 1, "{lines:?}");
    assert!(
        archived[0].contains("\"principalId\":\"precise-ttl\""),
        "{}",
        archived[0]
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("deleted-early\"}},\"OldImage")),
        "{lines:?}"
    );
}

/// A table with the expiry index (native TTL off) and `count` items due a minute ago or less.
async fn table_with_due_items(count: i64) -> (Dynamo, String) {
    use precise_ttl_bench_driver::ItemWriter;
    use precise_ttl_bench_driver::items::epoch_seconds;
    use precise_ttl_core::Timestamp;
    let dynamo = Dynamo::local(local());
    let table = format!("precise-ttl-lambda-it-{:08x}", fastrand::u32(..));
    let layout = TtlLayout::default();
    precise_ttl_bench_driver::load::create_bare(&dynamo, &table, "pk")
        .await
        .unwrap();
    let options = precise_ttl_ops::SetupOptions {
        native_ttl: false,
        poll_interval: Duration::from_millis(100),
        ..Default::default()
    };
    precise_ttl_ops::setup::setup(&dynamo, &table, &layout, &options)
        .await
        .unwrap();
    let writer = ItemWriter::new("pk", &layout);
    let now = Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    );
    let items = (0..count)
        .map(|i| {
            let ttl = Timestamp::from_millis(now.as_millis() - 60_000 + i * 1_000);
            writer.item(
                &format!("due-{i}"),
                Some(epoch_seconds(ttl)),
                Some((i % 16) as u16),
            )
        })
        .collect();
    precise_ttl_bench_driver::put_all(&dynamo, &table, items, |_| {})
        .await
        .unwrap();
    (dynamo, table)
}

/// `PRECISE_TTL_ARCHIVE` on the function: every item an invocation deletes has its record in the
/// archive when the invocation returns; an archive URL that cannot be used fails the invocation
/// in one line before anything is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_archives_every_item_it_deletes() {
    let (dynamo, table) = table_with_due_items(30).await;
    let function = |archive: &str| {
        function_with(vec![
            ("PRECISE_TTL_TABLE".into(), table.clone()),
            ("AWS_ENDPOINT_URL_DYNAMODB".into(), local().into()),
            ("PRECISE_TTL_ARCHIVE".into(), archive.into()),
        ])
    };
    let bad = function("ftp://nowhere");
    let answer = invoke_once(bad, serde_json::json!({}), 10, 15).await;
    let error = answer.as_ref().unwrap_err();
    let message = error["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("ftp://nowhere"), "{error}");
    assert!(!message.contains('\n'), "one line: {message}");

    let dir = std::env::temp_dir().join(format!("precise-ttl-lambda-{:08x}", fastrand::u32(..)));
    let lambda = function(&format!("file://{}", dir.display()));
    let answer = invoke_once(lambda, serde_json::json!({}), 6, 15).await;
    let report = answer.as_ref().expect("the invocation succeeds");
    assert_eq!(report["deleted"], 30, "{report}");
    let mut keys = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        for line in std::fs::read_to_string(entry.unwrap().path())
            .unwrap()
            .lines()
        {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            keys.insert(
                record["dynamodb"]["Keys"]["pk"]["S"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
    }
    let expected: std::collections::BTreeSet<String> =
        (0..30).map(|i| format!("due-{i}")).collect();
    assert_eq!(keys, expected);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = dynamo.query.delete_table().table_name(&table).send().await;
}

/// Started by hand, outside Lambda: one line saying where it runs and how to run it locally,
/// exit 2, no panic or backtrace.
#[test]
fn outside_lambda_it_says_so_in_one_line_and_exits_2() {
    let mut command = std::process::Command::new(FUNCTION);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_LAMBDA_") {
            command.env_remove(name);
        }
    }
    let out = command.env("RUST_BACKTRACE", "1").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("AWS_LAMBDA_RUNTIME_API"), "{stderr}");
    assert!(stderr.contains("cargo lambda watch"), "{stderr}");
    assert!(stderr.contains("precise-ttl run"), "{stderr}");
}
