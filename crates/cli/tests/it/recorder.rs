//! A recording HTTP proxy in front of DynamoDB Local or the local S3 server: it notes every
//! request the binary sends (its `X-Amz-Target`, or its S3 method and path, and its JSON body)
//! and can refuse one DynamoDB operation with `AccessDeniedException` as DynamoDB answers it.
//!
//! Why a proxy and not an SDK interceptor: an interceptor would have to live in the product's
//! client code (or in a test-only build of it), while the proxy sees exactly what goes on the
//! wire from the released binary, through every command's real paths, with no product code
//! added; the AWS protocols name the operation in each request (`X-Amz-Target` for DynamoDB and
//! DynamoDB Streams, the method and path for S3).
//!
//! Each request goes upstream on a connection of its own with `Connection: close`, and the
//! answer is read to the end of that connection and passed back the same way: whatever framing
//! the server picks (a length, chunks, a HEAD answer with a length and no body), the answer is
//! whole. Slower than keeping connections, which a test of a few hundred calls does not notice.

use crate::support::{LocalProxy, Serves};
use std::io;
use std::sync::Arc;
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One request as it went on the wire.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path and query, as sent (`/bucket/key`, `/`).
    pub path: String,
    /// `X-Amz-Target` (`DynamoDB_20120810.Query`), empty for S3.
    pub target: String,
    /// The JSON body, `Null` when there is none or it is not JSON.
    pub body: serde_json::Value,
}

impl Request {
    /// The operation's name: after the `X-Amz-Target` prefix (`Query`), or empty for S3.
    pub fn operation(&self) -> &str {
        self.target.rsplit('.').next().unwrap_or_default()
    }
}

#[derive(Default)]
pub struct State {
    seen: Mutex<Vec<Request>>,
    /// The operation answered with AccessDeniedException instead of being forwarded.
    deny: Mutex<Option<String>>,
}

/// The recording proxy: its state is what it saw, and what it refuses.
pub type Recorder = LocalProxy<State>;

impl Recorder {
    /// Every request since the last call, in order.
    pub fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.state.seen.lock().unwrap())
    }

    /// Whether `operation` was requested since the last [`Recorder::take`].
    pub fn saw(&self, operation: &str) -> bool {
        self.state
            .seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.operation() == operation)
    }

    /// From now on, `operation` (`Query`, `GetRecords`) is refused as DynamoDB refuses a call
    /// the caller's policies do not allow.
    pub fn deny(&self, operation: &str) {
        *self.state.deny.lock().unwrap() = Some(operation.to_string());
    }
}

/// Reads one request: its head, then a body of its Content-Length (the SDKs send every body of
/// these services with one); `None` when the client closed the connection.
async fn read_request(conn: &mut TcpStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = header(&head, "content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = conn.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(None);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Ok(Some((head, buf[end + 4..end + 4 + len].to_vec())));
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// The head with its `Connection` header replaced by `Connection: close`.
fn closing(head: &str) -> String {
    let mut out: Vec<&str> = head
        .split("\r\n")
        .filter(|l| {
            !l.split(':')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("connection")
        })
        .collect();
    out.push("Connection: close");
    out.join("\r\n")
}

impl Serves for State {
    async fn serve(mut client: TcpStream, upstream: String, state: Arc<State>) -> io::Result<()> {
        let (upstream, state) = (upstream.as_str(), &*state);
        let Some((head, body)) = read_request(&mut client).await? else {
            return Ok(());
        };
        let mut words = head.split_whitespace();
        let request = Request {
            method: words.next().unwrap_or_default().to_string(),
            path: words.next().unwrap_or_default().to_string(),
            target: header(&head, "x-amz-target").unwrap_or_default(),
            body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        };
        let denied = state.deny.lock().unwrap().as_deref() == Some(request.operation());
        let answer = if denied {
            access_denied(&request)
        } else {
            let mut up = TcpStream::connect(upstream).await?;
            up.write_all(closing(&head).as_bytes()).await?;
            up.write_all(b"\r\n\r\n").await?;
            up.write_all(&body).await?;
            let mut answer = Vec::new();
            up.read_to_end(&mut answer).await?;
            match answer.windows(4).position(|w| w == b"\r\n\r\n") {
                Some(end) => {
                    let head = String::from_utf8_lossy(&answer[..end]).into_owned();
                    let mut out = closing(&head).into_bytes();
                    out.extend_from_slice(&answer[end..]);
                    out
                }
                None => return Ok(()),
            }
        };
        state.seen.lock().unwrap().push(request);
        client.write_all(&answer).await?;
        client.shutdown().await
    }
}

/// DynamoDB's answer to a call no policy allows, byte for byte in shape: HTTP 400, the
/// `com.amazon.coral.service#AccessDeniedException` type and a `Message` in the format of the
/// IAM User Guide's "Troubleshoot access denied error messages" (an implicit deny), naming the
/// action and the resource the request addressed.
fn access_denied(request: &Request) -> Vec<u8> {
    let operation = request.operation();
    let table = request.body["TableName"].as_str().unwrap_or("unknown");
    // A shard iterator starts with its stream's ARN.
    let stream = request.body["StreamArn"].as_str().or_else(|| {
        request.body["ShardIterator"]
            .as_str()
            .and_then(|i| i.split('|').find(|p| p.starts_with("arn:")))
    });
    let resource = match (stream, request.body["IndexName"].as_str()) {
        (Some(arn), _) => arn.to_string(),
        (None, Some(index)) => {
            format!("arn:aws:dynamodb:us-east-1:123456789012:table/{table}/index/{index}")
        }
        (None, None) => format!("arn:aws:dynamodb:us-east-1:123456789012:table/{table}"),
    };
    let body = serde_json::json!({
        "__type": "com.amazon.coral.service#AccessDeniedException",
        "Message": format!(
            "User: arn:aws:sts::123456789012:assumed-role/precise-ttl-test/session is not authorized to perform: dynamodb:{operation} on resource: {resource} because no identity-based policy allows the dynamodb:{operation} action"
        ),
    })
    .to_string();
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: recorder-denied\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
