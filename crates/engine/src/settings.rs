//! The daemon's settings, defined once: each one's name (the `precise-ttl run` flag and the
//! Lambda's event key), environment variable (`PRECISE_TTL_` and the name in upper snake case),
//! default, range and one-line meaning, and the parser that enforces the range.
//!
//! `run`'s flags take their defaults, parsers and help lines from here; the Lambda reads its
//! environment and event through [`DaemonSettings::from_lookup`] with the same parsers;
//! [`DaemonConfig::default`] takes its values from [`DaemonSettings::default`]; and
//! [`DaemonSettings::daemon_config`] is the one mapping from checked settings to a
//! [`DaemonConfig`], for both. A minimum or default changed here changes everywhere at once.

mod fleet;
mod lookup;
mod run;
mod table;

pub use fleet::*;
pub use run::*;
pub use table::*;

use crate::DaemonConfig;
use precise_ttl_core::capacity::{self, WriteCapacity};
use precise_ttl_core::parse_duration;
use std::time::Duration;
use thiserror::Error;

/// One setting: what every front end shows and reads of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The flag's long name, the config file's key and the Lambda event's key.
    pub name: &'static str,
    /// The default as users write it (`None`: unset unless given).
    pub default: Option<&'static str>,
    /// One line saying what it does: the flag's help.
    pub meaning: &'static str,
}

impl Setting {
    /// `PRECISE_TTL_` and the name in upper snake case: the rule for every flag.
    pub fn env(&self) -> String {
        env_name(self.name)
    }
}

/// The environment variable of the flag `--<flag>`.
pub fn env_name(flag: &str) -> String {
    format!("PRECISE_TTL_{}", flag.replace('-', "_").to_uppercase())
}

/// A value a setting refuses, and why (the value quoted, the range named).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// Settings that cannot run, from whichever source.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingError {
    /// One setting's value is out of its range or not of its kind.
    #[error("{name}: {why}")]
    Invalid { name: &'static str, why: Invalid },
    /// Two settings contradict each other.
    #[error(
        "lookback ({lookback:?}) must be at least poll-interval ({poll_interval:?}), or items written between two reads could wait for the backlog pass"
    )]
    LookbackBelowPollInterval {
        lookback: Duration,
        poll_interval: Duration,
    },
}

/// The shortest poll interval: below it, each shard's Query costs more than it can find, and
/// the head read would race the index's own propagation delay.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);

pub const POLL_INTERVAL: Setting = Setting {
    name: "poll-interval",
    default: Some("1s"),
    meaning: "How often each shard's index is read (100ms at least)",
};
pub const HORIZON: Setting = Setting {
    name: "horizon",
    default: Some("5s"),
    meaning: "How far ahead each read looks, so items are deleted at their expiry instant",
};
pub const LOOKBACK: Setting = Setting {
    name: "lookback",
    default: Some("2s"),
    meaning: "How far back each read reaches, for items written late (at least the poll interval)",
};
pub const CONCURRENCY: Setting = Setting {
    name: "concurrency",
    default: Some("64"),
    meaning: "Most delete requests in flight at once, across all shards (1 to 1024); admission adapts below it",
};
pub const PAGE_SIZE: Setting = Setting {
    name: "page-size",
    default: Some("500"),
    meaning: "Keys read per index query (1 to 10000); bounds the memory each shard's reader holds",
};
pub const MAX_ATTEMPTS: Setting = Setting {
    name: "max-attempts",
    default: Some("10"),
    meaning: "Attempts per store call (1 to 100), the first included, before the item counts as an error and is left for the next pass",
};
pub const MAX_DELETES_PER_SECOND: Setting = Setting {
    name: "max-deletes-per-second",
    default: None,
    meaning: "Cap on items deleted per second (default: as fast as the table allows)",
};
pub const BACKLOG_BUDGET: Setting = Setting {
    name: "backlog-budget",
    default: Some("0.5"),
    meaning: "The share of the table's write capacity that deleting the backlog (items already late) may use; `off`: as fast as the table accepts",
};
pub const TABLE_WRITE_CAPACITY: Setting = Setting {
    name: "table-write-capacity",
    default: None,
    meaning: "The table's write capacity (write units/s) for the backlog budget, instead of what DescribeTable says",
};
pub const BATCH_LINGER: Setting = Setting {
    name: "batch-linger",
    default: Some("0s"),
    meaning: "In batch mode, how long a due item may wait for others to share its request (0s: never)",
};
pub const STRAY_CHECK_INTERVAL: Setting = Setting {
    name: "stray-check-interval",
    default: Some("5m"),
    meaning: "How often to look for due items on shard values from --shards up to 1023 (left by writers with a larger shard count) and sweep them; 0s: never",
};

/// The settings [`DaemonSettings`] holds, in the order `from_lookup` reads them.
pub const DAEMON: &[Setting] = &[
    POLL_INTERVAL,
    HORIZON,
    LOOKBACK,
    CONCURRENCY,
    PAGE_SIZE,
    MAX_ATTEMPTS,
    MAX_DELETES_PER_SECOND,
    BACKLOG_BUDGET,
    TABLE_WRITE_CAPACITY,
    BATCH_LINGER,
    STRAY_CHECK_INTERVAL,
];

// The table, its layout and the fleet: not `DaemonConfig`'s, but read by `run` and the Lambda
// alike, so their defaults and ranges are defined here too.

pub const SHARDS: Setting = Setting {
    name: "shards",
    default: Some("16"),
    meaning: "How many shard values writers spread items over (1 to 1024)",
};
pub const TTL_ATTRIBUTE: Setting = Setting {
    name: "ttl-attribute",
    default: Some("ttl"),
    meaning: "The TTL attribute: a Number of epoch seconds, as for native TTL",
};
pub const SHARD_ATTRIBUTE: Setting = Setting {
    name: "shard-attribute",
    default: Some("ttl_shard"),
    meaning: "The shard attribute writers add next to the TTL: a Number in 0..SHARDS",
};
pub const INDEX_NAME: Setting = Setting {
    name: "index-name",
    default: Some("precise-ttl"),
    meaning: "The name of the expiry index (a sparse KEYS_ONLY GSI on shard + TTL)",
};
pub const LEASE_TABLE: Setting = Setting {
    name: "lease-table",
    default: Some("precise-ttl-leases"),
    meaning: "The table of shard leases that splits the work among workers; one serves every swept table (created by `setup`)",
};
pub const LEASE_DURATION: Setting = Setting {
    name: "lease-duration",
    default: Some("10s"),
    meaning: "How long a lease's heartbeat may stop before another worker takes it over (1s to 10m)",
};
pub const DELETE_MODE: Setting = Setting {
    name: "delete-mode",
    default: Some("auto"),
    meaning: "How deletes are sent: PartiQL batches of up to 25 conditional DELETEs (batch), one DeleteItem per item (single), or batches with DeleteItem for good once the store refuses PartiQL (auto)",
};

/// A duration as users write it (`250ms`, `5s`, `1m30s`).
pub fn duration(s: &str) -> Result<Duration, Invalid> {
    parse_duration(s).map_err(|e| Invalid(e.to_string()))
}

pub fn poll_interval(s: &str) -> Result<Duration, Invalid> {
    let d = duration(s)?;
    if d < MIN_POLL_INTERVAL {
        return Err(Invalid(format!(
            "{s:?} is below the minimum poll interval of 100ms"
        )));
    }
    Ok(d)
}

pub fn lease_duration(s: &str) -> Result<Duration, Invalid> {
    let d = duration(s)?;
    if !(Duration::from_secs(1)..=Duration::from_secs(600)).contains(&d) {
        return Err(Invalid(format!(
            "{s:?} is not a lease duration from 1s to 10m"
        )));
    }
    Ok(d)
}

/// A whole number in `range` (said as clap says its own ranges).
fn whole(s: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, Invalid> {
    match s.trim().parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        Ok(n) => Err(Invalid(format!(
            "{n} is not in {}..={}",
            range.start(),
            range.end()
        ))),
        Err(_) => Err(Invalid(format!("{s:?} is not a whole number"))),
    }
}

pub fn concurrency(s: &str) -> Result<u64, Invalid> {
    whole(s, 1..=1024)
}

pub fn page_size(s: &str) -> Result<u32, Invalid> {
    whole(s, 1..=10_000).map(|n| n as u32)
}

pub fn max_attempts(s: &str) -> Result<u32, Invalid> {
    whole(s, 1..=100).map(|n| n as u32)
}

pub fn shards(s: &str) -> Result<u64, Invalid> {
    whole(s, 1..=1024)
}

pub fn table_write_capacity(s: &str) -> Result<u64, Invalid> {
    match s.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Invalid(format!(
            "{s:?} is not a positive whole number of write units per second"
        ))),
    }
}

/// A rate above zero (deletes, writes per second).
pub fn positive_rate(s: &str) -> Result<f64, Invalid> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(Invalid(format!(
            "{s:?} is not a positive number per second"
        ))),
    }
}

/// A share of the table's write capacity, or `off` (`None`).
pub fn backlog_budget(s: &str) -> Result<Option<f64>, Invalid> {
    capacity::parse_share(s).map_err(Invalid)
}

/// Every value of the daemon's settings, checked one by one and together.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonSettings {
    pub poll_interval: Duration,
    pub horizon: Duration,
    pub lookback: Duration,
    pub concurrency: u64,
    pub page_size: u32,
    pub max_attempts: u32,
    pub max_deletes_per_second: Option<f64>,
    /// `None`: `off`.
    pub backlog_budget: Option<f64>,
    pub table_write_capacity: Option<u64>,
    pub batch_linger: Duration,
    /// Zero: never.
    pub stray_check_interval: Duration,
}

impl Default for DaemonSettings {
    /// Every setting at its default (each one's text parsed by its own parser, as a flag's).
    fn default() -> Self {
        DaemonSettings::from_lookup(|_| None).expect("the built-in defaults are valid")
    }
}

/// The backlog's budget for one table: its ceiling and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Backlog deletes per second at most.
    pub ceiling: f64,
    pub share: f64,
    pub capacity: WriteCapacity,
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "backlog budget {:.0} deletes/s ({:.0} % of {})",
            self.ceiling,
            self.share * 100.0,
            self.capacity
        )
    }
}

impl DaemonSettings {
    /// Reads each setting by name from `get` (absent or empty: its default) with its own parser,
    /// then checks them together. The Lambda's environment and event go through here.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, SettingError> {
        let get = lookup::Lookup(get);
        let settings = DaemonSettings {
            poll_interval: get.required(POLL_INTERVAL, poll_interval)?,
            horizon: get.required(HORIZON, duration)?,
            lookback: get.required(LOOKBACK, duration)?,
            concurrency: get.required(CONCURRENCY, concurrency)?,
            page_size: get.required(PAGE_SIZE, page_size)?,
            max_attempts: get.required(MAX_ATTEMPTS, max_attempts)?,
            max_deletes_per_second: get.optional(MAX_DELETES_PER_SECOND, positive_rate)?,
            backlog_budget: get.required(BACKLOG_BUDGET, backlog_budget)?,
            table_write_capacity: get.optional(TABLE_WRITE_CAPACITY, table_write_capacity)?,
            batch_linger: get.required(BATCH_LINGER, duration)?,
            stray_check_interval: get.required(STRAY_CHECK_INTERVAL, duration)?,
        };
        settings.check()?;
        Ok(settings)
    }

    /// What no single setting's parser can see: the lookback must cover a poll interval, or
    /// items written between two reads would wait for the backlog pass. Refused, never raised
    /// silently, so a deployment says what it runs with.
    pub fn check(&self) -> Result<(), SettingError> {
        if self.lookback < self.poll_interval {
            return Err(SettingError::LookbackBelowPollInterval {
                lookback: self.lookback,
                poll_interval: self.poll_interval,
            });
        }
        Ok(())
    }

    /// The backlog's budget for a table whose capacity DescribeTable gave as `described`
    /// (`--table-write-capacity` instead, when given); `None` with the budget `off`.
    pub fn budget(&self, described: WriteCapacity) -> Option<Budget> {
        let share = self.backlog_budget?;
        let capacity = self
            .table_write_capacity
            .map_or(described, WriteCapacity::Given);
        Some(Budget {
            ceiling: capacity::backlog_ceiling(capacity, share),
            share,
            capacity,
        })
    }

    /// The daemon's configuration for a table of `described` write capacity: the one mapping
    /// from settings to [`DaemonConfig`], for `run` and the Lambda alike.
    pub fn daemon_config(&self, described: WriteCapacity) -> DaemonConfig {
        DaemonConfig {
            backlog_ceiling: self.budget(described).map(|b| b.ceiling),
            ..DaemonConfig::from_settings(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn from(pairs: &[(&str, &str)]) -> Result<DaemonSettings, SettingError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DaemonSettings::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn every_default_parses_and_daemon_config_default_is_the_settings_defaults() {
        let d = DaemonSettings::default();
        assert_eq!(d.poll_interval, Duration::from_secs(1));
        assert_eq!(d.concurrency, 64);
        assert_eq!(d.backlog_budget, Some(capacity::DEFAULT_BACKLOG_SHARE));
        assert_eq!(
            d.max_attempts,
            precise_ttl_core::Backoff::default().max_attempts
        );
        let config = DaemonConfig::default();
        assert_eq!(config.max_concurrency, 64);
        assert_eq!(config.poll_interval, d.poll_interval);
        assert_eq!(config.stray_check_interval, Some(Duration::from_secs(300)));
        assert_eq!(config.backlog_ceiling, None);
        shards(SHARDS.default.unwrap()).unwrap();
        lease_duration(LEASE_DURATION.default.unwrap()).unwrap();
    }

    #[test]
    fn env_names_follow_the_rule() {
        assert_eq!(POLL_INTERVAL.env(), "PRECISE_TTL_POLL_INTERVAL");
        assert_eq!(
            env_name("max-deletes-per-second"),
            "PRECISE_TTL_MAX_DELETES_PER_SECOND"
        );
    }

    #[test]
    fn ranges_and_minimums_are_enforced_and_named() {
        for (name, bad) in [
            ("poll-interval", "50ms"),
            ("poll-interval", "soon"),
            ("concurrency", "0"),
            ("concurrency", "1025"),
            ("page-size", "10001"),
            ("max-attempts", "0"),
            ("max-deletes-per-second", "-1"),
            ("backlog-budget", "2"),
            ("table-write-capacity", "0"),
            ("stray-check-interval", "often"),
        ] {
            let e = from(&[(name, bad)]).unwrap_err();
            assert!(e.to_string().starts_with(name), "{name}={bad}: {e}");
        }
        assert!(poll_interval("100ms").is_ok());
    }

    #[test]
    fn a_lookback_below_the_poll_interval_is_refused_not_raised() {
        let e = from(&[("poll-interval", "3s")]).unwrap_err();
        assert!(
            matches!(e, SettingError::LookbackBelowPollInterval { .. }),
            "{e}"
        );
        assert!(from(&[("poll-interval", "3s"), ("lookback", "3s")]).is_ok());
    }

    #[test]
    fn the_config_follows_the_settings_and_the_table() {
        let s = from(&[
            ("concurrency", "8"),
            ("stray-check-interval", "0s"),
            ("max-attempts", "3"),
            ("backlog-budget", "0.25"),
        ])
        .unwrap();
        let c = s.daemon_config(WriteCapacity::Provisioned(1_000));
        assert_eq!(c.max_concurrency, 8);
        assert!(c.initial_concurrency <= 8 && c.min_concurrency <= 8);
        assert_eq!(c.stray_check_interval, None);
        assert_eq!(c.backoff.max_attempts, 3);
        assert_eq!(c.backlog_ceiling, Some(250.0));
        let s = from(&[("table-write-capacity", "2000")]).unwrap();
        let b = s.budget(WriteCapacity::OnDemandDefault).unwrap();
        assert_eq!(b.ceiling, 1_000.0);
        assert!(b.to_string().contains("50 % of"), "{b}");
        let off = from(&[("backlog-budget", "off")]).unwrap();
        assert_eq!(
            off.daemon_config(WriteCapacity::OnDemandDefault)
                .backlog_ceiling,
            None
        );
    }
}
