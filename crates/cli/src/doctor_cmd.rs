//! `precise-ttl doctor`: reads the table (all of it, or a random sample) and reports everything
//! that keeps items from being deleted on time, with what to do about it. The examination is
//! `precise_ttl_ops::doctor`; this file builds it from the flags, prints the report and picks the
//! exit code.

use crate::wiring::Outcome;
use precise_ttl_flags::{DoctorArgs, Global, IndexLayout};
use precise_ttl_ops::doctor::{DoctorOptions, doctor};
use precise_ttl_ops::queue::QueueCheck;

pub async fn run(global: &Global, args: &DoctorArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    let dynamo = crate::wiring::connect(global).await?;
    global.refuse_layout("doctor", &[IndexLayout::BlogWindow])?;
    let queue = match global.index_layout {
        IndexLayout::StreamQueue => Some(QueueCheck {
            queue_table: global.queue_table()?,
            checkpoint_table: args.indexer.indexer_checkpoint_table.clone(),
        }),
        _ => None,
    };
    let options = DoctorOptions {
        sample: args.sample,
        segments: args.scan.segments,
        examples: args.examples,
        rate_pages: args.rate_pages,
        queue,
    };
    let r = doctor(&dynamo, table, &layout, &options)
        .await
        .map_err(crate::wiring::ops_error)?;
    let sample_note = match args.sample {
        Some(_) => format!(
            " (a sample: {} of {} segments)",
            r.sampled_segments, r.total_segments
        ),
        None => String::new(),
    };
    let capped_note = r.counted.capped.then(|| {
        format!(
            "the expiry-rate count stopped at --rate-pages {} on some shards: the rate is at least what is shown",
            args.rate_pages
        )
    });
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "table": table,
                "scanned": r.scanned,
                "with_ttl": r.with_ttl,
                "sample": args.sample.is_some(),
                "native_ttl": { "status": r.native_ttl_status, "attribute": r.native_ttl_attribute },
                "queue": r.queue_note,
                "findings": r.findings,
                "sizing": r.advice.map(|a| serde_json::json!({
                    "expiries_per_second_next_minute": a.expiries_per_s,
                    "index_partition_wcu_per_second_busiest": a.busiest_partition_wcu,
                    "shards_needed": a.shards_needed,
                    "enough": a.enough,
                    "count_pages_read": r.counted.pages,
                    "count_capped": r.counted.capped,
                })),
                "index_write_capacity": r.index_write_need.map(|(_, n)| serde_json::json!({
                    "provisioned": n.provisioned,
                    "needed": n.needed,
                    "at_least": n.lower_bound,
                    "enough": !n.short(),
                })),
            })
        );
    } else {
        println!(
            "doctor {table:?}: scanned {} items{sample_note}, {} with a TTL attribute",
            r.scanned, r.with_ttl
        );
        if r.findings.is_empty() {
            println!(
                "  no findings: every TTL item is indexed, the index and native TTL are in place"
            );
        }
        if let Some(a) = r.advice.filter(|a| a.enough) {
            println!("  shards: {}", a.describe(u64::from(layout.shards.get())));
        }
        if let Some((_, n)) = r.index_write_need.filter(|(_, n)| !n.short()) {
            println!(
                "  index write capacity: {} units/s provisioned, the next minute's expirations need ~{:.0}{}: enough",
                n.provisioned,
                n.needed,
                if n.lower_bound { " or more" } else { "" }
            );
        }
        if let Some(note) = &capped_note {
            println!("  note: {note}");
        }
        if let Some(note) = &r.queue_note {
            println!("  {note}");
        }
        for f in &r.findings {
            println!("  ✗ {}", f.message);
            if !f.examples.is_empty() {
                println!("      e.g. {}", f.examples.join("; "));
            }
        }
    }
    Ok(if r.findings.is_empty() {
        Outcome::Success
    } else {
        Outcome::Findings
    })
}
