//! The `--config` TOML file: the same settings as the flags, under their long flag names.
//!
//! The file's values become clap's defaults before the command line is parsed again, so one
//! parser (clap's, with each flag's own value parser and range) validates every source, and the
//! precedence is clap's: a flag, then its `PRECISE_TTL_*` variable, then the file, then the
//! built-in default. A key may belong to any command (one file can serve `run`, `sweep` and
//! `backfill`); a key that is no command's flag, or a value a flag would refuse, stops the command
//! before it does anything.

use anyhow::{Context, anyhow, bail};
use clap::{Arg, ArgAction, Command};
use std::ffi::OsStr;
use std::path::Path;

/// `command` with every setting of the file at `path` as the default of its flag, wherever
/// (globally or on any subcommand) that flag exists.
pub fn with_file_defaults(mut command: Command, path: &Path) -> anyhow::Result<Command> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let file: toml::Table = toml::from_str(&text)
        .map_err(|e| anyhow!("config file {}: {}", path.display(), e.to_string().trim()))?;
    for (key, value) in file {
        let bad = |why: String| anyhow!("config file {}: {key}: {why}", path.display());
        let value: String = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => return Err(bad(format!("{} is not a flag value", other.type_str()))),
        };
        if key == "config" {
            return Err(bad("a config file cannot name another".into()));
        }
        // Leaked once per key and run: clap keeps defaults as `'static` strings.
        let value: &'static str = Box::leak(value.into_boxed_str());
        let mut found = false;
        if let Some(id) = settable(&command, &key) {
            validate(&command, &id, value).map_err(bad)?;
            command = command.mut_arg(id, |a| a.default_value(value));
            found = true;
        }
        let subcommands: Vec<String> = command
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for name in subcommands {
            let sub = command.find_subcommand(&name).expect("listed");
            if let Some(id) = settable(sub, &key) {
                validate(sub, &id, value).map_err(bad)?;
                command =
                    command.mut_subcommand(name, |s| s.mut_arg(id, |a| a.default_value(value)));
                found = true;
            }
        }
        if !found {
            bail!(
                "config file {}: unknown key `{key}` (keys are long flag names, e.g. poll-interval)",
                path.display()
            );
        }
    }
    Ok(command)
}

/// The id of the flag `--<key>` of `command` itself (global flags live on the top command until
/// clap builds it), if a file may set it.
fn settable(command: &Command, key: &str) -> Option<String> {
    command
        .get_arguments()
        .find(|a| a.get_long() == Some(key))
        .filter(|a| takes_a_default(a))
        .map(|a| a.get_id().to_string())
}

fn takes_a_default(arg: &Arg) -> bool {
    !matches!(
        arg.get_action(),
        ArgAction::Count
            | ArgAction::Help
            | ArgAction::Version
            | ArgAction::HelpLong
            | ArgAction::HelpShort
    )
}

/// Runs the flag's own value parser on `value`, in a one-flag command of its own.
fn validate(command: &Command, id: &str, value: &str) -> Result<(), String> {
    let arg = command
        .get_arguments()
        .find(|a| a.get_id() == id)
        .expect("found by id");
    if matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        return match value {
            "true" | "false" => Ok(()),
            _ => Err(format!("{value:?} is not true or false")),
        };
    }
    let probe = Arg::new("value")
        .long("value")
        .num_args(1)
        .value_parser(arg.get_value_parser().clone());
    Command::new("config")
        .no_binary_name(true)
        .arg(probe)
        .try_get_matches_from([OsStr::new("--value"), OsStr::new(value)])
        .map(|_| ())
        .map_err(|e| {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            first
                .trim_start_matches("error: ")
                .replace(" for '--value <value>'", "")
        })
}
