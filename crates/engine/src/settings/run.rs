//! Everything a sweeper runs with, apart from its host's own settings: the table and its layout,
//! the index read, the delete mode, the fleet and the daemon's settings. `precise-ttl run` builds
//! it from its flags, the Lambda reads it with [`RunSettings::from_lookup`]; both through the
//! parsers and defaults of the settings' modules, so one set of values gives one `RunSettings`.

use super::lookup::Lookup;
use super::{
    Choice, DELETE_MODE, DaemonSettings, DeleteMode, FleetSettings, INDEX_LAYOUT, INDEX_NAME,
    Index, IndexLayout, LayoutInvalid, QUEUE_TABLE, SHARD_ATTRIBUTE, SHARDS, SettingError,
    TTL_ATTRIBUTE, shards, ttl_layout,
};
use precise_ttl_core::TtlLayout;
use thiserror::Error;

/// Settings that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RunSettingsError {
    #[error(transparent)]
    Setting(#[from] SettingError),
    #[error(transparent)]
    Layout(#[from] LayoutInvalid),
}

/// What `run` and the Lambda's scheduled sweep share.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings {
    pub table: String,
    pub layout: TtlLayout,
    pub index: Index,
    pub delete_mode: DeleteMode,
    pub fleet: FleetSettings,
    pub daemon: DaemonSettings,
}

impl RunSettings {
    /// The settings of `table`, each read by name from `get` (absent or empty: its default)
    /// with its own parser, then checked together.
    pub fn from_lookup(
        table: String,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, RunSettingsError> {
        let lookup = Lookup(&get);
        let text = |s: &str| Ok(s.to_string());
        let layout = ttl_layout(
            &lookup.required(TTL_ATTRIBUTE, text)?,
            &lookup.required(SHARD_ATTRIBUTE, text)?,
            &lookup.required(INDEX_NAME, text)?,
            lookup.required(SHARDS, shards)?,
        )?;
        let index_layout = lookup.required(INDEX_LAYOUT, IndexLayout::parse)?;
        let index = Index::of(index_layout, lookup.given(QUEUE_TABLE).as_deref(), &table);
        let delete_mode = lookup.required(DELETE_MODE, DeleteMode::parse)?;
        Ok(RunSettings {
            table,
            layout,
            index,
            delete_mode,
            fleet: FleetSettings::from_lookup(&get)?,
            daemon: DaemonSettings::from_lookup(&get)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_one_line_refusals() {
        let s = RunSettings::from_lookup("t".into(), |_| None).unwrap();
        assert_eq!(s.layout.shards.get(), 16);
        assert_eq!(s.index, Index::Sharded);
        assert_eq!(s.delete_mode, DeleteMode::Auto);
        assert_eq!(s.daemon, DaemonSettings::default());
        for (name, bad) in [
            ("shards", "0"),
            ("index-layout", "queue"),
            ("delete-mode", "fast"),
            ("no-leases", "1"),
            ("poll-interval", "50ms"),
        ] {
            let e = RunSettings::from_lookup("t".into(), |n| (n == name).then(|| bad.into()))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("{name}: ")), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = RunSettings::from_lookup("t".into(), |n| {
            (n == "shard-attribute").then(|| "ttl".into())
        })
        .unwrap_err();
        assert!(matches!(e, RunSettingsError::Layout(_)), "{e}");
    }
}
