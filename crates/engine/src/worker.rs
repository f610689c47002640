//! One worker's run, as `precise-ttl run` and the Lambda handler both make it: the daemon reads
//! the shards its leases allow while the heartbeats run alongside; it stops when the caller's
//! future completes or the lease table fails for good, and the leases are released once the
//! deletes in flight have drained.

use crate::clock::Clock;
use crate::daemon::{Daemon, DaemonError, DaemonReport};
use crate::lease::{LeaseStore, Leases};
use crate::store::ExpiryStore;
use std::future::Future;
use std::sync::Arc;

/// Runs `daemon` until `shutdown`; with `leases`, only on the shards they grant.
pub async fn run_worker<S, C, L>(
    daemon: Daemon<S, C>,
    leases: Option<Arc<Leases<L>>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<DaemonReport, DaemonError>
where
    S: ExpiryStore,
    C: Clock,
    L: LeaseStore,
{
    let daemon = match &leases {
        Some(l) => daemon
            .with_ownership(l.usable())
            .with_unattended(l.unattended()),
        None => daemon,
    };
    let mut beating = leases.map(|l| l.start());
    let lease_failure = beating.as_mut().and_then(|b| b.failure());
    // Kept for the caller: a worker stopped by its lease table failed, it did not finish (a
    // refused `dynamodb:UpdateItem` must end `run` non-zero, as a refused delete does).
    let lease_error = Arc::new(std::sync::Mutex::new(None));
    let stop = {
        let lease_error = Arc::clone(&lease_error);
        async move {
            tokio::select! {
                _ = shutdown => {}
                // A lease table that vanished or refuses access stops the worker, as a fatal
                // store error does.
                e = crate::lease::failed(lease_failure) => {
                    *lease_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
            }
        }
    };
    let report = daemon.run(stop).await;
    if let Some(beating) = beating {
        beating.stop().await;
    }
    let failed = lease_error.lock().unwrap_or_else(|p| p.into_inner()).take();
    match (report, failed) {
        (Ok(_), Some(e)) => Err(DaemonError::Fatal(e)),
        (report, _) => report,
    }
}
