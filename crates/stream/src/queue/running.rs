//! The expiry queue's indexer run beside the daemon (`run` in the stream-queue layout): opened
//! with the daemon, run in a task of its own on the stream shards its leases grant, and stopped
//! after it. A fatal error stops it on its own, and says so, so the daemon can stop with it.

use super::QueueTable;
use super::indexer::{Indexer, IndexerOptions, IndexerReport, indexer_leases};
use precise_ttl_dynamodb::{AdapterError, Dynamo, LeaseTable};
use precise_ttl_engine::StoreError;
use precise_ttl_engine::host::ThisProcess;
use precise_ttl_engine::lease::{Beating, LeaseConfig, Leases};
use std::sync::Arc;
use thiserror::Error;
use tokio::sync::oneshot;

/// This worker's leases over the stream: the lease table, its settings, and the process check
/// that proves a predecessor dead.
#[derive(Debug)]
pub struct IndexerFleet {
    pub lease_table: String,
    pub config: LeaseConfig,
    pub this: Option<ThisProcess>,
}

/// Why the indexer stopped before it was asked to.
#[derive(Debug, Error)]
pub enum IndexerStopped {
    #[error("the expiry queue's indexer stopped")]
    Indexer(#[source] AdapterError),
    #[error("the indexer's lease table failed")]
    Leases(#[source] StoreError),
    #[error("the indexer's task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// An indexer ready to run, with this worker's leases over the stream (none without a fleet: it
/// reads every stream shard).
#[derive(Debug)]
pub struct Opened {
    indexer: Indexer,
    leases: Option<Leases<LeaseTable>>,
}

/// Checks the table's stream, loads the checkpoints and prepares the leases.
pub async fn open(
    dynamo: &Dynamo,
    table: &str,
    queue: &str,
    options: &IndexerOptions,
    fleet: Option<IndexerFleet>,
) -> Result<Opened, AdapterError> {
    let indexer = Indexer::open(
        dynamo,
        table,
        QueueTable::new(dynamo.clone(), queue),
        options,
    )
    .await?;
    let leases = match fleet {
        None => None,
        Some(fleet) => {
            let leases = indexer_leases(dynamo, &fleet.lease_table, table, fleet.config).await?;
            Some(match fleet.this {
                Some(this) => leases.with_owner_check(Arc::new(this)),
                None => leases,
            })
        }
    };
    Ok(Opened { indexer, leases })
}

/// The indexer at work.
#[derive(Debug)]
pub struct Running {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<IndexerReport, IndexerStopped>>,
    beating: Option<Beating<LeaseTable>>,
    /// Fires when the indexer stops on its own (a fatal error): the daemon stops with it.
    pub failed: Option<oneshot::Receiver<()>>,
}

impl Running {
    pub fn start(opened: Opened) -> Running {
        let mut beating = opened.leases.map(|l| Arc::new(l).start());
        let indexer = match &beating {
            Some(b) => opened.indexer.shared(b.leases().usable()),
            None => opened.indexer,
        };
        let lease_failure = beating.as_mut().and_then(|b| b.failure());
        let (stop, stopped) = oneshot::channel::<()>();
        let (failed, failure) = oneshot::channel();
        let task = tokio::spawn(async move {
            let (lease_failed, lease_error) = oneshot::channel();
            let stop = async move {
                tokio::select! {
                    _ = stopped => {}
                    e = precise_ttl_engine::lease::failed(lease_failure) => {
                        let _ = lease_failed.send(e);
                    }
                }
            };
            let report = indexer.run(stop).await;
            let result = match (report, lease_error.await.ok()) {
                (Err(e), _) => Err(IndexerStopped::Indexer(e)),
                (Ok(_), Some(e)) => Err(IndexerStopped::Leases(e)),
                (Ok(report), None) => Ok(report),
            };
            if result.is_err() {
                let _ = failed.send(());
            }
            result
        });
        Running {
            stop,
            task,
            beating,
            failed: Some(failure),
        }
    }

    /// Stops indexing (the page being written is finished first), then releases the leases.
    pub async fn stop(self) -> Result<IndexerReport, IndexerStopped> {
        let _ = self.stop.send(());
        let report = self.task.await.map_err(IndexerStopped::Task)?;
        if let Some(beating) = self.beating {
            beating.stop().await;
        }
        report
    }
}
