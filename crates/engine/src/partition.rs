//! Which partitions of the expiry index hold the items due in a time range.
//!
//! Our layout has a fixed set: the shard values `0..shards`, each read by its own lane (its own
//! readers and watermark) whatever the time range. The 2022 blog's layout has one partition per
//! time window, so the set moves with the clock: one lane reads the labels of the windows a
//! range touches, from a floor (the durable checkpoint) that rises with the watermark.
//! Both run through the same daemon and sweeper; only this answer differs.

use precise_ttl_core::{DueWindow, Shard, ShardCount, Timestamp, WindowLabel, WindowSpec};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// The largest shard value a writer using any valid shard count can produce.
pub const MAX_SHARD_VALUE: u16 = 1023;

pub trait Partitioning: Send + Sync + 'static {
    /// One partition key value of the index: a shard number or a window label.
    type Partition: Clone + Send + Sync + fmt::Debug + fmt::Display + 'static;

    /// Lanes read independently, each with its own readers and watermark.
    fn lanes(&self) -> usize;

    /// A lane's name in metrics and status.
    fn lane_name(&self, lane: usize) -> String;

    /// The partitions of `lane` that may hold items whose expiry lies in `window`, oldest first.
    fn partitions(&self, lane: usize, window: DueWindow) -> Vec<Self::Partition>;

    /// Partitions outside the layout that writers may still use by mistake (an old, larger shard
    /// count), probed now and then so that nothing is stranded there.
    fn strays(&self) -> Vec<Self::Partition> {
        Vec::new()
    }

    /// Every due item of `lane` with expiry at or before `watermark` is known deleted.
    fn watermark_advanced(&self, _lane: usize, _watermark: Timestamp) {}
}

/// Our layout: lane `i` reads shard `i`.
impl Partitioning for ShardCount {
    type Partition = Shard;

    fn lanes(&self) -> usize {
        usize::from(self.get())
    }

    fn lane_name(&self, lane: usize) -> String {
        lane.to_string()
    }

    fn partitions(&self, lane: usize, _window: DueWindow) -> Vec<Shard> {
        vec![Shard(lane as u16)]
    }

    fn strays(&self) -> Vec<Shard> {
        (self.get()..=MAX_SHARD_VALUE).map(Shard).collect()
    }
}

/// The blog's layout: one lane over the window labels. Reads never reach below the floor, so a
/// range of five years costs the windows since the last checkpoint, not millions of queries; the
/// floor follows the watermark at `lookback` distance, as the blog sweeper's checkpoint did.
#[derive(Debug)]
pub struct Windows {
    spec: WindowSpec,
    lookback: Duration,
    floor: Mutex<Timestamp>,
}

impl Windows {
    /// `floor`: the oldest expiry worth reading (the checkpoint minus `lookback`, or how far
    /// back a first run looks).
    pub fn new(spec: WindowSpec, floor: Timestamp, lookback: Duration) -> Self {
        Windows {
            spec,
            lookback,
            floor: Mutex::new(floor),
        }
    }

    pub fn spec(&self) -> WindowSpec {
        self.spec
    }

    pub fn floor(&self) -> Timestamp {
        *self.floor.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Partitioning for Windows {
    type Partition = WindowLabel;

    fn lanes(&self) -> usize {
        1
    }

    fn lane_name(&self, _lane: usize) -> String {
        "windows".into()
    }

    fn partitions(&self, _lane: usize, window: DueWindow) -> Vec<WindowLabel> {
        let oldest = window.oldest.max(self.floor());
        if oldest > window.until {
            return Vec::new();
        }
        (self.spec.index_of(oldest)..=self.spec.index_of(window.until))
            .map(|i| WindowLabel(self.spec.label(i)))
            .collect()
    }

    fn watermark_advanced(&self, _lane: usize, watermark: Timestamp) {
        let mut floor = self.floor.lock().unwrap_or_else(|p| p.into_inner());
        *floor = (*floor).max(watermark.saturating_sub(self.lookback));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::WindowFormat;

    fn minutes() -> WindowSpec {
        WindowSpec::new(Duration::from_secs(60), WindowFormat::Millis).unwrap()
    }

    #[test]
    fn shards_are_one_lane_each_with_the_rest_as_strays() {
        let shards = ShardCount::new(4).unwrap();
        assert_eq!(shards.lanes(), 4);
        let any = DueWindow::at(Timestamp::from_secs(1_000));
        assert_eq!(shards.partitions(3, any), vec![Shard(3)]);
        let strays = shards.strays();
        assert_eq!(strays.first(), Some(&Shard(4)));
        assert_eq!(strays.last(), Some(&Shard(MAX_SHARD_VALUE)));
    }

    #[test]
    fn windows_cover_the_range_from_the_floor() {
        let t0 = Timestamp::from_secs(1_658_311_200); // 2022-07-20T10:00:00Z
        let w = Windows::new(minutes(), t0, Duration::from_secs(2));
        // Five years back is clamped to the floor: three windows, not millions.
        let due = w.partitions(0, DueWindow::at(Timestamp::from_secs(1_658_311_200 + 150)));
        assert_eq!(
            due.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
            [
                "2022-07-20T10:00:00.000Z_2022-07-20T10:01:00.000Z",
                "2022-07-20T10:01:00.000Z_2022-07-20T10:02:00.000Z",
                "2022-07-20T10:02:00.000Z_2022-07-20T10:03:00.000Z",
            ]
        );
        // A read-ahead range inside one window is one query.
        let ahead = DueWindow::between(
            Timestamp::from_secs(1_658_311_200 + 10),
            Timestamp::from_secs(1_658_311_200 + 15),
        );
        assert_eq!(w.partitions(0, ahead).len(), 1);
        // Entirely below the floor: nothing to read.
        let old = DueWindow::between(Timestamp::from_secs(0), Timestamp::from_secs(100));
        assert!(w.partitions(0, old).is_empty());
    }

    #[test]
    fn the_floor_follows_the_watermark_at_lookback_distance_and_never_falls() {
        let t0 = Timestamp::from_secs(1_000_000);
        let w = Windows::new(minutes(), t0, Duration::from_secs(2));
        w.watermark_advanced(0, Timestamp::from_secs(1_000_100));
        assert_eq!(w.floor(), Timestamp::from_secs(1_000_098));
        w.watermark_advanced(0, Timestamp::from_secs(1_000_050));
        assert_eq!(w.floor(), Timestamp::from_secs(1_000_098));
    }
}
