//! `precise-ttl setup`.

use crate::args::{Global, SetupArgs};
use crate::wiring::Outcome;
use precise_ttl_dynamodb::{CreateTable, SetupOptions, setup};

pub async fn run(global: &Global, args: &SetupArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
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
        ..SetupOptions::default()
    };
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
