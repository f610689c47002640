//! `run`'s expiry queue indexer (the stream-queue layout): its options and leases from the
//! flags; opening, running and stopping it are `precise_ttl_stream::queue::running`'s.

use crate::args::RunArgs;
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::{AdapterError, Dynamo};
use precise_ttl_stream::queue::indexer::IndexerOptions;
use precise_ttl_stream::queue::running::{IndexerFleet, Opened};

/// Checks the table's stream, loads the checkpoints and prepares the leases (none with
/// `--no-leases`: it reads every stream shard).
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
    let fleet = (!args.fleet.no_leases).then(|| {
        let (config, this) = crate::run_cmd::lease_config(args);
        IndexerFleet {
            lease_table: args.fleet.table.lease_table.clone(),
            config,
            this,
        }
    });
    precise_ttl_stream::queue::running::open(dynamo, table, queue, &options, fleet).await
}
