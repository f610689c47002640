//! What a scheduled invocation sweeps, by the layout ([`IndexLayout`]): the shard index
//! ([`DynamoStore`]) or the expiry queue ([`QueueStore`]), with the same deletes (mode,
//! archive), leases, daemon settings and deadline either way, as `precise-ttl run` does.

use crate::config::{IndexLayout, LambdaConfig};
use precise_ttl_core::Shard;
use precise_ttl_dynamodb::{AdapterError, Dynamo, DynamoStore, LeaseTable};
use precise_ttl_engine::lease::Leases;
use precise_ttl_engine::worker::run_worker;
use precise_ttl_engine::{Daemon, DaemonError, DaemonReport, ExpiryStore, SharedPartitioning};
use precise_ttl_stream::queue::QueueStore;
use std::sync::Arc;
use tokio::time::Instant;

/// The store an invocation sweeps.
pub(crate) enum Store {
    Sharded(DynamoStore),
    Queue(QueueStore),
}

impl Store {
    /// Opens the layout's store, its deletes configured as `config` and `archive` say.
    pub(crate) async fn open(
        dynamo: &Dynamo,
        config: &LambdaConfig,
        archive: Option<&precise_ttl_archive::Sink>,
    ) -> Result<Store, AdapterError> {
        let configure = |items: DynamoStore| {
            let items = items.with_delete_mode(config.delete_mode);
            match archive {
                Some(sink) => items.with_archive(sink.clone()),
                None => items,
            }
        };
        Ok(match &config.index {
            IndexLayout::Sharded => Store::Sharded(configure(
                DynamoStore::open(dynamo.clone(), &config.table, config.layout.clone()).await?,
            )),
            IndexLayout::StreamQueue { queue_table } => Store::Queue(
                QueueStore::open(
                    dynamo.clone(),
                    &config.table,
                    queue_table,
                    config.layout.clone(),
                )
                .await?
                .map_items(configure),
            ),
        })
    }

    /// Runs the daemon on this store until `stop_at`, holding `leases` if any.
    pub(crate) async fn run(
        self,
        dynamo: &Dynamo,
        config: &LambdaConfig,
        leases: Option<Arc<Leases<LeaseTable>>>,
        stop_at: Instant,
    ) -> Result<DaemonReport, DaemonError> {
        match self {
            Store::Sharded(store) => {
                let capacity = store.write_capacity();
                sweep(store, capacity, dynamo, config, leases, stop_at).await
            }
            Store::Queue(store) => {
                let capacity = store.write_capacity();
                sweep(store, capacity, dynamo, config, leases, stop_at).await
            }
        }
    }
}

/// Where the leases of `config`'s layout stand in the lease table, beside the table's name:
/// the index's name, or the queue table's (as `run` scopes them, so a fleet of `run` workers
/// and functions on one layout share its leases).
pub(crate) fn lease_scope(config: &LambdaConfig) -> &str {
    match &config.index {
        IndexLayout::Sharded => &config.layout.index_name,
        IndexLayout::StreamQueue { queue_table } => queue_table,
    }
}

async fn sweep<S: ExpiryStore<Partition = Shard>>(
    store: S,
    capacity: precise_ttl_core::capacity::WriteCapacity,
    dynamo: &Dynamo,
    config: &LambdaConfig,
    leases: Option<Arc<Leases<LeaseTable>>>,
    stop_at: Instant,
) -> Result<DaemonReport, DaemonError> {
    let shards: SharedPartitioning<_> = Arc::new(config.layout.shards);
    let daemon = Daemon::new(
        Arc::new(store),
        dynamo.store_clock.clone(),
        shards,
        config.daemon_for(capacity),
    );
    run_worker(daemon, leases, tokio::time::sleep_until(stop_at)).await
}
