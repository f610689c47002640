//! A run's result: the JSON summary (the analysis report plus what the driver measured around
//! it), its Markdown rendering, and the files they are written to.

use crate::crash_loop::{CrashLoopReport, Spread};
use crate::error::BenchError;
use crate::fleet::FleetReport;
use crate::lambda_run::LambdaReport;
use crate::raw::RawRates;
use crate::revision::Revision;
use crate::usage::Usage;
use precise_ttl_bench::Report;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Capacity units per deleted item, as the daemon's /metrics counted them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CapacityPerItem {
    pub query: f64,
    pub delete: f64,
    pub total: f64,
    /// What a million expirations cost at these units, at AWS's list prices
    /// (`precise_ttl_core::capacity`).
    pub cost_per_million: CostPerMillion,
}

/// Dollars per million expirations, from the measured units per item.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostPerMillion {
    pub region: &'static str,
    /// Every unit billed as consumed (on-demand table).
    pub on_demand_usd: f64,
    /// A provisioned table consumed at exactly its provisioned rate: the floor.
    pub provisioned_floor_usd: f64,
}

impl CapacityPerItem {
    /// Query units are read units, delete units write units (the table's and its index's).
    pub fn new(query: f64, delete: f64) -> Self {
        let prices = precise_ttl_core::capacity::US_EAST_1;
        let cost = prices.per_million(delete, query);
        CapacityPerItem {
            query,
            delete,
            total: query + delete,
            cost_per_million: CostPerMillion {
                region: prices.region,
                on_demand_usd: cost.on_demand,
                provisioned_floor_usd: cost.provisioned_floor,
            },
        }
    }
}

/// The benchmark JSON. Field names are what README figures and earlier artifacts quote.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub name: String,
    /// The command line, joined with spaces (kept for earlier readers; `argv` is exact).
    pub command: String,
    pub argv: Vec<String>,
    pub git_revision: Revision,
    pub items: u64,
    pub spread_s: f64,
    pub backlog: u64,
    pub steady_rate_per_s: f64,
    pub poll_interval_ms: u64,
    pub delete_mode: String,
    pub shards: u16,
    /// The share of the expiring items written to shard 0 (`--hot-shard-share`); absent when
    /// every shard was drawn uniformly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_shard_share: Option<f64>,
    /// `sharded` (ours) or `blog-window` (the 2022 blog's index).
    pub index_layout: String,
    /// TTLs are multiples of this many milliseconds (1000: whole epoch seconds).
    pub ttl_granularity_ms: u64,
    /// The seed of the planted TTLs: runs with one seed planted the same items.
    pub seed: u64,
    /// `true` when no daemon ran (`--no-sweeper`): the load was planted and the application
    /// wrote, but nothing deleted; lag, the bound and items left behind are not applicable.
    pub no_sweeper: bool,
    /// The bench table's provisioned write and read units per second; absent on demand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned_wcu: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned_rcu: Option<u64>,
    pub load_seconds: f64,
    pub raw_delete_item_per_s: Option<f64>,
    pub raw_partiql_batch_per_s: Option<f64>,
    pub sweeper_cpu_seconds: f64,
    pub sweeper_shutdown_ms: u64,
    pub sweeper_peak_rss_mb: f64,
    pub capacity_units_per_deleted_item: Option<CapacityPerItem>,
    pub report: Report,
    /// With several workers, or in a crash loop: the events, and each phase's split and lag.
    /// `sweeper_cpu_seconds` and `sweeper_peak_rss_mb` are then the first worker's (in a crash
    /// loop the first process's, until its kill; `capacity_units_per_deleted_item` is left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetReport>,
    /// In Lambda mode: every invocation's record and report, and the lag at the boundaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda: Option<LambdaReport>,
    /// In the stream-queue layout: the stream-to-entry delay and the entries missing at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<crate::entry_probe::QueueReport>,
    /// On the simulated store: what it counted (its CPU, calls, capacity used, throttles).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulator: Option<serde_json::Value>,
}

/// What [`crate::run`] measured.
#[derive(Debug, Clone)]
pub struct BenchRun {
    pub summary: Summary,
    pub markdown: String,
}

/// What the driver measured besides the analysis report.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    pub load_seconds: f64,
    pub raw: Option<RawRates>,
    pub usage: Usage,
    pub shutdown_ms: u64,
    /// Query and delete capacity units in total.
    pub capacity: Option<(f64, f64)>,
    pub observer_delay_ms: f64,
}

impl BenchRun {
    /// No wrong deletion (the application's items included), nothing left behind and, in the
    /// stream-queue layout, no queue entry missing; without a sweeper everything is left behind
    /// by design, and only wrong deletions count.
    pub fn is_clean(&self) -> bool {
        let r = &self.summary.report;
        let queue_whole = self
            .summary
            .queue
            .as_ref()
            .is_none_or(|q| q.entries_missing == 0);
        r.wrong.is_empty() && (self.summary.no_sweeper || r.left_behind.total == 0) && queue_whole
    }

    /// Writes `<out>/<name>.{json,md,svg}`; returns `<out>/<name>`.
    pub fn write_files(&self, out: &Path) -> Result<PathBuf, BenchError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BenchError::Write { path, source }
        };
        std::fs::create_dir_all(out).map_err(io(out))?;
        let base = out.join(&self.summary.name);
        let json = base.with_extension("json");
        let text = serde_json::to_string_pretty(&self.summary)
            .map_err(|e| io(&json)(std::io::Error::other(e)))?;
        std::fs::write(&json, text).map_err(io(&json))?;
        let md = base.with_extension("md");
        std::fs::write(&md, &self.markdown).map_err(io(&md))?;
        precise_ttl_bench::write_plot(&self.summary.report, &base.with_extension("svg"))?;
        Ok(base)
    }
}

pub(crate) fn summarize(
    config: &crate::BenchConfig,
    mut report: Report,
    m: &Measured,
    fleet: Option<FleetReport>,
    lambda: Option<LambdaReport>,
) -> BenchRun {
    if config.no_sweeper {
        // With nothing deleting, every item is "behind" once due: a figure about no sweeper.
        report.behind = None;
        if let Some(app) = report.app.as_mut() {
            app.while_behind = None;
        }
    }
    let deleted = report.counts.deleted.max(1) as f64;
    let summary = Summary {
        name: config.name.clone(),
        command: config.argv.join(" "),
        argv: config.argv.clone(),
        git_revision: config.revision.clone(),
        items: config.items,
        spread_s: config.spread.as_secs_f64(),
        backlog: config.backlog,
        steady_rate_per_s: config.items as f64 / config.spread.as_secs_f64().max(0.001),
        poll_interval_ms: config.poll_interval.as_millis() as u64,
        delete_mode: config.delete_mode.name().to_string(),
        shards: config.layout.shards.get(),
        hot_shard_share: config.hot_shard_share,
        index_layout: config.index.name().to_string(),
        ttl_granularity_ms: config.ttl_granularity.as_millis() as u64,
        seed: config.seed,
        no_sweeper: config.no_sweeper,
        provisioned_wcu: config.provisioned.map(|p| p.write),
        provisioned_rcu: config.provisioned.map(|p| p.read),
        load_seconds: m.load_seconds,
        raw_delete_item_per_s: m.raw.map(|r| r.single_per_s),
        raw_partiql_batch_per_s: m.raw.map(|r| r.batch_per_s),
        sweeper_cpu_seconds: m.usage.cpu_seconds,
        sweeper_shutdown_ms: m.shutdown_ms,
        sweeper_peak_rss_mb: m.usage.peak_rss_kb as f64 / 1024.0,
        capacity_units_per_deleted_item: m
            .capacity
            .map(|(q, d)| CapacityPerItem::new(q / deleted, d / deleted)),
        report,
        fleet,
        lambda,
        queue: None,
        simulator: None,
    };
    let markdown = markdown(&summary, m);
    BenchRun { summary, markdown }
}

fn markdown(s: &Summary, m: &Measured) -> String {
    let report = &s.report;
    let mut md = String::new();
    md.push_str(&format!("### {}\n\n", s.name));
    md.push_str(&format!("`{}`\n\n", s.command));
    match &s.git_revision {
        Revision::Known { commit, dirty } => md.push_str(&format!(
            "revision `{commit}`{}\n\n",
            if *dirty {
                " (with uncommitted changes)"
            } else {
                ""
            }
        )),
        Revision::Unknown => md.push_str("revision unknown\n\n"),
    }
    md.push_str("| setting / measure | value |\n|---|---|\n");
    md.push_str(&format!(
        "| load | {} expiring over {:.0} s ({:.0}/s), TTLs in steps of {} ms (seed {}), {} backlog, {} must-survive |\n",
        s.items,
        s.spread_s,
        s.steady_rate_per_s,
        s.ttl_granularity_ms,
        s.seed,
        s.backlog,
        report.counts.survive
    ));
    if let Some(share) = s.hot_shard_share {
        md.push_str(&format!(
            "| hot shard | {:.1} % of the expiring items ({:.0}/s) written to shard 0, the rest spread over shards 1–{} ({:.0}/s) |\n",
            share * 100.0,
            s.steady_rate_per_s * share,
            s.shards.saturating_sub(1),
            s.steady_rate_per_s * (1.0 - share)
        ));
    }
    if let (Some(w), Some(r)) = (s.provisioned_wcu, s.provisioned_rcu) {
        md.push_str(&format!("| table | provisioned, {w} WCU and {r} RCU |\n"));
    }
    if s.no_sweeper {
        md.push_str(
            "| daemon | **off** (`--no-sweeper`): no daemon ran, nothing was deleted |\n\n",
        );
        md.push_str(&no_sweeper_markdown(report));
        return md;
    }
    md.push_str(&format!(
        "| daemon | index layout {}, poll {} ms, {} shards, delete mode {} |\n",
        s.index_layout, s.poll_interval_ms, s.shards, s.delete_mode
    ));
    if let Some(r) = &m.raw {
        let sweeper_rate = report.throughput.per_s.unwrap_or(0.0);
        md.push_str(&format!(
            "| raw rate (this run) | DeleteItem {:.0}/s, PartiQL batch {:.0}/s |\n| sweeper throughput | {:.0}/s = {:.2} × raw DeleteItem |\n",
            r.single_per_s,
            r.batch_per_s,
            sweeper_rate,
            sweeper_rate / r.single_per_s.max(1.0)
        ));
        if let (Some(ms), true) = (report.backlog.time_to_clear_ms, s.backlog > 0) {
            let rate = s.backlog as f64 / (ms as f64 / 1000.0).max(0.001);
            md.push_str(&format!(
                "| catch-up | {} items in {:.1} s = {:.0}/s = {:.2} × raw DeleteItem |\n",
                s.backlog,
                ms as f64 / 1000.0,
                rate,
                rate / r.single_per_s.max(1.0)
            ));
        }
    }
    let crash_loop = s.fleet.as_ref().is_some_and(|f| f.crash_loop.is_some());
    md.push_str(&format!(
        "| sweeper process | {:.1} CPU s, peak RSS {:.1} MB{}, stopped {} ms after SIGTERM |\n",
        s.sweeper_cpu_seconds,
        s.sweeper_peak_rss_mb,
        if crash_loop {
            " (the first process, until its kill)"
        } else {
            ""
        },
        s.sweeper_shutdown_ms
    ));
    if let Some(c) = &s.capacity_units_per_deleted_item {
        md.push_str(&format!(
            "| capacity per deleted item | {:.3} (query {:.3} + delete {:.3}), as the store reports it |\n",
            c.total, c.query, c.delete
        ));
        let cost = &c.cost_per_million;
        md.push_str(&format!(
            "| cost per million expirations | ${:.2} on demand, ${:.2} provisioned at full use ({} list prices, precise_ttl_core::capacity) |\n",
            cost.on_demand_usd, cost.provisioned_floor_usd, cost.region
        ));
    }
    if m.raw.is_some() || m.observer_delay_ms > 0.0 {
        md.push_str(&format!(
            "| stream observation delay | {:.1} ms (median) |\n\n",
            m.observer_delay_ms
        ));
    } else {
        md.push_str("| deletions observed | by the store's own commit log |\n\n");
    }
    md.push_str(&report.to_markdown());
    match &s.fleet {
        Some(
            f @ FleetReport {
                crash_loop: Some(c),
                ..
            },
        ) => md.push_str(&crash_markdown(f, c)),
        Some(f) => md.push_str(&fleet_markdown(f)),
        None => {}
    }
    if let Some(l) = &s.lambda {
        md.push_str(&lambda_markdown(l));
    }
    md
}

/// A run without a sweeper: what it is for (the application's writes) and what it cannot say.
fn no_sweeper_markdown(report: &Report) -> String {
    let mut md = format!(
        "The sweeper was off: lag, throughput, the physical bound and items left behind are n/a (the {} expiring and backlog items planted stay, as nothing deletes them).\n",
        report.counts.expected_deletions
    );
    match report.wrong.len() {
        0 => md.push_str("\nWrong deletions: 0.\n"),
        n => {
            md.push_str(&format!(
                "\nWrong deletions ({n}), though nothing ran that deletes:\n\n"
            ));
            for w in report.wrong.iter().take(20) {
                md.push_str(&format!("- `{}`: {}\n", w.key, w.reason));
            }
        }
    }
    if let Some(app) = &report.app {
        md.push_str(&app.to_markdown());
    }
    md
}

fn lambda_markdown(l: &LambdaReport) -> String {
    let mut md = format!(
        "\n#### Lambda: {} invocations of {} ms, one every {} ms\n\n| invocation | environment | started (ms after the first) | ran (ms) | deleted | lag p99 / max (ms) | init, spawn to first poll (ms) | peak RSS (MB) |\n|---|---|---|---|---|---|---|---|\n",
        l.invocations.len(),
        l.length_ms,
        l.every_ms
    );
    let first = l.starts_ms.first().copied().unwrap_or(0);
    for r in &l.invocations {
        let ok = r.result.as_ref().ok();
        let field = |k: &str| ok.map(|v| v[k].to_string()).unwrap_or_else(|| "—".into());
        let lag = ok
            .map(|v| format!("{} / {}", v["lag"]["p99_ms"], v["lag"]["max_ms"]))
            .unwrap_or_else(|| "—".into());
        md.push_str(&format!(
            "| {} | {}{} | {} | {} | {} | {lag} | {} | {} |\n",
            r.request_id,
            r.environment,
            if r.cold { " (cold)" } else { "" },
            r.started_ms - first,
            field("ran_ms"),
            field("deleted"),
            r.init_ms.map_or("—".into(), |ms| ms.to_string()),
            ok.and_then(|v| v["max_rss_mb"].as_f64())
                .map_or("—".into(), |m| format!("{m:.1}")),
        ));
    }
    md.push_str(&format!(
        "\nDeleted as the invocations reported them: {}.\n\n| boundary (ms after the first start) | items due from 2 s before to 4 s after | lag p99 / max (ms) |\n|---|---|---|\n",
        l.reported_deleted
    ));
    for b in &l.boundaries {
        md.push_str(&format!(
            "| {} | {} | {} / {} |\n",
            b.at_ms - first,
            b.items,
            b.p99_ms,
            b.max_ms
        ));
    }
    md
}

fn crash_markdown(f: &FleetReport, c: &CrashLoopReport) -> String {
    let spread = |s: Option<Spread>| {
        s.map_or("—".to_string(), |s| {
            format!("{} / {} / {} ms", s.p50_ms, s.p99_ms, s.max_ms)
        })
    };
    let mut md = format!(
        "\n#### Crash loop: `run` SIGKILLed every {:.1}–{:.1} s, a new process started at once without `--worker-id` (lease duration {} ms)\n\n| measure | value |\n|---|---|\n",
        c.kill_every_min_ms as f64 / 1000.0,
        c.kill_every_max_ms as f64 / 1000.0,
        f.lease_duration_ms
    );
    md.push_str(&format!("| kills | {} |\n", c.kills));
    md.push_str(&format!(
        "| deleted by the last kill, of the items due by then | {} / {} |\n",
        c.deleted_before_last_kill, c.due_before_last_kill
    ));
    md.push_str(&format!(
        "| killed processes lived p50 / p99 / max | {} |\n",
        spread(c.lived)
    ));
    md.push_str(&format!(
        "| new process held every shard after p50 / p99 / max | {} ({} restarts never did) |\n",
        spread(c.every_shard_held_after),
        c.never_held_every_shard
    ));
    md.push_str(&format!(
        "| lag beyond the next kill p50 / p99 / max | {} |\n",
        spread(c.lag_beyond_next_kill)
    ));
    if let Some(w) = &c.worst {
        md.push_str(&format!(
            "| worst item | {}: lag {} ms, {} |\n",
            w.key,
            w.lag_ms,
            w.next_kill_ms
                .map_or("no kill after its TTL".to_string(), |k| format!(
                    "killed {} ms after its TTL",
                    k - w.ttl_ms
                ))
        ));
    }
    md.push_str("\nThe lag beyond the next kill is an item's lag minus the time from its TTL to the first kill after it: what waiting for the restart cost on top of the kill itself.\n\n| kill at (s after first TTL) | process had lived | every shard held again after |\n|---|---|---|\n");
    for e in f.events.iter().filter(|e| e.lived_ms.is_some()) {
        md.push_str(&format!(
            "| {:.1} | {} ms | {} |\n",
            e.offset_s,
            e.lived_ms.unwrap_or(0),
            e.all_shards_held_after_ms
                .map_or("never".to_string(), |ms| format!("{ms} ms"))
        ));
    }
    md
}

fn fleet_markdown(f: &FleetReport) -> String {
    let mut md = format!(
        "\n#### Fleet: {} workers, lease duration {} ms\n\n| at (s after first TTL) | event | every shard held again after |\n|---|---|---|\n",
        f.workers, f.lease_duration_ms
    );
    for e in &f.events {
        let held = e
            .all_shards_held_after_ms
            .map_or("—".to_string(), |ms| format!("{ms} ms"));
        md.push_str(&format!("| {:.1} | {} | {held} |\n", e.offset_s, e.action));
    }
    let first = f.phases.first().map_or(0, |p| p.from_ms);
    md.push_str("\nPhases run from one event (or the moment every shard was held again) to the next; an item belongs to the phase its TTL falls in, a worker's deletions to the phase they were counted in.\n");
    md.push_str("\n| phase (s after first TTL) | items due | lag p50 / p99 / max (ms) | share per worker |\n|---|---|---|---|\n");
    for p in &f.phases {
        let lag = p.lag.map_or("—".to_string(), |l| {
            format!("{} / {} / {}", l.p50_ms, l.p99_ms, l.max_ms)
        });
        let shares: Vec<String> = p
            .share_by_worker
            .iter()
            .map(|(w, s)| format!("{w} {:.0} %", s * 100.0))
            .collect();
        md.push_str(&format!(
            "| {:.1}–{:.1} | {} | {lag} | {} |\n",
            (p.from_ms - first) as f64 / 1000.0,
            (p.to_ms - first) as f64 / 1000.0,
            p.lag.map_or(0, |l| l.items),
            shares.join(", ")
        ));
    }
    md
}
