//! The `--config` TOML file: the same settings as the flags, under their long flag names.
//!
//! The file's values become clap's defaults before the command line is parsed again, so one
//! parser (clap's, with each flag's own value parser and range) validates every source, and the
//! precedence is clap's: a flag, then its `PRECISE_TTL_*` variable, then the file, then the
//! built-in default. A key may belong to any command (one file can serve `run`, `sweep` and
//! `backfill`); a key that is no command's flag, or a value a flag would refuse, stops the command
//! before it does anything.

use clap::{Arg, ArgAction, Command};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Why the config file cannot be used; nothing has been done yet when it is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not TOML, with the parser's message.
    #[error("config file {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    /// A key whose value no flag would take (or that may not be set in a file), and why.
    #[error("config file {}: {key}: {why}", path.display())]
    Value {
        path: PathBuf,
        key: String,
        why: String,
    },
    #[error("config file {}: unknown key `{key}` (keys are long flag names, e.g. poll-interval)", path.display())]
    UnknownKey { path: PathBuf, key: String },
}

/// The config file's path: `--config FILE` (or `--config=FILE`) among `args` (the command line
/// without the program's name), else `PRECISE_TTL_CONFIG` (`env`, when set and not empty). Read
/// before clap parses, since the file supplies clap's defaults.
pub fn path(args: impl IntoIterator<Item = OsString>, env: Option<OsString>) -> Option<PathBuf> {
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if arg == "--config" {
            return args.next().map(Into::into);
        }
        if let Some(path) = arg.to_str().and_then(|a| a.strip_prefix("--config=")) {
            return Some(path.into());
        }
    }
    env.filter(|p| !p.is_empty()).map(Into::into)
}

/// `command` with every setting of the file at `path` as the default of its flag, wherever
/// (globally or on any subcommand) that flag exists.
pub fn with_file_defaults(mut command: Command, path: &Path) -> Result<Command, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string().trim().to_string(),
    })?;
    for (key, value) in file {
        let bad = |why: String| ConfigError::Value {
            path: path.to_path_buf(),
            key: key.clone(),
            why,
        };
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
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                key,
            });
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
