//! A crash loop on one host (issue 24): `run` SIGKILLed every 2–5 s and started again at once as
//! a new process without `--worker-id`, as systemd's `Restart=always` would, while items expire
//! at a steady rate. Each new process must take its dead predecessor's shard leases at once; one
//! that waits out the lease duration (10 s) outlives no pause and deletes nothing.
//!
//! The loop is `precise-ttl bench --kill-every`: the bench plants the items (and items that must
//! survive: TTLs extended 1–2 s before expiry, far-future TTLs, and the other adversarial kinds),
//! times each deletion from outside by the table's stream, and judges each item against the
//! kills. A kill needs no readiness: SIGKILL at any moment is what a crash is, and the
//! next process starts only after the killed one is reaped.

use crate::support::precise_ttl;
use std::time::Duration;

/// Items expiring over a minute: 75 a second, which DynamoDB Local on two cores carries with
/// room to spare beside the other tests.
const ITEMS: u64 = 4_500;
const SPREAD: &str = "60s";
/// What a restart may add to an item's wait beyond the kill itself: the new process's start,
/// its lease takeover and its first read.
const RESTART_ALLOWANCE_MS: i64 = 2_000;

#[test]
fn a_run_killed_every_few_seconds_and_restarted_on_the_same_host_deletes_every_item_in_time() {
    // Alone, and on a DynamoDB Local of its own: the lag bound is per item, and the other
    // tests' load on the shared instance (or a chaos test beside it) would be measured with it.
    // The instance starts before the test waits for its turn, so that the JVM's start overlaps
    // the wait (nothing is timed until the bench runs).
    let local = precise_ttl_local::DynamoDbLocal::start().expect("DynamoDB Local starts");
    let _alone = crate::support::alone();
    let out = std::env::temp_dir().join(format!("precise-ttl-crash-{:016x}", fastrand::u64(..)));
    let output = precise_ttl()
        .env("PRECISE_TTL_ENDPOINT_URL", local.endpoint())
        .args(["bench", "--items", &ITEMS.to_string(), "--spread", SPREAD])
        .args(["--ttl-granularity", "1s", "--kill-every", "2s..5s"])
        .args(["--raw-items", "0", "--grace", "3s", "--timeout", "30s"])
        // Ten seconds of the loop before the first TTL: the loop is under way when items start
        // expiring, and a load slowed by a busy machine still ends before they do.
        .args(["--idle", "10s"])
        .args(["--name", "crash-loop", "--out", out.to_str().unwrap()])
        .timeout(Duration::from_secs(400))
        .output()
        .expect("bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The bench exits non-zero when items are left or deleted wrongly, and still writes its
    // report: the assertions below say what went wrong.
    let json = std::fs::read_to_string(out.join("crash-loop.json"))
        .unwrap_or_else(|e| panic!("no report ({e}):\n{stdout}\n{stderr}"));
    let summary: serde_json::Value = serde_json::from_str(&json).unwrap();
    let report = &summary["report"];
    let crash = &summary["fleet"]["crash_loop"];
    let counts = &report["counts"];
    let lag = &report["lag"];
    let beyond = &crash["lag_beyond_next_kill"];
    crate::support::artifact(
        "crash-loop-test",
        "crash_loop::a_run_killed_every_few_seconds_and_restarted_on_the_same_host_deletes_every_item_in_time",
        serde_json::json!({
            "items": ITEMS,
            "spread": SPREAD,
            "kill_every": "2s..5s",
            "seed": summary["seed"],
            "argv": summary["argv"],
            "expected": counts["expected_deletions"],
            "deleted": counts["deleted"],
            "left": report["left_behind"]["total"],
            "wrong": report["wrong"].as_array().map_or(0, Vec::len),
            "survivors_planted": counts["survive"],
            "lag": lag,
            "crash_loop": crash,
        }),
    );
    let context = format!(
        "while the loop ran, {} of the {} items due were deleted\n{}\n{stderr}",
        crash["deleted_before_last_kill"],
        crash["due_before_last_kill"],
        stdout.lines().take(60).collect::<Vec<_>>().join("\n")
    );

    let kills = crash["kills"].as_u64().unwrap_or(0);
    assert!(
        kills >= 12,
        "{kills} kills in a minute of 2–5 s pauses\n{context}"
    );
    assert_eq!(counts["deleted"], ITEMS, "deleted\n{context}");
    assert_eq!(report["left_behind"]["total"], 0, "left behind\n{context}");
    assert_eq!(
        report["wrong"],
        serde_json::json!([]),
        "wrong deletions\n{context}"
    );
    // Per item: its lag at most the time from its TTL to the next kill plus the restart's
    // allowance, so never more than the longest pause (5 s) plus the allowance.
    let worst = beyond["max_ms"].as_i64().expect("lags were judged");
    assert!(
        worst <= RESTART_ALLOWANCE_MS,
        "an item waited {worst} ms beyond the next kill: {}\n{context}",
        crash["worst"]
    );
    let max = lag["max_ms"].as_i64().unwrap();
    assert!(
        max <= 5_000 + RESTART_ALLOWANCE_MS,
        "lag max {max} ms\n{context}"
    );
    assert!(output.status.success(), "bench failed\n{context}");
    std::fs::remove_dir_all(&out).ok();
}
