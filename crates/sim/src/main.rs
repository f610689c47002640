//! `precise-ttl-sim`: the simulated DynamoDB on a port, for manual use. Prints
//! `ready http://127.0.0.1:PORT` once it accepts, then serves until stopped (Ctrl-C) or, with
//! `--until-stdin-closes`, until its standard input closes.

use clap::Parser;
use precise_ttl_sim::{Latency, Limits, SimConfig, Simulator};
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A simulated DynamoDB for benchmarks (in memory, loopback only)"
)]
struct Args {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Median latency of a call, in milliseconds.
    #[arg(long, default_value_t = 4.0)]
    latency_p50_ms: f64,
    /// 99th percentile latency of a call, in milliseconds.
    #[arg(long, default_value_t = 15.0)]
    latency_p99_ms: f64,
    /// Answer at once.
    #[arg(long)]
    no_latency: bool,
    /// Partitions of every table.
    #[arg(long, default_value_t = 40)]
    partitions: usize,
    /// Write units per second of one partition (table or index).
    #[arg(long, default_value_t = 1000.0)]
    partition_wcu: f64,
    /// Read units per second of one partition (table or index).
    #[arg(long, default_value_t = 3000.0)]
    partition_rcu: f64,
    /// Write units per second of a whole on-demand table (and of each index).
    #[arg(long, default_value_t = 40_000.0)]
    table_wcu: f64,
    /// Read units per second of a whole on-demand table (and of each index).
    #[arg(long, default_value_t = 40_000.0)]
    table_rcu: f64,
    /// Seconds of unused capacity a bucket keeps.
    #[arg(long, default_value_t = 1.0)]
    burst_seconds: f64,
    /// No capacity limits at all.
    #[arg(long)]
    unlimited: bool,
    /// Threads serving requests.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Stop when standard input closes (for a parent process that holds a pipe).
    #[arg(long)]
    until_stdin_closes: bool,
    /// Print the stats as JSON on standard error every this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    stats_every_s: u64,
}

fn main() {
    let args = Args::parse();
    let latency = if args.no_latency {
        Latency::None
    } else {
        Latency::LogNormal {
            p50: Duration::from_secs_f64(args.latency_p50_ms.max(0.0) / 1000.0),
            p99: Duration::from_secs_f64(args.latency_p99_ms.max(0.0) / 1000.0),
        }
    };
    let limits = if args.unlimited {
        Limits::unlimited()
    } else {
        Limits {
            partition_wcu: args.partition_wcu,
            partition_rcu: args.partition_rcu,
            total_wcu: args.table_wcu,
            total_rcu: args.table_rcu,
            burst_seconds: args.burst_seconds,
        }
    };
    let config = SimConfig {
        bind: SocketAddr::new(args.host, args.port),
        latency,
        table_partitions: args.partitions,
        limits,
        threads: args.threads,
        ..SimConfig::default()
    };
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
