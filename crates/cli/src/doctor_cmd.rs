//! `precise-ttl doctor`: reads the table (all of it, or a random sample) and reports everything
//! that keeps items from being deleted on time, with what to do about it.

use crate::args::{DoctorArgs, Global, IndexLayout};
use crate::wiring::Outcome;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::diagnose::{Inspected, ShardValue, Tally};
use precise_ttl_stream::queue::QueueTable;
use precise_ttl_stream::queue::inspect::parts;

use precise_ttl_dynamodb::count::DueCount;
use precise_ttl_dynamodb::item::{ttl_value, type_name};
use precise_ttl_engine::retry::with_backoff;
use precise_ttl_engine::{Clock, SystemClock};
use precise_ttl_ops::setup::capacity::{self, IndexCapacity, WriteNeed};
use precise_ttl_ops::{ScanFilter, ScannedItem, Segment, TableScan};

/// One kind of problem, with how many items have it and a few of their keys.
#[derive(Debug, Clone, serde::Serialize)]
struct Finding {
    kind: &'static str,
    count: u64,
    examples: Vec<String>,
    message: String,
}

/// The scanned item in the shape the pure tally reads.
fn inspected(item: &ScannedItem) -> Inspected<'_> {
    let ttl = ttl_value(item.ttl.as_ref());
    Inspected {
        key: &item.key,
        ttl,
        shard: match &item.shard {
            None => ShardValue::Missing,
            Some(AttributeValue::N(n)) => ShardValue::Number(n),
            Some(other) => ShardValue::Other(type_name(other)),
        },
    }
}

pub async fn run(global: &Global, args: &DoctorArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    let dynamo = crate::wiring::connect(global).await?;
    global.refuse_layout("doctor", &[IndexLayout::BlogWindow])?;
    let queue = match global.index_layout {
        IndexLayout::StreamQueue => Some(global.queue_table()?),
        _ => None,
    };
    let queue_check = match &queue {
        Some(q) => Some(queue_doctor(&dynamo, table, q, &layout, args).await?),
        None => None,
    };
    let scan = TableScan::open(dynamo, table, layout.clone()).await?;
    let mut findings = Vec::new();

    // The table: index (or queue) and native TTL.
    let index = match &queue_check {
        Some((problems, _)) => {
            findings.extend(problems.iter().cloned());
            Ok(Some(()))
        }
        None => scan.shape().expiry_index(&layout).map(|i| {
            i.map(|i| {
                if i.status != "ACTIVE" {
                    findings.push(Finding {
                        kind: "index_not_active",
                        count: 1,
                        examples: vec![],
                        message: format!(
                            "the expiry index {:?} is {}: DynamoDB is still building it",
                            layout.index_name, i.status
                        ),
                    });
                }
            })
        }),
    };
    match index {
        Ok(Some(())) => {}
        Ok(None) => findings.push(Finding {
            kind: "index_missing",
            count: 1,
            examples: vec![],
            message: format!(
                "table {table:?} has no index {:?}: nothing can be swept; run `precise-ttl setup --table {table}`",
                layout.index_name
            ),
        }),
        Err(e) => findings.push(Finding {
            kind: "index_wrong_schema",
            count: 1,
            examples: vec![],
            message: e.to_string(),
        }),
    }
    let (status, attribute) = scan.native_ttl().await?;
    let native_attribute = attribute.clone();
    let native_on = status == "ENABLED" || status == "ENABLING";
    if !native_on {
        findings.push(Finding {
            kind: "native_ttl_off",
            count: 1,
            examples: vec![],
            message: format!("native TTL is {status}: there is no backstop if the sweeper stops; `precise-ttl setup` enables it"),
        });
    } else if attribute.as_deref() != Some(layout.ttl_attribute.as_str()) {
        findings.push(Finding {
            kind: "native_ttl_other_attribute",
            count: 1,
            examples: vec![],
            message: format!(
                "native TTL is on attribute {:?}, not {:?}: the two disagree about what expires",
                attribute.unwrap_or_default(),
                layout.ttl_attribute
            ),
        });
    }

    // The items.
    let now = SystemClock.now();
    let mut tally = Tally::default();
    let backoff = precise_ttl_core::Backoff::default();
    let (total, order): (u32, Vec<u32>) = match args.sample {
        // A sample reads whole random segments of a fine split, so it sees every part of the
        // key space with equal chance rather than the first N items.
        Some(_) => {
            let total = 256;
            let mut order: Vec<u32> = (0..total).collect();
            fastrand::shuffle(&mut order);
            (total, order)
        }
        None => (args.scan.segments, (0..args.scan.segments).collect()),
    };
    let budget = args.sample.unwrap_or(u64::MAX);
    let mut sampled_segments = 0;
    'segments: for index in order {
        let segment = Segment { index, total };
        sampled_segments += 1;
        let mut cursor = None;
        loop {
            let page = with_backoff(
                &backoff,
                || {},
                || scan.page(segment, ScanFilter::TtlOrShard, cursor.clone(), 1000),
            )
            .await?;
            tally.scanned += page.scanned;
            for item in &page.items {
                tally.inspect(inspected(item), layout.shards, now, args.examples);
            }
            cursor = page.next;
            if tally.scanned >= budget {
                break 'segments;
            }
            if cursor.is_none() {
                break;
            }
        }
    }
    let sample_note = match args.sample {
        Some(_) => format!(" (a sample: {sampled_segments} of {total} segments)"),
        None => String::new(),
    };
    for (kind, (count, examples)) in std::mem::take(&mut tally.counts) {
        // The queue layout reads no shard attribute: writers set only the TTL.
        if queue.is_some() && SHARD_FINDINGS.contains(&kind) {
            continue;
        }
        let message = match kind {
            "ttl_not_a_number" => format!(
                "{count} items have a TTL that is not a Number ({}): neither native TTL nor precise-ttl will ever delete them. Rewrite them as epoch seconds; note that once the expiry index exists DynamoDB rejects writes of a non-Number {:?}, so writers still sending one fail loudly",
                tally
                    .ttl_types
                    .iter()
                    .map(|(t, n)| format!("{t}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                layout.ttl_attribute
            ),
            "ttl_in_milliseconds" => format!(
                "{count} items have a TTL of 10^11 or more: milliseconds (or microseconds) instead of seconds, so they expire thousands of years late. Divide by 1000"
            ),
            "ttl_more_than_5_years_old" => format!(
                "{count} items have a TTL more than 5 years in the past (or negative): native TTL ignores such values and so does precise-ttl; delete them yourself if they are meant to be gone"
            ),
            "ttl_without_shard" => format!(
                "{count} items have a Number TTL but no {:?}: the index does not list them, so they are not swept on time. Run `precise-ttl backfill --table {table}`, and make writers add the shard",
                layout.shard_attribute
            ),
            "shard_out_of_range" => format!(
                "{count} items have a shard outside 0..{} ({}): the sweeper also probes shards up to 1023 for due items, but raise --shards to cover them or rewrite them",
                layout.shards,
                tally
                    .strays
                    .iter()
                    .take(10)
                    .map(|(s, n)| format!("shard {s}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "shard_invalid" => format!(
                "{count} items have a shard that is negative, fractional or not a Number: no sweep reads them. Rewrite them (remove {:?} and run backfill)",
                layout.shard_attribute
            ),
            other => format!("{count} items: {other}"),
        };
        findings.push(Finding {
            kind,
            count,
            examples,
            message,
        });
    }

    // The index's write load ahead, from the index itself (a sample scan cannot tell the rate):
    // items due in the next minute, per shard, at most --rate-pages pages each so the read cost
    // stays bounded whatever is due.
    let mut upcoming = Vec::new();
    let mut counted = DueCount::default();
    let mut index_write_need = None;
    if scan
        .shape()
        .expiry_index(&layout)
        .is_ok_and(|i| i.is_some())
    {
        let dynamo = crate::wiring::connect(global).await?;
        let now = dynamo.store_clock.now();
        let until = now.saturating_add(capacity::RATE_WINDOW);
        for shard in layout.shards.all() {
            let count = precise_ttl_ops::status::count_between(
                &dynamo,
                table,
                &layout,
                shard,
                now,
                until,
                Some(args.rate_pages),
            )
            .await?;
            upcoming.push(count.due);
            counted.due += count.due;
            counted.pages += count.pages;
            counted.capped |= count.capped;
        }
        // On demand: no provisioned capacity to fall short, so nothing to say.
        if let Some(provisioned) = capacity::index_capacity(scan.shape(), &layout.index_name) {
            index_write_need = Some((
                provisioned,
                WriteNeed::from_count(counted, capacity::RATE_WINDOW, provisioned.write),
            ));
        }
    }
    let advice = (!upcoming.is_empty())
        .then(|| precise_ttl_core::sizing::advise(&upcoming, capacity::RATE_WINDOW.as_secs_f64()));
    if let Some(a) = advice.filter(|a| !a.enough) {
        findings.push(Finding {
            kind: "shards_too_few",
            count: a.shards_needed,
            examples: Vec::new(),
            message: a.describe(u64::from(layout.shards.get())),
        });
    }
    if let Some((provisioned, need)) = index_write_need.filter(|(_, n)| n.short()) {
        findings.push(Finding {
            kind: "index_write_capacity_low",
            count: need.to_provision() as u64,
            examples: Vec::new(),
            message: write_need_message(table, &layout.index_name, provisioned, &need),
        });
    }
    let capped_note = counted.capped.then(|| {
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
                "scanned": tally.scanned,
                "with_ttl": tally.with_ttl,
                "sample": args.sample.is_some(),
                "native_ttl": { "status": status, "attribute": native_attribute },
                "queue": queue_check.as_ref().map(|(_, note)| note),
                "findings": findings,
                "sizing": advice.map(|a| serde_json::json!({
                    "expiries_per_second_next_minute": a.expiries_per_s,
                    "index_partition_wcu_per_second_busiest": a.busiest_partition_wcu,
                    "shards_needed": a.shards_needed,
                    "enough": a.enough,
                    "count_pages_read": counted.pages,
                    "count_capped": counted.capped,
                })),
                "index_write_capacity": index_write_need.map(|(_, n)| serde_json::json!({
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
            tally.scanned, tally.with_ttl
        );
        if findings.is_empty() {
            println!(
                "  no findings: every TTL item is indexed, the index and native TTL are in place"
            );
        }
        if let Some(a) = advice.filter(|a| a.enough) {
            println!("  shards: {}", a.describe(u64::from(layout.shards.get())));
        }
        if let Some((_, n)) = index_write_need.filter(|(_, n)| !n.short()) {
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
        if let Some((_, note)) = &queue_check {
            println!("  {note}");
        }
        for f in &findings {
            println!("  ✗ {}", f.message);
            if !f.examples.is_empty() {
                println!("      e.g. {}", f.examples.join("; "));
            }
        }
    }
    Ok(if findings.is_empty() {
        Outcome::Success
    } else {
        Outcome::Findings
    })
}

/// Findings that speak of the shard attribute, which the queue layout does not use.
const SHARD_FINDINGS: [&str; 3] = ["ttl_without_shard", "shard_out_of_range", "shard_invalid"];

/// Entries read to check them against their items.
const QUEUE_SAMPLE: u32 = 1000;

/// The expiry queue's problems (the stream, the queue table) and one line on the indexer and a
/// sample of entries checked against their items.
async fn queue_doctor(
    dynamo: &precise_ttl_dynamodb::Dynamo,
    table: &str,
    queue: &str,
    layout: &precise_ttl_core::TtlLayout,
    args: &DoctorArgs,
) -> anyhow::Result<(Vec<Finding>, String)> {
    let checkpoints = &args.indexer.indexer_checkpoint_table;
    let parts = parts(dynamo, table, queue, checkpoints).await?;
    let problems = parts
        .problems(table, queue)
        .into_iter()
        .map(|(kind, message)| Finding {
            kind,
            count: 1,
            examples: vec![],
            message,
        })
        .collect();
    let mut note = parts.describe(dynamo.store_clock.now().as_secs_f64());
    if parts.queue_present {
        let key_names = precise_ttl_dynamodb::TableShape::require(dynamo, table)
            .await?
            .key_names();
        let q = QueueTable::new(dynamo.clone(), queue);
        let s = q
            .sample(table, &layout.ttl_attribute, &key_names, QUEUE_SAMPLE)
            .await?;
        note += &format!(
            "; of {} queue entries read, {} have their item with that TTL, {} an item gone and {} an item whose TTL changed (harmless: the sweeper removes them without touching the item){}",
            s.entries,
            s.live,
            s.item_gone,
            s.ttl_changed,
            match s.unread {
                0 => String::new(),
                n => format!(", {n} not read"),
            }
        );
    }
    Ok((problems, note))
}

/// The one line for an index whose provisioned writes fall short of the measured need, with
/// the figures and the fix.
fn write_need_message(
    table: &str,
    index: &str,
    provisioned: IndexCapacity,
    need: &WriteNeed,
) -> String {
    let at_least = if need.lower_bound { "at least " } else { "" };
    format!(
        "the expiry index {index:?} has {} write units/s provisioned, but the next minute's expirations ({at_least}{:.1}/s, counted in the index) need {at_least}~{} (2 per expiring item: its insert into the index and its delete; in steady state as many items are written as expire): the index throttles, and through it the table's writes. Raise it: aws dynamodb update-table --table-name {table} --global-secondary-index-updates '[{{\"Update\":{{\"IndexName\":\"{index}\",\"ProvisionedThroughput\":{{\"ReadCapacityUnits\":{},\"WriteCapacityUnits\":{}}}}}}}]', or raise the minimum of its auto scaling target (table/{table}/index/{index})",
        need.provisioned,
        need.expiries_per_s,
        need.to_provision(),
        provisioned.read,
        need.to_provision(),
    )
}
