//! The backfill against an in-memory table whose shard writes fail on demand.

use super::*;
use precise_ttl_core::{ErrorClass, Shard, ShardCount};
use precise_ttl_dynamodb::item::ItemKey;
use precise_ttl_engine::SystemClock;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

/// One segment of items in a fixed order; a page is `limit` positions of it, of which only the
/// items without a shard come back (as DynamoDB applies a filter after the limit).
#[derive(Clone)]
struct Table {
    keys: Vec<String>,
    shards: Arc<StdMutex<HashMap<String, Shard>>>,
    failing: Arc<StdMutex<HashSet<String>>>,
}

impl Table {
    fn new(n: usize) -> Self {
        Table {
            keys: (0..n).map(|i| format!("k{i}")).collect(),
            shards: Arc::default(),
            failing: Arc::default(),
        }
    }
}

fn key(pk: &str) -> ItemKey {
    ItemKey::new(vec![("pk".to_string(), AttributeValue::S(pk.to_string()))])
}

impl BackfillTable for Table {
    async fn unsharded_page(
        &self,
        _segment: Segment,
        cursor: Option<ScanCursor>,
        limit: u32,
    ) -> Result<ScanPage, StoreError> {
        let from = match cursor.as_ref().and_then(|c| c.get("pos")) {
            Some(AttributeValue::N(n)) => n.parse::<usize>().unwrap(),
            _ => 0,
        };
        let to = (from + limit as usize).min(self.keys.len());
        let sharded = self.shards.lock().unwrap();
        let items = self.keys[from..to]
            .iter()
            .filter(|k| !sharded.contains_key(*k))
            .map(|k| crate::scan::ScannedItem {
                key: key(k),
                ttl: Some(AttributeValue::N("1800000000".into())),
                shard: None,
            })
            .collect();
        Ok(ScanPage {
            items,
            scanned: (to - from) as u64,
            next: (to < self.keys.len())
                .then(|| HashMap::from([("pos".to_string(), AttributeValue::N(to.to_string()))])),
        })
    }

    async fn write(&self, item: &crate::scan::ScannedItem) -> Result<ShardWrite, StoreError> {
        let key = &item.key;
        let shard = ShardCount::new(16)
            .unwrap()
            .shard_for_key(&key.partition_bytes());
        let pk = String::from_utf8(key.partition_bytes()).unwrap();
        if self.failing.lock().unwrap().contains(&pk) {
            return Err(StoreError::new(ErrorClass::Transient, "injected"));
        }
        self.shards.lock().unwrap().insert(pk, shard);
        Ok(ShardWrite::Added)
    }
}

struct Quiet;
impl BackfillProgress for Quiet {}

fn options() -> BackfillOptions {
    BackfillOptions {
        page_size: 3,
        concurrency: 2,
        max_writes_per_second: None,
        backoff: Backoff {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(1),
            max_attempts: 2,
        },
    }
}

fn target() -> BackfillTarget {
    BackfillTarget {
        table: "t".into(),
        ttl_attribute: "ttl".into(),
        shard_attribute: "ttl_shard".into(),
        shards: 16,
        segments: 1,
    }
}

/// A run that nothing stops early.
async fn run_to_the_end(table: &Table, checkpoint: CheckpointFile) -> BackfillReport {
    run(
        table.clone(),
        SystemClock,
        checkpoint,
        options(),
        Arc::new(Quiet),
        std::future::pending(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_page_with_a_failed_write_is_read_again_by_the_resumed_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint.json");
    let table = Table::new(10);
    table.failing.lock().unwrap().insert("k4".into());

    let (checkpoint, _) = CheckpointFile::open(&path, &target(), false).unwrap();
    let first = run_to_the_end(&table, checkpoint).await;
    assert_eq!(first.errors, 1);
    assert!(
        !first.complete,
        "a run that could not write k4 must not call itself complete"
    );
    assert!(!table.shards.lock().unwrap().contains_key("k4"));

    // The store recovers; the same command resumes from the checkpoint and finishes the job.
    table.failing.lock().unwrap().clear();
    let (checkpoint, opened) = CheckpointFile::open(&path, &target(), false).unwrap();
    assert_eq!(
        opened,
        Opened::Resumed {
            done: 0,
            segments: 1
        }
    );
    let second = run_to_the_end(&table, checkpoint).await;
    assert!(second.complete);
    assert_eq!(second.errors, 0);
    let shards = table.shards.lock().unwrap();
    for k in &table.keys {
        assert!(shards.contains_key(k), "{k} has no shard");
    }
    assert!(!path.exists(), "a complete run removes its checkpoint");
}

#[test]
fn a_checkpoint_for_another_target_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint.json");
    let (fresh, _) = CheckpointFile::open(&path, &target(), false).unwrap();
    assert_eq!(fresh.positions(), vec![SegmentPosition::At(None)]);
    let other = BackfillTarget {
        segments: 4,
        ..target()
    };
    assert!(matches!(
        CheckpointFile::open(&path, &other, false),
        Err(BackfillError::OtherTarget { .. })
    ));
    assert!(CheckpointFile::open(&path, &other, true).is_ok());
    std::fs::write(&path, b"not json").unwrap();
    assert!(matches!(
        CheckpointFile::open(&path, &target(), false),
        Err(BackfillError::NotACheckpoint(_))
    ));
}
