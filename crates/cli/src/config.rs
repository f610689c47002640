//! The `--config` TOML file: the same settings as the flags, under their flag names.
//!
//! Precedence: a flag, then its `PRECISE_TTL_*` variable, then the file, then the default. The
//! file is validated whole before anything runs: an unknown key or a bad value is an error that
//! names the file and the key.

use crate::args::{self, Cli, Command, DeleteModeArg, LogFormat};
use anyhow::{Context, bail};
use clap::ArgMatches;
use clap::parser::ValueSource;
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileConfig {
    table: Option<String>,
    ttl_attribute: Option<String>,
    shard_attribute: Option<String>,
    shards: Option<u64>,
    index_name: Option<String>,
    endpoint_url: Option<String>,
    region: Option<String>,
    connect_timeout: Option<String>,
    attempt_timeout: Option<String>,
    log_format: Option<String>,
    // `run`
    poll_interval: Option<String>,
    horizon: Option<String>,
    lookback: Option<String>,
    metrics_addr: Option<String>,
    max_deletes_per_second: Option<f64>,
    concurrency: Option<u64>,
    delete_mode: Option<String>,
    page_size: Option<u32>,
}

pub fn load(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("config file {}: {}", path.display(), e.to_string().trim()))
}

fn unset(m: &ArgMatches, id: &str) -> bool {
    matches!(
        m.try_get_raw(id).ok().flatten().and(m.value_source(id)),
        None | Some(ValueSource::DefaultValue)
    )
}

/// Fills every setting that neither a flag nor a variable gave from the file.
pub fn apply(
    cli: &mut Cli,
    matches: &ArgMatches,
    file: FileConfig,
    path: &Path,
) -> anyhow::Result<()> {
    let bad = |key: &str, e: String| anyhow::anyhow!("config file {}: {key}: {e}", path.display());
    let g = &mut cli.global;
    macro_rules! set {
        ($m:expr, $field:ident, $target:expr, $conv:expr) => {
            if let Some(v) = file.$field {
                if unset($m, stringify!($field)) {
                    $target = $conv(v)
                        .map_err(|e: String| bad(&stringify!($field).replace('_', "-"), e))?;
                }
            }
        };
    }
    let ok = |v| Ok::<_, String>(v);
    let some = |v| Ok::<_, String>(Some(v));
    set!(matches, table, g.table, some);
    set!(matches, ttl_attribute, g.ttl_attribute, ok);
    set!(matches, shard_attribute, g.shard_attribute, ok);
    set!(
        matches,
        shards,
        g.shards,
        |v: u64| if (1..=1024).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is not in 1..=1024"))
        }
    );
    set!(matches, index_name, g.index_name, ok);
    set!(matches, endpoint_url, g.endpoint_url, some);
    set!(matches, region, g.region, some);
    set!(matches, connect_timeout, g.connect_timeout, |v: String| {
        args::duration(&v)
    });
    set!(matches, attempt_timeout, g.attempt_timeout, |v: String| {
        args::duration(&v)
    });
    set!(
        matches,
        log_format,
        g.log_format,
        |v: String| match v.as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("{v:?} is not text or json")),
        }
    );
    if let (Command::Run(run), Some(("run", m))) = (&mut cli.command, matches.subcommand()) {
        set!(m, poll_interval, run.poll_interval, |v: String| {
            args::poll_interval(&v)
        });
        set!(m, horizon, run.horizon, |v: String| args::duration(&v));
        set!(m, lookback, run.lookback, |v: String| args::duration(&v));
        set!(m, metrics_addr, run.metrics_addr, |v: String| v
            .parse()
            .map(Some)
            .map_err(|_| format!(
                "{v:?} is not an address like 127.0.0.1:9464"
            )));
        set!(
            m,
            max_deletes_per_second,
            run.max_deletes_per_second,
            |v: f64| args::positive_rate(&v.to_string()).map(Some)
        );
        set!(
            m,
            concurrency,
            run.concurrency,
            |v: u64| if (1..=1024).contains(&v) {
                Ok(v)
            } else {
                Err(format!("{v} is not in 1..=1024"))
            }
        );
        set!(
            m,
            delete_mode,
            run.delete_mode,
            |v: String| match v.as_str() {
                "single" => Ok(DeleteModeArg::Single),
                "batch" => Ok(DeleteModeArg::Batch),
                _ => Err(format!("{v:?} is not single or batch")),
            }
        );
        set!(
            m,
            page_size,
            run.page_size,
            |v: u32| if (1..=10_000).contains(&v) {
                Ok(v)
            } else {
                Err(format!("{v} is not in 1..=10000"))
            }
        );
    }
    // Settings for `run` in a file shared by all commands are fine: they apply to `run` only.
    if cli.global.table.as_deref() == Some("") {
        bail!("config file {}: table: must not be empty", path.display());
    }
    Ok(())
}
