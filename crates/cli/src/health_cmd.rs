//! `precise-ttl health`: asks a running `run` (or `archive`) for its `/healthz` with one plain
//! HTTP/1.0 GET and turns the answer into an exit status: 0 for a 200, 1 for anything else
//! (another status, no answer within the timeout, nothing listening). It is the container health
//! check of an image that has no HTTP client (ECS `HealthCheck`, Docker `HEALTHCHECK`).

use crate::args::{HealthArgs, HealthUrl};
use crate::wiring::Outcome;
use anyhow::anyhow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most of an answer read: a status line, a few headers and `/healthz`'s one line.
const MAX_ANSWER: u64 = 64 * 1024;

pub async fn run(args: &HealthArgs) -> anyhow::Result<Outcome> {
    let url = match (&args.url, args.metrics_addr) {
        (Some(url), _) => url.clone(),
        (None, Some(addr)) => HealthUrl::of_listener(addr),
        (None, None) => {
            return Err(anyhow!(
                "no address to ask: pass --url http://HOST:PORT/healthz, or --metrics-addr (PRECISE_TTL_METRICS_ADDR) as given to `run`"
            ));
        }
    };
    let answer = tokio::time::timeout(args.timeout, ask(&url))
        .await
        .map_err(|_| anyhow!("unhealthy: {url} gave no answer within {:?}", args.timeout))?
        .map_err(|e| anyhow!("unhealthy: {url}: {e}"))?;
    let (status, line) = parse(&answer).ok_or_else(|| {
        anyhow!(
            "unhealthy: {url} did not answer in HTTP: {:?}",
            first_line(&answer)
        )
    })?;
    if status == 200 {
        println!("healthy: {url}: 200 {line}");
        Ok(Outcome::Success)
    } else {
        Err(anyhow!("unhealthy: {url}: {status} {line}"))
    }
}

/// Sends the GET and reads the answer until the server closes (HTTP/1.0 without keep-alive).
async fn ask(url: &HealthUrl) -> std::io::Result<Vec<u8>> {
    let mut stream = tokio::net::TcpStream::connect(url.authority.as_str()).await?;
    let request = format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: precise-ttl-health\r\nConnection: close\r\n\r\n",
        url.path, url.authority
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.take(MAX_ANSWER).read_to_end(&mut answer).await?;
    Ok(answer)
}

/// The status code and the first line of the body (`/healthz` says why in one line).
fn parse(answer: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&*text, ""));
    let status_line = head.lines().next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    Some((status, body.lines().next().unwrap_or("").trim().to_string()))
}

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
    /// `/healthz` on the address a daemon listens on; an unspecified address (`0.0.0.0`, `[::]`)
    /// is asked on loopback.
    pub fn of_listener(addr: SocketAddr) -> Self {
        let ip = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        HealthUrl {
            authority: SocketAddr::new(ip, addr.port()).to_string(),
            path: "/healthz".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_and_the_bodys_first_line_are_read() {
        let answer = b"HTTP/1.0 503 Service Unavailable\r\ncontent-length: 28\r\n\r\nstarting: no index read yet\n";
        assert_eq!(
            parse(answer),
            Some((503, "starting: no index read yet".into()))
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\n\r\nok\n"),
            Some((200, "ok".into()))
        );
        assert_eq!(parse(b"SSH-2.0-OpenSSH_9.2\r\n"), None);
        assert_eq!(parse(b""), None);
    }

    #[test]
    fn an_unspecified_listener_is_asked_on_loopback() {
        let url = HealthUrl::of_listener("0.0.0.0:9464".parse().unwrap());
        assert_eq!(url.to_string(), "http://127.0.0.1:9464/healthz");
        let url = HealthUrl::of_listener("[::]:9464".parse().unwrap());
        assert_eq!(url.to_string(), "http://[::1]:9464/healthz");
        let url = HealthUrl::of_listener("10.0.0.5:80".parse().unwrap());
        assert_eq!(url.to_string(), "http://10.0.0.5:80/healthz");
    }
}
