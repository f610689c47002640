//! What runs beside the workers while a run watches them (the TTL extender, the usage sampler),
//! how it ends, and what the run then hands the analysis, whichever store it ran on.

use crate::app::AppWriter;
use crate::config::BenchConfig;
use crate::error::BenchError;
use crate::fleet::Fleet;
use crate::items::ItemWriter;
use crate::load::extend_ttls;
use crate::progress::{Event, Progress};
use crate::usage::UsageSampler;
use precise_ttl_bench::Inputs;
use precise_ttl_core::Timestamp;
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_engine::Clock;
use std::collections::HashSet;

/// What runs beside the workers while they are watched: the TTL extender (its writes come
/// back when it ends) and the usage sampler of the first worker.
pub(crate) struct Beside {
    extender: tokio::task::JoinHandle<Result<Vec<crate::load::SentWrite>, BenchError>>,
    sampler: UsageSampler,
}

/// What the run left once the watch is over.
pub(crate) struct Ended {
    pub(crate) app: Option<precise_ttl_bench::AppLoad>,
    pub(crate) run_ended: Timestamp,
    pub(crate) usage: crate::usage::Usage,
    pub(crate) extended: Vec<crate::load::SentWrite>,
}

impl Ended {
    /// The analysis's inputs from the watch: its span, the TTL extensions and the application's
    /// writes. Each store's run adds the items, what it saw deleted and left, and the bound, the
    /// raw rate and the observer error it has. `partition` places an extended item on its table
    /// partition where the store says (the simulator).
    pub(crate) fn inputs(
        &self,
        run_started: Timestamp,
        config: &BenchConfig,
        partition: impl Fn(&str) -> Option<u32>,
    ) -> Inputs {
        Inputs {
            planted: Vec::new(),
            removals: Vec::new(),
            present_at_end: HashSet::new(),
            run_started_ms: run_started.as_millis(),
            run_ended_ms: self.run_ended.as_millis(),
            observer_error_ms: None,
            capacity: None,
            hot_shard: config.hot_shard_share.map(|_| 0),
            raw_batch_per_s: None,
            app_writes: self
                .extended
                .iter()
                .map(|w| w.app_write(partition(&w.key)))
                .collect(),
            app: self.app.clone(),
        }
    }
}

impl Beside {
    pub(crate) fn start(
        dynamo: &Dynamo,
        table: &str,
        items: &ItemWriter,
        extensions: Vec<crate::plan::Extension>,
        fleet: Option<&Fleet>,
        sampler: Option<UsageSampler>,
    ) -> Beside {
        Beside {
            extender: tokio::spawn(extend_ttls(
                dynamo.clone(),
                table.to_string(),
                items.clone(),
                extensions,
            )),
            // A worker started before the load is sampled from its start.
            sampler: sampler.unwrap_or_else(|| {
                UsageSampler::start(fleet.and_then(|f| f.first_pid()).unwrap_or(0))
            }),
        }
    }

    /// Ends them, and the application's writer first, after a watch that went well: the run
    /// ends when the writer has stopped.
    pub(crate) async fn end(
        self,
        app: Option<AppWriter>,
        clock: &impl Clock,
        progress: &dyn Progress,
    ) -> Result<Ended, BenchError> {
        let app = match app {
            Some(app) => Some(app.stop().await?),
            None => None,
        };
        let run_ended = clock.now();
        let usage = self.sampler.stop();
        progress.event(Event::SweepFinished);
        let extended = self.extender.await??;
        Ok(Ended {
            app,
            run_ended,
            usage,
            extended,
        })
    }
}

/// After a failed watch: the workers, the application's writer and the TTL extender stopped,
/// whatever they answer, so that the run's own error is the one reported.
pub(crate) async fn abandon(
    fleet: Option<Fleet>,
    app: Option<AppWriter>,
    beside: Beside,
    now: Timestamp,
) {
    if let Some(fleet) = fleet {
        let _ = fleet.stop(now.as_millis()).await;
    }
    if let Some(app) = app {
        let _ = app.stop().await;
    }
    beside.extender.abort();
}
