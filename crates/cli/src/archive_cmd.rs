//! `precise-ttl archive`: flags to options, the sink opened, the stream tailed until a signal
//! (`precise_ttl_stream::archive_stream` does the work), the counts printed; with
//! `--metrics-addr`, its counters on `/metrics` and its health on `/healthz` meanwhile.
//!
//! Every message goes to standard error: with `--to -` the records are standard output. The
//! start line (`precise-ttl archive: table …`) comes once the stream is open and says which
//! record-time resolution is in force and why.

use crate::wiring::Outcome;
use precise_ttl_flags::{ArchiveArgs, Global};
use precise_ttl_ops::serve;
use precise_ttl_stream::archive_stream::{ArchiveProgress, archive, open};

pub async fn run(global: &Global, args: &ArchiveArgs) -> anyhow::Result<Outcome> {
    let stop = crate::wiring::signal();
    let table = global.table()?;
    let layout = global.layout()?;
    let progress = ArchiveProgress::default();
    // Served before the store is reached: /healthz says "starting" meanwhile.
    let mut where_metrics = String::new();
    if let Some(addr) = args.archive_metrics_addr {
        let stale = args.unhealthy_after();
        let prometheus = serve::install_archive_recorder()?;
        let bound = serve::serve_archive(addr, prometheus, progress.clone(), stale).await?;
        where_metrics = format!(", metrics on http://{bound}/metrics");
        eprintln!("precise-ttl archive: metrics on http://{bound}/metrics");
    }
    // Records go to standard output with `--to -`: the messages go to standard error then.
    let sink = crate::wiring::open_sink(&args.archive_to, &args.tuning, global).await?;
    let dynamo = crate::wiring::connect(global).await?;
    let options = args.options(&layout);
    // A store that is slow or unreachable at start (a restart during a blip) is waited for.
    let Some(opened) = crate::wiring::until_reachable(|| open(&dynamo, table, &options)).await?
    else {
        sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
        eprintln!("stopped before the store could be reached: nothing archived");
        return Ok(Outcome::Success);
    };
    eprintln!(
        "precise-ttl archive: table {table:?}, stream {}, record times to {}, checkpoints in {:?}{where_metrics}",
        opened.arn(),
        opened.resolution().describe(),
        args.archive_checkpoint_table,
    );
    let report = archive(table, opened, &sink, &options, &progress, stop).await;
    // Whatever the stream did, what reached the sink goes to its final place.
    sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
    let report = report?;
    eprintln!(
        "stopped: {} expiry records archived ({} by native TTL), {} other REMOVE records left out",
        report.records, report.native, report.other_removes
    );
    Ok(Outcome::Success)
}
