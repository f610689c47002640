//! Which of the heavy tests (the crash loop, the archive crash test, the chaos scenarios, the
//! recovery test, the simulated bench) may run beside one another.

/// Which of the heavy tests may run at once. The crash loop (a per-item lag bound on a DynamoDB
/// Local of its own) and the simulated bench (both cores busy) each run [`alone`]: beside either,
/// another heavy test would be measured with it. The chaos scenarios, the recovery test and the
/// archive crash test take it [`shared`]: none of them bounds a latency that the others' load
/// decides (each chaos scenario runs at most two daemons, as other tests do beside them, and the
/// archive crash test checks what was archived, not when), so they need not wait for one another,
/// only for the tests that run alone. A test waiting here holds one of the test threads, so
/// every pair excluded without need lengthens the run; `scripts/test` (CI) runs the two that
/// run alone after all the others, so that no test waits here there.
static HEAVY: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Held for a whole test that must run with no other heavy test beside it (the two that do are
/// the bench's, in the binary only with the `bench` feature; `scripts/test` names them).
#[cfg(feature = "bench")]
pub fn alone() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    HEAVY.blocking_write()
}

/// Held for a whole heavy test that may run beside the other shared ones.
pub async fn shared() -> tokio::sync::RwLockReadGuard<'static, ()> {
    HEAVY.read().await
}

/// [`shared`], for a test without a runtime.
pub fn shared_blocking() -> tokio::sync::RwLockReadGuard<'static, ()> {
    HEAVY.blocking_read()
}
