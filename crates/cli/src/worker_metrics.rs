//! `status --metrics-url`: asks a running worker for its `/metrics` page with `http_get`'s plain
//! GET; the page is read by `precise_ttl_engine::metrics_page`.

use crate::args::HealthUrl;
use crate::http_get;
pub use precise_ttl_engine::metrics_page::Admission;
use precise_ttl_engine::metrics_page::parse;
use std::time::Duration;

/// How long one worker may take to answer, connecting included (as `health`'s default).
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// The most of an answer read. A worker's /metrics is tens of kilobytes (histograms, a few series
/// per shard); one this long is not ours, and a cut one would be misread, so it is refused.
const MAX_ANSWER: u64 = 16 * 1024 * 1024;

/// Asks `url` for its page and reads the admission families; the error is one line saying why
/// not (no answer in time, refused, not HTTP, not 200, too long).
pub async fn ask(url: &HealthUrl) -> Result<Admission, String> {
    let answer = tokio::time::timeout(
        TIMEOUT,
        http_get::get(url, "precise-ttl-status", MAX_ANSWER),
    )
    .await
    .map_err(|_| format!("no answer within {TIMEOUT:?}"))?
    .map_err(|e| e.to_string())?;
    if answer.len() as u64 >= MAX_ANSWER {
        return Err(format!(
            "answer longer than {MAX_ANSWER} bytes: not a worker's /metrics"
        ));
    }
    let (status, body) = http_get::parse(&answer).ok_or_else(|| {
        format!(
            "did not answer in HTTP: {:?}",
            http_get::first_line(&answer)
        )
    })?;
    if status != 200 {
        let line = body.lines().next().unwrap_or("").trim();
        return Err(format!("answered {status} {line}").trim_end().to_string());
    }
    Ok(parse(&body))
}
