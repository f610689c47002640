//! A fault-injecting HTTP proxy in front of DynamoDB Local: throttling and server errors at a
//! configurable rate, slow responses, connection resets, and a switch that takes the store
//! "down" (every connection is dropped), and statements of a batch left unprocessed — the
//! failures of real AWS that DynamoDB Local never shows.

use crate::support::{LocalProxy, Serves};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Rates in per mille of requests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    pub throttle: u32,
    pub server_error: u32,
    pub slow: u32,
    pub reset: u32,
    /// Per statement of a `BatchExecuteStatement`: the statement is taken out of the request
    /// before it reaches the store and answered with a per-statement `ThrottlingError`, as real
    /// DynamoDB does for the statements it did not process.
    pub unprocessed: u32,
    /// Every connection is dropped at once, as if the endpoint were unreachable.
    pub down: bool,
    /// Every `BatchExecuteStatement` is refused with `AccessDeniedException`, as for a role
    /// that may `DeleteItem` but not `PartiQLDelete`.
    pub refuse_partiql: bool,
    /// Every `BatchExecuteStatement` is answered `500 InternalServerError`, as by a DynamoDB
    /// implementation without PartiQL.
    pub partiql_500: bool,
    /// Seconds added to the `Date` header of every answer: -5 makes the store's clock look 5 s
    /// behind this host's, as if this host's clock ran 5 s ahead.
    pub date_shift_secs: i64,
    /// Every `UpdateItem` and `PutItem` on the table of this name is throttled (reads pass): a
    /// lease table without the write capacity the heartbeats need.
    pub throttle_writes_to: Option<&'static str>,
}

#[derive(Default)]
pub struct State {
    /// The faults injected now: one value, swapped whole by [`set`], so that a request sees
    /// one setting or the next, never half of each.
    faults: std::sync::Mutex<Faults>,
    pub unprocessed_statements: AtomicU64,
    pub injected: AtomicU64,
    pub forwarded: AtomicU64,
}

impl State {
    fn faults(&self) -> Faults {
        *self.faults.lock().unwrap()
    }
}

/// The fault proxy: its state is the faults it injects, and what it counted.
pub type FaultProxy = LocalProxy<State>;

impl FaultProxy {
    pub fn set(&self, f: Faults) {
        set(&self.state, f);
    }
}

pub fn set(state: &State, f: Faults) {
    *state.faults.lock().unwrap() = f;
}

/// Reads one HTTP/1.1 message (head and Content-Length body); `None` at end of stream.
async fn read_message(conn: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<Vec<u8>>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let total = end + 4 + len;
            while buf.len() < total {
                let mut chunk = [0u8; 16384];
                let n = conn.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(None);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Ok(Some(buf.drain(..total).collect()));
        }
        let mut chunk = [0u8; 16384];
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn error_response(status: &str, kind: &str) -> Vec<u8> {
    let body = format!(
        "{{\"__type\":\"com.amazonaws.dynamodb.v20120810#{kind}\",\"message\":\"injected by the test proxy\"}}"
    );
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: injected\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers `client` with the error `kind` (HTTP `status`) instead of forwarding its request:
/// one injected fault.
async fn inject(client: &mut TcpStream, state: &State, status: &str, kind: &str) -> io::Result<()> {
    state.injected.fetch_add(1, Ordering::Relaxed);
    client.write_all(&error_response(status, kind)).await
}

impl Serves for State {
    async fn serve(mut client: TcpStream, upstream: String, state: Arc<State>) -> io::Result<()> {
        let (upstream, state) = (upstream.as_str(), &*state);
        let mut buf = Vec::new();
        let mut up: Option<(TcpStream, Vec<u8>)> = None;
        loop {
            if state.faults().down {
                return Ok(()); // drop the connection
            }
            let Some(request) = read_message(&mut client, &mut buf).await? else {
                return Ok(());
            };
            // One setting for the whole request, read once it has come.
            let faults = state.faults();
            if faults.down {
                return Ok(());
            }
            let batch = target(&request).ends_with("BatchExecuteStatement");
            if faults.refuse_partiql && batch {
                inject(
                    &mut client,
                    state,
                    "400 Bad Request",
                    "AccessDeniedException",
                )
                .await?;
                continue;
            }
            if faults.partiql_500 && batch {
                let (status, kind) = ("500 Internal Server Error", "InternalServerError");
                inject(&mut client, state, status, kind).await?;
                continue;
            }
            if let Some(table) = faults.throttle_writes_to {
                let op = target(&request);
                let named = format!("\"TableName\":\"{table}\"");
                if (op.ends_with("UpdateItem") || op.ends_with("PutItem"))
                    && String::from_utf8_lossy(&request).contains(&named)
                {
                    let kind = "ProvisionedThroughputExceededException";
                    inject(&mut client, state, "400 Bad Request", kind).await?;
                    continue;
                }
            }
            let roll = fastrand::u32(0..1000);
            let t = faults.throttle;
            let e = t + faults.server_error;
            let r = e + faults.reset;
            let s = r + faults.slow;
            if roll < t {
                let kind = [
                    "ThrottlingException",
                    "ProvisionedThroughputExceededException",
                    "RequestLimitExceeded",
                ][fastrand::usize(0..3)];
                inject(&mut client, state, "400 Bad Request", kind).await?;
                continue;
            }
            if roll < e {
                let (status, kind) = if fastrand::bool() {
                    ("500 Internal Server Error", "InternalServerError")
                } else {
                    ("503 Service Unavailable", "ServiceUnavailable")
                };
                inject(&mut client, state, status, kind).await?;
                continue;
            }
            if roll < r {
                state.injected.fetch_add(1, Ordering::Relaxed);
                return Ok(()); // reset before answering
            }
            if roll < s {
                state.injected.fetch_add(1, Ordering::Relaxed);
                // Longer than any attempt timeout the tests configure.
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            let rate = faults.unprocessed;
            let (request, held_back) = if rate > 0 && batch {
                hold_back_statements(&request, rate)
            } else {
                (request, Vec::new())
            };
            state
                .unprocessed_statements
                .fetch_add(held_back.len() as u64, Ordering::Relaxed);
            if !held_back.is_empty() && request.is_empty() {
                // Every statement held back: answer without asking the store.
                let responses = vec![unprocessed_entry(); held_back.len()];
                let body = serde_json::json!({ "Responses": responses }).to_string();
                client
                    .write_all(&with_body(&ok_head(), body.as_bytes()))
                    .await?;
                continue;
            }
            if up.is_none() {
                up = Some((TcpStream::connect(upstream).await?, Vec::new()));
            }
            let (conn, upbuf) = up.as_mut().expect("connected above");
            conn.write_all(&request).await?;
            let Some(mut response) = read_message(conn, upbuf).await? else {
                return Ok(());
            };
            state.forwarded.fetch_add(1, Ordering::Relaxed);
            if !held_back.is_empty() {
                response = splice_unprocessed(&response, &held_back);
            }
            let shift = faults.date_shift_secs;
            if shift != 0 {
                response = shift_date(&response, shift);
            }
            client.write_all(&response).await?;
        }
    }
}

fn split(message: &[u8]) -> (&[u8], &[u8]) {
    let end = message
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete message");
    (&message[..end], &message[end + 4..])
}

fn target(request: &[u8]) -> String {
    let (head, _) = split(request);
    String::from_utf8_lossy(head)
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("x-amz-target")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default()
}

/// The message's head with a new body: Content-Length rewritten, checksums dropped (DynamoDB
/// Local does not verify request signatures, and the body no longer matches any checksum).
fn with_body(head: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(head).split("\r\n") {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if name == "content-length" || name == "x-amz-crc32" {
            continue;
        }
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

fn ok_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: injected"
        .to_vec()
}

fn unprocessed_entry() -> serde_json::Value {
    serde_json::json!({
        "Error": { "Code": "ThrottlingError", "Message": "held back by the test proxy" }
    })
}

/// Takes a share of the statements out of a `BatchExecuteStatement` request. Returns the new
/// request (empty when every statement was held back) and the held-back positions.
fn hold_back_statements(request: &[u8], rate: u32) -> (Vec<u8>, Vec<usize>) {
    let (head, body) = split(request);
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (request.to_vec(), Vec::new());
    };
    let Some(statements) = json["Statements"].as_array_mut() else {
        return (request.to_vec(), Vec::new());
    };
    let mut held_back = Vec::new();
    let mut kept = Vec::new();
    for (i, statement) in statements.drain(..).enumerate() {
        if fastrand::u32(0..1000) < rate {
            held_back.push(i);
        } else {
            kept.push(statement);
        }
    }
    if kept.is_empty() {
        return (Vec::new(), held_back);
    }
    *statements = kept;
    (with_body(head, json.to_string().as_bytes()), held_back)
}

/// Puts an unprocessed entry back at each held-back position of the store's answer.
fn splice_unprocessed(response: &[u8], held_back: &[usize]) -> Vec<u8> {
    let (head, body) = split(response);
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return response.to_vec(); // an error answer for the whole request: pass it on
    };
    let Some(responses) = json["Responses"].as_array_mut() else {
        return response.to_vec();
    };
    for &i in held_back {
        let at = i.min(responses.len());
        responses.insert(at, unprocessed_entry());
    }
    with_body(head, json.to_string().as_bytes())
}

/// The answer with its `Date` header moved by `shift` seconds.
fn shift_date(response: &[u8], shift: i64) -> Vec<u8> {
    let (head, body) = split(response);
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(head).split("\r\n") {
        let shifted = line
            .split_once(':')
            .filter(|(name, _)| name.eq_ignore_ascii_case("date"))
            .and_then(|(_, value)| httpdate::parse_http_date(value.trim()).ok())
            .map(|t| {
                let moved = if shift < 0 {
                    t - Duration::from_secs(shift.unsigned_abs())
                } else {
                    t + Duration::from_secs(shift as u64)
                };
                format!("Date: {}", httpdate::fmt_http_date(moved))
            });
        out.extend_from_slice(shifted.as_deref().unwrap_or(line).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}
