//! What a running daemon shows: backlog, read-ahead, per-lane and overall watermark, and when
//! an index read last succeeded (for `/healthz`); published to metrics and to a shared handle.

use super::{REMEMBER_RESOLVED, Shared, lock, stopped};
use crate::clock::Clock;
use crate::metrics as m;
use crate::store::ExpiryStore;
use precise_ttl_core::Timestamp;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A point-in-time view of the daemon, for health checks and `status`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaemonStatus {
    pub backlog: u64,
    pub scheduled: u64,
    pub watermark: Option<Timestamp>,
    /// Per lane (a shard, or the blog layout's windows).
    pub lane_watermarks: Vec<Option<Timestamp>>,
    /// When a head read last succeeded (monotonic), for `/healthz`.
    pub last_read_ok: Option<Instant>,
    /// With leases: when a heartbeat last succeeded, and the leases held then.
    pub last_heartbeat_ok: Option<(Instant, usize)>,
    /// With leases: how many this worker holds now.
    pub leases_held: Option<usize>,
    /// Lanes with due items that nobody attends (see `stall`), by name.
    pub stalled: Vec<String>,
    /// Admission's table-wide limit of delete requests in flight.
    pub concurrency_limit: usize,
    /// The table's send rate (items/s) while engaged.
    pub table_rate: Option<f64>,
    /// The rate retries go at (items/s) while engaged.
    pub retry_rate: Option<f64>,
    /// The backlog's budget (items/s): its current rate and its ceiling, when budgeted.
    pub backlog_rate: Option<f64>,
    pub backlog_ceiling: Option<f64>,
    /// Lanes sending under a limit of their own (their index partition refused), with it
    /// (items/s).
    pub limited_lanes: Vec<(usize, f64)>,
    /// Throttled deletes by scope (`table_partition`, `table`, `index_partition`, `index`,
    /// `unknown`).
    pub refusals: Vec<(String, u64)>,
}

/// What `/healthz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Index reads succeed.
    Reading,
    /// A fleet worker that holds no lease (more workers than shards, or waiting for its share)
    /// and whose heartbeats succeed: ready to take over.
    Standby,
    /// A worker that holds no lease sees shards with due items that nobody attends: it is
    /// not the standby it would be, the fleet has stopped deleting them.
    Stalled(Vec<String>),
    /// No index read yet, and no successful heartbeat without leases.
    Starting,
    /// No index read has succeeded for this long.
    Stale(Duration),
}

impl DaemonStatus {
    /// Healthy while the worker does its job: reading its shards, or, holding none, beating.
    pub fn health(&self, now: Instant, stale_after: Duration) -> Health {
        let fresh = |t: Instant| now.saturating_duration_since(t) <= stale_after;
        match (self.last_read_ok, self.last_heartbeat_ok) {
            _ if self.leases_held == Some(0) && !self.stalled.is_empty() => {
                Health::Stalled(self.stalled.clone())
            }
            (Some(t), _) if fresh(t) => Health::Reading,
            (_, Some((t, 0))) if fresh(t) => Health::Standby,
            (Some(t), _) => Health::Stale(now.saturating_duration_since(t)),
            (None, _) => Health::Starting,
        }
    }
}

/// Shared view of a running daemon.
#[derive(Debug, Clone, Default)]
pub struct DaemonHandle {
    pub(super) status: Arc<Mutex<DaemonStatus>>,
}

impl DaemonHandle {
    pub fn status(&self) -> DaemonStatus {
        lock(&self.status).clone()
    }

    /// The worker holds `held` leases now.
    pub fn leases_held(&self, held: usize) {
        lock(&self.status).leases_held = Some(held);
    }

    /// A lease heartbeat succeeded while holding `held` leases.
    pub fn lease_heartbeat_ok(&self, held: usize) {
        lock(&self.status).last_heartbeat_ok = Some((Instant::now(), held));
    }
}

pub(super) fn publish<S: ExpiryStore, C: Clock>(shared: &Shared<S, C>) {
    let now = shared.clock.now();
    let mut pending = lock(&shared.pending);
    if let Some(before) = Instant::now().checked_sub(REMEMBER_RESOLVED) {
        pending.forget_resolved_before(before);
    }
    // A lane this worker does not hold has no watermark here: its holder publishes it.
    let lane_watermarks: Vec<Option<Timestamp>> = (0..pending.coverage.len())
        .map(|lane| {
            shared
                .owns(lane)
                .then(|| pending.watermark(lane, now))
                .flatten()
        })
        .collect();
    let owned: Vec<usize> = (0..lane_watermarks.len())
        .filter(|lane| shared.owns(*lane))
        .collect();
    let (backlog, scheduled) = pending.due_count(now);
    drop(pending);
    let overall = if !owned.is_empty() && owned.iter().all(|l| lane_watermarks[*l].is_some()) {
        lane_watermarks.iter().flatten().min().copied()
    } else {
        None
    };
    metrics::gauge!(m::BACKLOG).set(backlog as f64);
    metrics::gauge!(m::SCHEDULED).set(scheduled as f64);
    for (lane, w) in lane_watermarks.iter().enumerate() {
        if let Some(w) = *w {
            shared.partitioning.watermark_advanced(lane, w);
            metrics::gauge!(m::WATERMARK, "shard" => shared.partitioning.lane_name(lane))
                .set(w.as_secs_f64());
        }
    }
    if let Some(w) = overall {
        metrics::gauge!(m::WATERMARK, "shard" => "all").set(w.as_secs_f64());
        metrics::gauge!(m::WATERMARK_DELAY).set(now.millis_since(w).max(0) as f64 / 1000.0);
    }
    let mut status = lock(&shared.handle.status);
    status.backlog = backlog;
    status.scheduled = scheduled;
    status.watermark = overall;
    status.lane_watermarks = lane_watermarks;
}

pub(super) async fn publish_every<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        publish(&shared);
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_healthy_while_it_reads_or_holds_no_lease_and_beats() {
        let t0 = Instant::now();
        let stale = Duration::from_secs(30);
        let later = t0 + Duration::from_secs(40);
        let status = |read: Option<Instant>, beat: Option<(Instant, usize)>| DaemonStatus {
            last_read_ok: read,
            last_heartbeat_ok: beat,
            ..DaemonStatus::default()
        };
        assert_eq!(status(None, None).health(t0, stale), Health::Starting);
        assert_eq!(status(Some(t0), None).health(t0, stale), Health::Reading);
        assert_eq!(
            status(Some(t0), None).health(later, stale),
            Health::Stale(Duration::from_secs(40))
        );
        // A standby (more workers than shards): no read ever, heartbeats fine.
        assert_eq!(
            status(None, Some((later, 0))).health(later, stale),
            Health::Standby
        );
        // Holding leases it cannot read is not standby.
        assert_eq!(
            status(Some(t0), Some((later, 3))).health(later, stale),
            Health::Stale(Duration::from_secs(40))
        );
        assert_eq!(
            status(None, Some((later, 3))).health(later, stale),
            Health::Starting
        );
        // A worker holding no lease that sees due items nobody attends is red, whether its
        // heartbeats succeed or not; one that reads its own shards is not.
        let stalled = |held: usize, beat: Option<(Instant, usize)>| DaemonStatus {
            stalled: vec!["3".into()],
            leases_held: Some(held),
            ..status(None, beat)
        };
        assert_eq!(
            stalled(0, Some((later, 0))).health(later, stale),
            Health::Stalled(vec!["3".into()])
        );
        assert_eq!(
            stalled(0, None).health(later, stale),
            Health::Stalled(vec!["3".into()])
        );
        let reading = DaemonStatus {
            last_read_ok: Some(later),
            ..stalled(2, Some((later, 2)))
        };
        assert_eq!(reading.health(later, stale), Health::Reading);
    }
}
