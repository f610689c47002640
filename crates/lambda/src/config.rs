//! The function's settings: environment variables with the names `precise-ttl run` reads
//! (`PRECISE_TTL_TABLE`, `PRECISE_TTL_SHARDS`, …), overridden per invocation by the event's keys
//! (the flag names: `table`, `shards`, `poll-interval`, …).
//!
//! Every setting the function shares with `run` (the table's layout, the index layout and queue
//! table, the delete mode, the fleet, the daemon's: defaults, ranges, minimums, names, parsers)
//! is `precise_ttl_engine::settings`', read through [`RunSettings::from_lookup`]; the daemon's
//! configuration comes from [`DaemonSettings::daemon_config`], the function `run` uses. Defined
//! here: what `run` has no flag for (`safety-margin`), the function's refusal of the blog
//! window's layout, and the worker's default name (the execution environment's log stream, in
//! [`crate::invoke`]).
//!
//! `index-layout` picks what the daemon reads: `sharded` (the default, the shard index
//! `precise-ttl setup` adds) or `stream-queue` (issue 29: precise-ttl's queue table, named by
//! `queue-table`, default `<table>-precise-ttl-queue`). The layout also decides what a DynamoDB
//! Streams batch is for ([`StreamRole`]).

use precise_ttl_core::TtlLayout;
use precise_ttl_engine::DaemonConfig;
use precise_ttl_engine::settings::{
    self, Choice as _, DaemonSettings, DeleteMode, FleetSettings, Index, Invalid, LayoutInvalid,
    RunSettings, RunSettingsError, Setting, SettingError,
};
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

/// Stop this long before the invocation's deadline (the Lambda's own setting).
pub const SAFETY_MARGIN: Setting = Setting {
    name: "safety-margin",
    default: Some("2s"),
    meaning: "Stop this long before the invocation's deadline: deletes in flight drain in half of it, leases are released and the report returned in the rest",
};

/// Every setting the function reads, by its flag name (the environment variable is
/// `PRECISE_TTL_` + the name in upper snake case). Spelt out for `scripts/check-deploy`, which
/// reads it; a test holds it to the settings' own names.
pub const SETTINGS: &[&str] = &[
    "table",
    "ttl-attribute",
    "shard-attribute",
    "shards",
    "index-name",
    "index-layout",
    "queue-table",
    "lease-table",
    "lease-duration",
    "no-leases",
    "worker-id",
    "delete-mode",
    "safety-margin",
    "poll-interval",
    "horizon",
    "lookback",
    "concurrency",
    "page-size",
    "max-attempts",
    "max-deletes-per-second",
    "backlog-budget",
    "table-write-capacity",
    "batch-linger",
    "stray-check-interval",
];

/// What the daemon reads to find the items that are due: the layouts the function sweeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexLayout {
    /// The shard index (a GSI on the shard and TTL attributes the writers set).
    Sharded,
    /// The expiry queue: precise-ttl's own table of entries, fed from the table's stream.
    StreamQueue { queue_table: String },
}

/// What the function does with a DynamoDB Streams batch (an event source mapping on the
/// table's stream). The layout decides, so one function needs no second setting: with
/// `stream-queue` the stream is the queue's source and a batch is indexed; otherwise the
/// function is the stream's archive consumer, as before the queue existed (and needs no table
/// settings). A stream-queue deployment that also wants the archive consumer deploys the
/// function a second time without `PRECISE_TTL_INDEX_LAYOUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRole {
    /// Write the queue entries of the batch's inserts and changes.
    Index,
    /// Return the batch's expiry records (REMOVEs that are expiries).
    Archive,
}

/// The role of stream batches under `env`'s layout (only `PRECISE_TTL_INDEX_LAYOUT` is read:
/// the archive consumer needs no other setting).
pub fn stream_role(env: &BTreeMap<String, String>) -> Result<StreamRole, ConfigError> {
    let value = env
        .get(&settings::INDEX_LAYOUT.env())
        .filter(|v| !v.is_empty())
        .map_or(settings::INDEX_LAYOUT.default.unwrap_or_default(), |v| v);
    let layout = settings::IndexLayout::parse(value).map_err(|why| SettingError::Invalid {
        name: settings::INDEX_LAYOUT.name,
        why,
    })?;
    Ok(match layout {
        settings::IndexLayout::StreamQueue => StreamRole::Index,
        settings::IndexLayout::Sharded => StreamRole::Archive,
        settings::IndexLayout::BlogWindow => return Err(blog_window_refused()),
    })
}

/// The function's refusal of the blog window's layout, which `run` sweeps.
fn blog_window_refused() -> ConfigError {
    ConfigError::Invalid(SettingError::Invalid {
        name: settings::INDEX_LAYOUT.name,
        why: Invalid(
            "the function sweeps sharded or stream-queue; blog-window runs with `precise-ttl run`"
                .into(),
        ),
    })
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("no table: set PRECISE_TTL_TABLE on the function, or \"table\" in the event")]
    NoTable,
    #[error(transparent)]
    Invalid(#[from] SettingError),
    /// The table's layout, refused as `run` refuses it.
    #[error(transparent)]
    Layout(#[from] LayoutInvalid),
    #[error("unknown setting {0:?} in the event (known: {known})", known = SETTINGS.join(", "))]
    Unknown(String),
}

impl From<RunSettingsError> for ConfigError {
    fn from(e: RunSettingsError) -> Self {
        match e {
            RunSettingsError::Setting(e) => ConfigError::Invalid(e),
            RunSettingsError::Layout(e) => ConfigError::Layout(e),
        }
    }
}

/// What one invocation runs with.
#[derive(Debug, Clone)]
pub struct LambdaConfig {
    pub table: String,
    pub layout: TtlLayout,
    /// The shard index, or the expiry queue.
    pub index: IndexLayout,
    /// The lease table (`None`: no leases), the lease duration and the worker's name (`None`:
    /// the execution environment's log stream).
    pub fleet: FleetSettings,
    pub delete_mode: DeleteMode,
    /// Stop this long before the invocation's deadline: in-flight deletes drain in half of it,
    /// leases are released and the report returned in the rest.
    pub safety_margin: Duration,
    /// The daemon's settings, as `run`'s flags give them.
    pub settings: DaemonSettings,
}

impl LambdaConfig {
    /// The daemon's settings for a table of `capacity`, the backlog budget included: `run`'s
    /// mapping, and the drain fitted in the safety margin.
    pub fn daemon_for(&self, capacity: precise_ttl_core::capacity::WriteCapacity) -> DaemonConfig {
        DaemonConfig {
            // Half the margin to drain, the rest to release leases and answer.
            drain_timeout: self.safety_margin / 2,
            ..self.settings.daemon_config(capacity)
        }
    }

    /// From `env` (the process environment), with `overrides` (the event's settings) on top:
    /// `run`'s settings through [`RunSettings::from_lookup`], and the function's own.
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
                .or_else(|| env.get(&settings::env_name(name)).cloned())
                .filter(|v| !v.is_empty())
        };
        let table = get(settings::TABLE.name).ok_or(ConfigError::NoTable)?;
        let run = RunSettings::from_lookup(table, get)?;
        let index = match run.index {
            Index::Sharded => IndexLayout::Sharded,
            Index::StreamQueue { queue_table } => IndexLayout::StreamQueue { queue_table },
            Index::BlogWindow => return Err(blog_window_refused()),
        };
        let safety_margin = get(SAFETY_MARGIN.name)
            .or(SAFETY_MARGIN.default.map(str::to_string))
            .unwrap_or_default();
        let safety_margin =
            settings::duration(&safety_margin).map_err(|why| SettingError::Invalid {
                name: SAFETY_MARGIN.name,
                why,
            })?;
        Ok(LambdaConfig {
            table: run.table,
            layout: run.layout,
            index,
            fleet: run.fleet,
            delete_mode: run.delete_mode,
            safety_margin,
            settings: run.daemon,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_dynamodb::DEFAULT_LEASE_TABLE;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_list_names_every_setting_read() {
        let mut read: Vec<&str> = vec![
            settings::TABLE.name,
            settings::TTL_ATTRIBUTE.name,
            settings::SHARD_ATTRIBUTE.name,
            settings::SHARDS.name,
            settings::INDEX_NAME.name,
            settings::INDEX_LAYOUT.name,
            settings::QUEUE_TABLE.name,
            settings::LEASE_TABLE.name,
            settings::LEASE_DURATION.name,
            settings::NO_LEASES.name,
            settings::WORKER_ID.name,
            settings::DELETE_MODE.name,
            SAFETY_MARGIN.name,
        ];
        read.extend(settings::DAEMON.iter().map(|s| s.name));
        assert_eq!(SETTINGS, read.as_slice());
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
        assert_eq!(c.settings.poll_interval, Duration::from_millis(500));
        assert_eq!(c.fleet.lease_table.as_deref(), Some(DEFAULT_LEASE_TABLE));
        assert_eq!(c.delete_mode, DeleteMode::Auto);
        let c = LambdaConfig::resolve(&env, &map(&[("table", "carts"), ("no-leases", "true")]))
            .unwrap();
        assert_eq!(c.table, "carts");
        assert_eq!(c.fleet.lease_table, None);
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

    #[test]
    fn the_layout_picks_the_queue_and_the_role_of_stream_batches() {
        let env = map(&[("PRECISE_TTL_TABLE", "sessions")]);
        let c = LambdaConfig::resolve(&env, &BTreeMap::new()).unwrap();
        assert_eq!(c.index, IndexLayout::Sharded);
        assert_eq!(stream_role(&env).unwrap(), StreamRole::Archive);
        let queue = map(&[
            ("PRECISE_TTL_TABLE", "sessions"),
            ("PRECISE_TTL_INDEX_LAYOUT", "stream-queue"),
        ]);
        let c = LambdaConfig::resolve(&queue, &BTreeMap::new()).unwrap();
        assert_eq!(
            c.index,
            IndexLayout::StreamQueue {
                queue_table: "sessions-precise-ttl-queue".into()
            }
        );
        assert_eq!(stream_role(&queue).unwrap(), StreamRole::Index);
        let c = LambdaConfig::resolve(&queue, &map(&[("queue-table", "q")])).unwrap();
        assert_eq!(
            c.index,
            IndexLayout::StreamQueue {
                queue_table: "q".into()
            }
        );
        // The event may switch one invocation to the sharded layout, and sharded is a value.
        let c = LambdaConfig::resolve(&queue, &map(&[("index-layout", "sharded")])).unwrap();
        assert_eq!(c.index, IndexLayout::Sharded);
        // The archive consumer needs no table.
        let archive = map(&[("PRECISE_TTL_INDEX_LAYOUT", "sharded")]);
        assert_eq!(stream_role(&archive).unwrap(), StreamRole::Archive);
    }

    #[test]
    fn other_layouts_are_refused_in_one_line_and_a_queue_counts_under_its_layout_only() {
        let env = map(&[("PRECISE_TTL_TABLE", "t")]);
        for (layout, says) in [
            (
                "blog-window",
                "sharded or stream-queue; blog-window runs with `precise-ttl run`",
            ),
            ("queue", "is not sharded, stream-queue or blog-window"),
            (
                "Stream-Queue",
                "is not sharded, stream-queue or blog-window",
            ),
        ] {
            let err = LambdaConfig::resolve(&env, &map(&[("index-layout", layout)])).unwrap_err();
            let line = err.to_string();
            assert!(line.starts_with("index-layout: "), "{line}");
            assert!(line.contains(says), "{line}");
            assert!(!line.contains('\n'), "{line}");
            let bad = map(&[("PRECISE_TTL_INDEX_LAYOUT", layout)]);
            assert_eq!(stream_role(&bad).unwrap_err(), err);
        }
        // As `run` does: `queue-table` names the stream-queue layout's table and is ignored by
        // the sharded one (one config file may serve both layouts' commands).
        let c = LambdaConfig::resolve(&env, &map(&[("queue-table", "q")])).unwrap();
        assert_eq!(c.index, IndexLayout::Sharded);
    }

    /// `run`'s minimums and checks, not looser ones of the function's own.
    #[test]
    fn run_s_minimums_hold_and_a_short_lookback_is_refused_not_raised() {
        let env = map(&[("PRECISE_TTL_TABLE", "t")]);
        let err = LambdaConfig::resolve(&env, &map(&[("poll-interval", "50ms")])).unwrap_err();
        assert!(err.to_string().contains("100ms"), "{err}");
        let err = LambdaConfig::resolve(&env, &map(&[("poll-interval", "3s")])).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid(SettingError::LookbackBelowPollInterval { .. })
            ),
            "{err}"
        );
        // Every setting of the daemon is read, under its flag's name.
        let c = LambdaConfig::resolve(
            &env,
            &map(&[("stray-check-interval", "0s"), ("max-attempts", "3")]),
        )
        .unwrap();
        let config = c.daemon_for(precise_ttl_core::capacity::WriteCapacity::OnDemandDefault);
        assert_eq!(config.stray_check_interval, None);
        assert_eq!(config.backoff.max_attempts, 3);
        assert_eq!(config.drain_timeout, c.safety_margin / 2);
    }
}
