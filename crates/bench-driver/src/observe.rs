//! Watching the table's stream from outside the sweeper: when each item really disappeared.
//!
//! Polling is steady (a tighter loop costs DynamoDB Local CPU that the sweeper needs, for little
//! gain in observation delay, which [`calibrate`] measures). Errors are retried after a jittered,
//! growing pause; after too many in a row the observer gives up and the run fails, instead of
//! judging the sweeper on a stream it could not read.

use crate::error::BenchError;
use crate::items::ItemWriter;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use precise_ttl_bench::Removal;
use precise_ttl_core::Backoff;
use precise_ttl_dynamodb::{AdapterError, Dynamo};
use precise_ttl_engine::{Clock, SystemClock};
use precise_ttl_stream::stream::{EventKind, RemovalStream, StreamEvent};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the stream is polled while all is well.
pub const CADENCE: Duration = Duration::from_millis(10);

/// Pauses between failed polls: 25 ms doubling to 1 s, 20 failures in a row at most (about 15 s).
pub const RETRY: Backoff = Backoff {
    base: Duration::from_millis(25),
    cap: Duration::from_secs(1),
    max_attempts: 20,
};

/// Where change events come from: the table's stream, in production.
pub trait EventSource: Send + 'static {
    fn poll(&mut self) -> impl Future<Output = Result<Vec<StreamEvent>, AdapterError>> + Send;
}

impl EventSource for RemovalStream {
    fn poll(&mut self) -> impl Future<Output = Result<Vec<StreamEvent>, AdapterError>> + Send {
        RemovalStream::poll(self)
    }
}

#[derive(Debug, Default)]
struct Seen {
    removals: Vec<Removal>,
    failure: Option<String>,
}

/// Polls an [`EventSource`] in the background and records when each REMOVE was seen.
#[derive(Debug)]
pub struct Observer {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    /// Watches `table`'s stream from now on.
    pub async fn start(dynamo: &Dynamo, table: &str) -> Result<Observer, BenchError> {
        Ok(Self::watch(
            RemovalStream::open_latest(dynamo, table).await?,
            RETRY,
        ))
    }

    pub fn watch(mut source: impl EventSource, retry: Backoff) -> Observer {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let seen = Arc::clone(&seen);
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut other = 0u64;
                let mut failures = 0;
                while !stop.load(Ordering::Relaxed) {
                    match source.poll().await {
                        Ok(events) => {
                            failures = 0;
                            let at = SystemClock.now().as_millis();
                            {
                                let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                                for e in events {
                                    match e.kind {
                                        EventKind::Remove => seen.removals.push(Removal {
                                            key: e.partition_key,
                                            seen_ms: at,
                                        }),
                                        EventKind::Other(_) => other += 1,
                                        _ => {}
                                    }
                                }
                            }
                            tokio::time::sleep(CADENCE).await;
                        }
                        Err(e) => {
                            failures += 1;
                            if !retry.may_retry_after(failures) {
                                seen.lock().unwrap_or_else(|p| p.into_inner()).failure =
                                    Some(e.to_string());
                                return;
                            }
                            tracing::warn!(error = %e, failures, "stream read failed; retrying");
                            tokio::time::sleep(retry.delay(failures, fastrand::f64())).await;
                        }
                    }
                }
                if other > 0 {
                    tracing::warn!(
                        other,
                        "stream records with an unknown event name (DynamoDB Local's own TTL deletes?)"
                    );
                }
            })
        };
        Observer { seen, stop, task }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// REMOVEs seen so far; an error once the observer gave up.
    pub fn removed_count(&self) -> Result<u64, BenchError> {
        let seen = self.seen();
        match &seen.failure {
            Some(e) => Err(BenchError::Observer(e.clone())),
            None => Ok(seen.removals.len() as u64),
        }
    }

    pub fn seen_at(&self, key: &str) -> Option<i64> {
        self.seen()
            .removals
            .iter()
            .find(|r| r.key == key)
            .map(|r| r.seen_ms)
    }

    /// Forgets REMOVEs whose key starts with `prefix`.
    pub fn forget(&self, prefix: &str) {
        self.seen().removals.retain(|r| !r.key.starts_with(prefix));
    }

    /// Stops polling; every REMOVE seen, or the error the observer gave up on.
    pub async fn stop(self) -> Result<Vec<Removal>, BenchError> {
        self.stop.store(true, Ordering::Relaxed);
        let Observer { seen, task, .. } = self;
        task.await?;
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        match seen.failure.take() {
            Some(e) => Err(BenchError::Observer(e)),
            None => Ok(std::mem::take(&mut seen.removals)),
        }
    }
}

/// The time from a DeleteItem returning to its REMOVE record being seen (median of 20 probes).
/// The probes' REMOVEs are then forgotten: they are not planted items.
pub async fn calibrate(
    dynamo: &Dynamo,
    table: &str,
    items: &ItemWriter,
    observer: &Observer,
) -> Result<f64, BenchError> {
    let mut delays = Vec::new();
    for i in 0..20 {
        let key = format!("probe-{i}");
        dynamo
            .write
            .put_item()
            .table_name(table)
            .set_item(Some(items.item(&key, None, None)))
            .send()
            .await
            .map_err(|e| BenchError::call("writing a probe", DisplayErrorContext(e)))?;
        let (name, value) = items.key(&key);
        dynamo
            .write
            .delete_item()
            .table_name(table)
            .key(name, value)
            .send()
            .await
            .map_err(|e| BenchError::call("deleting a probe", DisplayErrorContext(e)))?;
        let returned = SystemClock.now().as_millis();
        let started = tokio::time::Instant::now();
        loop {
            if let Some(seen) = observer.seen_at(&key) {
                delays.push(seen.saturating_sub(returned).max(0) as f64);
                break;
            }
            observer.removed_count()?;
            if started.elapsed() > Duration::from_secs(5) {
                return Err(BenchError::ProbeNotSeen);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    delays.sort_by(f64::total_cmp);
    observer.forget("probe-");
    Ok(delays[delays.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::ErrorClass;

    /// A stream that cannot be read, noting when each attempt was made. After 20 attempts it
    /// stops answering, so an observer that retried without pausing shows up as 20 attempts at
    /// the same instant rather than as a test that never ends.
    struct Unreadable(Arc<Mutex<Vec<tokio::time::Instant>>>);

    impl EventSource for Unreadable {
        async fn poll(&mut self) -> Result<Vec<StreamEvent>, AdapterError> {
            let count = {
                let mut at = self.0.lock().unwrap();
                at.push(tokio::time::Instant::now());
                at.len()
            };
            if count > 20 {
                std::future::pending::<()>().await;
            }
            Err(AdapterError::Call {
                operation: "GetRecords",
                class: ErrorClass::Transient,
                message: "connection refused".into(),
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_stream_is_retried_with_pauses_then_given_up() {
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let retry = Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(1),
            max_attempts: 20,
        };
        let observer = Observer::watch(Unreadable(Arc::clone(&attempts)), retry);
        while attempts.lock().unwrap().len() < 20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let at = attempts.lock().unwrap().clone();
        // Nineteen pauses drawn uniformly in [0, 1 s]: all of them under 1 s in total is
        // practically impossible, and a retry loop without pauses takes no time at all.
        let span = at[19] - at[0];
        assert!(
            span >= Duration::from_secs(1),
            "20 attempts within {span:?}"
        );
        // Twenty failures in a row: the observer gives up and says so.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(attempts.lock().unwrap().len(), 20);
        assert!(matches!(
            observer.removed_count(),
            Err(BenchError::Observer(_))
        ));
        assert!(matches!(
            observer.stop().await,
            Err(BenchError::Observer(_))
        ));
    }
}
