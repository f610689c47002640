//! The 2022 blog's window index, swept by the same engine as our own layout.
//!
//! The store reads window labels ([`DynamoStore<WindowLabel>`]); [`Windows`] says which labels a
//! time range spans, from a floor; a small control table keeps how far a previous run got
//! ("swept until"), so a restart reads from there (minus a lookback, for late writes) instead of
//! from `since` ago. The daemon's watermark is what gets saved: every due item up to it is known
//! deleted, whichever reader deleted it.

use crate::checkpoint::CheckpointTable;
use crate::connect::Dynamo;
use crate::error::AdapterError;
use crate::store::DynamoStore;
use precise_ttl_core::{Timestamp, TtlLayout, WindowLabel, WindowSpec};
use precise_ttl_engine::{
    Clock, DaemonHandle, SharedPartitioning, SweepConfig, SweepError, SweepReport, Sweeper, Windows,
};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// How the writers label windows and where the checkpoint lives.
#[derive(Debug, Clone)]
pub struct BlogOptions {
    /// The String attribute holding `<startISO>_<endISO>`, the index's partition key.
    pub window_attribute: String,
    pub spec: WindowSpec,
    /// With no checkpoint yet, how far back to read.
    pub since: Duration,
    /// How far behind the checkpoint (and, while running, the watermark) reads reach.
    pub lookback: Duration,
    /// The control table keeping each index's "swept until"; created if missing.
    pub checkpoint_table: String,
}

#[derive(Debug, Error)]
pub enum BlogError {
    #[error(transparent)]
    Sweep(#[from] SweepError),
    #[error("cannot use the checkpoint table: {0}")]
    Checkpoint(#[source] AdapterError),
}

/// One table swept through its blog window index.
#[derive(Debug)]
pub struct BlogWindows {
    pub store: DynamoStore<WindowLabel>,
    pub windows: Arc<Windows>,
    checkpoints: CheckpointTable,
    id: String,
}

impl BlogWindows {
    /// Checks the table and its window index, creates the checkpoint table if missing, and
    /// places the floor: the checkpoint minus the lookback, or `since` before `now`.
    pub async fn open(
        dynamo: Dynamo,
        table: &str,
        layout: &TtlLayout,
        options: &BlogOptions,
        now: Timestamp,
    ) -> Result<Self, AdapterError> {
        let layout = TtlLayout {
            shard_attribute: options.window_attribute.clone(),
            ..layout.clone()
        };
        let store = DynamoStore::open_blog_windows(dynamo.clone(), table, layout.clone()).await?;
        let checkpoints =
            CheckpointTable::open_or_create(dynamo, &options.checkpoint_table).await?;
        let id = format!("{table}/{}", layout.index_name);
        let floor = match checkpoints.load(&id).await? {
            Some(until) => until.saturating_sub(options.lookback),
            None => now.saturating_sub(options.since),
        };
        Ok(BlogWindows {
            store,
            windows: Arc::new(Windows::new(options.spec, floor, options.lookback)),
            checkpoints,
            id,
        })
    }

    pub fn partitioning(&self) -> SharedPartitioning<WindowLabel> {
        Arc::clone(&self.windows) as SharedPartitioning<WindowLabel>
    }

    /// The first window label reads reach (at the floor).
    pub fn first_window(&self) -> String {
        let spec = self.windows.spec();
        spec.label(spec.index_of(self.windows.floor()))
    }

    /// One pass over every window from the floor to now; the checkpoint advances to the pass's
    /// instant only if no delete failed (a failed item is still due and must be read again).
    pub async fn sweep_once<C: Clock>(
        &self,
        clock: Arc<C>,
        config: SweepConfig,
    ) -> Result<(SweepReport<WindowLabel>, Option<Timestamp>), BlogError> {
        let sweeper = Sweeper::new(
            Arc::new(self.store.clone()),
            clock,
            self.partitioning(),
            SweepConfig {
                probe_strays: false,
                ..config
            },
        );
        let report = sweeper.sweep_once().await?;
        if report.errors > 0 {
            return Ok((report, None));
        }
        let until = report.now;
        self.save(until).await?;
        Ok((report, Some(until)))
    }

    /// Saves a running daemon's watermark, if it has one; returns what was saved.
    pub async fn save_watermark(
        &self,
        handle: &DaemonHandle,
    ) -> Result<Option<Timestamp>, BlogError> {
        let Some(watermark) = handle.status().watermark else {
            return Ok(None);
        };
        self.save(watermark).await?;
        Ok(Some(watermark))
    }

    /// Saves the daemon's watermark every `every`, for as long as it is polled (abort the task
    /// to stop). A failed save is logged and tried again at the next tick: the checkpoint only
    /// shortens a restart's catch-up, deletes do not depend on it.
    pub async fn save_watermark_every(&self, handle: DaemonHandle, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = self.save_watermark(&handle).await {
                tracing::warn!(error = %e, "cannot save the window checkpoint; trying again");
            }
        }
    }

    async fn save(&self, until: Timestamp) -> Result<(), BlogError> {
        self.checkpoints
            .advance(&self.id, until)
            .await
            .map_err(BlogError::Checkpoint)
    }
}
