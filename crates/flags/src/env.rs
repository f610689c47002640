//! Variables set to the empty string count as not set: a flag's variable given empty takes the
//! config file's value or the default, as the Lambda reads its settings (`Lookup` in
//! `precise_ttl_engine::settings`: "a value given empty counts as none"). A deployment template
//! whose parameter defaults to "" sets its variable empty, and `run` refused what the Lambda took
//! as unset. A value given empty on the command line is still refused: it was typed.

use clap::{Command, Id};
use std::ffi::OsString;

/// `command` with every flag whose variable `var` reads as empty no longer reading it (its
/// subcommands' flags too).
pub fn empty_variables_unset(command: Command, var: &impl Fn(&str) -> Option<OsString>) -> Command {
    let empty: Vec<Id> = command
        .get_arguments()
        .filter(|a| {
            a.get_env()
                .and_then(|name| name.to_str())
                .and_then(var)
                .is_some_and(|value| value.is_empty())
        })
        .map(|a| a.get_id().clone())
        .collect();
    let mut command = empty.into_iter().fold(command, |c, id| {
        c.mut_arg(id, |a| a.env(None::<&'static str>))
    });
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |s| empty_variables_unset(s, var));
    }
    command
}
