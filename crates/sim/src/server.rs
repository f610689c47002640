//! The HTTP side: DynamoDB's JSON protocol on `POST /` (the operation named by
//! `X-Amz-Target: DynamoDB_20120810.<Op>`), answered after the latency model's delay, plus
//! `GET /stats` and `GET /deletions?from=N&limit=M` for benches.

use crate::Stats;
use crate::db::{Db, Now};
use crate::error::DbError;
use crate::latency::Latency;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// What the server's tasks share with the handle.
#[derive(Debug)]
pub struct Shared {
    pub db: Mutex<Db>,
    pub latency: Latency,
    /// Where in a call's latency it commits (0: at once, 1: just before answering).
    pub commit_point: f64,
    pub rng: Mutex<fastrand::Rng>,
    pub started: Instant,
    /// The server threads' ids, for their CPU time.
    pub threads: Mutex<Vec<String>>,
    pub request_ids: AtomicU64,
}

impl Shared {
    pub fn db(&self) -> MutexGuard<'_, Db> {
        // A panic while holding the lock leaves the data as it was at that statement; the
        // simulator keeps serving rather than poisoning every later call.
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn latency(&self) -> std::time::Duration {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        self.latency.sample(&mut rng)
    }
}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", post(dynamodb))
        .route("/stats", get(stats))
        .route("/deletions", get(deletions))
        // DynamoDB takes requests of up to 16 MB (a BatchWriteItem of 25 large items).
        .layer(DefaultBodyLimit::max(16 * 1024 * 1024))
        .with_state(shared)
}

const JSON_1_0: &str = "application/x-amz-json-1.0";

async fn dynamodb(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let operation = target
        .strip_prefix("DynamoDB_20120810.")
        .unwrap_or(target)
        .to_string();
    let delay = shared.latency();
    let before = delay.mul_f64(shared.commit_point.clamp(0.0, 1.0));
    if !before.is_zero() {
        tokio::time::sleep(before).await;
    }
    let result = {
        let mut db = shared.db();
        let result = dispatch(&mut db, &operation, &body, Now::current());
        let counts = &mut db.counts;
        *counts.requests.entry(operation.clone()).or_default() += 1;
        if let Err(e) = &result {
            let name = e.type_name().rsplit('#').next().unwrap_or_default();
            *counts.errors.entry(name.to_string()).or_default() += 1;
        }
        result
    };
    let after = delay.saturating_sub(before);
    if !after.is_zero() {
        tokio::time::sleep(after).await;
    }
    let id = shared.request_ids.fetch_add(1, Ordering::Relaxed);
    let (status, body) = match result {
        Ok(body) => (StatusCode::OK, body),
        Err(e) => (
            StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST),
            e.body(),
        ),
    };
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_1_0));
    if let Ok(v) = HeaderValue::from_str(&format!("SIM{id:020}")) {
        h.insert("x-amzn-requestid", v);
    }
    response
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, DbError> {
    serde_json::to_vec(value).map_err(|e| DbError::Internal(e.to_string()))
}

fn dispatch(db: &mut Db, operation: &str, body: &[u8], now: Now) -> Result<Vec<u8>, DbError> {
    use crate::codec::decode;
    match operation {
        "BatchExecuteStatement" => encode(&db.batch_execute_statement(decode(body)?, now)?),
        "Query" => encode(&db.query(decode(body)?, now)?),
        "DeleteItem" => encode(&db.delete_item(decode(body)?, now)?),
        "PutItem" => encode(&db.put_item(decode(body)?, now)?),
        "UpdateItem" => encode(&db.update_item(decode(body)?, now)?),
        "GetItem" => encode(&db.get_item(decode(body)?, now)?),
        "BatchWriteItem" => encode(&db.batch_write_item(decode(body)?, now)?),
        "Scan" => encode(&db.scan(decode(body)?, now)?),
        "ExecuteStatement" => encode(&db.execute_statement(decode(body)?, now)?),
        "DescribeTable" => encode(&db.describe_table(decode(body)?)?),
        "CreateTable" => encode(&db.create_table(decode(body)?, now)?),
        "DeleteTable" => encode(&db.delete_table(decode(body)?)?),
        "UpdateTable" => encode(&db.update_table(decode(body)?, now)?),
        "ListTables" => encode(&db.list_tables(decode(body)?)?),
        "DescribeTimeToLive" => encode(&db.describe_time_to_live(decode(body)?)?),
        "UpdateTimeToLive" => encode(&db.update_time_to_live(decode(body)?)?),
        other => Err(DbError::UnknownOperation(format!(
            "The simulator does not implement the operation {other:?}"
        ))),
    }
}

async fn stats(State(shared): State<Arc<Shared>>) -> Response {
    json_response(&Stats::collect(&shared))
}

/// A number parameter of a query string (`from=10&limit=5`).
fn query_number(uri: &Uri, name: &str) -> Option<usize> {
    uri.query()?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

async fn deletions(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let from = query_number(&uri, "from").unwrap_or(0);
    let limit = query_number(&uri, "limit")
        .unwrap_or(100_000)
        .min(1_000_000);
    let (total, slice) = {
        let db = shared.db();
        (db.log.len(), db.log.slice(from, limit))
    };
    let rows: Vec<serde_json::Value> = slice
        .into_iter()
        .map(|d| match d.sort {
            Some(s) => serde_json::json!([d.at_ms, d.table, d.key, s]),
            None => serde_json::json!([d.at_ms, d.table, d.key]),
        })
        .collect();
    let next = from.min(total) + rows.len();
    json_response(&serde_json::json!({
        "total": total,
        "from": from,
        "next": next,
        "deletions": rows,
    }))
}

fn json_response<T: serde::Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => {
            let mut r = (StatusCode::OK, body).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
