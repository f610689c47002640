//! `precise-ttl health`: asks a running `run` (or `archive`) for its `/healthz` with one plain
//! HTTP/1.0 GET (`precise_ttl_ops::probe`, shared with `status --metrics-url`) and turns the
//! answer into an exit status: 0 for a 200, 1 for anything else (another status, no answer within
//! the timeout, nothing listening). It is the container health check of an image that has no
//! HTTP client (ECS `HealthCheck`, Docker `HEALTHCHECK`).

use crate::wiring::Outcome;
use anyhow::anyhow;
use precise_ttl_flags::HealthArgs;

pub async fn run(args: &HealthArgs) -> anyhow::Result<Outcome> {
    let url = args.target().ok_or_else(|| {
        anyhow!(
            "no address to ask: pass --url http://HOST:PORT/healthz, or --metrics-addr (PRECISE_TTL_METRICS_ADDR) as given to `run`"
        )
    })?;
    let line = precise_ttl_ops::probe::health(&url, args.timeout).await?;
    println!("healthy: {url}: 200 {line}");
    Ok(Outcome::Success)
}
