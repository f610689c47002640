//! The bench's Lambda mode: instead of `precise-ttl run`, scheduled invocations of the function
//! binary on a [`LocalLambda`], each running `length` and starting `every` apart (shorter than
//! `length`: consecutive invocations overlap, as the deploy template makes them).

use crate::lambda::{Function, InvocationRecord, LocalLambda};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// How the function is scheduled in a bench run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LambdaPlan {
    /// The `precise-ttl-lambda` binary.
    pub program: PathBuf,
    pub invocations: u32,
    /// Each invocation's timeout (it stops a safety margin before).
    pub length: Duration,
    /// Between the starts of consecutive invocations.
    pub every: Duration,
}

/// What the invocations did.
#[derive(Debug, Clone, Serialize)]
pub struct LambdaReport {
    pub invocations: Vec<InvocationRecord>,
    /// When each invocation was started, epoch ms.
    pub starts_ms: Vec<i64>,
    pub length_ms: u64,
    pub every_ms: u64,
    /// The sum of the invocations' `deleted`.
    pub reported_deleted: u64,
    /// Lag of the items due around each boundary: from 2 s before an invocation started to 4 s
    /// after (the overlap, the hand-over and the first reads of the incoming invocation).
    pub boundaries: Vec<BoundaryLag>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct BoundaryLag {
    pub at_ms: i64,
    pub items: u64,
    pub p99_ms: i64,
    pub max_ms: i64,
}

pub(crate) struct LambdaRun {
    plan: LambdaPlan,
    lambda: LocalLambda,
    started: Vec<i64>,
    first_ms: i64,
}

impl LambdaRun {
    pub(crate) fn new(plan: LambdaPlan, function: Function, first_ms: i64) -> LambdaRun {
        LambdaRun {
            lambda: LocalLambda::new(Function {
                program: plan.program.clone(),
                ..function
            }),
            plan,
            started: Vec::new(),
            first_ms,
        }
    }

    /// Starts the invocations due at `now_ms`.
    pub(crate) async fn tick(&mut self, now_ms: i64) -> std::io::Result<()> {
        let k = self.started.len() as u32;
        if k < self.plan.invocations
            && now_ms >= self.first_ms + (self.plan.every * k).as_millis() as i64
        {
            self.started.push(now_ms);
            self.lambda
                .invoke(serde_json::json!({}), self.plan.length)
                .await?;
        }
        Ok(())
    }

    /// Waits for the invocations still running, stops the environments, and reports (without
    /// the boundaries' lag: [`fill_boundaries`] once the lags are known).
    pub(crate) async fn finish(self) -> LambdaReport {
        let records = self
            .lambda
            .shut_down(self.plan.length + Duration::from_secs(2))
            .await;
        let reported_deleted = records
            .iter()
            .filter_map(|r| r.result.as_ref().ok()?["deleted"].as_u64())
            .sum();
        LambdaReport {
            invocations: records,
            starts_ms: self.started,
            length_ms: self.plan.length.as_millis() as u64,
            every_ms: self.plan.every.as_millis() as u64,
            reported_deleted,
            boundaries: Vec::new(),
        }
    }
}

/// The lag of the items due around each boundary, from each expired item's TTL and lag.
pub(crate) fn fill_boundaries(report: &mut LambdaReport, lags: &[(i64, i64)]) {
    report.boundaries = report
        .starts_ms
        .iter()
        .skip(1)
        .map(|&at| {
            let mut window: Vec<i64> = lags
                .iter()
                .filter(|(ttl, _)| (at - 2_000..at + 4_000).contains(ttl))
                .map(|(_, lag)| *lag)
                .collect();
            window.sort_unstable();
            let p99 = window
                .get(((window.len().max(1) - 1) as f64 * 0.99).round() as usize)
                .copied()
                .unwrap_or(0);
            BoundaryLag {
                at_ms: at,
                items: window.len() as u64,
                p99_ms: p99,
                max_ms: window.last().copied().unwrap_or(0),
            }
        })
        .collect();
}
