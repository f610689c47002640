//! `run`'s expiry queue indexer (the stream-queue layout): opened with the daemon, run beside it
//! in a task of its own on the stream shards its leases grant, and stopped after it.

use crate::args::RunArgs;
use anyhow::Context;
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::{AdapterError, Dynamo, LeaseTable};
use precise_ttl_engine::lease::{Beating, Leases};
use precise_ttl_stream::queue::QueueTable;
use precise_ttl_stream::queue::indexer::{Indexer, IndexerOptions, IndexerReport, indexer_leases};
use std::sync::Arc;
use tokio::sync::oneshot;

/// An indexer ready to run, with this worker's leases over the stream (none with
/// `--no-leases`: it reads every stream shard).
pub struct Opened {
    indexer: Indexer,
    leases: Option<Leases<LeaseTable>>,
}

/// Checks the table's stream, loads the checkpoints and prepares the leases.
pub async fn open(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    args: &RunArgs,
    queue: &str,
) -> Result<Opened, AdapterError> {
    let options = IndexerOptions {
        ttl_attribute: layout.ttl_attribute.clone(),
        shards: layout.shards,
        checkpoint_table: args.indexer.checkpoints.indexer_checkpoint_table.clone(),
        poll_interval: args.indexer.indexer_poll_interval,
    };
    let indexer = Indexer::open(
        dynamo,
        table,
        QueueTable::new(dynamo.clone(), queue),
        &options,
    )
    .await?;
    let leases = match args.fleet.no_leases {
        true => None,
        false => {
            let (config, this) = crate::run_cmd::lease_config(args);
            let leases =
                indexer_leases(dynamo, &args.fleet.table.lease_table, table, config).await?;
            Some(match this {
                Some(this) => leases.with_owner_check(Arc::new(this)),
                None => leases,
            })
        }
    };
    Ok(Opened { indexer, leases })
}

/// The indexer at work.
pub struct Running {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<IndexerReport>>,
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
                    Some(Ok(e)) = async {
                        match lease_failure {
                            Some(f) => Some(f.await),
                            None => std::future::pending().await,
                        }
                    } => {
                        let _ = lease_failed.send(e);
                    }
                }
            };
            let report = indexer.run(stop).await;
            let result = match (report, lease_error.await.ok()) {
                (Err(e), _) => {
                    Err(anyhow::Error::new(e).context("the expiry queue's indexer stopped"))
                }
                (Ok(_), Some(e)) => {
                    Err(anyhow::Error::new(e).context("the indexer's lease table failed"))
                }
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
    pub async fn stop(self) -> anyhow::Result<IndexerReport> {
        let _ = self.stop.send(());
        let report = self.task.await.context("the indexer's task failed")?;
        if let Some(beating) = self.beating {
            beating.stop().await;
        }
        report
    }
}
