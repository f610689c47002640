//! Rendering a [`Report`] as text: a compact Markdown summary for `docs/benchmarks.md`, and JSON.

use std::fmt::Write as _;

use crate::analyze::Report;

/// How many wrong deletions the Markdown summary lists (the count is always given).
const WRONG_LISTED: usize = 10;

impl Report {
    /// A compact Markdown summary: one table of the headline numbers, then the wrong deletions and
    /// left-behind keys, if any.
    pub fn to_markdown(&self) -> String {
        let c = &self.counts;
        let mut rows: Vec<(&str, String)> = vec![
            (
                "planted",
                format!(
                    "{} ({} expire, {} backlog, {} survive)",
                    c.planted, c.expire, c.backlog, c.survive
                ),
            ),
            (
                "deleted / expected",
                format!("{} / {}", c.deleted, c.expected_deletions),
            ),
        ];
        match &self.lag {
            Some(l) => {
                rows.push((
                    "lag p50 / p90 / p99 / p99.9 / max",
                    format!(
                        "{} / {} / {} / {} / {} ms",
                        l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
                    ),
                ));
                rows.push((
                    "lag mean",
                    format!("{:.1} ms over {} items", l.mean_ms, l.count),
                ));
            }
            None => rows.push(("lag", "n/a (no expiring item deleted)".to_owned())),
        }
        if let Some(r) = &self.ramp {
            rows.push((
                "ramp: lag p99 of the first 15 s of TTLs / the rest",
                format!(
                    "{} ms ({} items, max {} ms) / {} ms ({} items) = {}",
                    r.first_p99_ms,
                    r.first_count,
                    r.first_max_ms,
                    r.rest_p99_ms,
                    r.rest_count,
                    r.ratio_p99.map_or("n/a".to_owned(), |x| format!("{x:.2}"))
                ),
            ));
        }
        if let Some(b) = &self.bound {
            let ratio = |r: Option<f64>| r.map_or("n/a".to_owned(), |r| format!("{r:.2}"));
            // Writes by others took capacity the perfect sweeper then lacked: say so, so that a
            // bound above the bare workload's is not read as a different store.
            let app_writes = match b.app_writes {
                0 => String::new(),
                n => format!(
                    "; including {n} writes by others during the run (the bench's TTL extensions{}) as capacity taken ahead of the deletes",
                    if self.app.is_some() {
                        ", the application's accepted writes"
                    } else {
                        ""
                    }
                ),
            };
            rows.push((
                "physical bound p50 / p99 / max",
                format!(
                    "{:.0} / {:.0} / {:.0} ms at {:.0} deletes/s (burst {:.0}, floor {:.1} ms; {}){app_writes}",
                    b.p50_ms,
                    b.p99_ms,
                    b.max_ms,
                    b.capacity.per_second,
                    b.capacity.burst_items,
                    b.capacity.floor_ms,
                    b.capacity.source
                ),
            ));
            rows.push((
                "our lag / bound",
                format!("p99 {} ×, max {} ×", ratio(b.ratio_p99), ratio(b.ratio_max)),
            ));
        }
        for g in [&self.hot_shard, &self.other_shards].into_iter().flatten() {
            rows.push(shard_group_row(g));
        }
        if let Some(b) = &self.behind {
            rows.push((
                "while behind (an item due over 1 s, not yet deleted)",
                behind_row(b),
            ));
        }
        rows.push((
            "deletions/s",
            format!(
                "{} (peak {} in one second)",
                opt_f1(self.throughput.per_s),
                self.throughput.peak_per_s
            ),
        ));
        rows.push(("wrong deletions", self.wrong.len().to_string()));
        let lb = &self.left_behind;
        rows.push((
            "left behind",
            format!("{} (still present at end: {})", lb.total, lb.still_present),
        ));
        if lb.removed_but_present > 0 || lb.survivors_missing > 0 {
            rows.push((
                "scan inconsistencies",
                format!(
                    "{} removed but present, {} survivors missing without REMOVE",
                    lb.removed_but_present, lb.survivors_missing
                ),
            ));
        }
        rows.push(("duplicate REMOVE records", c.duplicate_removals.to_string()));
        let b = &self.backlog;
        rows.push((
            "backlog clear time",
            match b.time_to_clear_ms {
                Some(ms) => {
                    let perfect = b.bound_time_to_clear_ms.map_or_else(String::new, |p| {
                        let ratio = b
                            .ratio_to_bound
                            .map_or("n/a".to_owned(), |r| format!("{r:.2}"));
                        format!("; the perfect sweeper {p:.0} ms, ours at {ratio} × its rate")
                    });
                    format!(
                        "{ms} ms for {} items ({} /s){perfect}",
                        b.count,
                        opt_f1(b.per_s)
                    )
                }
                None if b.count == 0 => "n/a (no backlog)".to_owned(),
                None => format!("not cleared: {} of {} removed", b.removed, b.count),
            },
        ));
        rows.push((
            "observer error",
            self.run
                .observer_error_ms
                .map_or_else(|| "n/a".to_owned(), |e| format!("{e:.1} ms")),
        ));
        rows.push(("run duration", format!("{:.1} s", self.run.duration_s)));

        let mut out = String::from("| metric | value |\n| --- | --- |\n");
        for (k, v) in rows {
            let _ = writeln!(out, "| {k} | {v} |");
        }
        if !self.wrong.is_empty() {
            let _ = writeln!(out, "\nWrong deletions ({}):\n", self.wrong.len());
            for w in self.wrong.iter().take(WRONG_LISTED) {
                let _ = writeln!(out, "- `{}`: {}", w.key, w.reason);
            }
            if self.wrong.len() > WRONG_LISTED {
                let _ = writeln!(out, "- … and {} more", self.wrong.len() - WRONG_LISTED);
            }
        }
        if lb.total > 0 {
            let keys: Vec<String> = lb.keys.iter().map(|k| format!("`{k}`")).collect();
            let more = lb.total - lb.keys.len() as u64;
            let _ = write!(out, "\nLeft behind ({}): {}", lb.total, keys.join(", "));
            if more > 0 {
                let _ = write!(out, " … and {more} more");
            }
            out.push('\n');
        }
        if let Some(app) = &self.app {
            out.push_str(&app.to_markdown());
        }
        out
    }

    /// The whole report as pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }
}

/// One part of a skewed load: its lag, and its own bound when the run has one.
fn shard_group_row(g: &crate::ShardGroup) -> (&'static str, String) {
    let name = match g.shard {
        Some(_) => "hot shard: lag p50 / p99 / max",
        None => "other shards: lag p50 / p99 / max",
    };
    let which = g.shard.map_or(String::new(), |s| format!("shard {s}, "));
    let mut value = format!(
        "{} / {} / {} ms ({which}{} of {} items deleted)",
        g.p50_ms, g.p99_ms, g.max_ms, g.deleted, g.items
    );
    if let Some(b) = &g.bound {
        let ratio = |r: Option<f64>| r.map_or("n/a".to_owned(), |r| format!("{r:.2}"));
        let _ = write!(
            value,
            "; bound {:.0} / {:.0} / {:.0} ms; ours / bound: p99 {} ×, max {} ×",
            b.p50_ms,
            b.p99_ms,
            b.max_ms,
            ratio(b.ratio_p99),
            ratio(b.ratio_max)
        );
    }
    (name, value)
}

fn behind_row(b: &crate::Behind) -> String {
    let mut value = format!(
        "{:.1} s in {} period{}: {} deletions",
        b.seconds,
        b.periods,
        if b.periods == 1 { "" } else { "s" },
        b.deletions
    );
    match b.deletions_per_second {
        Some(rate) => {
            let _ = write!(value, " = {rate:.0}/s");
        }
        None => value.push_str(" (too short for a rate)"),
    }
    if let (Some(ratio), Some(raw)) = (b.ratio_to_raw, b.raw_batch_per_s) {
        let _ = write!(
            value,
            " = {ratio:.2} × this run's raw PartiQL batch rate ({raw:.0}/s)"
        );
    }
    value
}

/// `x` with one decimal, or `n/a`.
fn opt_f1(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".to_owned(), |x| format!("{x:.1}"))
}
