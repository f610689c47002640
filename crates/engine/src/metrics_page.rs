//! A running worker's `/metrics` page read back: its admission controllers (the limit on delete
//! requests in flight, the table's send rate, the shards under a limit of their own, throttled
//! deletes by scope), its backlog budget, the capacity it consumes and the cost per million
//! expirations so far, as `status --metrics-url` shows them.
//!
//! Only those families are read, from the Prometheus text format line by line
//! (`name{label="value",...} value [timestamp]`, `#` lines skipped): `status` needs a few families
//! of one exporter (ours), not a general parser, and the names come from [`crate::metrics`], so a
//! rename there cannot leave this reading a family that no longer exists without the compiler
//! noticing.

use crate::metrics as m;
use std::collections::BTreeMap;

/// The scopes of `precise_ttl_throttled_deletes_total`, in the order shown (the table's own
/// refusals first, then the index's; DynamoDB's `ThrottlingReasons`).
const SCOPES: [&str; 5] = [
    "table_partition",
    "table",
    "index_partition",
    "index",
    "unknown",
];

/// One worker's admission controllers. A family the page lacks is `None` (empty): a worker of a
/// version before them, or not `run`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Admission {
    /// `precise_ttl_concurrency_limit`: delete requests in flight at most.
    pub concurrency_limit: Option<f64>,
    /// `precise_ttl_table_rate_limit`: items/s, 0 while not engaged.
    pub table_rate_limit: Option<f64>,
    /// `precise_ttl_retry_rate_limit`: items/s, 0 while not engaged.
    pub retry_rate_limit: Option<f64>,
    /// `precise_ttl_shards_limited`: shards sending under a limit of their own.
    pub shards_limited: Option<f64>,
    /// `precise_ttl_backlog_rate_limit`: the backlog's budget now, items/s (0: none).
    pub backlog_rate_limit: Option<f64>,
    /// `precise_ttl_capacity_units_per_second` by `op`: read units of index queries, write
    /// units of deletes.
    pub read_units_per_second: Option<f64>,
    pub write_units_per_second: Option<f64>,
    /// `precise_ttl_capacity_centiunits_total` by `op`, in units, and `precise_ttl_deleted_total`:
    /// what the worker's deletes cost so far.
    pub read_units_total: Option<f64>,
    pub write_units_total: Option<f64>,
    pub deleted_total: Option<f64>,
    /// `precise_ttl_shard_rate_limit` by `shard`: items/s, 0 once lifted; in shard order.
    pub shard_rate_limits: Vec<(String, f64)>,
    /// `precise_ttl_throttled_deletes_total` by `scope`, summed over any other labels.
    pub throttled_by_scope: BTreeMap<String, f64>,
}

impl Admission {
    /// Whether the page had any of the families (a worker of an older version has none).
    pub fn is_empty(&self) -> bool {
        // The deletes and capacity counters are older than admission: a page with only them is
        // still an older worker's.
        Admission {
            read_units_total: None,
            write_units_total: None,
            deleted_total: None,
            ..self.clone()
        } == Admission::default()
    }

    /// The shards under a limit now (a lifted one keeps its series, at 0).
    fn limited(&self) -> impl Iterator<Item = &(String, f64)> {
        self.shard_rate_limits
            .iter()
            .filter(|(_, rate)| *rate > 0.0)
    }

    /// What `status` prints under the worker's URL, one line each.
    pub fn describe(&self) -> Vec<String> {
        if self.is_empty() {
            return vec![
                "none of the admission metrics (precise_ttl_concurrency_limit, …) on this page: a worker of an older version, or not `precise-ttl run`".into(),
            ];
        }
        let or_missing = |v: Option<String>| v.unwrap_or_else(|| "not published".into());
        let mut lines = vec![
            format!(
                "requests in flight: {}",
                or_missing(
                    self.concurrency_limit
                        .map(|l| format!("at most {}", number(l)))
                )
            ),
            format!(
                "table send rate: {}",
                or_missing(self.table_rate_limit.map(|r| if r > 0.0 {
                    format!("{} items/s", number(r))
                } else {
                    "not engaged".into()
                }))
            ),
        ];
        // Workers before the retries' own rate do not publish it: no line then.
        if let Some(rate) = self.retry_rate_limit {
            lines.push(if rate > 0.0 {
                format!("retry rate: {} items/s", number(rate))
            } else {
                "retry rate: not engaged".into()
            });
        }
        // Workers before the budget do not publish it: no line rather than "not published".
        if let Some(rate) = self.backlog_rate_limit {
            lines.push(if rate > 0.0 {
                format!("backlog budget: {} deletes/s", number(rate.round()))
            } else {
                "backlog budget: none (--backlog-budget off)".into()
            });
        }
        if self.read_units_per_second.is_some() || self.write_units_per_second.is_some() {
            lines.push(format!(
                "capacity consumed (last ~10 s): {} write units/s (deletes), {} read units/s (index queries)",
                or_missing(self.write_units_per_second.map(|u| number((u * 10.0).round() / 10.0))),
                or_missing(self.read_units_per_second.map(|u| number((u * 10.0).round() / 10.0))),
            ));
        }
        if let Some(cost) = self.cost_per_million() {
            lines.push(format!(
                "cost per million expirations so far: ${:.2} on demand, ${:.2} provisioned at full use ({} list prices; {} deletes, {:.3} write + {:.3} read units each)",
                cost.0.on_demand,
                cost.0.provisioned_floor,
                precise_ttl_core::capacity::US_EAST_1.region,
                number(self.deleted_total.unwrap_or(0.0)),
                cost.1,
                cost.2,
            ));
        }
        let limited: Vec<String> = self
            .limited()
            .map(|(shard, rate)| format!("{shard} at {} items/s", number(*rate)))
            .collect();
        // The count is the gauge's; the list is the per-shard series at the same scrape.
        let count = self
            .shards_limited
            .map_or(limited.len() as f64, |n| n.max(limited.len() as f64));
        lines.push(if count == 0.0 {
            "shards under a limit of their own: none".into()
        } else {
            format!(
                "shards under a limit of their own: {} ({})",
                number(count),
                limited.join(", ")
            )
        });
        let total: f64 = self.throttled_by_scope.values().sum();
        lines.push(if total == 0.0 {
            "throttled deletes: none".into()
        } else {
            let by_scope: Vec<String> = self
                .scopes()
                .filter(|(_, n)| *n > 0.0)
                .map(|(scope, n)| format!("{scope} {}", number(n)))
                .collect();
            format!(
                "throttled deletes: {} ({})",
                number(total),
                by_scope.join(", ")
            )
        });
        lines
    }

    /// What a million expirations cost at this worker's units per delete so far, with the write
    /// and read units per delete (`None` before its first delete, or on an older worker).
    fn cost_per_million(&self) -> Option<(precise_ttl_core::capacity::CostPerMillion, f64, f64)> {
        let deleted = self.deleted_total.filter(|d| *d > 0.0)?;
        let write = self.write_units_total? / deleted;
        let read = self.read_units_total.unwrap_or(0.0) / deleted;
        Some((
            precise_ttl_core::capacity::US_EAST_1.per_million(write, read),
            write,
            read,
        ))
    }

    /// The scopes in [`SCOPES`] order, then any other the worker named, alphabetically.
    fn scopes(&self) -> impl Iterator<Item = (&str, f64)> {
        let known = SCOPES
            .iter()
            .filter_map(|s| self.throttled_by_scope.get(*s).map(|n| (*s, *n)));
        let other = self
            .throttled_by_scope
            .iter()
            .filter(|(s, _)| !SCOPES.contains(&s.as_str()))
            .map(|(s, n)| (s.as_str(), *n));
        known.chain(other)
    }

    /// `status --json`'s object for the worker (its `url` and `error` added by the caller).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "concurrency_limit": self.concurrency_limit,
            "table_rate_limit": self.table_rate_limit,
            "table_rate_engaged": self.table_rate_limit.map(|r| r > 0.0),
            "retry_rate_limit": self.retry_rate_limit,
            "shards_limited": self.shards_limited,
            "backlog_rate_limit": self.backlog_rate_limit,
            "write_units_per_second": self.write_units_per_second,
            "read_units_per_second": self.read_units_per_second,
            "cost_per_million_expirations": self.cost_per_million().map(|(c, w, r)| serde_json::json!({
                "region": precise_ttl_core::capacity::US_EAST_1.region,
                "on_demand_usd": c.on_demand,
                "provisioned_floor_usd": c.provisioned_floor,
                "write_units_per_delete": w,
                "read_units_per_delete": r,
            })),
            "shard_rate_limits": self
                .limited()
                .map(|(s, r)| (s.clone(), serde_json::json!(r)))
                .collect::<serde_json::Map<_, _>>(),
            "throttled_deletes": self
                .scopes()
                .map(|(s, n)| (s.to_string(), serde_json::json!(n)))
                .collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// A count or a rate as people read it: whole numbers without decimals, others with one.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Reads the admission families from a Prometheus text page; other lines are skipped, as are
/// lines it cannot read (a page is only looked at, never rejected).
pub fn parse(page: &str) -> Admission {
    let mut admission = Admission::default();
    let mut shards: BTreeMap<String, f64> = BTreeMap::new();
    for line in page.lines() {
        let Some(sample) = Sample::read(line) else {
            continue;
        };
        match sample.name {
            n if n == m::CONCURRENCY_LIMIT => admission.concurrency_limit = Some(sample.value),
            n if n == m::TABLE_RATE_LIMIT => admission.table_rate_limit = Some(sample.value),
            n if n == m::RETRY_RATE_LIMIT => admission.retry_rate_limit = Some(sample.value),
            n if n == m::LANES_LIMITED => admission.shards_limited = Some(sample.value),
            n if n == m::BACKLOG_RATE_LIMIT => admission.backlog_rate_limit = Some(sample.value),
            n if n == m::DELETED => {
                *admission.deleted_total.get_or_insert(0.0) += sample.value;
            }
            n if n == m::CAPACITY_UNITS => {
                let slot = match sample.label("op") {
                    Some("query") => &mut admission.read_units_total,
                    Some("delete") => &mut admission.write_units_total,
                    _ => continue,
                };
                *slot.get_or_insert(0.0) += sample.value / 100.0;
            }
            n if n == m::CAPACITY_UNITS_PER_SECOND => match sample.label("op") {
                Some("query") => admission.read_units_per_second = Some(sample.value),
                Some("delete") => admission.write_units_per_second = Some(sample.value),
                _ => {}
            },
            n if n == m::LANE_RATE_LIMIT => {
                if let Some(shard) = sample.label("shard") {
                    shards.insert(shard.to_string(), sample.value);
                }
            }
            n if n == m::THROTTLED_BY_SCOPE => {
                let scope = sample.label("scope").unwrap_or("unknown").to_string();
                *admission.throttled_by_scope.entry(scope).or_default() += sample.value;
            }
            _ => {}
        }
    }
    // Shard numbers in numeric order; a lane that is not a number (a blog-layout window) after.
    let mut shards: Vec<(String, f64)> = shards.into_iter().collect();
    shards.sort_by_key(|(s, _)| (s.parse::<u64>().unwrap_or(u64::MAX), s.clone()));
    admission.shard_rate_limits = shards;
    admission
}

/// One sample line of the text format.
#[derive(Debug, PartialEq)]
struct Sample<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    value: f64,
}

impl<'a> Sample<'a> {
    /// `name{label="value",...} value [timestamp]`; `None` for a comment, a blank line or a line
    /// it cannot read.
    fn read(line: &'a str) -> Option<Self> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .unwrap_or(line.len());
        let name = &line[..name_end];
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(inner) = rest.strip_prefix('{') {
            let (read, after) = read_labels(inner)?;
            labels = read;
            rest = after;
        }
        // The value; a timestamp after it is not needed.
        let value = rest.split_whitespace().next()?.parse().ok()?;
        Some(Sample {
            name,
            labels,
            value,
        })
    }

    fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The labels after a `{`, up to and past its `}`: values are quoted, with `\\`, `\"` and `\n`
/// escaped, so a `,` or `}` inside one does not end it.
fn read_labels(mut rest: &str) -> Option<(Vec<(&str, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim();
        rest = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((name, value));
        rest = rest[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a worker's /metrics looks like (the exporter's layout: HELP and TYPE lines, families
    /// in no set order), with the neighbouring families that must not be read as these.
    const PAGE: &str = r#"# HELP precise_ttl_concurrency_limit The adaptive limit on delete requests in flight
# TYPE precise_ttl_concurrency_limit gauge
precise_ttl_concurrency_limit 48

# TYPE precise_ttl_throttled_deletes_total counter
precise_ttl_throttled_deletes_total{scope="table_partition"} 12
precise_ttl_throttled_deletes_total{scope="table"} 0
precise_ttl_throttled_deletes_total{scope="index_partition"} 340
precise_ttl_throttled_deletes_total{scope="index"} 0
precise_ttl_throttled_deletes_total{scope="unknown"} 3

# TYPE precise_ttl_throttled_total counter
precise_ttl_throttled_total 999

# TYPE precise_ttl_table_rate_limit gauge
precise_ttl_table_rate_limit 1250.5

# TYPE precise_ttl_retry_rate_limit gauge
precise_ttl_retry_rate_limit 20000

# TYPE precise_ttl_shards_limited gauge
precise_ttl_shards_limited 2

# TYPE precise_ttl_shard_rate_limit gauge
precise_ttl_shard_rate_limit{shard="10"} 80.5
precise_ttl_shard_rate_limit{shard="3"} 150
precise_ttl_shard_rate_limit{shard="7"} 0

# TYPE precise_ttl_watermark_seconds gauge
precise_ttl_watermark_seconds{shard="3"} 1790000000
precise_ttl_lag_seconds_bucket{le="0.1"} 5
"#;

    #[test]
    fn the_admission_families_are_read_from_a_page() {
        let a = parse(PAGE);
        assert_eq!(a.concurrency_limit, Some(48.0));
        assert_eq!(a.table_rate_limit, Some(1250.5));
        assert_eq!(a.retry_rate_limit, Some(20_000.0));
        assert_eq!(a.shards_limited, Some(2.0));
        // Numeric shard order, the lifted shard 7 kept (at 0).
        assert_eq!(
            a.shard_rate_limits,
            vec![("3".into(), 150.0), ("7".into(), 0.0), ("10".into(), 80.5)]
        );
        assert_eq!(a.throttled_by_scope.len(), 5);
        assert_eq!(a.throttled_by_scope["index_partition"], 340.0);
        assert_eq!(
            a.describe(),
            vec![
                "requests in flight: at most 48",
                "table send rate: 1250.5 items/s",
                "retry rate: 20000 items/s",
                "shards under a limit of their own: 2 (3 at 150 items/s, 10 at 80.5 items/s)",
                "throttled deletes: 355 (table_partition 12, index_partition 340, unknown 3)",
            ]
        );
    }

    #[test]
    fn a_quiet_worker_says_not_engaged_and_none() {
        let a = parse(
            "precise_ttl_concurrency_limit 64\nprecise_ttl_table_rate_limit 0\nprecise_ttl_shards_limited 0\nprecise_ttl_throttled_deletes_total{scope=\"table\"} 0\n",
        );
        assert_eq!(
            a.describe(),
            vec![
                "requests in flight: at most 64",
                "table send rate: not engaged",
                "shards under a limit of their own: none",
                "throttled deletes: none",
            ]
        );
        assert_eq!(a.to_json()["table_rate_engaged"], false);
    }

    #[test]
    fn a_page_without_the_families_says_so_in_one_line() {
        let a = parse("# TYPE precise_ttl_deleted_total counter\nprecise_ttl_deleted_total 5\n");
        assert!(a.is_empty());
        assert_eq!(a.describe().len(), 1);
        assert!(
            a.describe()[0].contains("older version"),
            "{:?}",
            a.describe()
        );
        // Some families but not others: each missing one is named as such.
        let a = parse("precise_ttl_concurrency_limit 8\n");
        assert_eq!(a.describe()[1], "table send rate: not published");
    }

    #[test]
    fn labels_are_read_with_their_escapes_and_other_labels_and_timestamps_pass() {
        let s = Sample::read(
            r#"precise_ttl_shard_rate_limit{ worker="a,\"b}\\", shard = "4" ,} 7.5 1790000000000"#,
        )
        .unwrap();
        assert_eq!(s.name, m::LANE_RATE_LIMIT);
        assert_eq!(s.label("worker"), Some(r#"a,"b}\"#));
        assert_eq!(s.label("shard"), Some("4"));
        assert_eq!(s.value, 7.5);
        assert_eq!(Sample::read("# HELP x y"), None);
        assert_eq!(Sample::read(""), None);
        assert_eq!(Sample::read(r#"x{a="unterminated} 1"#), None);
        assert_eq!(Sample::read("x notanumber"), None);
        // Two workers' series on one page (a global label): counters add up by scope.
        let a = parse(
            "precise_ttl_throttled_deletes_total{scope=\"table\",worker=\"a\"} 2\nprecise_ttl_throttled_deletes_total{worker=\"b\",scope=\"table\"} 3\n",
        );
        assert_eq!(a.throttled_by_scope["table"], 5.0);
    }

    #[test]
    fn the_json_gives_the_limited_shards_and_every_scope() {
        let json = parse(PAGE).to_json();
        assert_eq!(json["concurrency_limit"], 48.0);
        assert_eq!(json["table_rate_engaged"], true);
        assert_eq!(
            json["shard_rate_limits"],
            serde_json::json!({"3": 150.0, "10": 80.5})
        );
        assert_eq!(json["throttled_deletes"]["table"], 0.0);
        assert_eq!(json["throttled_deletes"]["index_partition"], 340.0);
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn the_backlog_budget_and_the_capacity_consumed_are_read() {
        let page = "precise_ttl_concurrency_limit 64\n\
            precise_ttl_backlog_rate_limit 2500.4\n\
            precise_ttl_capacity_units_per_second{op=\"query\"} 12.25\n\
            precise_ttl_capacity_units_per_second{op=\"delete\"} 4000\n\
            precise_ttl_capacity_centiunits_total{op=\"delete\"} 123456\n";
        let a = parse(page);
        assert_eq!(a.backlog_rate_limit, Some(2500.4));
        assert_eq!(a.read_units_per_second, Some(12.25));
        assert_eq!(a.write_units_per_second, Some(4000.0));
        let lines = a.describe();
        assert!(
            lines.contains(&"backlog budget: 2500 deletes/s".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"capacity consumed (last ~10 s): 4000 write units/s (deletes), 12.3 read units/s (index queries)".to_string()),
            "{lines:?}"
        );
        assert_eq!(a.to_json()["write_units_per_second"], 4000.0);
        let with_deletes = parse(&format!(
            "{page}precise_ttl_deleted_total 1000\nprecise_ttl_capacity_centiunits_total{{op=\"query\"}} 1300\n"
        ));
        // 1,234.56 write units and 13 read units for 1,000 deletes.
        let line = with_deletes
            .describe()
            .into_iter()
            .find(|l| l.starts_with("cost per million"))
            .unwrap();
        assert!(line.contains("$0.77 on demand"), "{line}");
        assert!(
            line.contains("1.235 write + 0.013 read units each"),
            "{line}"
        );
        let off = parse("precise_ttl_backlog_rate_limit 0\n");
        assert!(
            off.describe()
                .contains(&"backlog budget: none (--backlog-budget off)".to_string())
        );
    }
}
