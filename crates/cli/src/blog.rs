//! Sweeping the 2022 blog's window index: enumerate every window label from the durable
//! checkpoint (minus a lookback) up to the current window, and sweep them as shards with the
//! same conditional deletes as our own layout.

use crate::args::{BlogArgs, Global, WindowFormatArg};
use anyhow::Context;
use precise_ttl_core::{DueWindow, ShardCount, Timestamp, TtlLayout, WindowFormat, WindowSpec};
use precise_ttl_dynamodb::{CheckpointTable, DynamoStore};
use precise_ttl_engine::{Clock, SweepConfig, SweepReport, Sweeper, SystemClock};
use std::sync::Arc;

/// Windows per sweep chunk: a chunk is swept like a table with that many shards.
const WINDOWS_PER_CHUNK: usize = 1024;

pub struct BlogSweeper {
    store: DynamoStore,
    checkpoints: CheckpointTable,
    id: String,
    spec: WindowSpec,
    since: std::time::Duration,
    lookback: std::time::Duration,
    pub config: SweepConfig,
}

/// What one pass over the windows did.
#[derive(Debug, Default)]
pub struct BlogPass {
    pub windows: u64,
    pub first_window: Option<String>,
    pub report: SweepReport,
    pub swept_until: Option<Timestamp>,
}

impl BlogSweeper {
    pub async fn open(
        global: &Global,
        blog: &BlogArgs,
        layout: &TtlLayout,
    ) -> anyhow::Result<Self> {
        let table = global.table()?;
        let format = match blog.window_format {
            WindowFormatArg::Millis => WindowFormat::Millis,
            WindowFormatArg::Seconds => WindowFormat::Seconds,
        };
        let spec = WindowSpec::new(blog.window_size, format)?;
        let layout = TtlLayout {
            shard_attribute: blog.window_attribute.clone(),
            ..layout.clone()
        };
        let dynamo = crate::wiring::connect(global).await?;
        let store = DynamoStore::open_blog_windows(dynamo.clone(), table, layout.clone()).await?;
        let checkpoints = CheckpointTable::open_or_create(dynamo, &blog.checkpoint_table)
            .await
            .context("cannot use the checkpoint table")?;
        let mut config = SweepConfig::new(layout.shards);
        config.probe_strays = false;
        Ok(BlogSweeper {
            store,
            checkpoints,
            id: format!("{table}/{}", layout.index_name),
            spec,
            since: blog.window_since,
            lookback: blog.window_lookback,
            config,
        })
    }

    pub fn with_store(mut self, f: impl FnOnce(DynamoStore) -> DynamoStore) -> Self {
        self.store = f(self.store);
        self
    }

    /// Sweeps every window from the checkpoint (or `--window-since` ago) to now, advancing the
    /// checkpoint past each chunk of windows that was swept without errors.
    pub async fn pass(&self) -> anyhow::Result<BlogPass> {
        let now = SystemClock.now();
        let from = match self.checkpoints.load(&self.id).await? {
            Some(t) => t.saturating_sub(self.lookback),
            None => now.saturating_sub(self.since),
        };
        let first = self.spec.index_of(from);
        let current = self.spec.index_of(now);
        let mut pass = BlogPass {
            first_window: Some(self.spec.label(first)),
            ..BlogPass::default()
        };
        let window = DueWindow::at(now);
        let indices: Vec<i64> = (first..=current).collect();
        for chunk in indices.chunks(WINDOWS_PER_CHUNK) {
            let labels: Vec<String> = chunk.iter().map(|&i| self.spec.label(i)).collect();
            let mut config = self.config.clone();
            config.shards = ShardCount::new(labels.len() as u64).expect("1..=1024 windows");
            let store = self.store.for_windows(labels);
            let sweeper = Sweeper::new(Arc::new(store), Arc::new(SystemClock), config.clone());
            let shards: Vec<_> = config.shards.all().collect();
            let report = sweeper.sweep_shards(window, &shards).await?;
            pass.windows += chunk.len() as u64;
            let r = &mut pass.report;
            r.deleted += report.deleted;
            r.skipped += report.skipped;
            r.errors += report.errors;
            r.throttled += report.throttled;
            r.pages += report.pages;
            r.max_lag_ms = r.max_lag_ms.max(report.max_lag_ms);
            if report.errors > 0 {
                // Items that kept failing are still due: the checkpoint must not pass them.
                break;
            }
            // A window is done once it has ended: its items all expired before now.
            let last = *chunk.last().expect("chunks are not empty");
            let done_until = if last == current {
                self.spec.start(current)
            } else {
                self.spec.end(last)
            };
            self.checkpoints.advance(&self.id, done_until).await?;
            pass.swept_until = Some(done_until);
        }
        pass.report.now = now;
        Ok(pass)
    }
}
