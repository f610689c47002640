//! `precise-ttl-lambda` (packaged as `bootstrap`): builds the client once per execution
//! environment, then serves invocations through the Lambda Runtime API. Logs are JSON lines;
//! each invocation's metrics follow its report as CloudWatch EMF lines on standard output.
//! Started outside Lambda, it says so in one line and exits 2.
//!
//! Three kinds of invocation: a schedule's (sweep until the deadline), and a DynamoDB Streams
//! batch of the table, indexed into the expiry queue when the function's layout is
//! `stream-queue`, else answered with its expiry records (the archive consumer).

use lambda_runtime::{LambdaEvent, service_fn};
use precise_ttl_lambda::Environment;
use precise_ttl_lambda::config::StreamRole;
use precise_ttl_lambda::invoke::{emf_documents, stream_emf_documents};
use std::process::ExitCode;
use std::sync::Arc;

/// What the Lambda runtime sets and the runtime client reads (it panics without them).
const RUNTIME_VARIABLES: &[&str] = &[
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "AWS_LAMBDA_FUNCTION_VERSION",
];

/// The runtime's variables missing from `get`'s environment (empty inside Lambda).
fn missing_runtime_variables(get: impl Fn(&str) -> Option<String>) -> Vec<&'static str> {
    RUNTIME_VARIABLES
        .iter()
        .copied()
        .filter(|name| get(name).is_none_or(|v| v.is_empty()))
        .collect()
}

fn main() -> ExitCode {
    let missing = missing_runtime_variables(|name| std::env::var(name).ok());
    if !missing.is_empty() {
        eprintln!(
            "error: precise-ttl-lambda runs inside AWS Lambda ({} not set); to run it locally, use `cargo lambda watch`, or run the same daemon with `precise-ttl run`",
            missing.join(", ")
        );
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(serve()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

async fn serve() -> Result<(), lambda_runtime::Error> {
    let started = tokio::time::Instant::now();
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_current_span(false)
        .init();
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let function = env
        .get("AWS_LAMBDA_FUNCTION_NAME")
        .cloned()
        .unwrap_or_else(|| "precise-ttl".into());
    let environment = Arc::new(Environment::new(env, started).await);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let environment = Arc::clone(&environment);
        let function = function.clone();
        async move {
            let (payload, context) = event.into_parts();
            // The table's stream as the event source: index its changes into the expiry queue
            // (the stream-queue layout) or archive its expiries; do not sweep.
            let is_stream = precise_ttl_lambda::stream_event::is_stream_event(&payload);
            let role = match is_stream {
                true => Some(
                    environment
                        .stream_role()
                        .map_err(|e| lambda_runtime::Error::from(e.to_string()))?,
                ),
                false => None,
            };
            if role == Some(StreamRole::Index) {
                // A failed batch is an error: the event source mapping retries it.
                let indexed = Box::pin(environment.index_batch(&payload)).await;
                return answer(
                    indexed,
                    |batch| {
                        tracing::info!(
                            records = batch.records,
                            entries = batch.entries,
                            unchanged = batch.unchanged,
                            no_ttl = batch.no_ttl,
                            "stream batch indexed"
                        )
                    },
                    Some("stream batch not indexed; the mapping retries it"),
                );
            }
            if is_stream {
                let archived = environment.stream_batch(&payload);
                return answer(
                    archived,
                    |batch| {
                        for line in &batch.lines {
                            println!("{line}");
                        }
                        // Counted as it happens, under /metrics' names: records, native, and
                        // REMOVEs left out by reason.
                        for doc in stream_emf_documents(batch, &function, now_ms()) {
                            println!("{}", doc.line());
                        }
                    },
                    None,
                );
            }
            // Boxed: the daemon's future is too deep to nest in the runtime's layout unboxed.
            let invocation =
                Box::pin(environment.invoke(&payload, &context.request_id, context.deadline));
            answer(
                invocation.await,
                |report| {
                    for doc in emf_documents(report, &function, now_ms()) {
                        println!("{}", doc.line());
                    }
                    tracing::info!(
                        deleted = report.deleted,
                        skipped = report.skipped,
                        unconfirmed = report.unconfirmed,
                        errors = report.errors,
                        "invocation done"
                    );
                },
                Some("invocation failed"),
            )
        }
    }))
    .await
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An invocation's answer: on success `done` reports it (logs, lines on stdout) and the runtime
/// gets it as JSON; on failure the error, logged as `failed` when given.
fn answer<T: serde::Serialize, E: std::fmt::Display>(
    result: Result<T, E>,
    done: impl FnOnce(&T),
    failed: Option<&str>,
) -> Result<serde_json::Value, lambda_runtime::Error> {
    match result {
        Ok(value) => {
            done(&value);
            serde_json::to_value(&value).map_err(lambda_runtime::Error::from)
        }
        Err(e) => {
            if let Some(failed) = failed {
                tracing::error!(error = %e, "{failed}");
            }
            Err(lambda_runtime::Error::from(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_lambda_the_missing_variables_are_named() {
        assert_eq!(missing_runtime_variables(|_| None), RUNTIME_VARIABLES);
        let inside = |_: &str| Some("x".to_string());
        assert!(missing_runtime_variables(inside).is_empty());
        let no_api = |name: &str| (name != "AWS_LAMBDA_RUNTIME_API").then(|| "x".to_string());
        assert_eq!(
            missing_runtime_variables(no_api),
            ["AWS_LAMBDA_RUNTIME_API"]
        );
    }
}
