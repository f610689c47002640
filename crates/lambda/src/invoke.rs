//! One invocation: settings resolved, the store and leases opened (riding out transient store
//! trouble until the deadline), the worker run until the deadline minus the safety margin, and
//! the report.

mod index;

use crate::config::{ConfigError, LambdaConfig};
use crate::emf::{Document, Unit};
use crate::event::{EventError, overrides};
use precise_ttl_core::removal::{ResolutionRule, ResolutionSetting, StreamSource};
use precise_ttl_core::{ErrorClass, Timestamp};
use precise_ttl_dynamodb::{AdapterError, ConnectOptions, Dynamo, LeaseTable};
use precise_ttl_engine::settings::{Invalid, SettingError};
use precise_ttl_engine::{Clock, DaemonError, LagSummary, SystemClock};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use thiserror::Error;
use tokio::time::Instant;

/// Why an invocation failed. Misconfiguration fails fast with what to fix; transient store
/// trouble is retried until the deadline and only then reported.
#[derive(Debug, Error)]
pub enum InvokeError {
    #[error("bad event: {0}")]
    Event(#[from] EventError),
    #[error("bad configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("cannot build the DynamoDB client: {0}")]
    Client(String),
    #[error("{0}")]
    Store(#[from] AdapterError),
    #[error("{0}")]
    Daemon(#[from] DaemonError),
    #[error(
        "the invocation has {remaining_ms} ms left, less than the safety margin of {margin_ms} ms: raise the function's timeout or lower PRECISE_TTL_SAFETY_MARGIN"
    )]
    TooShort { remaining_ms: i64, margin_ms: u128 },
    #[error("{0}")]
    Archive(String),
    #[error("{0}")]
    Index(#[from] crate::index_event::IndexError),
}

/// What an invocation returns (and logs).
#[derive(Debug, Clone, Serialize)]
pub struct InvocationReport {
    pub request_id: String,
    pub worker: String,
    pub table: String,
    pub deleted: u64,
    pub skipped: u64,
    /// Found gone on a retry after a lost answer: deleted by us or by another worker.
    pub unconfirmed: u64,
    pub errors: u64,
    pub throttled: u64,
    pub queries: u64,
    /// Epoch seconds: every due item with a TTL at or before it is known deleted (`None`: no
    /// complete read in this invocation).
    pub watermark: Option<f64>,
    pub watermark_delay_seconds: Option<f64>,
    /// Lag of this invocation's deletes, TTL to acknowledgement.
    pub lag: Option<Lag>,
    /// From the handler's start to its report.
    pub ran_ms: u64,
    /// The first invocation of this execution environment.
    pub cold_start: bool,
    /// For a cold start: from process start to the first invocation's handler.
    pub init_ms: Option<u64>,
    /// The process's peak resident memory so far (Linux), MB.
    pub max_rss_mb: Option<f64>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Lag {
    pub count: u64,
    pub p50_ms: u64,
    pub p90_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
}

impl From<LagSummary> for Lag {
    fn from(l: LagSummary) -> Self {
        Lag {
            count: l.count,
            p50_ms: l.p50_ms,
            p90_ms: l.p90_ms,
            p99_ms: l.p99_ms,
            max_ms: l.max_ms,
        }
    }
}

/// What lives as long as the execution environment: the client (built once, at cold start), the
/// environment variables and the default worker id.
#[derive(Debug)]
pub struct Environment {
    pub(crate) dynamo: Result<Dynamo, String>,
    pub(crate) env: BTreeMap<String, String>,
    worker: String,
    cold: AtomicBool,
    init: Duration,
    /// `PRECISE_TTL_ARCHIVE`'s sink, opened at the first invocation that needs it (a bucket
    /// that cannot be used fails that invocation in one line; the next one tries again).
    archive: tokio::sync::OnceCell<precise_ttl_archive::Sink>,
    /// As the stream's consumer: the record-time resolution of each stream this environment
    /// has seen (what `auto` learnt lives as long as the environment; a cold one starts again
    /// from the stream's ARN and endpoint), and when it last warned of REMOVEs left out.
    streams: std::sync::Mutex<StreamState>,
    /// As the expiry queue's indexer: the table's key names, partition key first, read once the
    /// queue table is checked (see [`crate::index_event`]).
    pub(crate) queue_keys: tokio::sync::OnceCell<Vec<String>>,
}

#[derive(Debug, Default)]
struct StreamState {
    rules: BTreeMap<String, ResolutionRule>,
    /// When the last warning about REMOVEs left out was logged, and how many were left out
    /// since: the first at once, then at most one line a minute.
    warned: Option<Instant>,
    left_out_since: u64,
}

/// At most one warning line a minute about REMOVEs left out.
const LEFT_OUT_LOG_EVERY: Duration = Duration::from_secs(60);

impl Environment {
    /// `env`: the process environment; `started`: when the process started.
    pub async fn new(env: BTreeMap<String, String>, started: Instant) -> Environment {
        let dynamo = Dynamo::connect(&ConnectOptions {
            endpoint_url: env.get("PRECISE_TTL_ENDPOINT_URL").cloned(),
            ..ConnectOptions::default()
        })
        .await
        .map_err(|e| e.to_string());
        // One log stream per execution environment: a stable name for its leases, so an
        // environment's next invocation takes its own leases back at once.
        let worker = env
            .get("AWS_LAMBDA_LOG_STREAM_NAME")
            .cloned()
            .unwrap_or_else(|| format!("lambda-{}", std::process::id()));
        Environment {
            dynamo,
            env,
            worker,
            cold: AtomicBool::new(true),
            init: started.elapsed(),
            archive: tokio::sync::OnceCell::new(),
            streams: std::sync::Mutex::default(),
            queue_keys: tokio::sync::OnceCell::new(),
        }
    }

    /// The archive named by `PRECISE_TTL_ARCHIVE` (with `_COMPRESSION`, `_ROTATE_EVERY`,
    /// `_SPOOL`, `_ENDPOINT_URL`), if set. The spool defaults to /tmp, which lives as long as
    /// the execution environment: each invocation flushes it to S3 before it returns.
    async fn archive(&self) -> Result<Option<&precise_ttl_archive::Sink>, InvokeError> {
        let Some(url) = self
            .env
            .get("PRECISE_TTL_ARCHIVE")
            .filter(|u| !u.is_empty())
        else {
            return Ok(None);
        };
        let invalid = |name: &'static str, value: &String, why: String| {
            InvokeError::Config(ConfigError::Invalid(SettingError::Invalid {
                name,
                why: Invalid(format!("{value:?}: {why}")),
            }))
        };
        let url = precise_ttl_archive::SinkUrl::parse(url)
            .map_err(|e| invalid("archive", url, e.to_string()))?;
        let compression = match self.env.get("PRECISE_TTL_ARCHIVE_COMPRESSION") {
            None => None,
            Some(v) => Some(
                precise_ttl_archive::Compression::parse(v)
                    .map_err(|e| invalid("archive-compression", v, e))?,
            ),
        };
        let max_age = match self.env.get("PRECISE_TTL_ARCHIVE_ROTATE_EVERY") {
            None => precise_ttl_archive::Rotation::default().max_age,
            Some(v) => precise_ttl_core::parse_duration(v)
                .map_err(|e| invalid("archive-rotate-every", v, e.to_string()))?,
        };
        let options = precise_ttl_archive::SinkOptions {
            rotation: precise_ttl_archive::Rotation {
                max_age,
                ..precise_ttl_archive::Rotation::default()
            },
            compression,
            spool: Some(self.env.get("PRECISE_TTL_ARCHIVE_SPOOL").map_or_else(
                || std::env::temp_dir().join("precise-ttl-spool"),
                Into::into,
            )),
            s3_endpoint_url: self.env.get("PRECISE_TTL_ARCHIVE_ENDPOINT_URL").cloned(),
            ..precise_ttl_archive::SinkOptions::default()
        };
        self.archive
            .get_or_try_init(|| precise_ttl_archive::Sink::open(&url, &options))
            .await
            .map(Some)
            .map_err(|e| InvokeError::Archive(e.to_string()))
    }

    /// A DynamoDB Streams batch (the function as the table stream's consumer): its expiry
    /// records, by the TTL attribute and record-time resolution of the environment
    /// (`PRECISE_TTL_RECORD_TIME_RESOLUTION`: `auto`, the default, or a duration, as
    /// `precise-ttl archive --record-time-resolution` takes it). REMOVEs left out are in the
    /// answer by reason, and warned of in the log (the first at once, then once a minute).
    pub fn stream_batch(
        &self,
        event: &serde_json::Value,
    ) -> Result<crate::stream_event::StreamBatch, InvokeError> {
        use crate::stream_event::{expiries, record_times, stream_arn};
        let ttl = self
            .env
            .get("PRECISE_TTL_TTL_ATTRIBUTE")
            .map_or("ttl", String::as_str);
        let setting = match self.env.get("PRECISE_TTL_RECORD_TIME_RESOLUTION") {
            None => ResolutionSetting::Auto,
            Some(v) if v.is_empty() => ResolutionSetting::Auto,
            Some(v) => ResolutionSetting::parse(v).map_err(|e| {
                InvokeError::Config(ConfigError::Invalid(SettingError::Invalid {
                    name: "record-time-resolution",
                    why: Invalid(format!("{v:?}: {e}")),
                }))
            })?,
        };
        let arn = stream_arn(event).unwrap_or_default();
        let endpoint = self.dynamo.as_ref().ok().and_then(|d| d.endpoint.clone());
        // A panic elsewhere while holding the lock leaves plain data behind: still usable.
        let mut streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rule = streams.rules.entry(arn.to_string()).or_insert_with(|| {
            let rule = ResolutionRule::new(setting, StreamSource::of(arn, endpoint.as_deref()));
            if let Some(warning) = rule.mismatch() {
                tracing::warn!(stream = arn, "{warning}");
            }
            rule
        });
        let resolution = rule.for_batch(record_times(event));
        let describe = rule.describe();
        let batch = expiries(event, ttl, resolution);
        if batch.other_removes > 0 {
            streams.left_out_since += batch.other_removes;
            if streams
                .warned
                .is_none_or(|t| t.elapsed() >= LEFT_OUT_LOG_EVERY)
            {
                tracing::warn!(
                    stream = arn,
                    left_out = ?batch.left_out,
                    left_out_since_last_line = streams.left_out_since,
                    resolution = %describe,
                    "stream REMOVE records were left out of the archive: no expiries"
                );
                streams.warned = Some(Instant::now());
                streams.left_out_since = 0;
            }
        }
        Ok(batch)
    }

    /// Runs one invocation until `deadline_ms` (epoch ms) minus the safety margin.
    pub async fn invoke(
        &self,
        event: &serde_json::Value,
        request_id: &str,
        deadline_ms: u64,
    ) -> Result<InvocationReport, InvokeError> {
        let began = Instant::now();
        let cold = self.cold.swap(false, Ordering::Relaxed);
        let config = LambdaConfig::resolve(&self.env, &overrides(event)?)?;
        let dynamo = self.dynamo.clone().map_err(InvokeError::Client)?;
        let archive = self.archive().await?;
        let remaining_ms = deadline_ms as i64 - SystemClock.now().as_millis();
        let run_ms = remaining_ms - config.safety_margin.as_millis() as i64;
        if run_ms <= 0 {
            return Err(InvokeError::TooShort {
                remaining_ms,
                margin_ms: config.safety_margin.as_millis(),
            });
        }
        let stop_at = began + Duration::from_millis(run_ms as u64);
        let worker = config.fleet.worker(|| self.worker.clone());

        let Some((store, leases)) = until_open(stop_at, || async {
            let store = crate::sweep::Store::open(&dynamo, &config, archive).await?;
            let leases = match &config.fleet.lease_table {
                None => None,
                Some(name) => {
                    let table = LeaseTable::open(
                        dynamo.clone(),
                        name,
                        &config.table,
                        crate::sweep::lease_scope(&config),
                    )
                    .await?;
                    let lease = config.fleet.lease_config(worker.clone());
                    Some(Arc::new(table.worker_leases(&config.layout.shards, lease)))
                }
            };
            Ok((store, leases))
        })
        .await?
        else {
            // The store stayed unreachable for the whole invocation: nothing deleted.
            return Ok(self.report(
                request_id,
                &worker,
                &config,
                Default::default(),
                began,
                cold,
            ));
        };
        let report = store.run(&dynamo, &config, leases, stop_at).await;
        if let Some(sink) = archive {
            // Records spooled in /tmp must be in S3 before the environment may be frozen or
            // recycled; the drain's half of the margin is left for it.
            let wait = Duration::from_millis(
                (deadline_ms as i64 - SystemClock.now().as_millis() - 100).max(100) as u64,
            );
            sink.flush(wait)
                .await
                .map_err(|e| InvokeError::Archive(e.to_string()))?;
        }
        let report = report?;
        Ok(self.report(request_id, &worker, &config, report, began, cold))
    }

    fn report(
        &self,
        request_id: &str,
        worker: &str,
        config: &LambdaConfig,
        r: precise_ttl_engine::DaemonReport,
        began: Instant,
        cold: bool,
    ) -> InvocationReport {
        let now = SystemClock.now();
        InvocationReport {
            request_id: request_id.to_string(),
            worker: worker.to_string(),
            table: config.table.clone(),
            deleted: r.deleted,
            skipped: r.skipped,
            unconfirmed: r.unconfirmed,
            errors: r.errors,
            throttled: r.throttled,
            queries: r.queries,
            watermark: r.watermark.map(Timestamp::as_secs_f64),
            watermark_delay_seconds: r
                .watermark
                .map(|w| now.millis_since(w).max(0) as f64 / 1000.0),
            lag: r.lag.map(Lag::from),
            ran_ms: began.elapsed().as_millis() as u64,
            cold_start: cold,
            init_ms: cold.then_some(self.init.as_millis() as u64),
            max_rss_mb: peak_rss_mb(),
        }
    }
}

/// Opens what the invocation needs, retrying transient failures (unreachable, throttled, 5xx)
/// until `stop_at`; `None` if the store never answered in time. Misconfiguration fails at once.
async fn until_open<T, F, Fut>(stop_at: Instant, mut open: F) -> Result<Option<T>, InvokeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AdapterError>>,
{
    let backoff = precise_ttl_core::Backoff {
        base: Duration::from_millis(200),
        cap: Duration::from_secs(1),
        max_attempts: u32::MAX,
    };
    let mut failures = 0u32;
    loop {
        match open().await {
            Ok(t) => return Ok(Some(t)),
            Err(e) if matches!(e.class(), ErrorClass::Transient | ErrorClass::Throttled) => {
                failures = failures.saturating_add(1);
                tracing::warn!(error = %e, attempts = failures, "the store is not reachable yet; retrying");
            }
            Err(e) => return Err(e.into()),
        }
        let next = Instant::now() + backoff.delay(failures, fastrand::f64());
        if next >= stop_at {
            return Ok(None);
        }
        tokio::time::sleep_until(next).await;
    }
}

/// VmHWM of this process, from /proc (Linux; `None` elsewhere).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// The invocation's metrics as EMF documents, under the names `/metrics` uses: the counts of
/// this invocation, the watermark delay at its end, and the lag as percentiles (dimension
/// `statistic`).
pub fn emf_documents(
    report: &InvocationReport,
    function: &str,
    timestamp_ms: u64,
) -> Vec<Document> {
    use precise_ttl_engine::metrics as m;
    let dims = |extra: Option<(&str, &str)>| {
        let mut d = vec![("function".to_string(), function.to_string())];
        if let Some((k, v)) = extra {
            d.push((k.to_string(), v.to_string()));
        }
        d
    };
    let mut metrics = vec![
        (m::DELETED.to_string(), Unit::Count, report.deleted as f64),
        (m::SKIPPED.to_string(), Unit::Count, report.skipped as f64),
        (
            m::UNCONFIRMED.to_string(),
            Unit::Count,
            report.unconfirmed as f64,
        ),
        (m::ERRORS.to_string(), Unit::Count, report.errors as f64),
        (
            m::THROTTLED.to_string(),
            Unit::Count,
            report.throttled as f64,
        ),
        (m::QUERIES.to_string(), Unit::Count, report.queries as f64),
    ];
    if let Some(delay) = report.watermark_delay_seconds {
        metrics.push((m::WATERMARK_DELAY.to_string(), Unit::Seconds, delay));
    }
    let properties = vec![
        ("requestId".to_string(), report.request_id.clone().into()),
        ("table".to_string(), report.table.clone().into()),
        ("worker".to_string(), report.worker.clone().into()),
    ];
    let mut docs = vec![Document {
        namespace: "precise-ttl".into(),
        timestamp_ms,
        dimensions: dims(None),
        metrics,
        properties: properties.clone(),
    }];
    if let Some(lag) = report.lag {
        for (statistic, ms) in [
            ("p50", lag.p50_ms),
            ("p90", lag.p90_ms),
            ("p99", lag.p99_ms),
            ("max", lag.max_ms),
        ] {
            docs.push(Document {
                namespace: "precise-ttl".into(),
                timestamp_ms,
                dimensions: dims(Some(("statistic", statistic))),
                metrics: vec![(
                    m::LAG_SECONDS.to_string(),
                    Unit::Seconds,
                    ms as f64 / 1000.0,
                )],
                properties: properties.clone(),
            });
        }
    }
    docs
}

/// A stream batch's counts as one EMF document (and one per reason a REMOVE was left out, with
/// dimension `reason`), under the names `precise-ttl archive`'s `/metrics` uses.
pub fn stream_emf_documents(
    batch: &crate::stream_event::StreamBatch,
    function: &str,
    timestamp_ms: u64,
) -> Vec<Document> {
    use precise_ttl_engine::metrics as m;
    let function = ("function".to_string(), function.to_string());
    let mut docs = vec![Document {
        namespace: "precise-ttl".into(),
        timestamp_ms,
        dimensions: vec![function.clone()],
        metrics: vec![
            (
                m::ARCHIVE_RECORDS.to_string(),
                Unit::Count,
                batch.records as f64,
            ),
            (
                m::ARCHIVE_NATIVE_RECORDS.to_string(),
                Unit::Count,
                batch.native as f64,
            ),
            (
                m::ARCHIVE_LEFT_OUT.to_string(),
                Unit::Count,
                batch.other_removes as f64,
            ),
            (
                m::ARCHIVE_RESOLUTION.to_string(),
                Unit::Seconds,
                batch.resolution_seconds,
            ),
        ],
        properties: vec![],
    }];
    for (reason, n) in &batch.left_out {
        docs.push(Document {
            namespace: "precise-ttl".into(),
            timestamp_ms,
            dimensions: vec![function.clone(), ("reason".into(), reason.to_string())],
            metrics: vec![(m::ARCHIVE_LEFT_OUT.to_string(), Unit::Count, *n as f64)],
            properties: vec![],
        });
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LOCAL_ARN: &str =
        "arn:aws:dynamodb:ddblocal:000000000000:table/sessions/stream/2026-11-27T10:11:56.729";
    const OTHER_ARN: &str =
        "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/2026-11-27T10:11:56.729";
    /// A whole minute.
    const MINUTE: f64 = 1_800_000_000.0;

    async fn environment(resolution: Option<&str>) -> Environment {
        let mut env = BTreeMap::from([(
            "PRECISE_TTL_ENDPOINT_URL".to_string(),
            "http://127.0.0.1:1".to_string(),
        )]);
        if let Some(r) = resolution {
            env.insert("PRECISE_TTL_RECORD_TIME_RESOLUTION".into(), r.into());
        }
        Environment::new(env, Instant::now()).await
    }

    /// One REMOVE of ours: deleted 45 s after a whole minute, at its TTL.
    fn batch(arn: &str, created: f64) -> serde_json::Value {
        let ttl = (MINUTE + 45.0).to_string();
        json!({"Records": [{
            "eventID": "1", "eventName": "REMOVE", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "dynamodb": {
                "ApproximateCreationDateTime": created,
                "Keys": {"pk": {"S": "a"}},
                "OldImage": {"pk": {"S": "a"}, "ttl": {"N": ttl}},
                "SequenceNumber": "1", "StreamViewType": "OLD_IMAGE"
            },
            "eventSourceARN": arn
        }]})
    }

    #[tokio::test]
    async fn auto_reads_dynamodb_locals_stream_at_a_minute_and_a_given_value_wins() {
        let auto = environment(None).await;
        let b = auto.stream_batch(&batch(LOCAL_ARN, MINUTE)).unwrap();
        assert_eq!(
            (b.records, b.other_removes, b.resolution_seconds),
            (1, 0, 60.0)
        );
        let given = environment(Some("1s")).await;
        let b = given.stream_batch(&batch(LOCAL_ARN, MINUTE)).unwrap();
        assert_eq!((b.records, b.other_removes), (0, 1));
        assert_eq!(b.left_out, BTreeMap::from([("not_due", 1)]));
        let bad = environment(Some("sometimes")).await;
        assert!(matches!(
            bad.stream_batch(&batch(LOCAL_ARN, MINUTE)),
            Err(InvokeError::Config(ConfigError::Invalid { .. }))
        ));
    }

    #[tokio::test]
    async fn a_warm_environment_keeps_what_auto_learnt_of_another_endpoint_a_cold_one_starts_over()
    {
        let warm = environment(Some("auto")).await;
        let seconds = |b: crate::stream_event::StreamBatch| b.resolution_seconds;
        assert_eq!(
            seconds(warm.stream_batch(&batch(OTHER_ARN, MINUTE)).unwrap()),
            60.0
        );
        // A record time that is not a whole minute: the stream dates to the second.
        let finer = warm.stream_batch(&batch(OTHER_ARN, MINUTE + 46.0)).unwrap();
        assert_eq!((finer.resolution_seconds, finer.records), (1.0, 1));
        assert_eq!(
            seconds(warm.stream_batch(&batch(OTHER_ARN, MINUTE)).unwrap()),
            1.0
        );
        let cold = environment(None).await;
        assert_eq!(
            seconds(cold.stream_batch(&batch(OTHER_ARN, MINUTE)).unwrap()),
            60.0
        );
    }

    #[test]
    fn a_batchs_counts_go_out_under_the_archives_metric_names() {
        let batch = crate::stream_event::StreamBatch {
            records: 2,
            native: 1,
            other_removes: 3,
            left_out: BTreeMap::from([("not_due", 2), ("no_ttl", 1)]),
            resolution_seconds: 1.0,
            ..Default::default()
        };
        let docs = stream_emf_documents(&batch, "f", 0);
        assert_eq!(docs.len(), 3);
        let line = docs[0].line();
        for name in [
            precise_ttl_engine::metrics::ARCHIVE_RECORDS,
            precise_ttl_engine::metrics::ARCHIVE_LEFT_OUT,
        ] {
            assert!(line.contains(name), "{line}");
        }
        assert!(
            docs[1].line().contains("\"reason\":\"no_ttl\""),
            "{}",
            docs[1].line()
        );
    }
}
