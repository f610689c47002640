//! The same benchmark on a simulated DynamoDB ([`precise_ttl_sim`]) instead of DynamoDB Local:
//! the precision question at the scale of a real table (40,000 write units/s, 1,000 per
//! partition), which no local store reaches. Items are planted in the simulator directly, the
//! daemon child talks to it over HTTP as it would to DynamoDB, and lag is each delete's commit
//! time (the simulator's log, no stream) minus its TTL. The bound is that of the simulator's own
//! capacity model: its limits, its burst credit and its latency.

use crate::app::AppWriter;
use crate::beside::Beside;
use crate::config::{BenchConfig, BenchIndex};
use crate::error::BenchError;
use crate::items::{Item, ItemWriter};
use crate::load::{create_table, scan_keys};
use crate::plan;
use crate::progress::{Event, Progress};
use crate::report::{BenchRun, Measured, summarize};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_bench::{Inputs, PartitionLimit, Removal, StoreCapacity};
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_engine::{Clock, SystemClock};
use precise_ttl_ops::setup;
use precise_ttl_sim::{KeyValue, Latency, SimConfig, Simulator, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TABLE: &str = "precise-ttl-bench";

/// Runs `config`'s scenario against a simulator started with `sim`, stopped at the end.
pub async fn run_simulated(
    sim: SimConfig,
    config: &BenchConfig,
    progress: &dyn Progress,
) -> Result<BenchRun, BenchError> {
    let capacity = capacity(&sim, config);
    let table_partitions = sim.table_partitions;
    let simulator =
        Simulator::start(sim).map_err(|e| BenchError::call("starting the simulator", e))?;
    let result = run_on(&simulator, capacity, table_partitions, config, progress).await;
    let stats = simulator.stats();
    simulator.shutdown();
    let mut run = result?;
    run.markdown.push_str(&simulator_markdown(&stats));
    run.summary.simulator = serde_json::to_value(&stats).ok();
    Ok(run)
}

/// The deletes per second the simulated table can take: its table-wide limit, its partitions'
/// sum, and its index partitions' sum (a shard value is one partition; each delete writes it).
fn capacity(sim: &SimConfig, config: &BenchConfig) -> StoreCapacity {
    let l = &sim.limits;
    // A provisioned table's limit is its provisioned units (the simulator caps its table-wide
    // bucket there); its index gets the same from `setup`, so the table stays the tighter.
    let table_wcu = config.provisioned.map_or(l.total_wcu, |p| p.write as f64);
    let per_second = table_wcu
        .min(sim.table_partitions as f64 * l.partition_wcu)
        .min(f64::from(config.layout.shards.get()) * l.partition_wcu);
    let floor_ms = match sim.latency {
        Latency::None => 0.0,
        Latency::LogNormal { p50, .. } => p50.as_secs_f64() * 1000.0 * sim.commit_point,
    };
    // Each delete also writes its table partition and its shard's index partition: a perfect
    // sweeper is held to their limits too (the bench knows where every item lives).
    let partition = matches!(config.index, BenchIndex::Sharded).then(|| PartitionLimit {
        per_second: l.partition_wcu,
        burst_items: l.partition_wcu * l.burst_seconds,
    });
    StoreCapacity {
        partition,
        per_second,
        burst_items: per_second * l.burst_seconds,
        floor_ms,
        source: format!(
            "the simulator: min(table {:.0}{}, {} partitions × {:.0}, {} shards × {:.0}) WCU/s, each item's table and index partition at {:.0} WCU/s, {:.2} s of burst credit, the median call's time to commit",
            table_wcu,
            if config.provisioned.is_some() {
                " provisioned"
            } else {
                ""
            },
            sim.table_partitions,
            l.partition_wcu,
            config.layout.shards,
            l.partition_wcu,
            l.partition_wcu,
            l.burst_seconds
        ),
    }
}

async fn run_on(
    simulator: &Simulator,
    capacity: StoreCapacity,
    table_partitions: usize,
    config: &BenchConfig,
    progress: &dyn Progress,
) -> Result<BenchRun, BenchError> {
    let endpoint = simulator.endpoint().to_string();
    let dynamo = Dynamo::local(&endpoint);
    let layout = &config.layout;
    let clock = SystemClock;
    create_table(&dynamo, TABLE, &config.key_attribute, config.provisioned).await?;
    let items = ItemWriter::new(&config.key_attribute, layout);
    // String TTLs before the index exists: DynamoDB refuses an index key of the wrong type.
    let t = clock.now();
    let early = plan::string_ttls(&items, t);
    plant(simulator, early.writes)?;
    let mut planted = early.planted;
    let options = crate::run::setup_options(config, Duration::from_millis(50));
    setup::setup(&dynamo, TABLE, layout, &options).await?;
    let total = config.items + config.backlog;
    // Planting ran at 170 000 items/s for 600 000 items and 110 000-131 000/s for 5.2 million
    // (the simulator's maps grow). Planned at 60 000/s, so the first TTLs fall after the sweeper
    // starts even on a busy machine: catch-ups planned at 200 000/s and at 100 000/s started 12 s
    // and up to 8 s late, and the fresh items of those seconds were backlog before the sweeper
    // ran. A faster load only lets the sweeper start on the backlog sooner.
    let lead = Duration::from_secs_f64(total as f64 / 60_000.0 + 3.0) + config.idle;
    let first = clock.now().saturating_add(lead);
    let main = plan::for_config(config, &items, t, first);
    planted.extend(main.planted);
    progress.event(Event::Loading {
        total: main.writes.len() as u64,
    });
    let load_started = Instant::now();
    let planted_now = main.writes.len() as u64;
    plant(simulator, main.writes)?;
    progress.event(Event::Loaded { items: planted_now });
    let load_seconds = load_started.elapsed().as_secs_f64();
    progress.event(Event::LoadFinished {
        items: planted.len() as u64,
        seconds: load_seconds,
        late: clock.now() > first.saturating_sub(Duration::from_secs(1)),
    });

    let table_partition = move |key: &str| {
        let hash = precise_ttl_sim::table::hash_key(&KeyValue::S(key.into()));
        Some(precise_ttl_sim::table::partition_among(hash, table_partitions) as u32)
    };
    // The application writes from here to the end of the run.
    let app = (config.app_writes_per_s > 0.0).then(|| {
        AppWriter::start(
            &dynamo,
            TABLE,
            items.clone(),
            layout.shards.get(),
            config.app_writes_per_s,
            config.seed,
            Arc::new(table_partition),
        )
    });

    let run_started = clock.now();
    let watch = crate::run::Watch::new(config, first, run_started, total);
    let mut fleet = match config.no_sweeper {
        false => Some(crate::run::start_fleet(
            config,
            TABLE,
            &endpoint,
            first.as_millis(),
        )?),
        true => None,
    };
    let beside = Beside::start(
        &dynamo,
        TABLE,
        &items,
        main.extensions,
        fleet.as_ref(),
        None,
    );
    progress.event(Event::Sweeping { expected: total });
    let removed = || Ok(simulator.deletion_count() as u64);
    let watched = watch
        .until_over(&clock, progress, removed, &mut fleet, None)
        .await;
    if let Err(e) = watched {
        crate::beside::abandon(fleet, app, beside, clock.now()).await;
        return Err(e);
    }
    let (units, failed, shutdown) = match fleet {
        Some(fleet) => {
            let units = fleet.capacity().await;
            let (_, failed, shutdown) = fleet.stop(clock.now().as_millis()).await?;
            (units, failed, shutdown)
        }
        None => (None, None, Duration::ZERO),
    };
    let ended = beside.end(app, &clock, progress).await?;
    if let Some(status) = failed {
        return Err(BenchError::DaemonFailed(status));
    }
    let removals: Vec<Removal> = simulator
        .deletions(0, usize::MAX)
        .into_iter()
        .filter(|d| d.table == TABLE)
        .map(|d| Removal {
            key: d.key,
            seen_ms: d.at_ms.round() as i64,
        })
        .collect();
    let present_at_end = scan_keys(&dynamo, TABLE, &config.key_attribute).await?;
    for p in &mut planted {
        p.table_partition = table_partition(&p.key);
    }
    let watched = ended.inputs(run_started, config, table_partition);
    let inputs = Inputs {
        planted,
        removals,
        present_at_end,
        // The simulator dates each delete itself: nothing stands between it and the log.
        observer_error_ms: Some(0.0),
        // Without a sweeper there is no lag to hold to a bound.
        capacity: (!config.no_sweeper).then_some(capacity),
        // No raw rate is measured on the simulator: its capacity is configured, and the bound
        // is held to it.
        raw_batch_per_s: None,
        // The extensions took the same table and index partitions as the deletes: the bound
        // counts them, each on its item's partitions.
        ..watched
    };
    let measured = Measured {
        load_seconds,
        raw: None,
        usage: ended.usage,
        shutdown_ms: shutdown.as_millis() as u64,
        capacity: units,
        observer_delay_ms: 0.0,
    };
    let report = precise_ttl_bench::analyze(&inputs);
    Ok(summarize(config, report, &measured, None, None))
}

fn plant(simulator: &Simulator, items: Vec<Item>) -> Result<(), BenchError> {
    let converted: Result<Vec<precise_ttl_sim::Item>, BenchError> =
        items.iter().map(to_sim_item).collect();
    simulator
        .plant(TABLE, converted?)
        .map_err(|e| BenchError::call("planting items in the simulator", e))?;
    Ok(())
}

fn to_sim_item(item: &Item) -> Result<precise_ttl_sim::Item, BenchError> {
    let pairs: Result<Vec<(&str, Value)>, BenchError> = item
        .iter()
        .map(|(k, v)| Ok((k.as_str(), to_sim_value(v)?)))
        .collect();
    Ok(precise_ttl_sim::Item::from_pairs(pairs?))
}

fn to_sim_value(v: &AttributeValue) -> Result<Value, BenchError> {
    let number = |n: &str| {
        precise_ttl_sim::Number::parse(n).map_err(|e| BenchError::call("planting a Number", e))
    };
    Ok(match v {
        AttributeValue::S(s) => Value::s(s.as_str()),
        AttributeValue::N(n) => Value::N(number(n)?),
        AttributeValue::B(b) => Value::B(b.as_ref().into()),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::L(l) => Value::L(l.iter().map(to_sim_value).collect::<Result<_, _>>()?),
        AttributeValue::M(m) => {
            let mut pairs: Vec<(Arc<str>, Value)> = m
                .iter()
                .map(|(k, v)| Ok((Arc::from(k.as_str()), to_sim_value(v)?)))
                .collect::<Result<_, BenchError>>()?;
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::M(pairs.into())
        }
        AttributeValue::Ss(s) => Value::Ss(s.iter().map(|x| x.as_str().into()).collect()),
        AttributeValue::Ns(n) => Value::Ns(n.iter().map(|x| number(x)).collect::<Result<_, _>>()?),
        AttributeValue::Bs(b) => Value::Bs(b.iter().map(|x| x.as_ref().into()).collect()),
        other => {
            return Err(BenchError::call(
                "planting an item",
                format!("an attribute value the simulator does not take: {other:?}"),
            ));
        }
    })
}

fn simulator_markdown(stats: &precise_ttl_sim::Stats) -> String {
    let mut throttles = 0u64;
    let mut write_units = 0.0;
    for t in stats.tables.values() {
        throttles += t.throttles.values().sum::<u64>();
        for i in t.indexes.values() {
            throttles += i.throttles.values().sum::<u64>();
        }
        write_units += t.usage.write_units;
    }
    let batches = stats
        .calls
        .requests
        .get("BatchExecuteStatement")
        .copied()
        .unwrap_or(0);
    let per_batch = if batches > 0 {
        format!(
            "{:.1}",
            stats.calls.batch_statements as f64 / batches as f64
        )
    } else {
        "n/a".to_string()
    };
    format!(
        "\n| simulator | |\n|---|---|\n| its CPU | {} s over {:.1} s |\n| writes refused by a throttle (statements and calls) | {throttles} |\n| statements per batch call | {per_batch} ({} in {batches}) |\n| table write units | {write_units:.0} |\n",
        stats
            .cpu_seconds
            .map_or("n/a".to_string(), |c| format!("{c:.1}")),
        stats.uptime_s,
        stats.calls.batch_statements,
    )
}
