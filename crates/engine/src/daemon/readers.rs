//! The readers that feed the dispatcher: per lane a head reader (read-ahead over the near
//! future) and a backlog reader (everything older, oldest first, paced to what one index
//! partition takes), plus the periodic sweep of stray partitions (shard values outside
//! `0..shards`).

use super::{NEAR_MARGIN, READ_YIELD_MAX, Shared, Work, YIELD_WHEN_WAITING, lock, stopped};
use crate::clock::Clock;
use crate::store::ExpiryStore;
use precise_ttl_core::{DueWindow, ErrorClass, NATIVE_TTL_MAX_AGE, Timestamp};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Sweeps stray shard values at start and then every `every`.
pub(super) async fn strays<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    if shared.partitioning.strays().is_empty() {
        return;
    }
    let mut config = super::sweep::SweepConfig::default();
    // One probe at a time: strays are rare, and the probe must not compete with on-time deletes
    // (about 1 000 queries, a second or two on DynamoDB Local).
    config.concurrency = 8;
    config.shard_parallelism = 1;
    config.page_size = shared.config.page_size;
    config.backoff = shared.config.backoff;
    let sweeper = super::sweep::Sweeper::new(
        Arc::clone(&shared.store),
        Arc::clone(&shared.clock),
        Arc::clone(&shared.partitioning),
        config,
    );
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tick.tick() => {}
        }
        if !shared.owns(0) {
            // The worker holding lane 0 probes for the fleet.
            continue;
        }
        let window = DueWindow::at(shared.clock.now());
        let strays = match sweeper.find_strays(window).await {
            Ok(s) => s,
            Err(super::sweep::SweepError::Fatal(e)) if e.class == ErrorClass::Fatal => {
                // Access denied or a vanished index stops the daemon, whichever reader sees it.
                shared.fail(e);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "stray partition probe failed");
                continue;
            }
        };
        if strays.is_empty() {
            continue;
        }
        match sweeper.sweep_partitions(window, &strays).await {
            Ok(report) => shared.counters.absorb(crate::counters::Tally {
                deleted: report.deleted,
                skipped: report.skipped,
                unconfirmed: report.unconfirmed,
                errors: report.errors,
                throttled: report.throttled,
                queries: report.pages,
            }),
            Err(super::sweep::SweepError::Fatal(e)) if e.class == ErrorClass::Fatal => {
                shared.fail(e);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "stray partition sweep failed"),
        }
    }
}

pub(super) async fn head<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    lane: usize,
    timely: mpsc::Sender<Work<S::Key>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = &shared.config;
    let lookback = config.lookback.max(config.poll_interval);
    // Items written late, with an expiry before what an earlier read already covered, are found
    // by re-reading only up to one poll (and a margin) ahead: the read that sees such an item
    // comes at least `NEAR_MARGIN` before its expiry. Further ahead, each read fetches only the
    // time no read has covered yet, instead of the whole horizon again.
    let near_ahead = config.poll_interval + NEAR_MARGIN;
    let mut far_until: Option<Timestamp> = None;
    let mut next_read = Instant::now();
    let mut reads = 0u32;
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep_until(next_read) => {}
        }
        // Reads start at most a poll interval apart (a slow read is followed at once), sooner at
        // random: they then reach the store at every point of its clock's second, and their
        // answers' `Date` headers bound this host's clock lead to within a few ms (see
        // `crate::skew`) instead of to the second. Up to half sooner for the first reads, so the
        // bound is tight within seconds of a start; then up to 10 % (5 % more queries).
        let early = if reads < 5 { 0.5 } else { 0.1 };
        reads += 1;
        next_read = Instant::now()
            + config
                .poll_interval
                .mul_f64(1.0 - early * shared.random_unit());
        if !shared.owns(lane) {
            far_until = None;
            if !wait_until_owned(&shared, lane, &mut stop).await {
                return;
            }
        }
        // Deleting the present goes before reading the future, while the last read reaches
        // far enough ahead that this one can wait.
        let yielding = Instant::now();
        while far_until.is_some_and(|until| {
            until.millis_since(shared.clock.now())
                > (near_ahead + READ_YIELD_MAX).as_millis() as i64
        }) && shared.waiting_at_least(lane, YIELD_WHEN_WAITING)
            && yielding.elapsed() < READ_YIELD_MAX
        {
            tokio::select! {
                _ = stopped(&mut stop) => return,
                _ = tokio::time::sleep(YIELD_STEP) => {}
            }
        }
        let now = shared.clock.now();
        let horizon_end = now.saturating_add(config.horizon.max(near_ahead));
        let near_end = now.saturating_add(near_ahead);
        let from = now.saturating_sub(lookback);
        let after = |until: Timestamp| Timestamp::from_millis(until.as_millis() + 1);
        // Behind, the recent time holds items already waiting; reading it again only costs.
        // What a skipped re-read would have found (a late write) is found once caught up.
        let (from, windows, skip_near) = match far_until {
            Some(until) if until > near_end => {
                let far = DueWindow::between(after(until), horizon_end);
                if shared.behind(lane) {
                    (from, vec![far], true)
                } else {
                    (from, vec![DueWindow::between(from, near_end), far], false)
                }
            }
            // This reader's last read ended before the near future (it waited long for room in
            // the dispatcher's queue): go on from there, so no time is left unread.
            Some(until) => {
                let from = from.min(after(until));
                (from, vec![DueWindow::between(from, horizon_end)], false)
            }
            // Contiguous: one read does it all.
            None => (from, vec![DueWindow::between(from, horizon_end)], false),
        };
        let mut ok = true;
        for window in windows {
            if window.oldest > window.until {
                continue;
            }
            let seq = shared.next_read();
            let listed = shared
                .read_window(lane, window, "head", seq, |w| {
                    let timely = timely.clone();
                    async move { timely.send(w).await.is_ok() }
                })
                .await;
            ok &= listed.is_ok();
            // A complete read no longer listing an item held for later at its expiry: the
            // application changed its TTL (or deleted it) since it was read. Not sending its
            // delete saves the write a failing conditional delete costs (see
            // `Pending::withdraw_unlisted`).
            if listed.is_ok() {
                let withdrawn = lock(&shared.pending).withdraw_unlisted(
                    lane,
                    window.oldest.max(now),
                    window.until,
                    seq,
                );
                if withdrawn > 0 {
                    tracing::debug!(lane, withdrawn, "held items moved in the index; withdrawn");
                }
            }
        }
        if ok {
            far_until = Some(horizon_end);
            if !skip_near {
                lock(&shared.pending).coverage[lane].head_read(from, now);
            }
            lock(&shared.handle.status).last_read_ok = Some(Instant::now());
        } else {
            far_until = None;
        }
    }
}

/// How often a yielding head read looks again whether due items still wait.
const YIELD_STEP: Duration = Duration::from_millis(5);

/// Backlog items a lane's reader may hand over at once after a pause, in its pace's gaps.
const PACE_BURST: u32 = 5;

/// How often a backlog pass runs at least, however far behind the dispatcher is.
const PASS_AT_LEAST_EVERY: Duration = Duration::from_secs(30);

pub(super) async fn backlog<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    lane: usize,
    backlog: mpsc::Sender<Work<S::Key>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = &shared.config;
    let lookback = config.lookback.max(config.poll_interval);
    // An empty backlog costs one query per partition and pass, and the head reads already cover the
    // recent past; with nothing found, look again after `backlog_idle_interval`.
    let idle = config.poll_interval.max(config.backlog_idle_interval);
    let mut pause = Duration::ZERO;
    let mut generation = lock(&shared.pending).coverage[lane].error_generation;
    loop {
        // Wait out the pause, but come back at the next poll if a delete of this shard failed
        // meanwhile: its item needs this reader to find it again.
        let waiting = Instant::now();
        loop {
            let step = pause
                .saturating_sub(waiting.elapsed())
                .min(config.poll_interval);
            tokio::select! {
                _ = stopped(&mut stop) => return,
                _ = tokio::time::sleep(step) => {}
            }
            let failed = lock(&shared.pending).coverage[lane].error_generation != generation;
            if failed || waiting.elapsed() >= pause {
                break;
            }
        }
        if !shared.owns(lane) && !wait_until_owned(&shared, lane, &mut stop).await {
            return;
        }
        // Behind, a pass lists mostly items already waiting: wait until due items flow again,
        // but not forever: a failed delete or a late write is found only by a pass.
        let behind_since = Instant::now();
        while shared.behind(lane) && behind_since.elapsed() < PASS_AT_LEAST_EVERY {
            tokio::select! {
                _ = stopped(&mut stop) => return,
                _ = tokio::time::sleep(config.poll_interval) => {}
            }
        }
        let now = shared.clock.now();
        let bound = now.saturating_sub(lookback);
        let window = DueWindow::between(now.saturating_sub(NATIVE_TTL_MAX_AGE), bound);
        generation = lock(&shared.pending).coverage[lane].error_generation;
        // Items go out evenly spaced, at most `backlog_per_lane_per_second`, a few at once.
        let gap = Duration::from_secs_f64(1.0 / config.backlog_per_lane_per_second.max(1.0));
        let mut slot = Instant::now();
        let read = shared
            .read_window(lane, window, "backlog", 0, |w| {
                let backlog = backlog.clone();
                let now = Instant::now();
                slot = slot.max(now.checked_sub(gap * PACE_BURST).unwrap_or(now)) + gap;
                let at = slot;
                async move {
                    tokio::time::sleep_until(at).await;
                    backlog.send(w).await.is_ok()
                }
            })
            .await;
        pause = match read {
            Ok(found) => {
                let mut pending = lock(&shared.pending);
                let coverage = &mut pending.coverage[lane];
                if coverage.error_generation == generation {
                    coverage.backlog_bound =
                        Some(coverage.backlog_bound.map_or(bound, |b| b.max(bound)));
                }
                if found > 0 {
                    config.poll_interval
                } else {
                    idle
                }
            }
            Err(()) => config.poll_interval,
        };
    }
}

/// Waits until this worker may read `lane` again, forgetting what it had read of it (another
/// worker read and deleted meanwhile). False when the daemon stops first.
async fn wait_until_owned<S: ExpiryStore, C: Clock>(
    shared: &Shared<S, C>,
    lane: usize,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let Some(mut ownership) = shared.ownership.clone() else {
        return true;
    };
    lock(&shared.pending).coverage[lane].forget();
    tokio::select! {
        _ = stopped(stop) => false,
        owned = ownership.wait_for(|lanes| lanes.contains(&lane)) => owned.is_ok(),
    }
}
