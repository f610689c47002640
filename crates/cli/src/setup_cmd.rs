//! `precise-ttl setup`.

use crate::wiring::Outcome;
use precise_ttl_flags::{Global, IndexLayout, SetupArgs, UsageError};
use precise_ttl_ops::queue::setup::{QueueSetupOptions, setup_queue};
use precise_ttl_ops::setup::capacity::{
    self, IndexCapacity, IndexPlan, register_scalable_target_command, scalable_resource_id,
};
use precise_ttl_ops::{CreateTable, SetupOptions, setup};

pub async fn run(global: &Global, args: &SetupArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    if global.index_layout == IndexLayout::StreamQueue {
        return queue(global, args).await;
    }
    global.refuse_layout("setup", &[IndexLayout::BlogWindow])?;
    let dynamo = crate::wiring::connect(global).await?;
    let options = SetupOptions {
        create_table: match (args.create_table, &args.partition_key) {
            (true, Some(pk)) => Some(CreateTable {
                partition_key: pk.clone(),
                sort_key: args.sort_key.clone(),
            }),
            _ => None,
        },
        native_ttl: !args.no_native_ttl,
        stream: args.stream,
        wait: (!args.no_wait).then_some(args.wait_timeout),
        lease_table: Some(args.leases.lease_table.clone()),
        // clap makes the two flags go together.
        index_capacity: args
            .index_read_capacity
            .zip(args.index_write_capacity)
            .map(|(read, write)| IndexCapacity { read, write }),
        ..SetupOptions::default()
    };
    // The capacity plan first, printed before anything changes; its refusals are setup's.
    for line in describe_plan(&setup::plan(&dynamo, table, &layout, &options).await?) {
        println!("{line}");
    }
    let report = setup::setup(&dynamo, table, &layout, &options).await?;
    for action in &report.actions {
        println!("  {action}");
    }
    if report.changed() {
        println!(
            "table {table:?} is ready for precise-ttl (index {:?}).",
            layout.index_name
        );
    } else {
        println!("table {table:?} was already set up: nothing changed.");
    }
    Ok(Outcome::Success)
}

/// Setup for the stream-queue layout: the application table gains nothing but a stream.
async fn queue(global: &Global, args: &SetupArgs) -> anyhow::Result<Outcome> {
    if args.create_table || args.index_read_capacity.is_some() {
        return Err(UsageError(
            "--create-table and --index-*-capacity are for the sharded layout: the stream-queue layout adds no index, and its queue table is on demand".into(),
        )
        .into());
    }
    let layout = global.layout()?;
    let table = global.table()?;
    let dynamo = crate::wiring::connect(global).await?;
    let options = QueueSetupOptions {
        queue_table: global.queue_table()?,
        native_ttl: !args.no_native_ttl,
        lease_table: Some(args.leases.lease_table.clone()),
    };
    let report = setup_queue(&dynamo, table, &layout, &options).await?;
    for action in &report.actions {
        println!("  {action}");
    }
    match report.changed() {
        true => println!(
            "table {table:?} is ready for precise-ttl (expiry queue {:?}, fed from its stream; its items were not changed). `precise-ttl backfill --index-layout stream-queue` queues the items written before.",
            options.queue_table
        ),
        false => println!("table {table:?} was already set up: nothing changed."),
    }
    Ok(Outcome::Success)
}

/// The plan in plain lines: what capacity the index gets and what auto scaling needs.
fn describe_plan(plan: &IndexPlan) -> Vec<String> {
    match plan {
        IndexPlan::OnDemand => Vec::new(),
        IndexPlan::Present {
            capacity: Some(c),
            requested: Some(_),
        } => vec![format!(
            "index capacity: the expiry index exists with {} read and {} write units/s; setup leaves it as it is (--index-read-capacity and --index-write-capacity apply only to a new index; change it with `aws dynamodb update-table` or its auto scaling)",
            c.read, c.write
        )],
        IndexPlan::Present { .. } => Vec::new(),
        IndexPlan::Provisioned {
            table,
            index,
            capacity: c,
            table_capacity: t,
        } => vec![
            format!(
                "index capacity: the expiry index {index:?} gets {} read and {} write units/s, provisioned apart from the table's {} read and {} write; it does not follow the table's auto scaling",
                c.read, c.write, t.read, t.write
            ),
            format!(
                "auto scaling: the index is its own scalable target ({}, dynamodb:index:WriteCapacityUnits and dynamodb:index:ReadCapacityUnits); register it, then give it a target-tracking policy (docs/configuration.md): {}",
                scalable_resource_id(table, index),
                register_scalable_target_command(
                    table,
                    index,
                    "Write",
                    c.write,
                    capacity::suggested_max(c.write)
                )
            ),
        ],
    }
}
