//! The function's settings: environment variables with the names `precise-ttl run` reads
//! (`PRECISE_TTL_TABLE`, `PRECISE_TTL_SHARDS`, …), overridden per invocation by the event's keys
//! (the flag names: `table`, `shards`, `poll-interval`, …).

use precise_ttl_core::{ShardCount, TtlLayout, parse_duration};
use precise_ttl_dynamodb::{DEFAULT_LEASE_TABLE, DeleteMode};
use precise_ttl_engine::DaemonConfig;
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

/// Every setting, by its flag name (the environment variable is `PRECISE_TTL_` + the name in
/// upper case with `_` for `-`).
pub const SETTINGS: &[&str] = &[
    "table",
    "ttl-attribute",
    "shard-attribute",
    "shards",
    "index-name",
    "lease-table",
    "lease-duration",
    "no-leases",
    "worker-id",
    "poll-interval",
    "horizon",
    "lookback",
    "concurrency",
    "page-size",
    "max-deletes-per-second",
    "backlog-budget",
    "table-write-capacity",
    "delete-mode",
    "safety-margin",
];

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("no table: set PRECISE_TTL_TABLE on the function, or \"table\" in the event")]
    NoTable,
    #[error("{name}: {value:?} {why}")]
    Invalid {
        name: String,
        value: String,
        why: String,
    },
    #[error("unknown setting {0:?} in the event (known: {known})", known = SETTINGS.join(", "))]
    Unknown(String),
}

/// What one invocation runs with.
#[derive(Debug, Clone)]
pub struct LambdaConfig {
    pub table: String,
    pub layout: TtlLayout,
    /// `None`: no leases (`no-leases`).
    pub lease_table: Option<String>,
    pub lease_duration: Duration,
    pub worker_id: Option<String>,
    pub delete_mode: DeleteMode,
    /// Stop this long before the invocation's deadline: in-flight deletes drain in half of it,
    /// leases are released and the report returned in the rest.
    pub safety_margin: Duration,
    /// The backlog's share of the table's write capacity (`None`: `off`), as `run
    /// --backlog-budget`.
    pub backlog_share: Option<f64>,
    /// The table's write capacity given by hand, as `run --table-write-capacity`.
    pub table_write_capacity: Option<u64>,
    pub daemon: DaemonConfig,
}

impl LambdaConfig {
    /// The daemon's settings for a table of `capacity`, the backlog budget included.
    pub fn daemon_for(&self, capacity: precise_ttl_core::capacity::WriteCapacity) -> DaemonConfig {
        use precise_ttl_core::capacity::{WriteCapacity, backlog_ceiling};
        let capacity = self
            .table_write_capacity
            .map_or(capacity, WriteCapacity::Given);
        DaemonConfig {
            backlog_ceiling: self.backlog_share.map(|s| backlog_ceiling(capacity, s)),
            ..self.daemon.clone()
        }
    }
}

fn env_name(setting: &str) -> String {
    format!("PRECISE_TTL_{}", setting.replace('-', "_").to_uppercase())
}

impl LambdaConfig {
    /// From `env` (the process environment), with `overrides` (the event's settings) on top.
    pub fn resolve(
        env: &BTreeMap<String, String>,
        overrides: &BTreeMap<String, String>,
    ) -> Result<LambdaConfig, ConfigError> {
        for key in overrides.keys() {
            if !SETTINGS.contains(&key.as_str()) {
                return Err(ConfigError::Unknown(key.clone()));
            }
        }
        let get = |name: &str| -> Option<String> {
            overrides
                .get(name)
                .cloned()
                .or_else(|| env.get(&env_name(name)).cloned())
                .filter(|v| !v.is_empty())
        };
        let invalid = |name: &str, value: &str, why: &dyn std::fmt::Display| ConfigError::Invalid {
            name: name.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        };
        let duration = |name: &str, default: &str| -> Result<Duration, ConfigError> {
            let v = get(name).unwrap_or_else(|| default.to_string());
            parse_duration(&v).map_err(|e| invalid(name, &v, &e))
        };
        let number = |name: &str, default: u64, range: std::ops::RangeInclusive<u64>| {
            let v = get(name).unwrap_or_else(|| default.to_string());
            match v.parse::<u64>() {
                Ok(n) if range.contains(&n) => Ok(n),
                _ => Err(invalid(
                    name,
                    &v,
                    &format!(
                        "is not a whole number from {} to {}",
                        range.start(),
                        range.end()
                    ),
                )),
            }
        };
        let flag = |name: &str| -> Result<bool, ConfigError> {
            match get(name).as_deref() {
                None | Some("false") | Some("0") => Ok(false),
                Some("true") | Some("1") => Ok(true),
                Some(v) => Err(invalid(name, v, &"is not true or false")),
            }
        };

        let table = get("table").ok_or(ConfigError::NoTable)?;
        let shards = number("shards", 16, 1..=1024)?;
        let layout = TtlLayout::new(
            get("ttl-attribute").unwrap_or_else(|| "ttl".into()),
            get("shard-attribute").unwrap_or_else(|| "ttl_shard".into()),
            get("index-name").unwrap_or_else(|| "precise-ttl".into()),
            ShardCount::new(shards).map_err(|e| invalid("shards", &shards.to_string(), &e))?,
        )
        .map_err(|e| invalid("ttl-attribute", "", &e))?;
        let lease_duration = duration("lease-duration", "10s")?;
        if !(Duration::from_secs(1)..=Duration::from_secs(600)).contains(&lease_duration) {
            return Err(invalid(
                "lease-duration",
                &format!("{lease_duration:?}"),
                &"is not from 1s to 10m",
            ));
        }
        let delete_mode = match get("delete-mode").as_deref().unwrap_or("auto") {
            "auto" => DeleteMode::Auto,
            "batch" => DeleteMode::Batch,
            "single" => DeleteMode::Single,
            v => return Err(invalid("delete-mode", v, &"is not auto, batch or single")),
        };
        let safety_margin = duration("safety-margin", "2s")?;
        let poll_interval = duration("poll-interval", "1s")?;
        if poll_interval < Duration::from_millis(50) {
            return Err(invalid(
                "poll-interval",
                &format!("{poll_interval:?}"),
                &"is below 50ms",
            ));
        }
        let max_deletes_per_second = match get("max-deletes-per-second") {
            None => None,
            Some(v) => match v.parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 => Some(r),
                _ => {
                    return Err(invalid(
                        "max-deletes-per-second",
                        &v,
                        &"is not a positive number",
                    ));
                }
            },
        };
        let backlog_share = match get("backlog-budget") {
            None => Some(precise_ttl_core::capacity::DEFAULT_BACKLOG_SHARE),
            Some(v) => precise_ttl_core::capacity::parse_share(&v)
                .map_err(|why| invalid("backlog-budget", &v, &why))?,
        };
        let table_write_capacity = match get("table-write-capacity") {
            None => None,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    return Err(invalid(
                        "table-write-capacity",
                        &v,
                        &"is not a positive whole number of write units per second",
                    ));
                }
            },
        };
        let mut daemon = DaemonConfig {
            poll_interval,
            horizon: duration("horizon", "5s")?,
            lookback: duration("lookback", "2s")?.max(poll_interval),
            page_size: number("page-size", 500, 1..=10_000)? as u32,
            max_concurrency: number("concurrency", 64, 1..=1024)? as usize,
            max_deletes_per_second,
            // Half the margin to drain, the rest to release leases and answer.
            drain_timeout: safety_margin / 2,
            ..DaemonConfig::default()
        };
        daemon.initial_concurrency = daemon.initial_concurrency.min(daemon.max_concurrency);
        daemon.min_concurrency = daemon.min_concurrency.min(daemon.max_concurrency);
        Ok(LambdaConfig {
            table,
            layout,
            lease_table: (!flag("no-leases")?)
                .then(|| get("lease-table").unwrap_or_else(|| DEFAULT_LEASE_TABLE.into())),
            lease_duration,
            worker_id: get("worker-id"),
            delete_mode,
            safety_margin,
            backlog_share,
            table_write_capacity,
            daemon,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_backlog_budget_is_run_s_and_follows_the_table() {
        use precise_ttl_core::capacity::WriteCapacity;
        let env = map(&[("PRECISE_TTL_TABLE", "sessions")]);
        let c = LambdaConfig::resolve(&env, &BTreeMap::new()).unwrap();
        assert_eq!(
            c.daemon_for(WriteCapacity::Provisioned(1_000))
                .backlog_ceiling,
            Some(500.0)
        );
        let c = LambdaConfig::resolve(
            &env,
            &map(&[("backlog-budget", "0.25"), ("table-write-capacity", "8000")]),
        )
        .unwrap();
        assert_eq!(
            c.daemon_for(WriteCapacity::OnDemandDefault).backlog_ceiling,
            Some(2_000.0)
        );
        let c = LambdaConfig::resolve(&env, &map(&[("backlog-budget", "off")])).unwrap();
        assert_eq!(
            c.daemon_for(WriteCapacity::OnDemandDefault).backlog_ceiling,
            None
        );
        for (name, bad) in [("backlog-budget", "2"), ("table-write-capacity", "0")] {
            let e = LambdaConfig::resolve(&env, &map(&[(name, bad)])).unwrap_err();
            assert!(matches!(e, ConfigError::Invalid { .. }), "{e}");
        }
    }

    #[test]
    fn the_environment_uses_the_cli_names_and_the_event_overrides_it() {
        let env = map(&[
            ("PRECISE_TTL_TABLE", "sessions"),
            ("PRECISE_TTL_SHARDS", "8"),
            ("PRECISE_TTL_POLL_INTERVAL", "500ms"),
        ]);
        let c = LambdaConfig::resolve(&env, &BTreeMap::new()).unwrap();
        assert_eq!(c.table, "sessions");
        assert_eq!(c.layout.shards.get(), 8);
        assert_eq!(c.daemon.poll_interval, Duration::from_millis(500));
        assert_eq!(c.lease_table.as_deref(), Some(DEFAULT_LEASE_TABLE));
        assert_eq!(c.delete_mode, DeleteMode::Auto);
        let c = LambdaConfig::resolve(&env, &map(&[("table", "carts"), ("no-leases", "true")]))
            .unwrap();
        assert_eq!(c.table, "carts");
        assert_eq!(c.lease_table, None);
    }

    #[test]
    fn mistakes_are_named() {
        let none = BTreeMap::new();
        assert_eq!(
            LambdaConfig::resolve(&none, &none).unwrap_err(),
            ConfigError::NoTable
        );
        let env = map(&[("PRECISE_TTL_TABLE", "t")]);
        for (key, value) in [
            ("shards", "0"),
            ("poll-interval", "soon"),
            ("delete-mode", "fast"),
            ("lease-duration", "1h"),
            ("no-leases", "maybe"),
        ] {
            let err = LambdaConfig::resolve(&env, &map(&[(key, value)])).unwrap_err();
            assert!(err.to_string().starts_with(key), "{err}");
        }
        let err = LambdaConfig::resolve(&env, &map(&[("tabel", "x")])).unwrap_err();
        assert_eq!(err, ConfigError::Unknown("tabel".into()));
    }
}
