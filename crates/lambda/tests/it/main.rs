//! The real `precise-ttl-lambda` binary on a local Lambda Runtime API (the bench driver's
//! [`LocalLambda`]) against DynamoDB Local: scheduled, overlapping invocations, and a
//! misconfigured function.

use precise_ttl_bench_driver::{
    BenchConfig, DaemonCommand, Function, LambdaPlan, LocalLambda, NoProgress,
};
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::{Dynamo, DynamoDbLocal};
use std::sync::OnceLock;
use std::time::Duration;

const FUNCTION: &str = env!("CARGO_BIN_EXE_precise-ttl-lambda");

fn local() -> &'static str {
    static LOCAL: OnceLock<DynamoDbLocal> = OnceLock::new();
    LOCAL
        .get_or_init(|| DynamoDbLocal::start().expect("DynamoDB Local starts"))
        .endpoint()
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
    let mut lambda = LocalLambda::new(Function {
        program: FUNCTION.into(),
        name: "precise-ttl-it".into(),
        memory_mb: 128,
        variables: vec![
            ("PRECISE_TTL_TABLE".into(), "no-such-table".into()),
            ("AWS_ENDPOINT_URL_DYNAMODB".into(), local().into()),
        ],
    });
    let started = std::time::Instant::now();
    lambda
        .invoke(serde_json::json!({}), Duration::from_secs(30))
        .await
        .unwrap();
    let records = lambda.shut_down(Duration::from_secs(30)).await;
    assert!(started.elapsed() < Duration::from_secs(10), "failed fast");
    let error = records[0].result.as_ref().unwrap_err();
    let message = error["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("no-such-table"), "{error}");
    assert!(!message.contains('\n'), "one line: {message}");

    // A bad setting in the event is named too.
    let mut lambda = LocalLambda::new(Function {
        program: FUNCTION.into(),
        name: "precise-ttl-it".into(),
        memory_mb: 128,
        variables: vec![("AWS_ENDPOINT_URL_DYNAMODB".into(), local().into())],
    });
    lambda
        .invoke(
            serde_json::json!({"table": "t", "shards": "many"}),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    let records = lambda.shut_down(Duration::from_secs(30)).await;
    let error = records[0].result.as_ref().unwrap_err();
    assert!(
        error["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("shards"),
        "{error}"
    );
}
