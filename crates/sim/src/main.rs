//! `precise-ttl-sim`: the simulated DynamoDB on a port, for manual use. Prints
//! `ready http://127.0.0.1:PORT` once it accepts, then serves until stopped (Ctrl-C) or, with
//! `--until-stdin-closes`, until its standard input closes.

use clap::Parser;
use precise_ttl_sim::{Latency, Limits, SimConfig, Simulator, defaults};
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A simulated DynamoDB for benchmarks (in memory, loopback only)"
)]
struct Args {
    /// Port to listen on (0: any free port). DynamoDB Local's, so what is pointed at a local
    /// DynamoDB finds it.
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = defaults::HOST)]
    host: IpAddr,
    /// Median latency of a call, in milliseconds.
    #[arg(long, default_value_t = millis(defaults::LATENCY_P50), value_parser = non_negative)]
    latency_p50_ms: f64,
    /// 99th percentile latency of a call, in milliseconds.
    #[arg(long, default_value_t = millis(defaults::LATENCY_P99), value_parser = non_negative)]
    latency_p99_ms: f64,
    /// Answer at once.
    #[arg(long)]
    no_latency: bool,
    /// Partitions of every table.
    #[arg(long, default_value_t = defaults::TABLE_PARTITIONS, value_parser = at_least_one)]
    partitions: usize,
    /// Write units per second of one partition (table or index).
    #[arg(long, default_value_t = defaults::PARTITION_WCU, value_parser = positive)]
    partition_wcu: f64,
    /// Read units per second of one partition (table or index).
    #[arg(long, default_value_t = defaults::PARTITION_RCU, value_parser = positive)]
    partition_rcu: f64,
    /// Write units per second of a whole on-demand table (and of each index).
    #[arg(long, default_value_t = defaults::TABLE_WCU, value_parser = positive)]
    table_wcu: f64,
    /// Read units per second of a whole on-demand table (and of each index).
    #[arg(long, default_value_t = defaults::TABLE_RCU, value_parser = positive)]
    table_rcu: f64,
    /// Seconds of unused capacity a bucket keeps.
    #[arg(long, default_value_t = defaults::BURST_SECONDS, value_parser = non_negative)]
    burst_seconds: f64,
    /// No capacity limits at all.
    #[arg(long)]
    unlimited: bool,
    /// Threads serving requests.
    #[arg(long, default_value_t = defaults::THREADS, value_parser = at_least_one)]
    threads: usize,
    /// Stop when standard input closes (for a parent process that holds a pipe).
    #[arg(long)]
    until_stdin_closes: bool,
    /// Print the stats as JSON on standard error every this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    stats_every_s: u64,
}

impl Args {
    /// The simulator the flags ask for: [`SimConfig::default`] but for what they change.
    fn config(&self) -> SimConfig {
        let latency = if self.no_latency {
            Latency::None
        } else {
            Latency::LogNormal {
                p50: Duration::from_secs_f64(self.latency_p50_ms / 1000.0),
                p99: Duration::from_secs_f64(self.latency_p99_ms / 1000.0),
            }
        };
        let limits = if self.unlimited {
            Limits::unlimited()
        } else {
            Limits {
                partition_wcu: self.partition_wcu,
                partition_rcu: self.partition_rcu,
                total_wcu: self.table_wcu,
                total_rcu: self.table_rcu,
                burst_seconds: self.burst_seconds,
            }
        };
        SimConfig {
            bind: SocketAddr::new(self.host, self.port),
            latency,
            table_partitions: self.partitions,
            limits,
            threads: self.threads,
            ..SimConfig::default()
        }
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A finite number, 0 or more (a latency or a burst).
fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a number, 0 or more, got {text:?}")),
    }
}

/// A finite number above 0 (a rate).
fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number, got {text:?}")),
    }
}

/// A whole number, 1 or more (partitions, threads).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a whole number, 1 or more, got {text:?}")),
    }
}

fn main() {
    let args = Args::parse();
    let config = args.config();
    let sim = match Simulator::start(config) {
        Ok(sim) => sim,
        Err(e) => {
            eprintln!("precise-ttl-sim: {e}");
            std::process::exit(1);
        }
    };
    println!("ready {}", sim.endpoint());
    if args.stats_every_s > 0 {
        let every = Duration::from_secs(args.stats_every_s);
        let sim = &sim;
        std::thread::scope(|s| {
            s.spawn(move || {
                loop {
                    std::thread::sleep(every);
                    match serde_json::to_string(&sim.stats()) {
                        Ok(text) => eprintln!("{text}"),
                        Err(e) => eprintln!("stats: {e}"),
                    }
                }
            });
            wait(args.until_stdin_closes);
            std::process::exit(0);
        });
    }
    wait(args.until_stdin_closes);
    sim.shutdown();
}

fn wait(until_stdin_closes: bool) {
    if until_stdin_closes {
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    } else {
        loop {
            std::thread::park();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_flags_the_binary_runs_the_default_simulator_on_port_8000() {
        let args = Args::parse_from(["precise-ttl-sim"]);
        let expected = SimConfig {
            bind: SocketAddr::new(defaults::HOST, 8000),
            ..SimConfig::default()
        };
        assert_eq!(args.config(), expected);
    }

    #[test]
    fn bad_numbers_are_usage_errors() {
        for bad in [
            "--latency-p50-ms=inf",
            "--latency-p99-ms=-1",
            "--burst-seconds=NaN",
            "--partition-wcu=0",
            "--table-rcu=x",
            "--partitions=0",
            "--threads=0",
        ] {
            let err = Args::try_parse_from(["precise-ttl-sim", bad]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
        }
    }
}
