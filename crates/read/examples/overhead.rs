//! What `HideExpired` costs a reader: Query (one page of 100 items) and GetItem (one item), each
//! through a client with the interceptor and one without, interleaved, against one DynamoDB
//! Local. Writes the p50 and p99 latencies and their differences as JSON.
//!
//! ```text
//! cargo run --release -p precise-ttl-read --example overhead -- --out overhead.json \
//!     [--rounds 1000] [--warmup 300] [--endpoint http://127.0.0.1:8000]
//! ```
//!
//! Without `--endpoint` it starts its own DynamoDB Local. Warm-up rounds come first because
//! DynamoDB Local is slow for its first few thousand operations.

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use aws_sdk_dynamodb::{Client, Config};
use precise_ttl_local::DynamoDbLocal;
use precise_ttl_read::HideExpired;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const TABLE: &str = "precise-ttl-read-overhead";
const ITEMS: usize = 100;
const PK: &str = "bench";

struct Args {
    out: PathBuf,
    rounds: usize,
    warmup: usize,
    endpoint: Option<String>,
}

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let args = parse_args()?;
    let (_local, endpoint) = match &args.endpoint {
        Some(url) => (None, url.clone()),
        None => {
            let local = DynamoDbLocal::start()?;
            let url = local.endpoint().to_string();
            (Some(local), url)
        }
    };
    let plain = client(&endpoint, None);
    let hiding = client(&endpoint, Some(HideExpired::new("ttl")));
    setup(&plain).await?;

    let mut samples: [Vec<Duration>; 4] = Default::default();
    for round in 0..args.warmup + args.rounds {
        let timed = one_round(&plain, &hiding, round).await?;
        if round >= args.warmup {
            for (s, t) in samples.iter_mut().zip(timed) {
                s.push(t);
            }
        }
    }
    let [query_without, query_with, get_without, get_with] = samples.map(|mut s| {
        s.sort();
        (percentile(&s, 0.50), percentile(&s, 0.99))
    });
    let figure = |(p50, p99): (f64, f64)| json!({ "p50_ms": p50, "p99_ms": p99 });
    let difference = |with: (f64, f64), without: (f64, f64)| {
        let (p50, p99) = (micros(with.0 - without.0), micros(with.1 - without.1));
        json!({ "p50_ms": p50, "p99_ms": p99 })
    };
    let report = json!({
        "revision": git(&["rev-parse", "HEAD"]),
        "clean": git(&["status", "--porcelain"]).map(|s| s.is_empty()),
        "command": std::env::args().collect::<Vec<_>>(),
        "host": host(),
        "runtime": runtime(),
        "endpoint": if args.endpoint.is_some() { "given" } else { "started by the example" },
        "items_per_query": ITEMS,
        "warmup_rounds": args.warmup,
        "rounds": args.rounds,
        "query": {
            "without": figure(query_without),
            "with": figure(query_with),
            "difference": difference(query_with, query_without),
        },
        "get_item": {
            "without": figure(get_without),
            "with": figure(get_with),
            "difference": difference(get_with, get_without),
        },
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&report)? + "\n")
        .map_err(|e| format!("could not write {}: {e}", args.out.display()))?;
    for (name, without, with) in [
        ("Query", query_without, query_with),
        ("GetItem", get_without, get_with),
    ] {
        println!(
            "{name}: p50 {:.3} ms without, {:.3} ms with; p99 {:.3} ms without, {:.3} ms with",
            without.0, with.0, without.1, with.1
        );
    }
    println!("written to {}", args.out.display());
    Ok(())
}

/// One round: the four calls, timed, as [query without, query with, get without, get with].
/// Which client goes first alternates between rounds, so neither always meets a warmer server.
async fn one_round(plain: &Client, hiding: &Client, round: usize) -> Result<[Duration; 4], Error> {
    let order: [(&Client, usize); 2] = if round.is_multiple_of(2) {
        [(plain, 0), (hiding, 1)]
    } else {
        [(hiding, 1), (plain, 0)]
    };
    let mut timed = [Duration::ZERO; 4];
    for (client, slot) in order {
        let started = Instant::now();
        let page = client
            .query()
            .table_name(TABLE)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(PK.into()))
            .send()
            .await?;
        timed[slot] = started.elapsed();
        if page.count as usize != ITEMS || page.last_evaluated_key.is_some() {
            return Err(format!(
                "a Query returned {} items, not one page of {ITEMS}",
                page.count
            )
            .into());
        }
    }
    for (client, slot) in order {
        let started = Instant::now();
        let item = client
            .get_item()
            .table_name(TABLE)
            .key("pk", AttributeValue::S(PK.into()))
            .key("sk", AttributeValue::S(sort_key(round % ITEMS)))
            .send()
            .await?;
        timed[2 + slot] = started.elapsed();
        if item.item.is_none() {
            return Err("a GetItem found no item".into());
        }
    }
    Ok(timed)
}

/// The table, and 100 items under one partition key, none expired (TTL an hour ahead), each
/// with a little payload.
async fn setup(client: &Client) -> Result<(), Error> {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
    };
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
    };
    let _ = client.delete_table().table_name(TABLE).send().await;
    client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk")?)
        .attribute_definitions(attribute("sk")?)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .send()
        .await?;
    let ttl = precise_ttl_read::now().as_millis() / 1000 + 3600;
    for i in 0..ITEMS {
        let item = HashMap::from([
            ("pk".to_string(), AttributeValue::S(PK.into())),
            ("sk".to_string(), AttributeValue::S(sort_key(i))),
            ("ttl".to_string(), AttributeValue::N(ttl.to_string())),
            ("payload".to_string(), AttributeValue::S("x".repeat(200))),
        ]);
        client
            .put_item()
            .table_name(TABLE)
            .set_item(Some(item))
            .send()
            .await?;
    }
    Ok(())
}

fn sort_key(i: usize) -> String {
    format!("item-{i:03}")
}

fn client(endpoint: &str, interceptor: Option<HideExpired>) -> Client {
    let mut config = Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("local", "local", None, None, "overhead"));
    if let Some(interceptor) = interceptor {
        config = config.interceptor(interceptor);
    }
    Client::from_conf(config.build())
}

/// The nearest-rank percentile of sorted samples, in milliseconds.
fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    micros(sorted[rank - 1].as_secs_f64() * 1000.0)
}

/// Milliseconds rounded to whole microseconds, finer than the clock's noise.
fn micros(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

fn parse_args() -> Result<Args, Error> {
    let usage = "usage: overhead --out FILE [--rounds N] [--warmup N] [--endpoint URL]";
    let mut out = None;
    let mut rounds = 1000;
    let mut warmup = 300;
    let mut endpoint = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value; {usage}"))
        };
        match flag.as_str() {
            "--out" => out = Some(PathBuf::from(value()?)),
            "--rounds" => rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--warmup" => warmup = value()?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--endpoint" => endpoint = Some(value()?),
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}; {usage}").into()),
        }
    }
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    Ok(Args {
        out: out.ok_or(format!("--out is required; {usage}"))?,
        rounds,
        warmup,
        endpoint,
    })
}

/// A git command's output in the workspace, trimmed; `None` outside a checkout.
fn git(args: &[&str]) -> Option<String> {
    output(
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR")),
    )
}

fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn host() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        });
    let cpu =
        cpu.or_else(|| output(Command::new("sysctl").args(["-n", "machdep.cpu.brand_string"])));
    let os_release = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|r| {
            r.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|name| name.trim_matches('"').to_string())
        });
    json!({
        "hostname": output(&mut Command::new("hostname")),
        "nproc": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "os": output(Command::new("uname").args(["-srm"])),
        "os_release": os_release,
        "cpu": cpu,
    })
}

fn runtime() -> Value {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    json!({
        "rustc": output(Command::new(rustc).arg("--version")),
        "aws-sdk-dynamodb": locked_version("aws-sdk-dynamodb"),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}

/// A package's version as the workspace's Cargo.lock pins it.
fn locked_version(package: &str) -> Option<String> {
    let lock =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock")).ok()?;
    let mut lines = lock.lines();
    lines.find(|l| *l == format!("name = \"{package}\""))?;
    lines
        .next()?
        .strip_prefix("version = \"")
        .map(|v| v.trim_end_matches('"').to_string())
}
