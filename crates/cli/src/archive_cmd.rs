//! `precise-ttl archive`: flags to options, the sink opened, the stream tailed until a signal
//! (`precise_ttl_dynamodb::archive_stream` does the work), the counts printed.

use crate::args::{ArchiveArgs, Global};
use crate::wiring::Outcome;
use precise_ttl_archive::{Rotation, Sink};
use precise_ttl_dynamodb::archive_stream::{ArchiveOptions, archive};

pub async fn run(global: &Global, args: &ArchiveArgs) -> anyhow::Result<Outcome> {
    let table = global.table()?;
    let layout = global.layout()?;
    // Records go to standard output with `--to -`: the messages go to standard error then.
    let sink = Sink::open(&args.to, Rotation::default())?;
    let dynamo = crate::wiring::connect(global).await?;
    let options = ArchiveOptions {
        ttl_attribute: layout.ttl_attribute.clone(),
        checkpoint_table: args.checkpoint_table.clone(),
        poll_interval: args.poll_interval,
        record_time_resolution: args.record_time_resolution,
    };
    let report = archive(&dynamo, table, &sink, &options, crate::wiring::signal()).await?;
    eprintln!(
        "stopped: {} expiry records archived ({} by native TTL), {} other REMOVE records left out",
        report.records, report.native, report.other_removes
    );
    Ok(Outcome::Success)
}
