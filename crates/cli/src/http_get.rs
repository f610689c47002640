//! One plain HTTP/1.0 GET, without an HTTP client library: `health` asks a daemon's `/healthz`
//! with it, `status --metrics-url` each worker's `/metrics`. HTTP/1.0 without keep-alive keeps it
//! to a request line and reading until the server closes: the server may not answer a 1.0 request
//! in chunks (RFC 9112, 7.1), so the body needs no decoding.

use crate::args::HealthUrl;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends the GET and reads the answer, head and body, until the server closes or `limit` bytes
/// came (the rest is not read). `agent` is the `User-Agent`, so a server's log tells the asker.
pub async fn get(url: &HealthUrl, agent: &str, limit: u64) -> std::io::Result<Vec<u8>> {
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
pub fn parse(answer: &[u8]) -> Option<(u16, String)> {
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
pub fn first_line(answer: &[u8]) -> String {
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
