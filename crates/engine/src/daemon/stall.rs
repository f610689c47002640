//! The stall watch: shards that hold due items while nobody attends their lease.
//!
//! A fleet can stop deleting without any worker failing: a supervisor that restarts a process
//! faster than a lease duration, a lease table that refuses writes, fewer workers than the
//! leases need. Each worker then looks healthy (a worker without a lease is a standby by design)
//! while items wait. So every worker watches the lanes its lease view calls unattended (not
//! renewed for half a lease duration, not held by it; see [`crate::lease::Leases::unattended`])
//! and asks the index whether one of them holds a due item (one query of one item per
//! partition, only for unattended lanes: a healthy fleet pays nothing). Such a lane is
//! stalled: said in the log when the set changes, in `precise_ttl_shards_stalled`, and in
//! `/healthz` of a worker that holds no lease.

use super::{Shared, lock, stopped};
use crate::clock::Clock;
use crate::metrics as m;
use crate::store::{DueQuery, ExpiryStore};
use precise_ttl_core::DueWindow;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often unattended lanes are probed.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The most partitions of one lane probed per check (the blog layout's windows since its floor).
const MAX_PARTITIONS: usize = 64;

pub(super) async fn watch_stalls<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    unattended: watch::Receiver<BTreeSet<usize>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut stalled: BTreeSet<usize> = BTreeSet::new();
    metrics::gauge!(m::SHARDS_STALLED).set(0.0);
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep(CHECK_EVERY) => {}
        }
        let lanes: Vec<usize> = unattended.borrow().iter().copied().collect();
        let mut now_stalled = BTreeSet::new();
        for lane in lanes {
            if shared.owns(lane) {
                continue;
            }
            match has_due(&shared, lane).await {
                Some(true) => {
                    now_stalled.insert(lane);
                }
                Some(false) => {}
                // A failed probe keeps the last verdict.
                None if stalled.contains(&lane) => {
                    now_stalled.insert(lane);
                }
                None => {}
            }
        }
        if now_stalled != stalled {
            let names: Vec<String> = now_stalled
                .iter()
                .map(|l| shared.partitioning.lane_name(*l))
                .collect();
            if names.is_empty() {
                tracing::info!("no shard is stalled any more");
            } else {
                tracing::warn!(
                    shards = %names.join(","),
                    "{} shard(s) hold due items and no worker has renewed their lease for half a lease duration: nothing deletes them",
                    names.len()
                );
            }
            lock(&shared.handle.status).stalled = names;
            stalled = now_stalled;
        }
        metrics::gauge!(m::SHARDS_STALLED).set(stalled.len() as f64);
    }
}

/// Whether `lane` holds an item due now (`None`: the index could not say).
async fn has_due<S: ExpiryStore, C: Clock>(shared: &Shared<S, C>, lane: usize) -> Option<bool> {
    let window = DueWindow::at(shared.clock.now());
    for partition in shared
        .partitioning
        .partitions(lane, window)
        .into_iter()
        .take(MAX_PARTITIONS)
    {
        shared.counters.query("stall");
        let probe = DueQuery::probe(&partition, window);
        match shared.store.due_page(probe).await {
            Ok(page) if !page.items.is_empty() => return Some(true),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%partition, error = %e, "stall probe failed");
                return None;
            }
        }
    }
    Some(false)
}
