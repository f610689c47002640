//! Usage errors exit 2 with one line, whichever check finds them (clap's, or a command's own after
//! parsing); `archive`'s renamed flags keep their former names; a variable set empty counts as
//! unset, as it does for the Lambda; logs carry no colour codes when standard error is not a
//! terminal. None of these needs a store.

use std::time::Duration;

/// The binary with an empty environment and an endpoint nothing listens on: whatever reaches the
/// network fails fast there, and a usage error must come before it.
fn bare() -> assert_cmd::Command {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = assert_cmd::Command::cargo_bin("precise-ttl").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env(
            "PRECISE_TTL_ENDPOINT_URL",
            format!("http://127.0.0.1:{port}"),
        )
        .timeout(Duration::from_secs(60));
    cmd
}

/// `command` with `args` must be a usage error (exit 2) that says `says`; its standard error.
pub fn usage_error(mut command: assert_cmd::Command, args: &[&str], says: &str) -> String {
    let out = command
        .args(args)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.contains(says), "{args:?}: {text}");
    text
}

/// A usage error in one line, on the bare binary.
fn one_line_exit_2(args: &[&str], says: &str) {
    let text = usage_error(bare(), args, says);
    let errors = text.lines().filter(|l| l.starts_with("error:")).count();
    assert_eq!(errors, 1, "{args:?}: {text}");
}

/// `command --help`, which must succeed.
fn help_of(command: &str) -> String {
    let help = bare().args([command, "--help"]).assert().success();
    crate::support::stdout_of(&help)
}

/// `command --help` names each of `wanted` (flags or headings); the help, for more checks.
fn help_names(command: &str, wanted: &[&str]) -> String {
    let help = help_of(command);
    for name in wanted {
        assert!(help.contains(name), "{name}: {help}");
    }
    help
}

#[test]
fn a_missing_or_empty_table_is_bad_usage_for_every_command_that_needs_one() {
    for command in [
        &["setup"][..],
        &["sweep"],
        &["run"],
        &["status"],
        &["archive", "--archive-to", "-"],
        &["backfill"],
        &["doctor"],
    ] {
        one_line_exit_2(command, "no table given");
        let mut empty = command.to_vec();
        empty.extend(["--table", ""]);
        one_line_exit_2(&empty, "--table");
    }
}

#[test]
fn flags_that_contradict_each_other_are_bad_usage() {
    one_line_exit_2(
        &[
            "run",
            "--table",
            "t",
            "--poll-interval",
            "2s",
            "--lookback",
            "1s",
        ],
        "lookback",
    );
    one_line_exit_2(
        &[
            "run",
            "--table",
            "t",
            "--index-layout",
            "blog-window",
            "--archive",
            "-",
        ],
        "sharded index only",
    );
    one_line_exit_2(
        &[
            "sweep",
            "--table",
            "t",
            "--ttl-attribute",
            "x",
            "--shard-attribute",
            "x",
        ],
        "must differ",
    );
}

#[test]
fn archive_s_flags_are_its_own_and_its_former_names_still_work() {
    help_names(
        "archive",
        &[
            "--archive-to",
            "--archive-poll-interval",
            "--archive-checkpoint-table",
            "--archive-metrics-addr",
            "--archive-unhealthy-after",
        ],
    );
    // The former names reach the same flags: the same minimum refuses the same value.
    for (to, poll_interval) in [
        ("--to", "--poll-interval"),
        ("--archive-to", "--archive-poll-interval"),
    ] {
        let args = ["archive", "--table", "t", to, "-", poll_interval, "50ms"];
        one_line_exit_2(&args, "100ms");
    }
}

#[test]
fn run_s_help_groups_its_flags_by_concern() {
    help_names(
        "run",
        &[
            "Table and index:",
            "Reading the index:",
            "Deletes:",
            "Backlog budget:",
            "Fleet (shard leases):",
            "Expiry records (archive):",
            "Metrics and health:",
            "AWS connection:",
        ],
    );
}

/// Standard error here is a pipe: the lines must be plain text a log collector can read.
#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let out = bare()
        .args(["run", "--table", "t", "--for", "2s", "-v"])
        .assert()
        .get_output()
        .stderr
        .clone();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("INFO") || text.contains("WARN"),
        "some log line: {text}"
    );
    assert!(!text.contains('\u{1b}'), "colour codes in: {text:?}");
}

/// A flag's variable set empty is no value (the default applies), as the Lambda reads its
/// settings; the same empty value typed on the command line is still bad usage.
#[test]
fn a_variable_set_empty_counts_as_unset_and_an_empty_flag_is_bad_usage() {
    let out = bare()
        .env("PRECISE_TTL_POLL_INTERVAL", "")
        .env("PRECISE_TTL_SHARDS", "")
        .args(["run", "--table", "t", "--for", "1s"])
        .assert()
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(2), "{text}");
    assert!(
        !text.contains("poll-interval") && !text.contains("shards"),
        "{text}"
    );
    one_line_exit_2(
        &["run", "--table", "t", "--poll-interval", ""],
        "--poll-interval",
    );
}
