//! `precise-ttl bench`: measures precision from outside the sweeper.
//!
//! It plants items with known TTLs (plus items that must survive), runs `precise-ttl run` as a
//! child process the way users run it, watches the table's stream for REMOVE records, scans the
//! table at the end, and hands that event log to `precise-ttl-bench` for the report. In the same
//! run it measures the store's raw conditional-delete rate, so throughput is a fraction of what
//! this machine's store can do, not an absolute number from another machine.

use crate::Outcome;
use crate::args::{DeleteModeArg, Global};
use anyhow::{Context, bail};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType as AwsKeyRole,
    PutRequest, ScalarAttributeType, WriteRequest,
};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use precise_ttl_bench::{Expectation, Inputs, Planted, Removal};
use precise_ttl_core::{DueWindow, Timestamp, TtlLayout};
use precise_ttl_dynamodb::stream::{EventKind, RemovalStream, enable_keys_stream};
use precise_ttl_dynamodb::{
    DeleteMode, Dynamo, DynamoDbLocal, DynamoStore, ItemKey, SetupOptions, setup,
};
use precise_ttl_engine::{Clock, DeleteOutcome, ExpiryStore, SystemClock};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Items whose TTLs fall during the run (deleted on time: the precision measurement)
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
    pub items: u64,

    /// Their TTLs are spread evenly over this long
    #[arg(long, default_value = "10s", value_parser = crate::args::duration)]
    pub spread: Duration,

    /// Items already expired when the sweeper starts (the catch-up scenario)
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=5_000_000))]
    pub backlog: u64,

    /// How long after the last TTL to wait for stragglers before judging what is left
    #[arg(long, default_value = "3s", value_parser = crate::args::duration)]
    pub grace: Duration,

    /// After the grace period, how long to wait at most for a backlog to be cleared
    #[arg(long, default_value = "15m", value_parser = crate::args::duration)]
    pub timeout: Duration,

    /// Items written to measure the raw conditional-delete rate (0: skip)
    #[arg(long, default_value_t = 4000)]
    pub raw_items: u64,

    /// Scenario name, used for the report files
    #[arg(long, default_value = "bench")]
    pub name: String,

    /// Folder for the report files (JSON, Markdown, SVG plot)
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,

    /// The daemon's poll interval
    #[arg(long, default_value = "1s", value_parser = crate::args::poll_interval)]
    pub poll_interval: Duration,

    /// The daemon's delete mode
    #[arg(long, default_value = "batch")]
    pub delete_mode: DeleteModeArg,

    /// Extra arguments for `precise-ttl run` (repeat the flag for each)
    #[arg(long = "daemon-arg", allow_hyphen_values = true)]
    pub daemon_args: Vec<String>,
}

/// Items that must survive, by kind; a few of each.
const ADVERSARIAL_EACH: usize = 5;

/// How often the stream is polled while the daemon runs.
const OBSERVER_CADENCE: Duration = Duration::from_millis(10);

fn now() -> Timestamp {
    SystemClock.now()
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(len), target);
    pb.set_style(
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

pub async fn run(global: &Global, args: &BenchArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let mut _local = None;
    let (dynamo, endpoint) = match &global.endpoint_url {
        Some(url) => (crate::connect(global).await?, url.clone()),
        None => {
            eprintln!("starting DynamoDB Local...");
            let heap_big = args.backlog + args.items > 50_000;
            let local = tokio::task::spawn_blocking(move || start_local(heap_big)).await??;
            let url = local.endpoint().to_string();
            _local = Some(local);
            (Dynamo::local(&url), url)
        }
    };
    // 2. The bench table: String TTLs must be written before the index exists (after, DynamoDB
    //    rejects them), so create it bare, plant those, then run setup.
    let table = format!("precise-ttl-bench-{:08x}", fastrand::u32(..));
    create_bare(&dynamo, &table).await?;
    enable_keys_stream(&dynamo, &table).await?;
    let mut planted = Vec::new();
    let mut early_writes = Vec::new();
    let t = now();
    for i in 0..ADVERSARIAL_EACH {
        let key = format!("string-ttl-{i}");
        early_writes.push(item(
            &key,
            Some(AttributeValue::S((t.as_millis() / 1000 - 10).to_string())),
            Some(i as u16),
        ));
        planted.push(survive(&key, "string TTL"));
    }
    put_all(&dynamo, &table, early_writes, None).await?;
    setup::setup(
        &dynamo,
        &table,
        &layout,
        &SetupOptions {
            native_ttl: false, // DynamoDB Local would delete too: we measure our deletes only.
            poll_interval: Duration::from_millis(100),
            ..SetupOptions::default()
        },
    )
    .await?;

    // Warm the store up and measure its raw conditional-delete rates, on the bench table itself:
    // DynamoDB Local is slow on a table's first few thousand operations, which would otherwise
    // land in the measured window.
    let raw = if args.raw_items > 0 {
        eprintln!(
            "measuring the raw conditional-delete rate ({} items per mode)...",
            args.raw_items
        );
        Some(measure_raw(&dynamo, &table, &layout, args.raw_items).await?)
    } else {
        None
    };
    if let Some(r) = &raw {
        eprintln!(
            "  raw DeleteItem: {:.0} items/s; raw PartiQL batch: {:.0} items/s",
            r.single_per_s, r.batch_per_s
        );
    }

    // 3. Plan the TTLs. Expirations start once loading is surely over.
    let shards = layout.shards.get();
    let total = args.items + args.backlog;
    let load_estimate = Duration::from_secs_f64(total as f64 / 2500.0 + 2.0);
    let first = now().saturating_add(load_estimate + Duration::from_secs(4));
    let extended_n = (args.items / 100).clamp(10, 1000);
    let mut writes = Vec::with_capacity(total as usize + 64);
    let mut extend_plan = Vec::new();
    let spread_ms = args.spread.as_millis().max(1) as f64;
    for i in 0..args.items {
        let key = format!("item-{i:07}");
        let ttl = Timestamp::from_millis(
            first.as_millis()
                + (spread_ms * i as f64 / args.items as f64) as i64
                + fastrand::i64(0..1000) % 7,
        );
        writes.push(item(&key, Some(n(ttl)), Some(fastrand::u16(0..shards))));
        planted.push(Planted {
            key,
            expect: Expectation::Expire {
                ttl_ms: ttl.as_millis(),
            },
        });
    }
    for i in 0..args.backlog {
        let key = format!("backlog-{i:07}");
        let ttl = t.saturating_sub(Duration::from_millis(10_000 + fastrand::u64(0..3_600_000)));
        writes.push(item(&key, Some(n(ttl)), Some(fastrand::u16(0..shards))));
        planted.push(Planted {
            key,
            expect: Expectation::Backlog {
                ttl_ms: ttl.as_millis(),
            },
        });
    }
    for i in 0..extended_n {
        let key = format!("extended-{i:05}");
        let offset = 2000.0 + (spread_ms - 2000.0).max(0.0) * i as f64 / extended_n as f64;
        let ttl = Timestamp::from_millis(first.as_millis() + offset as i64);
        writes.push(item(&key, Some(n(ttl)), Some(fastrand::u16(0..shards))));
        // Extended one to two seconds before the original expiry.
        let at = ttl.saturating_sub(Duration::from_millis(1000 + fastrand::u64(0..1000)));
        extend_plan.push((at, key.clone()));
        planted.push(survive(&key, "TTL extended 1–2 s before expiry"));
    }
    let six_years = Duration::from_secs(6 * 365 * 86_400);
    for i in 0..ADVERSARIAL_EACH {
        let s = Some(fastrand::u16(0..shards));
        let adversarial = [
            (
                format!("millis-ttl-{i}"),
                Some(AttributeValue::N(first.as_millis().to_string())),
                s,
                "TTL in milliseconds",
            ),
            (
                format!("negative-ttl-{i}"),
                Some(AttributeValue::N("-100".into())),
                s,
                "negative TTL",
            ),
            (
                format!("too-old-{i}"),
                Some(n(t.saturating_sub(six_years))),
                s,
                "TTL more than 5 years old",
            ),
            (format!("no-ttl-{i}"), None, s, "no TTL"),
            (
                format!("no-shard-{i}"),
                Some(n(first)),
                None,
                "no shard attribute",
            ),
        ];
        for (key, ttl, shard, why) in adversarial {
            writes.push(item(&key, ttl, shard));
            planted.push(survive(&key, why));
        }
    }
    fastrand::shuffle(&mut writes);
    let pb = bar(writes.len() as u64, "loading");
    let load_started = Instant::now();
    put_all(&dynamo, &table, writes, Some(&pb)).await?;
    pb.finish_and_clear();
    let load_secs = load_started.elapsed().as_secs_f64();
    eprintln!("loaded {} items in {load_secs:.1} s", planted.len());
    if now() > first.saturating_sub(Duration::from_secs(1)) {
        eprintln!(
            "warning: loading took longer than planned; the first items expire as the sweeper starts"
        );
    }

    // 4. Watch the stream, and calibrate how late it shows a delete.
    let observer = Observer::start(&dynamo, &table).await?;
    let observer_error_ms = calibrate(&dynamo, &table, &observer).await?;
    eprintln!("stream observation delay: {observer_error_ms:.1} ms (median of 20 probe deletes)");

    // 5. Run the daemon as users do, until every expected deletion was seen after the last TTL
    //    plus the grace period (or the timeout), then stop it with SIGTERM as a service manager
    //    would.
    let last_ttl = first.saturating_add(args.spread);
    let judge_at = last_ttl.saturating_add(args.grace);
    let exe =
        std::env::current_exe().context("finding the precise-ttl binary to run as the daemon")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["run", "--table", &table, "--endpoint-url", &endpoint])
        .args([
            "--ttl-attribute",
            &layout.ttl_attribute,
            "--shard-attribute",
            &layout.shard_attribute,
        ])
        .args([
            "--index-name",
            &layout.index_name,
            "--shards",
            &shards.to_string(),
        ])
        .args([
            "--poll-interval",
            &format!("{}ms", args.poll_interval.as_millis()),
        ])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .args([
            "--delete-mode",
            match args.delete_mode {
                DeleteModeArg::Single => "single",
                DeleteModeArg::Batch => "batch",
            },
        ])
        .args(&args.daemon_args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PRECISE_TTL_") {
            cmd.env_remove(k);
        }
    }
    let run_started = now();
    let mut child = cmd.spawn().context("starting `precise-ttl run`")?;
    let pid = child.id();
    let stdout = child.stdout.take().expect("piped");
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(i) = line.find("http://") {
                let _ = url_tx.send(line[i..].trim().to_string());
            }
        }
    });
    let metrics_url = url_rx.recv_timeout(Duration::from_secs(30)).ok();

    let extender = tokio::spawn(extend_items(
        dynamo.clone(),
        table.clone(),
        layout.ttl_attribute.clone(),
        extend_plan,
    ));
    let sampler = ProcSampler::start(pid);
    let expected = args.items + args.backlog;
    let pb = bar(expected, "deleted");
    let give_up = judge_at.saturating_add(args.timeout);
    loop {
        let removed = observer.removed_count();
        pb.set_position(removed);
        let t = now();
        if t >= judge_at && (removed >= expected || t >= give_up) {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!("the daemon exited early with {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pb.finish_and_clear();
    // Scrape while the daemon still runs: its counters die with it.
    let capacity = scrape_capacity(metrics_url.as_deref()).await;
    let stopping = Instant::now();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if stopping.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            bail!("the daemon did not stop within 15 s of SIGTERM; killed it");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let shutdown_ms = stopping.elapsed().as_millis() as u64;
    let run_ended = now();
    let usage = sampler.stop();
    extender.await??;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let removals = observer.stop().await;
    if !status.success() {
        bail!("the daemon exited with {status}");
    }

    // 6. What is left, and the verdict.
    let present_at_end = scan_keys(&dynamo, &table).await?;
    let inputs = Inputs {
        planted,
        removals,
        present_at_end,
        run_started_ms: run_started.as_millis(),
        run_ended_ms: run_ended.as_millis(),
        observer_error_ms: Some(observer_error_ms),
    };
    let report = precise_ttl_bench::analyze(&inputs);
    let deleted = report.counts.deleted.max(1) as f64;
    let summary = serde_json::json!({
        "name": args.name,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "items": args.items,
        "spread_s": args.spread.as_secs_f64(),
        "backlog": args.backlog,
        "steady_rate_per_s": args.items as f64 / args.spread.as_secs_f64().max(0.001),
        "poll_interval_ms": args.poll_interval.as_millis() as u64,
        "delete_mode": format!("{:?}", args.delete_mode).to_lowercase(),
        "shards": shards,
        "load_seconds": load_secs,
        "raw_delete_item_per_s": raw.as_ref().map(|r| r.single_per_s),
        "raw_partiql_batch_per_s": raw.as_ref().map(|r| r.batch_per_s),
        "sweeper_cpu_seconds": usage.cpu_seconds,
        "sweeper_shutdown_ms": shutdown_ms,
        "sweeper_peak_rss_mb": usage.peak_rss_kb as f64 / 1024.0,
        "capacity_units_per_deleted_item": capacity.map(|(q, d)| serde_json::json!({
            "query": q / deleted, "delete": d / deleted, "total": (q + d) / deleted,
        })),
        "report": report,
    });
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let base = args.out.join(&args.name);
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    let mut md = String::new();
    md.push_str(&format!("### {}\n\n", args.name));
    md.push_str(&format!(
        "`{}`\n\n",
        summary["command"].as_str().unwrap_or_default()
    ));
    md.push_str("| setting / measure | value |\n|---|---|\n");
    md.push_str(&format!(
        "| load | {} expiring over {:.0} s ({:.0}/s), {} backlog, {} must-survive |\n",
        args.items,
        args.spread.as_secs_f64(),
        summary["steady_rate_per_s"].as_f64().unwrap_or(0.0),
        args.backlog,
        report.counts.survive
    ));
    md.push_str(&format!(
        "| daemon | poll {} ms, {} shards, delete mode {} |\n",
        args.poll_interval.as_millis(),
        shards,
        summary["delete_mode"].as_str().unwrap_or_default()
    ));
    if let Some(r) = &raw {
        let sweeper_rate = report.throughput.per_s.unwrap_or(0.0);
        md.push_str(&format!(
            "| raw rate (this run) | DeleteItem {:.0}/s, PartiQL batch {:.0}/s |\n| sweeper throughput | {:.0}/s = {:.2} × raw DeleteItem |\n",
            r.single_per_s,
            r.batch_per_s,
            sweeper_rate,
            sweeper_rate / r.single_per_s.max(1.0)
        ));
        if let (Some(ms), true) = (report.backlog.time_to_clear_ms, args.backlog > 0) {
            let rate = args.backlog as f64 / (ms as f64 / 1000.0).max(0.001);
            md.push_str(&format!(
                "| catch-up | {} items in {:.1} s = {:.0}/s = {:.2} × raw DeleteItem |\n",
                args.backlog,
                ms as f64 / 1000.0,
                rate,
                rate / r.single_per_s.max(1.0)
            ));
        }
    }
    md.push_str(&format!(
        "| sweeper process | {:.1} CPU s, peak RSS {:.1} MB, stopped {} ms after SIGTERM |\n",
        usage.cpu_seconds,
        usage.peak_rss_kb as f64 / 1024.0,
        shutdown_ms
    ));
    if let Some((q, d)) = capacity {
        md.push_str(&format!(
            "| capacity per deleted item | {:.3} (query {:.3} + delete {:.3}), as DynamoDB Local reports it |\n",
            (q + d) / deleted,
            q / deleted,
            d / deleted
        ));
    }
    md.push_str(&format!(
        "| stream observation delay | {observer_error_ms:.1} ms (median) |\n\n"
    ));
    md.push_str(&report.to_markdown());
    std::fs::write(base.with_extension("md"), &md)?;
    precise_ttl_bench::write_plot(&report, &base.with_extension("svg"))?;
    println!("{md}");
    println!("report: {}.{{json,md,svg}}", base.display());
    dynamo
        .query
        .delete_table()
        .table_name(&table)
        .send()
        .await
        .ok();
    let clean = report.wrong.is_empty() && report.left_behind.total == 0;
    if !clean {
        bail!("wrong deletions or items left behind (see the report)");
    }
    Ok(Outcome::Success)
}

fn start_local(big_heap: bool) -> anyhow::Result<DynamoDbLocal> {
    if big_heap && std::env::var_os("DYNAMODB_LOCAL_HEAP").is_none() {
        Ok(DynamoDbLocal::start_with_heap("1g")?)
    } else {
        Ok(DynamoDbLocal::start()?)
    }
}

fn n(t: Timestamp) -> AttributeValue {
    AttributeValue::N(t.to_epoch_seconds_text())
}

fn survive(key: &str, why: &str) -> Planted {
    Planted {
        key: key.to_string(),
        expect: Expectation::Survive {
            why: why.to_string(),
        },
    }
}

fn item(
    pk: &str,
    ttl: Option<AttributeValue>,
    shard: Option<u16>,
) -> HashMap<String, AttributeValue> {
    let mut m = HashMap::from([("pk".to_string(), AttributeValue::S(pk.to_string()))]);
    if let Some(ttl) = ttl {
        m.insert("ttl".into(), ttl);
    }
    if let Some(s) = shard {
        m.insert("ttl_shard".into(), AttributeValue::N(s.to_string()));
    }
    m
}

async fn create_bare(dynamo: &Dynamo, table: &str) -> anyhow::Result<()> {
    dynamo
        .query
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(AwsKeyRole::Hash)
                .build()?,
        )
        .send()
        .await
        .context("creating the bench table")?;
    Ok(())
}

/// BatchWriteItem, four requests in flight.
pub(crate) async fn put_all(
    dynamo: &Dynamo,
    table: &str,
    items: Vec<HashMap<String, AttributeValue>>,
    pb: Option<&ProgressBar>,
) -> anyhow::Result<()> {
    let mut chunks = items
        .chunks(25)
        .map(|c| c.to_vec())
        .collect::<Vec<_>>()
        .into_iter();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.len() < 4 {
            let Some(chunk) = chunks.next() else { break };
            let dynamo = dynamo.clone();
            let table = table.to_string();
            tasks.spawn(async move {
                let n = chunk.len() as u64;
                let mut requests: Vec<WriteRequest> = chunk
                    .into_iter()
                    .map(|i| {
                        WriteRequest::builder()
                            .put_request(
                                PutRequest::builder()
                                    .set_item(Some(i))
                                    .build()
                                    .expect("item set"),
                            )
                            .build()
                    })
                    .collect();
                while !requests.is_empty() {
                    let out = dynamo
                        .write
                        .batch_write_item()
                        .request_items(&table, requests)
                        .send()
                        .await?;
                    requests = out
                        .unprocessed_items
                        .and_then(|mut u| u.remove(&table))
                        .unwrap_or_default();
                }
                Ok::<u64, anyhow::Error>(n)
            });
        }
        match tasks.join_next().await {
            Some(done) => {
                let n = done??;
                if let Some(pb) = pb {
                    pb.inc(n);
                }
            }
            None => return Ok(()),
        }
    }
}

struct RawRates {
    single_per_s: f64,
    batch_per_s: f64,
}

/// Loads items that are all due and deletes them as fast as the store allows, once with one
/// conditional DeleteItem per item (64 in flight) and once with PartiQL batches of 25 (8 in
/// flight). A first unmeasured round warms the store up.
async fn measure_raw(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    count: u64,
) -> anyhow::Result<RawRates> {
    let store = Arc::new(
        DynamoStore::open(dynamo.clone(), table, layout.clone())
            .await?
            .with_delete_mode(DeleteMode::Batch),
    );
    let due = now().saturating_sub(Duration::from_secs(60));
    let shards = layout.shards.get();
    let keys =
        |round: &str| -> Vec<String> { (0..count).map(|i| format!("{round}-{i}")).collect() };
    let mut rates = Vec::new();
    for (round, batch, measured) in [
        ("warm", 1, false),
        ("single", 1, true),
        ("batch", 25, true),
        ("warm-2", 1, false),
    ] {
        let names = keys(round);
        let items = names
            .iter()
            .map(|k| item(k, Some(n(due)), Some(fastrand::u16(0..shards))))
            .collect();
        put_all(dynamo, table, items, None).await?;
        let item_keys: Vec<ItemKey> = names
            .iter()
            .map(|k| ItemKey::new(vec![("pk".into(), AttributeValue::S(k.clone()))]))
            .collect();
        let started = Instant::now();
        let deleted = delete_all(Arc::clone(&store), item_keys, batch).await?;
        let secs = started.elapsed().as_secs_f64();
        if deleted != count {
            bail!("raw measurement deleted {deleted} of {count} items");
        }
        if measured {
            rates.push(count as f64 / secs.max(0.001));
        }
    }
    Ok(RawRates {
        single_per_s: rates[0],
        batch_per_s: rates[1],
    })
}

async fn delete_all(
    store: Arc<DynamoStore>,
    keys: Vec<ItemKey>,
    batch: usize,
) -> anyhow::Result<u64> {
    let in_flight = if batch == 1 { 64 } else { 8 };
    let deleted = Arc::new(AtomicU64::new(0));
    let mut chunks = keys
        .chunks(batch)
        .map(|c| c.to_vec())
        .collect::<Vec<_>>()
        .into_iter();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.len() < in_flight {
            let Some(chunk) = chunks.next() else { break };
            let store = Arc::clone(&store);
            let deleted = Arc::clone(&deleted);
            tasks.spawn(async move {
                let window = DueWindow::at(now());
                let results = if chunk.len() == 1 {
                    vec![store.delete_if_due(&chunk[0], window).await]
                } else {
                    store.delete_many_if_due(&chunk, window).await
                };
                for r in results {
                    if r? == DeleteOutcome::Deleted {
                        deleted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok::<(), anyhow::Error>(())
            });
        }
        match tasks.join_next().await {
            Some(done) => done??,
            None => return Ok(deleted.load(Ordering::Relaxed)),
        }
    }
}

/// Polls the stream in the background and records when each REMOVE was seen.
struct Observer {
    seen: Arc<Mutex<Vec<Removal>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    async fn start(dynamo: &Dynamo, table: &str) -> anyhow::Result<Observer> {
        let mut stream = RemovalStream::open_latest(dynamo, table).await?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let seen = Arc::clone(&seen);
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut other = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match stream.poll().await {
                        Ok(events) => {
                            let at = now().as_millis();
                            {
                                let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                                for e in events {
                                    match e.kind {
                                        EventKind::Remove => seen.push(Removal {
                                            key: e.partition_key,
                                            seen_ms: at,
                                        }),
                                        EventKind::Other(_) => other += 1,
                                        _ => {}
                                    }
                                }
                            }
                            // A steady cadence: a tighter loop costs DynamoDB Local CPU that the sweeper
                            // needs, for little gain in observation delay (which calibration measures).
                            tokio::time::sleep(OBSERVER_CADENCE).await;
                        }
                        Err(e) => tracing::warn!(error = %e, "stream read failed; retrying"),
                    }
                }
                if other > 0 {
                    tracing::warn!(
                        other,
                        "stream records with an unknown event name (DynamoDB Local's own TTL deletes?)"
                    );
                }
            })
        };
        Ok(Observer { seen, stop, task })
    }

    fn removed_count(&self) -> u64 {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    fn seen_at(&self, key: &str) -> Option<i64> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|r| r.key == key)
            .map(|r| r.seen_ms)
    }

    async fn stop(self) -> Vec<Removal> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The time from a DeleteItem returning to its REMOVE record being seen (median of 20).
async fn calibrate(dynamo: &Dynamo, table: &str, observer: &Observer) -> anyhow::Result<f64> {
    let mut delays = Vec::new();
    for i in 0..20 {
        let key = format!("probe-{i}");
        dynamo
            .write
            .put_item()
            .table_name(table)
            .set_item(Some(item(&key, None, None)))
            .send()
            .await?;
        dynamo
            .write
            .delete_item()
            .table_name(table)
            .key("pk", AttributeValue::S(key.clone()))
            .send()
            .await?;
        let returned = now();
        let started = Instant::now();
        loop {
            if let Some(seen) = observer.seen_at(&key) {
                delays.push(seen.saturating_sub(returned.as_millis()).max(0) as f64);
                break;
            }
            if started.elapsed() > Duration::from_secs(5) {
                bail!("the stream did not show a probe delete within 5 s");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    delays.sort_by(f64::total_cmp);
    // Probes are not planted items; the analysis counts their REMOVEs as unknown, so drop them.
    observer
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|r| !r.key.starts_with("probe-"));
    Ok(delays[delays.len() / 2])
}

async fn extend_items(
    dynamo: Dynamo,
    table: String,
    ttl_attribute: String,
    mut plan: Vec<(Timestamp, String)>,
) -> anyhow::Result<()> {
    plan.sort();
    for (at, key) in plan {
        let wait = at.millis_since(now());
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        }
        let later = now().saturating_add(Duration::from_secs(3600));
        dynamo
            .write
            .update_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(key))
            .update_expression("SET #t = :t")
            .expression_attribute_names("#t", &ttl_attribute)
            .expression_attribute_values(":t", n(later))
            .send()
            .await
            .context("extending a TTL")?;
    }
    Ok(())
}

async fn scan_keys(dynamo: &Dynamo, table: &str) -> anyhow::Result<HashSet<String>> {
    let mut keys = HashSet::new();
    let mut start = None;
    loop {
        let out = dynamo
            .query
            .scan()
            .table_name(table)
            .projection_expression("pk")
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .context("scanning what is left")?;
        for i in out.items() {
            if let Some(AttributeValue::S(k)) = i.get("pk") {
                keys.insert(k.clone());
            }
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(keys);
        }
    }
}

/// Query and delete capacity units, from the daemon's /metrics.
async fn scrape_capacity(url: Option<&str>) -> Option<(f64, f64)> {
    let url = url?;
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, "metrics"));
    let body = tokio::task::spawn_blocking({
        let host = host.to_string();
        let path = format!("/{path}");
        move || -> std::io::Result<String> {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(&host)?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
            let mut body = String::new();
            s.read_to_string(&mut body)?;
            Ok(body)
        }
    })
    .await
    .ok()?
    .ok()?;
    let mut query = 0.0;
    let mut delete = 0.0;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix(precise_ttl_engine::metrics::CAPACITY_UNITS) {
            let value: f64 = rest.rsplit(' ').next()?.parse().ok()?;
            if rest.contains("op=\"query\"") {
                query += value / 100.0;
            } else if rest.contains("op=\"delete\"") {
                delete += value / 100.0;
            }
        }
    }
    Some((query, delete))
}

#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    cpu_seconds: f64,
    peak_rss_kb: u64,
}

/// Samples a child's CPU time and peak RSS from /proc until stopped.
struct ProcSampler {
    usage: Arc<Mutex<Usage>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl ProcSampler {
    fn start(pid: u32) -> ProcSampler {
        let usage = Arc::new(Mutex::new(Usage::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let usage = Arc::clone(&usage);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
                    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
                    if stat.is_none() {
                        break;
                    }
                    let mut u = usage.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(stat) = stat {
                        // Fields after the command name; utime and stime are the 12th and 13th.
                        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                            let f: Vec<&str> = rest.split_whitespace().collect();
                            let ticks: f64 =
                                f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
                                    + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
                            // USER_HZ is 100 on Linux.
                            u.cpu_seconds = u.cpu_seconds.max(ticks / 100.0);
                        }
                    }
                    if let Some(status) = status
                        && let Some(line) = status.lines().find(|l| l.starts_with("VmHWM:"))
                    {
                        let kb: u64 = line
                            .split_whitespace()
                            .nth(1)
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        u.peak_rss_kb = u.peak_rss_kb.max(kb);
                    }
                    drop(u);
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        ProcSampler {
            usage,
            stop,
            thread,
        }
    }

    fn stop(self) -> Usage {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        *self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }
}
