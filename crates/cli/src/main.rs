//! The `precise-ttl` binary: parses the command line, sets up logging, runs one command and
//! turns its outcome into an exit code. The only place that prints errors or exits.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod archive_cmd;
mod backfill_cmd;
#[cfg(feature = "bench")]
mod bench;
mod demo;
mod doctor_cmd;
mod health_cmd;
mod hints;
mod run_cmd;
mod setup_cmd;
mod status_cmd;
mod sweep_cmd;
mod wiring;

use wiring::Outcome;

use clap::{CommandFactory, FromArgMatches};
use precise_ttl_flags::{self as args, Cli, Command, LogFormat};
use std::process::ExitCode;

fn main() -> ExitCode {
    // First: a SIGTERM from here on stops `run`, `archive` and `backfill` in order, exit 0,
    // however early it comes (wiring::signal); other commands die by it as before, below.
    wiring::catch_stop_signals();
    // A config file's values become the flags' defaults before the one parse, so clap validates
    // them like any flag and `--help` shows the values in effect.
    let config_path = args::config::path(
        std::env::args_os().skip(1),
        std::env::var_os("PRECISE_TTL_CONFIG"),
    );
    let command = match config_path {
        Some(path) => match args::config::with_file_defaults(Cli::command(), &path) {
            Ok(command) => command,
            Err(e) => {
                eprintln!("error: {:#}", anyhow::Error::new(e));
                return ExitCode::from(2);
            }
        },
        None => Cli::command(),
    };
    let command = args::empty_variables_unset(command, &|name: &str| std::env::var_os(name));
    let matches = command.get_matches();
    // For the hint after a refused IAM action: each command has its own policy file.
    let command_name = matches.subcommand_name().unwrap_or_default().to_string();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if !stops_in_order(&cli.command) {
        wiring::die_on_stop_signals();
    }
    init_logging(cli.global.log_format, cli.global.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // For the hint after a credentials error: `aws sso login --profile NAME`.
    let profile = cli.global.profile.clone();
    let stream_queue = cli.global.index_layout == args::IndexLayout::StreamQueue;
    match runtime.block_on(run(cli)) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Partial) => ExitCode::from(3),
        Ok(Outcome::Findings) => ExitCode::from(4),
        // A refused IAM action: its one line (action, resource, caller, why) and the policy
        // file to fix, not the whole chain of the call that met it.
        Err(e) if hints::denial(&e).is_some() => {
            let denial = hints::denial(&e).expect("checked by the guard");
            eprintln!("error: {denial}");
            eprintln!(
                "hint: {}",
                hints::for_denial(&denial, &command_name, stream_queue)
            );
            ExitCode::from(1)
        }
        // Bad usage found after parsing (no table, flags that contradict each other): 2, as
        // for clap's own usage errors.
        Err(e) if e.chain().any(|cause| cause.is::<args::UsageError>()) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            if let Some(hint) = hints::for_error(&e, profile.as_deref()) {
                eprintln!("hint: {hint}");
            }
            ExitCode::from(1)
        }
    }
}

/// The commands that end in order on SIGTERM or SIGINT (what is in flight drained, leases
/// released, the archive flushed) and then exit 0.
fn stops_in_order(command: &Command) -> bool {
    matches!(
        command,
        Command::Run(_) | Command::Archive(_) | Command::Backfill(_)
    )
}

async fn run(cli: Cli) -> anyhow::Result<Outcome> {
    if stops_in_order(&cli.command) {
        wiring::listen_for_stop();
    }
    match &cli.command {
        Command::Setup(args) => setup_cmd::run(&cli.global, args).await,
        Command::Sweep(args) => sweep_cmd::run(&cli.global, args).await,
        Command::Run(args) => run_cmd::run(&cli.global, args).await,
        Command::Status(args) => status_cmd::run(&cli.global, args).await,
        Command::Archive(args) => archive_cmd::run(&cli.global, args).await,
        Command::Backfill(args) => backfill_cmd::run(&cli.global, args).await,
        Command::Doctor(args) => doctor_cmd::run(&cli.global, args).await,
        Command::Demo(args) => demo::run(&cli.global, args).await,
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench::run(&cli.global, args).await,
        Command::Health(args) => health_cmd::run(args).await,
    }
}

fn init_logging(format: LogFormat, verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{default},aws_config=error,aws_smithy_runtime=warn,hyper=warn"
        ))
    });
    // Colour codes only for a terminal: in a file, a pipe or a log collector they are noise.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_target(false).init(),
        LogFormat::Json => builder.json().init(),
    }
}
