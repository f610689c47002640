//! A crash loop: the one `precise-ttl run` process is SIGKILLed after a random pause and a new
//! process is started at once, without `--worker-id`, as a supervisor restarting it in place
//! would (systemd's `Restart=always`, a shell loop, a container restarted on its host). Each new
//! process has the default identity, so it must take over its predecessor's shard leases by
//! itself.
//!
//! The loop runs until the last planted TTL, then the last process is left to finish. The report
//! judges each expired item against the kills: an item due while a process ran may wait for that
//! process's kill and the next process's start, but no longer, so what counts is the lag beyond
//! the next kill after the item's TTL.

use precise_ttl_bench::{Expectation, Inputs};
use serde::Serialize;
use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

/// The shortest pause `--kill-every` takes: below it the loop would spend its time starting
/// processes, and the driver's 100 ms tick could not keep the drawn pauses anyway.
pub const MIN_PAUSE: Duration = Duration::from_millis(500);

/// How long each process lives: a pause drawn evenly from `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillEvery {
    pub min: Duration,
    pub max: Duration,
}

/// `--kill-every` syntax: `MIN..MAX` (`2s..5s`), or one duration for a fixed pause.
impl FromStr for KillEvery {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (min, max) = s.split_once("..").unwrap_or((s, s));
        let parse = |d: &str| {
            precise_ttl_core::duration::parse_duration(d).map_err(|e| {
                format!(
                    "{s:?}: {d:?} is not a duration like 2s ({e}); expected MIN..MAX, as 2s..5s"
                )
            })
        };
        let every = KillEvery {
            min: parse(min)?,
            max: parse(max)?,
        };
        if every.min < MIN_PAUSE {
            return Err(format!(
                "{s:?}: the shortest pause is {} ms",
                MIN_PAUSE.as_millis()
            ));
        }
        if every.max < every.min {
            return Err(format!("{s:?}: MAX is shorter than MIN"));
        }
        Ok(every)
    }
}

impl KillEvery {
    fn draw(&self, rng: &mut fastrand::Rng) -> Duration {
        let (min, max) = (self.min.as_millis() as u64, self.max.as_millis() as u64);
        Duration::from_millis(rng.u64(min..=max))
    }
}

/// When the running process is killed next.
#[derive(Debug)]
pub(crate) struct CrashLoop {
    every: KillEvery,
    rng: fastrand::Rng,
    /// No kill at or after this instant (epoch ms): the last TTL.
    until_ms: i64,
    /// When the running process was started, epoch ms.
    started_ms: i64,
    next_kill_ms: i64,
}

impl CrashLoop {
    /// The first process started at `started_ms`; pauses are drawn from `seed`.
    pub(crate) fn new(every: KillEvery, seed: u64, started_ms: i64, until_ms: i64) -> CrashLoop {
        let mut lp = CrashLoop {
            every,
            rng: fastrand::Rng::with_seed(seed),
            until_ms,
            started_ms,
            next_kill_ms: 0,
        };
        lp.restarted(started_ms);
        lp
    }

    /// Whether the running process is to be killed at `now_ms`.
    pub(crate) fn due(&self, now_ms: i64) -> bool {
        now_ms >= self.next_kill_ms && now_ms < self.until_ms
    }

    /// How long the running process has lived at `now_ms`.
    pub(crate) fn lived_ms(&self, now_ms: i64) -> u64 {
        (now_ms - self.started_ms).max(0) as u64
    }

    /// No kill at or after `until_ms` (epoch ms).
    pub(crate) fn end_at(&mut self, until_ms: i64) {
        self.until_ms = until_ms;
    }

    /// A new process was started at `at_ms`: its pause begins.
    pub(crate) fn restarted(&mut self, at_ms: i64) {
        self.started_ms = at_ms;
        self.next_kill_ms = at_ms + self.every.draw(&mut self.rng).as_millis() as i64;
    }
}

/// Percentiles of a set of durations, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Spread {
    pub count: u64,
    pub p50_ms: i64,
    pub p99_ms: i64,
    pub max_ms: i64,
}

impl Spread {
    fn of(mut values: Vec<i64>) -> Option<Spread> {
        values.sort_unstable();
        let last = *values.last()?;
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        Some(Spread {
            count: values.len() as u64,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: last,
        })
    }
}

/// The expired item that waited longest beyond the next kill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Worst {
    pub key: String,
    pub ttl_ms: i64,
    pub lag_ms: i64,
    /// The first kill at or after its TTL (`None`: none came).
    pub next_kill_ms: Option<i64>,
}

/// What the crash loop did and how the deletions fared across it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrashLoopReport {
    pub kill_every_min_ms: u64,
    pub kill_every_max_ms: u64,
    /// SIGKILLs, each followed at once by a new process.
    pub kills: u64,
    /// How long the killed processes lived.
    pub lived: Option<Spread>,
    /// After each kill, how long the new process took to hold every shard (kills after which it
    /// never did, before its own kill or the end, are counted in `never_held_every_shard`).
    pub every_shard_held_after: Option<Spread>,
    pub never_held_every_shard: u64,
    /// Over the deleted `Expire` items: the lag minus the time from the TTL to the next kill
    /// (the whole lag when no kill came after the TTL). At most the restart's own delay when a
    /// new process resumes at once; a new process that must wait out its predecessor's leases
    /// shows that wait here.
    pub lag_beyond_next_kill: Option<Spread>,
    pub worst: Option<Worst>,
    /// `Expire` items whose TTL came before the last kill, and how many of them were seen
    /// deleted before it: what the loop itself got done, whatever the last process did after.
    pub due_before_last_kill: u64,
    pub deleted_before_last_kill: u64,
}

/// Judges every deleted `Expire` item of `inputs` against the kills (epoch ms, in order): how
/// long each killed process had `lived`, and how soon after each kill its successor held every
/// shard (`held_after`). The fleet that ran the loop reads these from its event records
/// ([`FleetReport::judge_crash_loop`](crate::fleet::FleetReport::judge_crash_loop)).
pub(crate) fn report(
    every: KillEvery,
    kills: &[i64],
    lived: Vec<i64>,
    held_after: &[Option<u64>],
    inputs: &Inputs,
) -> CrashLoopReport {
    let mut seen: HashMap<&str, i64> = HashMap::new();
    for r in &inputs.removals {
        let s = seen.entry(r.key.as_str()).or_insert(r.seen_ms);
        *s = (*s).min(r.seen_ms);
    }
    let mut beyond = Vec::new();
    let mut worst: Option<Worst> = None;
    let last_kill = kills.last().copied().unwrap_or(i64::MIN);
    let (mut due_before, mut deleted_before) = (0, 0);
    for p in &inputs.planted {
        let Expectation::Expire { ttl_ms } = p.expect else {
            continue;
        };
        let seen_ms = seen.get(p.key.as_str()).copied();
        if ttl_ms < last_kill {
            due_before += 1;
            deleted_before += u64::from(seen_ms.is_some_and(|s| s < last_kill));
        }
        let Some(seen_ms) = seen_ms else {
            continue;
        };
        let lag = seen_ms - ttl_ms;
        let next_kill = kills.get(kills.partition_point(|k| *k < ttl_ms)).copied();
        let excess = lag - next_kill.map_or(0, |k| k - ttl_ms);
        beyond.push(excess);
        let worse = worst
            .as_ref()
            .is_none_or(|w| excess > w.lag_ms - w.next_kill_ms.map_or(0, |k| k - w.ttl_ms));
        if worse {
            worst = Some(Worst {
                key: p.key.clone(),
                ttl_ms,
                lag_ms: lag,
                next_kill_ms: next_kill,
            });
        }
    }
    CrashLoopReport {
        kill_every_min_ms: every.min.as_millis() as u64,
        kill_every_max_ms: every.max.as_millis() as u64,
        kills: kills.len() as u64,
        lived: Spread::of(lived),
        every_shard_held_after: Spread::of(
            held_after.iter().flatten().map(|&ms| ms as i64).collect(),
        ),
        never_held_every_shard: held_after.iter().filter(|h| h.is_none()).count() as u64,
        lag_beyond_next_kill: Spread::of(beyond),
        worst,
        due_before_last_kill: due_before,
        deleted_before_last_kill: deleted_before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_bench::{Planted, Removal};

    #[test]
    fn kill_every_parses_and_explains_its_mistakes() {
        let e: KillEvery = "2s..5s".parse().unwrap();
        assert_eq!(
            (e.min, e.max),
            (Duration::from_secs(2), Duration::from_secs(5))
        );
        let fixed: KillEvery = "3s".parse().unwrap();
        assert_eq!(fixed.min, fixed.max);
        for bad in ["5s..2s", "x..5s", "2s..", "100ms..1s", "2s...5s"] {
            let err = bad.parse::<KillEvery>().unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn pauses_stay_in_range_and_no_kill_comes_after_the_last_ttl() {
        let every: KillEvery = "2s..5s".parse().unwrap();
        let mut lp = CrashLoop::new(every, 7, 0, 60_000);
        let mut kills = Vec::new();
        for now in (0..70_000).step_by(100) {
            if lp.due(now) {
                let lived = lp.lived_ms(now);
                assert!((2_000..=5_100).contains(&lived), "{lived}");
                kills.push(now);
                lp.restarted(now);
            }
        }
        assert!((12..=30).contains(&kills.len()), "{kills:?}");
        assert!(kills.iter().all(|k| *k < 60_000));
    }

    #[test]
    fn each_item_is_judged_against_the_next_kill() {
        let expire = |key: &str, ttl_ms| Planted {
            key: key.into(),
            expect: Expectation::Expire { ttl_ms },
            shard: None,
            table_partition: None,
        };
        let removal = |key: &str, seen_ms| Removal {
            key: key.into(),
            seen_ms,
        };
        let inputs = Inputs {
            planted: vec![
                expire("a", 1_000),  // deleted before the kill at 3 000: 500 ms lag
                expire("b", 2_900),  // waited for the kill at 3 000, then 700 ms
                expire("c", 5_000),  // after the last kill: its whole lag
                expire("left", 500), // never deleted: not judged here
            ],
            removals: vec![
                removal("a", 1_500),
                removal("b", 3_700),
                removal("b", 3_600),
                removal("c", 5_300),
            ],
            ..Inputs::default()
        };
        let every: KillEvery = "2s..5s".parse().unwrap();
        let r = report(every, &[3_000], vec![3_000], &[Some(400)], &inputs);
        let beyond = r.lag_beyond_next_kill.unwrap();
        assert_eq!(beyond.count, 3);
        assert_eq!(beyond.max_ms, 600);
        assert_eq!(r.worst.unwrap().key, "b");
        assert_eq!(r.never_held_every_shard, 0);
        assert_eq!(r.every_shard_held_after.unwrap().max_ms, 400);
        // a, b and left were due before the kill at 3 000; only a was gone by then.
        assert_eq!((r.due_before_last_kill, r.deleted_before_last_kill), (3, 1));
    }
}
