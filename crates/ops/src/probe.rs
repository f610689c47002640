//! Asking a running worker over plain HTTP, without an HTTP client library: `health` asks a
//! daemon's (or the archive's) `/healthz` ([`health`]), `status --metrics-url` each worker's
//! `/metrics` ([`admission`], read by `precise_ttl_engine::metrics_page`). One HTTP/1.0 GET
//! without keep-alive keeps it to a request line and reading until the server closes: the server
//! may not answer a 1.0 request in chunks (RFC 9112, 7.1), so the body needs no decoding.

pub use precise_ttl_engine::metrics_page::Admission;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain `http://` URL, as `health` (and `status --metrics-url`) asks it: where to connect and
/// what to GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthUrl {
    /// `host:port` (an IPv6 host in brackets), as connected to and sent in `Host`.
    pub authority: String,
    /// The path and query, `/healthz` (`health`) or `/metrics` (`status`) when the URL has none.
    pub path: String,
}

impl HealthUrl {
    /// `health --url`: without a path, `/healthz`.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_with_default_path(text, "/healthz")
    }

    /// `default_path` is asked when the URL has no path, and is the examples' path.
    pub fn parse_with_default_path(text: &str, default_path: &str) -> Result<Self, String> {
        let rest = text.strip_prefix("http://").ok_or_else(|| {
            format!("{text:?} is not an http:// URL (e.g. http://127.0.0.1:9464{default_path})")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty()
            || authority.contains(|c: char| c.is_whitespace() || c == '@' || c == '?')
        {
            return Err(format!(
                "{text:?} names no host (e.g. http://127.0.0.1:9464{default_path})"
            ));
        }
        let has_port = match authority.rsplit_once(':') {
            // An IPv6 host is bracketed; a colon inside the brackets is not a port's.
            Some((host, port)) if !port.contains(']') => {
                if host.contains(':') && !host.ends_with(']') {
                    return Err(format!(
                        "{text:?}: put an IPv6 host in brackets (http://[::1]:9464{default_path})"
                    ));
                }
                port.parse::<u16>()
                    .map_err(|_| format!("{text:?}: {port:?} is not a port"))?;
                true
            }
            _ => false,
        };
        let authority = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let path = if path.is_empty() { default_path } else { path };
        Ok(HealthUrl {
            authority,
            path: path.to_string(),
        })
    }
}

impl std::fmt::Display for HealthUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

/// Sends the GET and reads the answer, head and body, until the server closes or `limit` bytes
/// came (the rest is not read). `agent` is the `User-Agent`, so a server's log tells the asker.
async fn get(url: &HealthUrl, agent: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut stream = tokio::net::TcpStream::connect(url.authority.as_str()).await?;
    let request = format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: {agent}\r\nConnection: close\r\n\r\n",
        url.path, url.authority
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.take(limit).read_to_end(&mut answer).await?;
    Ok(answer)
}

/// The status code and the body of an answer; `None` when it is not HTTP.
fn parse(answer: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&*text, ""));
    let status_line = head.lines().next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    Some((status, body.to_string()))
}

/// The first line of an answer that is not HTTP, cut to a length an error message can carry.
fn first_line(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(120)
        .collect()
}

impl HealthUrl {
    /// `path` on the address a daemon listens on (its `--metrics-addr`); an unspecified address
    /// (`0.0.0.0`, `[::]`) is asked on loopback.
    pub fn of_listener(addr: SocketAddr, path: &str) -> Self {
        let ip = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        HealthUrl {
            authority: SocketAddr::new(ip, addr.port()).to_string(),
            path: path.into(),
        }
    }
}

/// How long one worker may take to answer `status --metrics-url`, connecting included (as
/// `health`'s default).
pub const METRICS_TIMEOUT: Duration = Duration::from_secs(2);

/// The most of a `/metrics` answer read. A worker's /metrics is tens of kilobytes (histograms, a
/// few series per shard); one this long is not ours, and a cut one would be misread, so it is
/// refused.
const MAX_METRICS_ANSWER: u64 = 16 * 1024 * 1024;

/// The most of a `/healthz` answer read: a status line, a few headers and its one line.
const MAX_HEALTH_ANSWER: u64 = 64 * 1024;

/// Asks `url` for its `/metrics` page and reads the admission families; the error is one line
/// saying why not (no answer in time, refused, not HTTP, not 200, too long).
pub async fn admission(url: &HealthUrl) -> Result<Admission, String> {
    let answer = tokio::time::timeout(
        METRICS_TIMEOUT,
        get(url, "precise-ttl-status", MAX_METRICS_ANSWER),
    )
    .await
    .map_err(|_| format!("no answer within {METRICS_TIMEOUT:?}"))?
    .map_err(|e| e.to_string())?;
    if answer.len() as u64 >= MAX_METRICS_ANSWER {
        return Err(format!(
            "answer longer than {MAX_METRICS_ANSWER} bytes: not a worker's /metrics"
        ));
    }
    let (status, body) = parse(&answer)
        .ok_or_else(|| format!("did not answer in HTTP: {:?}", first_line(&answer)))?;
    if status != 200 {
        let line = body.lines().next().unwrap_or("").trim();
        return Err(format!("answered {status} {line}").trim_end().to_string());
    }
    Ok(precise_ttl_engine::metrics_page::parse(&body))
}

/// Why `health` found a worker unhealthy, in one line naming the URL asked.
#[derive(Debug, thiserror::Error)]
pub enum Unhealthy {
    #[error("unhealthy: {url} gave no answer within {timeout:?}")]
    NoAnswer { url: HealthUrl, timeout: Duration },
    #[error("unhealthy: {url}: {error}")]
    Unreachable {
        url: HealthUrl,
        error: std::io::Error,
    },
    #[error("unhealthy: {url} did not answer in HTTP: {first_line:?}")]
    NotHttp { url: HealthUrl, first_line: String },
    /// Any status but 200, with the first line of the body (`/healthz` says why there).
    #[error("unhealthy: {url}: {status} {line}")]
    Status {
        url: HealthUrl,
        status: u16,
        line: String,
    },
}

/// Asks `url` (a `/healthz`) once, within `timeout`: the first line of its body when it answers
/// 200.
pub async fn health(url: &HealthUrl, timeout: Duration) -> Result<String, Unhealthy> {
    let answer = tokio::time::timeout(timeout, get(url, "precise-ttl-health", MAX_HEALTH_ANSWER))
        .await
        .map_err(|_| Unhealthy::NoAnswer {
            url: url.clone(),
            timeout,
        })?
        .map_err(|error| Unhealthy::Unreachable {
            url: url.clone(),
            error,
        })?;
    let (status, body) = parse(&answer).ok_or_else(|| Unhealthy::NotHttp {
        url: url.clone(),
        first_line: first_line(&answer),
    })?;
    let line = body.lines().next().unwrap_or("").trim().to_string();
    match status {
        200 => Ok(line),
        _ => Err(Unhealthy::Status {
            url: url.clone(),
            status,
            line,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_and_the_body_are_read() {
        let answer = b"HTTP/1.0 503 Service Unavailable\r\ncontent-length: 28\r\n\r\nstarting: no index read yet\n";
        assert_eq!(
            parse(answer),
            Some((503, "starting: no index read yet\n".into()))
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\n\r\nok\n"),
            Some((200, "ok\n".into()))
        );
        assert_eq!(parse(b"SSH-2.0-OpenSSH_9.2\r\n"), None);
        assert_eq!(parse(b""), None);
    }

    #[test]
    fn an_unspecified_listener_is_asked_on_loopback() {
        let url = HealthUrl::of_listener("0.0.0.0:9464".parse().unwrap(), "/healthz");
        assert_eq!(url.to_string(), "http://127.0.0.1:9464/healthz");
        let url = HealthUrl::of_listener("[::]:9464".parse().unwrap(), "/metrics");
        assert_eq!(url.to_string(), "http://[::1]:9464/metrics");
        let url = HealthUrl::of_listener("10.0.0.5:80".parse().unwrap(), "/healthz");
        assert_eq!(url.to_string(), "http://10.0.0.5:80/healthz");
    }
}

#[cfg(test)]
mod health_url_tests {
    use super::HealthUrl;

    fn parsed(text: &str) -> (String, String) {
        let url = HealthUrl::parse(text).unwrap();
        (url.authority, url.path)
    }

    #[test]
    fn urls_are_split_into_where_to_connect_and_what_to_get() {
        let pair = |a: &str, p: &str| (a.to_string(), p.to_string());
        assert_eq!(
            parsed("http://127.0.0.1:9464/healthz"),
            pair("127.0.0.1:9464", "/healthz")
        );
        assert_eq!(
            parsed("http://localhost:9465"),
            pair("localhost:9465", "/healthz")
        );
        assert_eq!(parsed("http://example"), pair("example:80", "/healthz"));
        assert_eq!(
            parsed("http://[::1]:9464/x?y=1"),
            pair("[::1]:9464", "/x?y=1")
        );
        assert_eq!(parsed("http://[::1]"), pair("[::1]:80", "/healthz"));
    }

    #[test]
    fn what_it_cannot_ask_is_refused_with_the_reason() {
        for (text, says) in [
            ("https://127.0.0.1:9464/healthz", "not an http:// URL"),
            ("127.0.0.1:9464", "not an http:// URL"),
            ("http:///healthz", "names no host"),
            ("http://user@host:1/", "names no host"),
            ("http://127.0.0.1:99999/healthz", "is not a port"),
            ("http://127.0.0.1:x/healthz", "is not a port"),
            ("http://::1:9464/healthz", "brackets"),
        ] {
            let e = HealthUrl::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
