//! `precise-ttl health`: asks a running `run` (or `archive`) for its `/healthz` with one plain
//! HTTP/1.0 GET and turns the answer into an exit status: 0 for a 200, 1 for anything else
//! (another status, no answer within the timeout, nothing listening). It is the container health
//! check of an image that has no HTTP client (ECS `HealthCheck`, Docker `HEALTHCHECK`). The GET
//! itself is `http_get`'s, shared with `status --metrics-url`.

use crate::args::{HealthArgs, HealthUrl};
use crate::http_get::{first_line, get, parse};
use crate::wiring::Outcome;
use anyhow::anyhow;

/// The most of an answer read: a status line, a few headers and `/healthz`'s one line.
const MAX_ANSWER: u64 = 64 * 1024;

pub async fn run(args: &HealthArgs) -> anyhow::Result<Outcome> {
    let url = match (&args.url, args.metrics_addr) {
        (Some(url), _) => url.clone(),
        (None, Some(addr)) => HealthUrl::of_listener(addr, "/healthz"),
        (None, None) => {
            return Err(anyhow!(
                "no address to ask: pass --url http://HOST:PORT/healthz, or --metrics-addr (PRECISE_TTL_METRICS_ADDR) as given to `run`"
            ));
        }
    };
    let answer = tokio::time::timeout(args.timeout, get(&url, "precise-ttl-health", MAX_ANSWER))
        .await
        .map_err(|_| anyhow!("unhealthy: {url} gave no answer within {:?}", args.timeout))?
        .map_err(|e| anyhow!("unhealthy: {url}: {e}"))?;
    let (status, body) = parse(&answer).ok_or_else(|| {
        anyhow!(
            "unhealthy: {url} did not answer in HTTP: {:?}",
            first_line(&answer)
        )
    })?;
    // `/healthz` says why in its body's first line.
    let line = body.lines().next().unwrap_or("").trim();
    if status == 200 {
        println!("healthy: {url}: 200 {line}");
        Ok(Outcome::Success)
    } else {
        Err(anyhow!("unhealthy: {url}: {status} {line}"))
    }
}
