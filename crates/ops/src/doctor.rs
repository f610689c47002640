//! `doctor`: reads the table (all of it, or a random sample), the expiry index (or the expiry
//! queue) and native TTL, and finds everything that keeps items from being deleted on time, each
//! finding with what to do about it. It returns the findings and the figures; the binary prints
//! them.

use crate::error::OpsError;
use crate::queue::QueueCheck;
use crate::setup::capacity::{self, IndexCapacity, WriteNeed};
use crate::{ScanFilter, ScannedItem, Segment, TableScan};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::TtlLayout;
use precise_ttl_core::diagnose::{Inspected, ShardValue, Tally};
use precise_ttl_core::sizing::ShardAdvice;
use precise_ttl_dynamodb::count::DueCount;
use precise_ttl_dynamodb::item::{ttl_value, type_name};
use precise_ttl_dynamodb::{Dynamo, TableShape};
use precise_ttl_engine::retry::with_backoff;
use precise_ttl_engine::{Clock, SystemClock};
use precise_ttl_stream::queue::QueueTable;
use precise_ttl_stream::queue::inspect::parts;

/// One kind of problem, with how many items have it and a few of their keys.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Finding {
    pub kind: &'static str,
    pub count: u64,
    pub examples: Vec<String>,
    pub message: String,
}

/// What `doctor` reads and how much.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// Read about this many items from random segments instead of the whole table.
    pub sample: Option<u64>,
    /// Parallel Scan segments of a whole-table read.
    pub segments: u32,
    /// Example keys kept per finding.
    pub examples: usize,
    /// The most pages each shard's expiry-rate count reads.
    pub rate_pages: u64,
    /// The stream-queue layout: check the queue instead of the shard index.
    pub queue: Option<QueueCheck>,
}

/// What `doctor` found.
#[derive(Debug, Clone)]
pub struct DoctorReport {
    pub scanned: u64,
    pub with_ttl: u64,
    /// Segments read, of `total_segments` (all of them unless a sample).
    pub sampled_segments: u32,
    pub total_segments: u32,
    /// Native TTL's status and attribute, as DescribeTimeToLive says.
    pub native_ttl_status: String,
    pub native_ttl_attribute: Option<String>,
    /// The queue layout's one line on the stream, the indexer and a sample of entries.
    pub queue_note: Option<String>,
    pub findings: Vec<Finding>,
    /// Shards against the next minute's expiries, when the index could be counted.
    pub advice: Option<ShardAdvice>,
    /// The expiry-rate count over the shards.
    pub counted: DueCount,
    /// A provisioned index's capacity and the write need the count implies.
    pub index_write_need: Option<(IndexCapacity, WriteNeed)>,
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

/// Examines `table`; changes nothing.
pub async fn doctor(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    options: &DoctorOptions,
) -> Result<DoctorReport, OpsError> {
    let layout = layout.clone();
    let queue_check = match &options.queue {
        Some(q) => Some(queue_doctor(dynamo, table, q, &layout).await?),
        None => None,
    };
    let scan = TableScan::open(dynamo.clone(), table, layout.clone()).await?;
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
    let native_ttl_attribute = attribute.clone();
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
    let (total, order): (u32, Vec<u32>) = match options.sample {
        // A sample reads whole random segments of a fine split, so it sees every part of the
        // key space with equal chance rather than the first N items.
        Some(_) => {
            let total = 256;
            let mut order: Vec<u32> = (0..total).collect();
            fastrand::shuffle(&mut order);
            (total, order)
        }
        None => (options.segments, (0..options.segments).collect()),
    };
    let budget = options.sample.unwrap_or(u64::MAX);
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
                tally.inspect(inspected(item), layout.shards, now, options.examples);
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
    for (kind, (count, examples)) in std::mem::take(&mut tally.counts) {
        // The queue layout reads no shard attribute: writers set only the TTL.
        if options.queue.is_some() && SHARD_FINDINGS.contains(&kind) {
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
    // items due in the next minute, per shard, at most `rate_pages` pages each so the read cost
    // stays bounded whatever is due.
    let mut upcoming = Vec::new();
    let mut counted = DueCount::default();
    let mut index_write_need = None;
    if scan
        .shape()
        .expiry_index(&layout)
        .is_ok_and(|i| i.is_some())
    {
        let now = dynamo.store_clock.now();
        let until = now.saturating_add(capacity::RATE_WINDOW);
        for shard in layout.shards.all() {
            let count = crate::status::count_between(
                dynamo,
                table,
                &layout,
                shard,
                now,
                until,
                Some(options.rate_pages),
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
    Ok(DoctorReport {
        scanned: tally.scanned,
        with_ttl: tally.with_ttl,
        sampled_segments,
        total_segments: total,
        native_ttl_status: status,
        native_ttl_attribute,
        queue_note: queue_check.map(|(_, note)| note),
        findings,
        advice,
        counted,
        index_write_need,
    })
}

/// Findings that speak of the shard attribute, which the queue layout does not use.
const SHARD_FINDINGS: [&str; 3] = ["ttl_without_shard", "shard_out_of_range", "shard_invalid"];

/// Entries read to check them against their items.
const QUEUE_SAMPLE: u32 = 1000;

/// The expiry queue's problems (the stream, the queue table) and one line on the indexer and a
/// sample of entries checked against their items.
async fn queue_doctor(
    dynamo: &Dynamo,
    table: &str,
    queue: &QueueCheck,
    layout: &TtlLayout,
) -> Result<(Vec<Finding>, String), OpsError> {
    let checkpoints = &queue.checkpoint_table;
    let queue = queue.queue_table.as_str();
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
        let key_names = TableShape::require(dynamo, table).await?.key_names();
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
