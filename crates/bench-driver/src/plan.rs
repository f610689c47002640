//! What the bench plants: items expiring during the run, a backlog, and items that must survive
//! (TTL extended before expiry, String / millisecond / negative / too-old / far-future TTL, no
//! TTL, no shard).

use crate::items::{Item, ItemWriter, epoch_seconds};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_bench::{Expectation, Planted};
use precise_ttl_core::Timestamp;
use std::time::Duration;

/// Items that must survive, by kind; a few of each.
pub const ADVERSARIAL_EACH: usize = 5;

/// Items to write, what is expected of each, and which TTLs a writer extends when.
#[derive(Debug, Default)]
pub struct Plan {
    pub writes: Vec<Item>,
    pub planted: Vec<Planted>,
    /// The TTLs a writer pushes an hour later during the run, and when.
    pub extensions: Vec<Extension>,
}

/// One planned TTL extension: `key`'s TTL is pushed an hour later at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    pub at: Timestamp,
    pub key: String,
    /// The item's shard: the index partition the extension rewrites (the physical bound counts
    /// the write there).
    pub shard: Option<u16>,
}

impl Plan {
    /// Plants `key` with a Number TTL at `ttl` on `shard`, to be deleted: as expiring during
    /// the run (`backlog` false) or as already due when it starts.
    fn due(
        &mut self,
        items: &ItemWriter,
        key: String,
        ttl: Timestamp,
        shard: Option<u16>,
        backlog: bool,
    ) {
        self.writes
            .push(items.item(&key, Some(epoch_seconds(ttl)), shard));
        let ttl_ms = ttl.as_millis();
        self.planted.push(Planted {
            key,
            expect: match backlog {
                false => Expectation::Expire { ttl_ms },
                true => Expectation::Backlog { ttl_ms },
            },
            shard,
            table_partition: None,
        });
    }
}

fn survive(key: &str, why: &str) -> Planted {
    Planted {
        key: key.to_string(),
        expect: Expectation::Survive {
            why: why.to_string(),
        },
        shard: None,
        table_partition: None,
    }
}

/// Items with a String TTL: written before the index exists (after, DynamoDB rejects them).
pub fn string_ttls(items: &ItemWriter, now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    for i in 0..ADVERSARIAL_EACH {
        let key = format!("string-ttl-{i}");
        let ttl = AttributeValue::S((now.as_millis() / 1000 - 10).to_string());
        plan.writes
            .push(items.item(&key, Some(ttl), Some(i as u16)));
        plan.planted.push(survive(&key, "string TTL"));
    }
    plan
}

/// What the main load looks like.
#[derive(Debug, Clone, Copy)]
pub struct LoadShape {
    /// Items expiring during the run, their TTLs spread evenly over `spread`.
    pub count: u64,
    pub spread: Duration,
    /// Items already expired.
    pub backlog: u64,
    /// The shard count writers spread over.
    pub shards: u16,
    /// The share of the expiring items written to shard 0 (the hot shard), the rest drawn from
    /// the other shards; `None` (or under two shards): all drawn uniformly. The backlog and the
    /// items that must survive are drawn uniformly either way.
    pub hot_share: Option<f64>,
    /// TTLs are multiples of this: 1 s for writers of whole epoch seconds (every item of a
    /// second due at once), 1 ms for spread-out fractional TTLs.
    pub granularity: Duration,
    /// Items that must survive because a writer extends their TTL 1–2 s before it is due
    /// (`None`: a hundredth of `count`, 10 to 1,000).
    pub extended: Option<u64>,
}

/// The main load `config` asks for, its TTLs from `first` on, seeded by the config's seed.
pub fn for_config(
    config: &crate::BenchConfig,
    items: &ItemWriter,
    now: Timestamp,
    first: Timestamp,
) -> Plan {
    let shape = LoadShape {
        count: config.items,
        spread: config.spread,
        backlog: config.backlog,
        shards: config.layout.shards.get(),
        hot_share: config.hot_shard_share,
        granularity: config.ttl_granularity,
        extended: config.extended,
    };
    main_load(
        items,
        shape,
        now,
        first,
        &mut fastrand::Rng::with_seed(config.seed),
    )
}

/// The main load. `now` is the planning instant; `first` the first expiry; `rng` makes a plan
/// repeatable (two runs with the same seed plant the same TTLs).
pub fn main_load(
    items: &ItemWriter,
    shape: LoadShape,
    now: Timestamp,
    first: Timestamp,
    rng: &mut fastrand::Rng,
) -> Plan {
    let LoadShape {
        count,
        spread,
        backlog,
        shards,
        hot_share,
        granularity,
        extended,
    } = shape;
    let mut plan = Plan::default();
    let mut shard_rng = rng.fork();
    let hot_share = hot_share.filter(|_| shards >= 2);
    // The hot shard's items are spaced evenly through the TTL order (expiring item i is hot
    // when floor((i + 1) × share) passes an integer), so every second of the load sends shard 0
    // its share exactly, not a binomial draw around it; the others are drawn from shards 1... One
    // stream of draws in one order: without a share the plan is that of earlier runs with the
    // same seed.
    let mut shard = move |expiring: Option<u64>| -> Option<u16> {
        match (expiring, hot_share) {
            (Some(i), Some(share)) => {
                let hot = ((i + 1) as f64 * share).floor() > (i as f64 * share).floor();
                Some(if hot { 0 } else { shard_rng.u16(1..shards) })
            }
            _ => Some(shard_rng.u16(0..shards)),
        }
    };
    // Writers that set no shard (the expiry queue's layout) still take the draw, so one seed
    // plants the same TTLs in every layout; the item and the report then have no shard.
    let writes_shards = items.writes_shards;
    let mut shard = move |expiring: Option<u64>| shard(expiring).filter(|_| writes_shards);
    let spread_ms = spread.as_millis().max(1) as f64;
    let step = (granularity.as_millis() as i64).max(1);
    for i in 0..count {
        let key = format!("item-{i:07}");
        let ms = first.as_millis() + (spread_ms * i as f64 / count as f64) as i64 + rng.i64(0..7);
        let ttl = Timestamp::from_millis(ms - ms.rem_euclid(step));
        plan.due(items, key, ttl, shard(Some(i)), false);
    }
    for i in 0..backlog {
        let key = format!("backlog-{i:07}");
        let ttl = now.saturating_sub(Duration::from_millis(10_000 + rng.u64(0..3_600_000)));
        plan.due(items, key, ttl, shard(None), true);
    }
    let extended = extended.unwrap_or((count / 100).clamp(10, 1000));
    for i in 0..extended {
        let key = format!("extended-{i:05}");
        let offset = 2000.0 + (spread_ms - 2000.0).max(0.0) * i as f64 / extended as f64;
        let ttl = Timestamp::from_millis(first.as_millis() + offset as i64);
        let s = shard(None);
        plan.writes
            .push(items.item(&key, Some(epoch_seconds(ttl)), s));
        // Extended one to two seconds before the original expiry.
        let at = ttl.saturating_sub(Duration::from_millis(1000 + rng.u64(0..1000)));
        plan.extensions.push(Extension {
            at,
            key: key.clone(),
            shard: s,
        });
        plan.planted
            .push(survive(&key, "TTL extended 1–2 s before expiry"));
    }
    let six_years = Duration::from_secs(6 * 365 * 86_400);
    let far = first
        .saturating_add(spread)
        .saturating_add(Duration::from_secs(3600));
    for i in 0..ADVERSARIAL_EACH {
        let s = shard(None);
        let mut adversarial = vec![
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
                Some(epoch_seconds(now.saturating_sub(six_years))),
                s,
                "TTL more than 5 years old",
            ),
            (
                format!("far-ttl-{i}"),
                Some(epoch_seconds(far)),
                s,
                "TTL an hour after the last expiring item's",
            ),
            (format!("no-ttl-{i}"), None, s, "no TTL"),
        ];
        // Without shards (the queue's layout) such an item expires like any other.
        if writes_shards {
            adversarial.push((
                format!("no-shard-{i}"),
                Some(epoch_seconds(first)),
                None,
                "no shard attribute",
            ));
        }
        for (key, ttl, shard, why) in adversarial {
            plan.writes.push(items.item(&key, ttl, shard));
            plan.planted.push(survive(&key, why));
        }
    }
    rng.shuffle(&mut plan.writes);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_bench::Expectation;
    use precise_ttl_core::{ShardCount, TtlLayout};

    /// `main_load` of `shape` with `seed`, made at one fixed time for a first TTL `lead`
    /// later: every test's plan.
    fn load(items: &ItemWriter, shape: LoadShape, lead: Duration, seed: u64) -> Plan {
        let now = Timestamp::from_millis(1_800_000_000_000);
        let first = now.saturating_add(lead);
        main_load(
            items,
            shape,
            now,
            first,
            &mut fastrand::Rng::with_seed(seed),
        )
    }

    /// `count` items due in whole seconds over two, and `backlog` already due, on `shards`
    /// shards drawn uniformly.
    fn whole_seconds(count: u64, backlog: u64, shards: u16) -> LoadShape {
        LoadShape {
            count,
            spread: Duration::from_secs(2),
            backlog,
            shards,
            hot_share: None,
            granularity: Duration::from_secs(1),
            extended: None,
        }
    }

    /// 300 items due over three seconds at any millisecond, and 7 already due, on 4 shards.
    fn three_seconds_of_300() -> LoadShape {
        LoadShape {
            count: 300,
            spread: Duration::from_secs(3),
            backlog: 7,
            shards: 4,
            hot_share: None,
            granularity: Duration::from_millis(1),
            extended: None,
        }
    }

    #[test]
    fn the_extended_items_are_as_many_as_asked_or_a_hundredth_of_the_load() {
        let items = ItemWriter::new("pk", &TtlLayout::default());
        let survivors = |shape: LoadShape| {
            let plan = load(&items, shape, Duration::from_secs(5), 7);
            let extended = plan
                .planted
                .iter()
                .filter(|p| matches!(&p.expect, Expectation::Survive { why } if why.starts_with("TTL extended")))
                .count();
            assert_eq!(extended, plan.extensions.len());
            extended
        };
        assert_eq!(survivors(three_seconds_of_300()), 10, "at least 10");
        let more = LoadShape {
            count: 3000,
            ..three_seconds_of_300()
        };
        assert_eq!(survivors(more), 30, "a hundredth");
        for asked in [0, 3] {
            let shape = LoadShape {
                extended: Some(asked),
                ..more
            };
            assert_eq!(survivors(shape), asked as usize);
        }
    }

    #[test]
    fn every_planted_item_is_written_once_with_the_layouts_names() {
        let layout =
            TtlLayout::new("expires_at", "bucket", "idx", ShardCount::new(4).unwrap()).unwrap();
        let items = ItemWriter::new("id", &layout);
        let shape = three_seconds_of_300();
        let plan = load(&items, shape, Duration::from_secs(5), 7);
        assert_eq!(plan.writes.len(), plan.planted.len());
        let expiring = plan
            .planted
            .iter()
            .filter(|p| matches!(p.expect, Expectation::Expire { .. }))
            .count();
        assert_eq!(expiring, 300);
        assert_eq!(plan.extensions.len(), 10);
        for e in &plan.extensions {
            let written = plan
                .writes
                .iter()
                .find(|w| w["id"] == AttributeValue::S(e.key.clone()))
                .unwrap();
            let shard = e.shard.map(|s| AttributeValue::N(s.to_string()));
            assert_eq!(
                written.get("bucket"),
                shard.as_ref(),
                "its shard, for the bound"
            );
        }
        for w in &plan.writes {
            assert!(w.contains_key("id"));
            assert!(
                !w.contains_key("pk") && !w.contains_key("ttl") && !w.contains_key("ttl_shard")
            );
        }
        let with_ttl = plan
            .writes
            .iter()
            .filter(|w| w.contains_key("expires_at"))
            .count();
        assert_eq!(with_ttl, plan.writes.len() - ADVERSARIAL_EACH);
    }

    #[test]
    fn whole_second_ttls_and_one_seed_give_one_plan() {
        let items = ItemWriter::new("pk", &TtlLayout::default());
        let plan = |seed| {
            load(
                &items,
                whole_seconds(200, 0, 4),
                Duration::from_millis(5_300),
                seed,
            )
        };
        let ttls = |p: &Plan| -> Vec<i64> {
            p.planted
                .iter()
                .filter_map(|p| match p.expect {
                    Expectation::Expire { ttl_ms } => Some(ttl_ms),
                    _ => None,
                })
                .collect()
        };
        let a = ttls(&plan(1));
        assert!(a.iter().all(|t| t % 1000 == 0), "whole seconds");
        assert_eq!(a, ttls(&plan(1)));
        assert_eq!(plan(1).writes, plan(1).writes);
    }

    #[test]
    fn a_hot_shard_gets_its_share_of_every_second_and_the_others_the_rest_evenly() {
        let items = ItemWriter::new("pk", &TtlLayout::default());
        let lead = Duration::from_secs(5);
        let uniform = whole_seconds(16_000, 100, 8);
        let shape = LoadShape {
            hot_share: Some(0.1875),
            ..uniform
        };
        let plan = load(&items, shape, lead, 3);
        let mut per_second: std::collections::BTreeMap<i64, [u64; 8]> = Default::default();
        for p in &plan.planted {
            if let Expectation::Expire { ttl_ms } = p.expect {
                per_second.entry(ttl_ms).or_default()[usize::from(p.shard.unwrap())] += 1;
            }
        }
        // Two whole seconds, and the few items the TTL jitter pushes into a third.
        let seconds: Vec<[u64; 8]> = per_second
            .values()
            .copied()
            .filter(|s| s.iter().sum::<u64>() > 1000)
            .collect();
        assert_eq!(seconds.len(), 2, "{per_second:?}");
        for s in &seconds {
            let total: u64 = s.iter().sum();
            // 3 of every 16 items: 1 500 of 8 000, give or take the few the TTL jitter (up to
            // 7 ms) moves over a second's boundary.
            assert!(s[0].abs_diff(total * 3 / 16) <= 15, "{s:?}");
            for other in &s[1..] {
                assert!(other.abs_diff((total - s[0]) / 7) < 150, "{s:?}");
            }
        }
        let backlog_on_0 = plan
            .planted
            .iter()
            .filter(|p| matches!(p.expect, Expectation::Backlog { .. }) && p.shard == Some(0))
            .count();
        assert!(
            backlog_on_0 < 40,
            "the backlog stays uniform: {backlog_on_0}"
        );
        let with_share_none = load(&items, uniform, lead, 3);
        let on_0 = with_share_none
            .planted
            .iter()
            .filter(|p| matches!(p.expect, Expectation::Expire { .. }) && p.shard == Some(0))
            .count();
        assert!((1500..2500).contains(&on_0), "{on_0}");
    }

    #[test]
    fn without_shards_the_same_ttls_are_planted_with_no_shard_and_no_no_shard_items() {
        let layout = TtlLayout::default();
        let now = Timestamp::from_millis(1_800_000_000_000);
        let first = now.saturating_add(Duration::from_secs(5));
        let shape = three_seconds_of_300();
        let plan = |items: &ItemWriter| {
            main_load(items, shape, now, first, &mut fastrand::Rng::with_seed(9))
        };
        let sharded = plan(&ItemWriter::new("pk", &layout));
        let queue = plan(&ItemWriter::new("pk", &layout).without_shards());
        assert!(queue.writes.iter().all(|w| !w.contains_key("ttl_shard")));
        assert!(queue.planted.iter().all(|p| p.shard.is_none()));
        assert!(queue.extensions.iter().all(|e| e.shard.is_none()));
        assert!(!queue.planted.iter().any(|p| p.key.starts_with("no-shard-")));
        let expected = |p: &Plan| -> Vec<(String, Expectation)> {
            p.planted
                .iter()
                .filter(|p| !p.key.starts_with("no-shard-"))
                .map(|p| (p.key.clone(), p.expect.clone()))
                .collect()
        };
        assert_eq!(expected(&sharded), expected(&queue));
        assert_eq!(queue.writes.len(), sharded.writes.len() - ADVERSARIAL_EACH);
    }
}
