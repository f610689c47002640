//! A fleet in one benchmark run: several `precise-ttl run` workers sharing the table through
//! shard leases, and a schedule of what happens to them (SIGKILL, SIGTERM, a start, a restart, a
//! rolling restart). It records when each event happened, how long the live workers took to hold
//! every shard again, and how many items each worker deleted between events (from its
//! `/metrics`), so the report can show the split, the failover and the hand-over.

use crate::crash_loop::{self, CrashLoop, CrashLoopReport, KillEvery};
use crate::daemon::{DaemonProcess, scrape};
use crate::error::BenchError;
use precise_ttl_bench::Inputs;
use precise_ttl_engine::metrics as m;
use precise_ttl_engine::{Clock, SystemClock};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

/// What happens to the fleet at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "action", content = "worker")]
pub enum Action {
    /// Nothing: a boundary between measured phases (e.g. once the split has converged).
    Mark,
    /// SIGKILL worker N: its leases wait out their duration.
    Kill(usize),
    /// SIGTERM worker N and wait for it to exit: it hands its leases back.
    Term(usize),
    /// Start worker N (a new one, or one stopped before).
    Start(usize),
    /// SIGTERM worker N, wait for its exit, start it again with the same worker id.
    Restart(usize),
    /// SIGKILL worker N and start it again at once, as a supervisor restarts a crashed process
    /// (a new process; in the crash loop without a worker id, in a fleet with the same one).
    Crash(usize),
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Mark => write!(f, "mark"),
            Action::Kill(n) => write!(f, "SIGKILL w{n}"),
            Action::Term(n) => write!(f, "SIGTERM w{n}"),
            Action::Start(n) => write!(f, "start w{n}"),
            Action::Restart(n) => write!(f, "restart w{n} (SIGTERM, start)"),
            Action::Crash(n) => write!(f, "SIGKILL w{n}, start it again at once"),
        }
    }
}

/// One scheduled event, `at` after the first planted TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetEvent {
    pub at: Duration,
    pub action: Action,
}

/// `--event` syntax: `AT:mark`, `AT:kill:N`, `AT:term:N`, `AT:start:N`, `AT:restart:N` or
/// `AT:crash:N`, with AT a duration such as `30s` after the first TTL and N a worker number from 1.
impl FromStr for FleetEvent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(':');
        let (at, what) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let at = precise_ttl_core::duration::parse_duration(at)
            .map_err(|e| format!("{s:?}: the time {at:?} is not a duration like 30s ({e})"))?;
        let worker = |n: Option<&str>| -> Result<usize, String> {
            n.and_then(|n| n.parse().ok())
                .filter(|n: &usize| *n >= 1)
                .ok_or_else(|| {
                    format!("{s:?}: {what} needs a worker number from 1, as 30s:{what}:2")
                })
        };
        let action = match what {
            "mark" => Action::Mark,
            "kill" => Action::Kill(worker(parts.next())?),
            "term" => Action::Term(worker(parts.next())?),
            "start" => Action::Start(worker(parts.next())?),
            "restart" => Action::Restart(worker(parts.next())?),
            "crash" => Action::Crash(worker(parts.next())?),
            _ => {
                return Err(format!(
                    "{s:?}: expected AT:mark, AT:kill:N, AT:term:N, AT:start:N, AT:restart:N or AT:crash:N"
                ));
            }
        };
        if parts.next().is_some() {
            return Err(format!("{s:?}: too many parts"));
        }
        Ok(FleetEvent { at, action })
    }
}

/// The fleet a run starts with and what happens to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetPlan {
    /// Workers started with the run, numbered from 1.
    pub workers: usize,
    /// Every worker's lease duration.
    pub lease_duration: Duration,
    /// In order of `at`.
    pub events: Vec<FleetEvent>,
}

impl FleetPlan {
    /// Checks that the events name workers that exist, in a possible order.
    pub fn new(
        workers: usize,
        lease_duration: Duration,
        mut events: Vec<FleetEvent>,
    ) -> Result<FleetPlan, String> {
        if workers == 0 {
            return Err("a fleet needs at least one worker".into());
        }
        events.sort_by_key(|e| e.at);
        let mut live: Vec<bool> = vec![true; workers];
        for e in &events {
            match e.action {
                Action::Mark => {}
                Action::Kill(n) | Action::Term(n) | Action::Restart(n) | Action::Crash(n) => {
                    if !live.get(n - 1).copied().unwrap_or(false) {
                        return Err(format!("worker {n} is not running at {:?}", e.at));
                    }
                    live[n - 1] = matches!(e.action, Action::Restart(_) | Action::Crash(_));
                }
                Action::Start(n) => {
                    if n > live.len() + 1 {
                        return Err(format!(
                            "worker {n} started before worker {}: number new workers in order",
                            live.len() + 1
                        ));
                    }
                    if live.get(n - 1).copied().unwrap_or(false) {
                        return Err(format!("worker {n} is already running at {:?}", e.at));
                    }
                    if n > live.len() {
                        live.push(true);
                    } else {
                        live[n - 1] = true;
                    }
                }
            }
        }
        Ok(FleetPlan {
            workers,
            lease_duration,
            events,
        })
    }

    /// Worker ids as the lease table shows them.
    pub fn worker_id(n: usize) -> String {
        format!("w{n}")
    }
}

/// One event as it happened.
#[derive(Debug, Clone, Serialize)]
pub struct EventRecord {
    #[serde(flatten)]
    pub action: Action,
    /// Epoch ms when it was carried out.
    pub at_ms: i64,
    /// Seconds after the first planted TTL.
    pub offset_s: f64,
    /// After a kill, term or restart: ms until the live workers held every shard again (`None`
    /// if they never did before the run ended).
    pub all_shards_held_after_ms: Option<u64>,
    /// After a crash-loop kill: how long the killed process had run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lived_ms: Option<u64>,
}

/// Deletions between two boundaries (events, or the moment every shard was held again).
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub from_ms: i64,
    pub to_ms: i64,
    /// Items deleted in the phase per worker id, from each worker's `deleted_total`.
    pub deleted_by_worker: BTreeMap<String, u64>,
    /// The same as fractions of the phase's deletions.
    pub share_by_worker: BTreeMap<String, f64>,
    /// Lag of the items whose TTL falls in the phase (filled in by the report).
    pub lag: Option<PhaseLag>,
}

/// Lag of the items due in one phase.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PhaseLag {
    pub items: u64,
    pub p50_ms: i64,
    pub p99_ms: i64,
    pub max_ms: i64,
}

/// What the fleet did during the run.
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    pub workers: usize,
    pub lease_duration_ms: u64,
    pub events: Vec<EventRecord>,
    pub phases: Vec<Phase>,
    /// In a crash loop: the kills and each item's lag against them (filled in by the report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash_loop: Option<CrashLoopReport>,
}

impl FleetReport {
    /// The crash loop's report from this fleet's kills and the run's inputs.
    pub(crate) fn judge_crash_loop(&self, every: KillEvery, inputs: &Inputs) -> CrashLoopReport {
        let kills: Vec<&EventRecord> = self
            .events
            .iter()
            .filter(|e| matches!(e.action, Action::Crash(_)))
            .collect();
        crash_loop::report(
            every,
            &kills.iter().map(|e| e.at_ms).collect::<Vec<_>>(),
            kills
                .iter()
                .filter_map(|e| e.lived_ms)
                .map(|ms| ms as i64)
                .collect(),
            &kills
                .iter()
                .map(|e| e.all_shards_held_after_ms)
                .collect::<Vec<_>>(),
            inputs,
        )
    }
}

struct Worker {
    process: Option<DaemonProcess>,
    /// Deleted by the worker's earlier processes (a restart starts its counter at 0).
    deleted_before: u64,
    /// The current process's counter at its last scrape.
    deleted_now: u64,
}

/// The running fleet.
pub(crate) struct Fleet {
    plan: FleetPlan,
    shards: usize,
    command: Box<dyn Fn(&str) -> Command + Send>,
    workers: Vec<Worker>,
    next_event: usize,
    /// Epoch ms of the first planted TTL; event times count from it.
    first_ttl_ms: i64,
    records: Vec<EventRecord>,
    /// Boundaries with every worker's cumulative count there.
    boundaries: Vec<(i64, BTreeMap<String, u64>)>,
    /// The event waiting for every shard to be held again, and since when (epoch ms).
    awaiting_shards: Option<usize>,
    /// Kills and restarts of worker 1 on a random schedule.
    crash: Option<CrashLoop>,
}

impl Fleet {
    /// Starts the plan's first workers; `command` builds one worker's `run` command line.
    pub(crate) fn start(
        plan: FleetPlan,
        shards: usize,
        first_ttl_ms: i64,
        command: Box<dyn Fn(&str) -> Command + Send>,
    ) -> Result<Fleet, BenchError> {
        let mut fleet = Fleet {
            plan,
            shards,
            command,
            workers: Vec::new(),
            next_event: 0,
            first_ttl_ms,
            records: Vec::new(),
            boundaries: Vec::new(),
            awaiting_shards: None,
            crash: None,
        };
        for n in 1..=fleet.plan.workers {
            fleet.spawn(n)?;
        }
        Ok(fleet)
    }

    /// Kills worker 1 after pauses drawn from `every` (seeded by `seed`) and starts a new process
    /// at once each time, until `until_ms` (epoch ms).
    pub(crate) fn crash_every(mut self, every: KillEvery, seed: u64, until_ms: i64) -> Fleet {
        let now = SystemClock.now().as_millis();
        self.crash = Some(CrashLoop::new(every, seed, now, until_ms));
        self
    }

    /// Moves the first planted TTL (event times count from it) and the crash loop's end: for a
    /// fleet started before the load is planned, as the queue's indexer must run during it.
    pub(crate) fn retime(&mut self, first_ttl_ms: i64, crash_until_ms: i64) {
        self.first_ttl_ms = first_ttl_ms;
        if let Some(c) = &mut self.crash {
            c.end_at(crash_until_ms);
        }
    }

    /// The worker's name in the report: its worker id, or `run` in a crash loop, whose
    /// processes have the default identity.
    fn name(&self, n: usize) -> String {
        if self.crash.is_some() {
            "run".into()
        } else {
            FleetPlan::worker_id(n)
        }
    }

    fn spawn(&mut self, n: usize) -> Result<(), BenchError> {
        let process = DaemonProcess::spawn((self.command)(&FleetPlan::worker_id(n)))?;
        self.install(n, process);
        Ok(())
    }

    /// [`Fleet::spawn`] off the runtime's threads: the wait for the start line would otherwise
    /// hold up the stream observer, whose timing is the measurement.
    async fn spawn_aside(&mut self, n: usize) -> Result<(), BenchError> {
        let cmd = (self.command)(&FleetPlan::worker_id(n));
        let process = tokio::task::spawn_blocking(move || DaemonProcess::spawn(cmd)).await??;
        self.install(n, process);
        Ok(())
    }

    fn install(&mut self, n: usize, process: DaemonProcess) {
        if n > self.workers.len() {
            self.workers.push(Worker {
                process: None,
                deleted_before: 0,
                deleted_now: 0,
            });
        }
        let w = &mut self.workers[n - 1];
        w.deleted_before += w.deleted_now;
        w.deleted_now = 0;
        w.process = Some(process);
    }

    /// The first worker's pid, for the CPU and memory sampler.
    pub(crate) fn first_pid(&self) -> Option<u32> {
        self.workers.first()?.process.as_ref().map(|p| p.pid())
    }

    /// Fails if a worker that should run has exited.
    pub(crate) fn check_running(&mut self) -> Result<(), BenchError> {
        for w in &mut self.workers {
            if let Some(p) = &mut w.process {
                p.check_running()?;
            }
        }
        Ok(())
    }

    /// Scrapes every live worker's deleted count and leases held; returns the leases in total.
    async fn scrape_all(&mut self) -> usize {
        let mut held = 0;
        for w in &mut self.workers {
            let Some(p) = &w.process else { continue };
            if let Some(page) = scrape(p.metrics_url.as_deref()).await {
                if let Some(v) = metric(&page, m::DELETED) {
                    w.deleted_now = v as u64;
                }
                held += metric(&page, m::LEASES_HELD).unwrap_or(0.0) as usize;
            }
        }
        held
    }

    fn cumulative(&self) -> BTreeMap<String, u64> {
        self.workers
            .iter()
            .enumerate()
            .map(|(i, w)| (self.name(i + 1), w.deleted_before + w.deleted_now))
            .collect()
    }

    /// Carries out the events due at `now_ms` and notes when every shard is held again.
    pub(crate) async fn tick(&mut self, now_ms: i64) -> Result<(), BenchError> {
        if self.boundaries.is_empty() && now_ms >= self.first_ttl_ms {
            self.scrape_all().await;
            self.boundaries.push((now_ms, self.cumulative()));
        }
        if let Some(i) = self.awaiting_shards
            && self.scrape_all().await >= self.shards
        {
            let since = self.records[i].at_ms;
            self.records[i].all_shards_held_after_ms = Some((now_ms - since).max(0) as u64);
            self.awaiting_shards = None;
            self.boundaries.push((now_ms, self.cumulative()));
        }
        while let Some(event) = self.plan.events.get(self.next_event).copied() {
            let due_ms = self.first_ttl_ms + event.at.as_millis() as i64;
            if now_ms < due_ms {
                break;
            }
            self.next_event += 1;
            // Counts just before the event: a killed worker's last deletions are in them.
            self.scrape_all().await;
            let at_ms = now_ms.max(SystemClock.now().as_millis());
            self.boundaries.push((at_ms, self.cumulative()));
            match event.action {
                Action::Mark => {}
                Action::Kill(n) => {
                    if let Some(p) = self.workers[n - 1].process.take() {
                        p.kill()?;
                    }
                }
                Action::Term(n) => {
                    if let Some(p) = self.workers[n - 1].process.take() {
                        p.terminate().await?;
                    }
                }
                Action::Start(n) => self.spawn_aside(n).await?,
                Action::Restart(n) => {
                    if let Some(p) = self.workers[n - 1].process.take() {
                        p.terminate().await?;
                    }
                    self.spawn_aside(n).await?;
                }
                Action::Crash(n) => {
                    if let Some(p) = self.workers[n - 1].process.take() {
                        p.kill()?;
                    }
                    self.spawn_aside(n).await?;
                }
            }
            self.records.push(EventRecord {
                action: event.action,
                at_ms,
                offset_s: (at_ms - self.first_ttl_ms) as f64 / 1000.0,
                all_shards_held_after_ms: None,
                lived_ms: None,
            });
            if event.action != Action::Mark {
                self.awaiting_shards = Some(self.records.len() - 1);
            }
        }
        if self.crash.as_ref().is_some_and(|c| c.due(now_ms)) {
            self.crash_now().await?;
        }
        Ok(())
    }

    /// SIGKILLs worker 1 and starts a new process in its place at once.
    async fn crash_now(&mut self) -> Result<(), BenchError> {
        // Counts just before the kill: the killed process's last deletions are in them.
        self.scrape_all().await;
        let at_ms = SystemClock.now().as_millis();
        self.boundaries.push((at_ms, self.cumulative()));
        if let Some(p) = self.workers[0].process.take() {
            // Reaped before the next start, as a supervisor does: the dead owner's pid is gone.
            p.kill()?;
        }
        let lived_ms = self.crash.as_ref().map(|c| c.lived_ms(at_ms));
        self.spawn_aside(1).await?;
        if let Some(c) = &mut self.crash {
            c.restarted(at_ms);
        }
        self.records.push(EventRecord {
            action: Action::Crash(1),
            at_ms,
            offset_s: (at_ms - self.first_ttl_ms) as f64 / 1000.0,
            all_shards_held_after_ms: None,
            lived_ms,
        });
        self.awaiting_shards = Some(self.records.len() - 1);
        Ok(())
    }

    /// Capacity units of the live workers (a killed worker's are lost with it).
    pub(crate) async fn capacity(&self) -> Option<(f64, f64)> {
        let mut total: Option<(f64, f64)> = None;
        for w in &self.workers {
            let Some(p) = &w.process else { continue };
            if let Some((q, d)) = crate::daemon::scrape_capacity(p.metrics_url.as_deref()).await {
                let t = total.get_or_insert((0.0, 0.0));
                t.0 += q;
                t.1 += d;
            }
        }
        total
    }

    /// Closes the last phase at `now_ms`, stops every worker with SIGTERM, and returns the
    /// report (phases without lag yet), the first failed exit status if any, and the longest
    /// shutdown.
    pub(crate) async fn stop(
        mut self,
        now_ms: i64,
    ) -> Result<(FleetReport, Option<std::process::ExitStatus>, Duration), BenchError> {
        self.scrape_all().await;
        self.boundaries.push((now_ms, self.cumulative()));
        let mut failed = None;
        let mut longest = Duration::ZERO;
        for w in &mut self.workers {
            if let Some(p) = w.process.take() {
                let (status, took) = p.terminate().await?;
                if !status.success() && failed.is_none() {
                    failed = Some(status);
                }
                longest = longest.max(took);
            }
        }
        let phases = self
            .boundaries
            .windows(2)
            .filter(|b| b[1].0 > b[0].0)
            .map(|b| phase(&b[0], &b[1]))
            .collect();
        let report = FleetReport {
            workers: self.workers.len(),
            lease_duration_ms: self.plan.lease_duration.as_millis() as u64,
            events: self.records,
            phases,
            crash_loop: None,
        };
        Ok((report, failed, longest))
    }
}

fn phase(from: &(i64, BTreeMap<String, u64>), to: &(i64, BTreeMap<String, u64>)) -> Phase {
    let deleted_by_worker: BTreeMap<String, u64> =
        to.1.iter()
            .map(|(w, n)| (w.clone(), n - from.1.get(w).copied().unwrap_or(0).min(*n)))
            .collect();
    let total: u64 = deleted_by_worker.values().sum();
    let share_by_worker = deleted_by_worker
        .iter()
        .map(|(w, n)| (w.clone(), *n as f64 / total.max(1) as f64))
        .collect();
    Phase {
        from_ms: from.0,
        to_ms: to.0,
        deleted_by_worker,
        share_by_worker,
        lag: None,
    }
}

/// A metric without labels, read from a `/metrics` page.
fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Fills in each phase's lag from `(ttl_ms, lag_ms)` of every expired item.
pub(crate) fn fill_lags(report: &mut FleetReport, items: &[(i64, i64)]) {
    for p in &mut report.phases {
        let mut lags: Vec<i64> = items
            .iter()
            .filter(|(ttl, _)| (p.from_ms..p.to_ms).contains(ttl))
            .map(|(_, lag)| *lag)
            .collect();
        if lags.is_empty() {
            continue;
        }
        lags.sort_unstable();
        let at = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
        p.lag = Some(PhaseLag {
            items: lags.len() as u64,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: *lags.last().expect("not empty"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_and_explain_their_mistakes() {
        let e: FleetEvent = "45s:kill:3".parse().unwrap();
        assert_eq!(e.at, Duration::from_secs(45));
        assert_eq!(e.action, Action::Kill(3));
        assert_eq!(
            "1m:mark".parse::<FleetEvent>().unwrap().action,
            Action::Mark
        );
        for bad in [
            "45s:kill",
            "45s:kill:0",
            "x:mark",
            "45s:explode:1",
            "4s:term:1:2",
        ] {
            let err = bad.parse::<FleetEvent>().unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn a_plan_names_only_workers_that_run() {
        let ev = |s: &str| s.parse::<FleetEvent>().unwrap();
        let lease = Duration::from_secs(10);
        assert!(FleetPlan::new(3, lease, vec![ev("5s:kill:3"), ev("9s:start:4")]).is_ok());
        assert!(FleetPlan::new(3, lease, vec![ev("5s:kill:4")]).is_err());
        assert!(FleetPlan::new(3, lease, vec![ev("5s:start:5")]).is_err());
        assert!(FleetPlan::new(3, lease, vec![ev("5s:start:2")]).is_err());
        assert!(FleetPlan::new(3, lease, vec![ev("5s:kill:2"), ev("9s:kill:2")]).is_err());
        assert!(FleetPlan::new(3, lease, vec![ev("5s:restart:2"), ev("9s:kill:2")]).is_ok());
        assert!(FleetPlan::new(3, lease, vec![ev("5s:crash:2"), ev("9s:crash:2")]).is_ok());
        assert!(FleetPlan::new(0, lease, vec![]).is_err());
    }

    #[test]
    fn phases_count_each_workers_deletions_across_restarts() {
        let at = |ms, a, b| (ms, BTreeMap::from([("w1".into(), a), ("w2".into(), b)]));
        let p = phase(&at(0, 10, 0), &at(1000, 40, 30));
        assert_eq!(p.deleted_by_worker["w1"], 30);
        assert_eq!(p.share_by_worker["w2"], 0.5);
        let mut report = FleetReport {
            workers: 2,
            lease_duration_ms: 10_000,
            events: vec![],
            phases: vec![p],
            crash_loop: None,
        };
        fill_lags(&mut report, &[(10, 5), (500, 100), (999, 7), (1000, 9_000)]);
        let lag = report.phases[0].lag.unwrap();
        assert_eq!((lag.items, lag.p50_ms, lag.max_ms), (3, 7, 100));
    }
}
