//! One meaning per flag, one settings source: `run`'s flags and the Lambda's settings give the
//! same settings (the table's layout, the index layout and queue table, the delete mode, the
//! fleet, the daemon configuration) and refuse the same values, and every flag of every command
//! follows the environment rule and has one default and one help line wherever its name appears.

use super::{Cli, Command};
use clap::{ArgAction, CommandFactory, FromArgMatches};
use precise_ttl_core::capacity::WriteCapacity;
use precise_ttl_engine::settings::{self, RunSettings};
use std::collections::{BTreeMap, BTreeSet};

/// The table's capacity both sides are configured for.
const CAPACITY: WriteCapacity = WriteCapacity::Provisioned(4_000);

/// What both sides are compared on: the shared settings, the lease configuration (the worker's
/// default name is each host's own) and the daemon's configuration.
fn describe(run: RunSettings) -> String {
    let worker = run.fleet.worker(|| "the host's default".into());
    format!(
        "{run:?}\n{:?}\n{:?}",
        run.fleet.lease_config(worker),
        run.daemon.daemon_config(CAPACITY)
    )
}

/// `command`'s option `--long`, if it has one.
fn long_arg<'a>(command: &'a clap::Command, long: &str) -> Option<&'a clap::Arg> {
    command.get_arguments().find(|a| a.get_long() == Some(long))
}

/// `precise-ttl run --table t --<name>=<value> …`'s settings, or why they were refused. A switch
/// (`no-leases`) takes no value on the command line: its value is given as its variable's or the
/// config file's would be, as the flag's default.
fn cli(settings: &[(&str, &'static str)]) -> Result<String, String> {
    let mut command = Cli::command();
    let mut argv = vec![
        "precise-ttl".to_string(),
        "run".into(),
        "--table".into(),
        "t".into(),
    ];
    for &(name, value) in settings {
        let run = command.find_subcommand("run").expect("run");
        let switch = long_arg(run, name)
            .filter(|a| matches!(a.get_action(), ArgAction::SetTrue))
            .map(|a| a.get_id().clone());
        match switch {
            Some(id) => {
                command =
                    command.mut_subcommand("run", |r| r.mut_arg(id, |a| a.default_value(value)))
            }
            None => argv.push(format!("--{name}={value}")),
        }
    }
    let matches = command
        .try_get_matches_from(argv)
        .map_err(|e| e.to_string())?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    let Command::Run(args) = cli.command else {
        unreachable!("parsed as run")
    };
    let run = args.run_settings(&cli.global).map_err(|e| e.to_string())?;
    Ok(describe(run))
}

/// The Lambda's: its environment and event are read by `RunSettings::from_lookup` (see
/// `precise_ttl_lambda::config`, whose own tests hold it to that).
fn lambda(settings: &[(&str, &str)]) -> Result<String, String> {
    let given: BTreeMap<&str, &str> = settings.iter().copied().collect();
    let run = RunSettings::from_lookup("t".into(), |name| given.get(name).map(|v| v.to_string()))
        .map_err(|e| e.to_string())?;
    Ok(describe(run))
}

#[test]
fn run_and_the_lambda_make_the_same_settings_from_the_same_values() {
    let cases: &[&[(&str, &str)]] = &[
        &[],
        &[("poll-interval", "250ms"), ("lookback", "500ms")],
        &[("poll-interval", "100ms"), ("horizon", "10s")],
        &[("concurrency", "8"), ("page-size", "100")],
        &[("concurrency", "1024"), ("max-attempts", "3")],
        &[("max-deletes-per-second", "500")],
        &[("backlog-budget", "off")],
        &[("backlog-budget", "0.25"), ("table-write-capacity", "8000")],
        &[("batch-linger", "5ms"), ("stray-check-interval", "0s")],
        &[("stray-check-interval", "1m")],
        &[
            ("shards", "8"),
            ("ttl-attribute", "expires"),
            ("shard-attribute", "bucket"),
            ("index-name", "by-expiry"),
        ],
        &[("shards", "1024")],
        &[("index-layout", "sharded")],
        &[("index-layout", "stream-queue")],
        &[("index-layout", "stream-queue"), ("queue-table", "q")],
        // Ignored by the sharded layout on both sides.
        &[("index-layout", "sharded"), ("queue-table", "q")],
        &[("index-layout", "blog-window")],
        &[("delete-mode", "single")],
        &[("delete-mode", "batch")],
        &[("delete-mode", "auto")],
        &[("lease-table", "leases"), ("lease-duration", "30s")],
        &[("lease-duration", "1s")],
        &[("lease-duration", "10m")],
        &[("no-leases", "true")],
        &[("no-leases", "false"), ("worker-id", "pod-0")],
        &[("no-leases", "true"), ("lease-table", "ignored")],
    ];
    for case in cases {
        let (cli, lambda) = (cli(case), lambda(case));
        assert!(cli.is_ok(), "{case:?}: {cli:?}");
        assert_eq!(cli, lambda, "{case:?}");
    }
}

#[test]
fn run_and_the_lambda_refuse_the_same_values() {
    let cases: &[&[(&str, &str)]] = &[
        &[("poll-interval", "50ms")],
        &[("poll-interval", "soon")],
        // Above the default lookback of 2s: refused by both, raised by neither.
        &[("poll-interval", "3s")],
        &[("lookback", "1s"), ("poll-interval", "2s")],
        &[("horizon", "1 sec")],
        &[("concurrency", "0")],
        &[("concurrency", "1025")],
        &[("page-size", "0")],
        &[("page-size", "10001")],
        &[("max-attempts", "101")],
        &[("max-deletes-per-second", "0")],
        &[("max-deletes-per-second", "fast")],
        &[("backlog-budget", "1.5")],
        &[("table-write-capacity", "0")],
        &[("batch-linger", "-1s")],
        &[("shards", "0")],
        &[("shards", "1025")],
        &[("shards", "many")],
        &[("shard-attribute", "ttl")],
        &[("ttl-attribute", "expires"), ("shard-attribute", "expires")],
        &[("index-name", "ix")],
        &[("index-name", "by expiry")],
        &[("index-layout", "queue")],
        &[("index-layout", "Sharded")],
        &[("delete-mode", "fast")],
        &[("delete-mode", "Batch")],
        &[("lease-duration", "500ms")],
        &[("lease-duration", "1h")],
        &[("lease-duration", "soon")],
        &[("no-leases", "1")],
        &[("no-leases", "yes")],
        &[("no-leases", "maybe")],
    ];
    for case in cases {
        assert!(cli(case).is_err(), "run accepted {case:?}");
        assert!(lambda(case).is_err(), "the Lambda accepted {case:?}");
    }
}

/// Every setting `run` shares with the Lambda is a `run` flag of that name, with the setting's
/// variable, default and help line; a setting whose values are names offers the settings' own.
#[test]
fn run_s_flags_are_the_settings() {
    let mut command = Cli::command();
    command.build();
    let run = command.find_subcommand("run").expect("run");
    let shared = [
        settings::TABLE,
        settings::TTL_ATTRIBUTE,
        settings::SHARD_ATTRIBUTE,
        settings::SHARDS,
        settings::INDEX_NAME,
        settings::INDEX_LAYOUT,
        settings::QUEUE_TABLE,
        settings::LEASE_TABLE,
        settings::LEASE_DURATION,
        settings::NO_LEASES,
        settings::WORKER_ID,
        settings::DELETE_MODE,
    ];
    for setting in shared.iter().chain(settings::DAEMON) {
        let arg =
            long_arg(run, setting.name).unwrap_or_else(|| panic!("run has no --{}", setting.name));
        assert_eq!(
            arg.get_env().map(|e| e.to_string_lossy().to_string()),
            Some(setting.env()),
            "{}",
            setting.name
        );
        let default: Vec<_> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().to_string())
            .collect();
        let expected: Vec<_> = setting.default.iter().map(|d| d.to_string()).collect();
        assert_eq!(default, expected, "{}", setting.name);
        assert_eq!(
            arg.get_help().map(|h| h.to_string()).as_deref(),
            Some(setting.meaning),
            "{}",
            setting.name
        );
    }
    let values = |name: &str| -> Vec<(String, String)> {
        long_arg(run, name)
            .expect(name)
            .get_possible_values()
            .iter()
            .map(|v| {
                let help = v.get_help().map(|h| h.to_string()).unwrap_or_default();
                (v.get_name().to_string(), help)
            })
            .collect()
    };
    fn offered<T: settings::Choice>() -> Vec<(String, String)> {
        T::ALL
            .iter()
            .map(|v| (v.name().to_string(), v.meaning().to_string()))
            .collect()
    }
    assert_eq!(values("index-layout"), offered::<settings::IndexLayout>());
    assert_eq!(values("delete-mode"), offered::<settings::DeleteMode>());
    assert_eq!(
        settings::LEASE_TABLE.default,
        Some(precise_ttl_dynamodb::DEFAULT_LEASE_TABLE)
    );
}

/// Flags that are read from the command line only, each with its reason.
const NO_ENVIRONMENT: &[(&str, &str)] = &[
    ("help", "clap's own"),
    ("version", "clap's own"),
    ("verbose", "a count (-vv); RUST_LOG is its variable"),
    (
        "json",
        "the output's format: a variable in a service's environment would change what a script parses",
    ),
    (
        "restart",
        "discards a backfill's saved progress: asked for on the run that means it",
    ),
    (
        "create-table",
        "creates a table: asked for on the one `setup` that means it",
    ),
    (
        "url",
        "`health`'s probe is its command line (a container's health check); a variable would be shared with the daemon beside it",
    ),
    ("timeout", "`health`'s, as --url"),
    (
        "items",
        "`demo` shows the product on a DynamoDB Local it starts: nothing to deploy",
    ),
    ("spread", "`demo`'s, as --items"),
    ("interval", "`demo`'s, as --items"),
];

/// Flag names whose default or help line differs between commands, each with its reason.
const DIFFERENT_MEANING: &[(&str, &str)] = &[
    (
        "metrics-addr",
        "the same address: `run` serves on it, `health` asks it, each help says which",
    ),
    ("items", "`demo`'s show and `bench`'s load"),
    ("spread", "`demo`'s show and `bench`'s load"),
];

/// The test bench (a harness, behind a feature once it moves): its flags are its scripts'
/// arguments, not a deployment's, so it is held to the defaults only, not to the environment
/// rule or the help lines (which say what the bench does with a value).
const HARNESS: &str = "bench";

#[test]
fn every_flag_has_its_variable_and_one_default_and_meaning_wherever_it_appears() {
    let mut command = Cli::command();
    command.build();
    // name -> (default, help, where)
    let mut seen: BTreeMap<String, BTreeSet<(Vec<String>, String, String)>> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut stack = vec![(String::new(), &command)];
    let mut found_names = BTreeSet::new();
    while let Some((path, cmd)) = stack.pop() {
        let harness = path.split(' ').any(|p| p == HARNESS);
        for arg in cmd.get_arguments().filter(|a| !a.is_positional()) {
            let Some(name) = arg.get_long() else { continue };
            found_names.insert(name.to_string());
            let env = arg.get_env().map(|e| e.to_string_lossy().to_string());
            let exempt = NO_ENVIRONMENT.iter().any(|(n, _)| *n == name);
            if !harness && !exempt && env != Some(settings::env_name(name)) {
                wrong.push(format!(
                    "{path} --{name}: variable {env:?}, not {}",
                    settings::env_name(name)
                ));
            }
            let default = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().to_string())
                .collect();
            let help = if harness {
                String::new()
            } else {
                arg.get_help().map(|h| h.to_string()).unwrap_or_default()
            };
            seen.entry(name.to_string())
                .or_default()
                .insert((default, help, path.clone()));
        }
        for sub in cmd.get_subcommands() {
            stack.push((format!("{path} {}", sub.get_name()), sub));
        }
    }
    for (name, uses) in &seen {
        if DIFFERENT_MEANING.iter().any(|(n, _)| n == name) {
            continue;
        }
        let defaults: BTreeSet<_> = uses.iter().map(|(d, _, _)| d).collect();
        if defaults.len() > 1 {
            wrong.push(format!("--{name} has several defaults: {uses:?}"));
        }
        let helps: BTreeSet<_> = uses
            .iter()
            .filter(|(_, h, _)| !h.is_empty())
            .map(|(_, h, _)| h)
            .collect();
        if helps.len() > 1 {
            wrong.push(format!("--{name} has several meanings: {helps:?}"));
        }
    }
    // An exception that no longer matches a flag is stale: drop it.
    for (name, _) in NO_ENVIRONMENT.iter().chain(DIFFERENT_MEANING) {
        if !found_names.contains(*name) {
            wrong.push(format!("exception for --{name}, which no command has"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A variable set empty is no value for `run`, as for the Lambda: the flag no longer reads it,
/// and the settings are the defaults'.
#[test]
fn a_variable_set_empty_counts_as_unset_for_run_as_for_the_lambda() {
    let var = |name: &str| (name == "PRECISE_TTL_POLL_INTERVAL").then(std::ffi::OsString::new);
    let mut command = crate::empty_variables_unset(Cli::command(), &var);
    command.build();
    let run = command.find_subcommand("run").expect("run");
    let env_of = |long: &str| {
        long_arg(run, long)
            .unwrap_or_else(|| panic!("--{long}"))
            .get_env()
            .map(|name| name.to_owned())
    };
    assert_eq!(env_of("poll-interval"), None);
    assert_eq!(env_of("lookback"), Some("PRECISE_TTL_LOOKBACK".into()));
    assert_eq!(lambda(&[("poll-interval", "")]), lambda(&[]));
}
