//! A fault-injecting HTTP proxy in front of DynamoDB Local: throttling and server errors at a
//! configurable rate, slow responses, connection resets, and a switch that takes the store
//! "down" (every connection is dropped) — the failures of real AWS that DynamoDB Local never shows.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Rates in per mille of requests.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    pub throttle: u32,
    pub server_error: u32,
    pub slow: u32,
    pub reset: u32,
    /// Every connection is dropped at once, as if the endpoint were unreachable.
    pub down: bool,
}

#[derive(Default)]
pub struct State {
    throttle: AtomicU32,
    server_error: AtomicU32,
    slow: AtomicU32,
    reset: AtomicU32,
    down: AtomicBool,
    pub injected: AtomicU64,
    pub forwarded: AtomicU64,
}

pub struct FaultProxy {
    pub url: String,
    pub state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    pub async fn start(upstream: &str) -> FaultProxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State::default());
        let task = {
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                while let Ok((conn, _)) = listener.accept().await {
                    let state = Arc::clone(&state);
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        let _ = serve(conn, &upstream, &state).await;
                    });
                }
            })
        };
        FaultProxy { url, state, task }
    }

    pub fn set(&self, f: Faults) {
        set(&self.state, f);
    }
}

pub fn set(state: &State, f: Faults) {
    state.throttle.store(f.throttle, Ordering::SeqCst);
    state.server_error.store(f.server_error, Ordering::SeqCst);
    state.slow.store(f.slow, Ordering::SeqCst);
    state.reset.store(f.reset, Ordering::SeqCst);
    state.down.store(f.down, Ordering::SeqCst);
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

async fn serve(mut client: TcpStream, upstream: &str, state: &State) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut up: Option<(TcpStream, Vec<u8>)> = None;
    loop {
        if state.down.load(Ordering::SeqCst) {
            return Ok(()); // drop the connection
        }
        let Some(request) = read_message(&mut client, &mut buf).await? else {
            return Ok(());
        };
        if state.down.load(Ordering::SeqCst) {
            return Ok(());
        }
        let roll = fastrand::u32(0..1000);
        let t = state.throttle.load(Ordering::SeqCst);
        let e = t + state.server_error.load(Ordering::SeqCst);
        let r = e + state.reset.load(Ordering::SeqCst);
        let s = r + state.slow.load(Ordering::SeqCst);
        if roll < t {
            state.injected.fetch_add(1, Ordering::Relaxed);
            let kind = [
                "ThrottlingException",
                "ProvisionedThroughputExceededException",
                "RequestLimitExceeded",
            ][fastrand::usize(0..3)];
            client
                .write_all(&error_response("400 Bad Request", kind))
                .await?;
            continue;
        }
        if roll < e {
            state.injected.fetch_add(1, Ordering::Relaxed);
            let (status, kind) = if fastrand::bool() {
                ("500 Internal Server Error", "InternalServerError")
            } else {
                ("503 Service Unavailable", "ServiceUnavailable")
            };
            client.write_all(&error_response(status, kind)).await?;
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
        if up.is_none() {
            up = Some((TcpStream::connect(upstream).await?, Vec::new()));
        }
        let (conn, upbuf) = up.as_mut().expect("connected above");
        conn.write_all(&request).await?;
        let Some(response) = read_message(conn, upbuf).await? else {
            return Ok(());
        };
        state.forwarded.fetch_add(1, Ordering::Relaxed);
        client.write_all(&response).await?;
    }
}
