//! `precise-ttl archive`: flags to options, the sink opened, the stream tailed until a signal
//! (`precise_ttl_dynamodb::archive_stream` does the work), the counts printed.

use crate::args::{ArchiveArgs, Global};
use crate::wiring::Outcome;
use precise_ttl_dynamodb::archive_stream::{ArchiveOptions, archive, open};

pub async fn run(global: &Global, args: &ArchiveArgs) -> anyhow::Result<Outcome> {
    let stop = crate::wiring::signal();
    let table = global.table()?;
    let layout = global.layout()?;
    // Records go to standard output with `--to -`: the messages go to standard error then.
    let sink = args.tuning.open(&args.to, global).await?;
    let dynamo = crate::wiring::connect(global).await?;
    let options = ArchiveOptions {
        ttl_attribute: layout.ttl_attribute.clone(),
        checkpoint_table: args.checkpoint_table.clone(),
        poll_interval: args.poll_interval,
        record_time_resolution: args.record_time_resolution,
    };
    // A store that is slow or unreachable at start (a restart during a blip) is waited for.
    let Some(opened) = crate::wiring::until_reachable(|| open(&dynamo, table, &options)).await?
    else {
        sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
        eprintln!("stopped before the store could be reached: nothing archived");
        return Ok(Outcome::Success);
    };
    let report = archive(&dynamo, table, opened, &sink, &options, stop).await;
    // Whatever the stream did, what reached the sink goes to its final place.
    sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
    let report = report?;
    eprintln!(
        "stopped: {} expiry records archived ({} by native TTL), {} other REMOVE records left out",
        report.records, report.native, report.other_removes
    );
    Ok(Outcome::Success)
}
