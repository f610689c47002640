//! `health`'s options, and the plain `http://` URLs it (and `status --metrics-url`) asks.

use clap::Args;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The URL to ask: http://HOST:PORT[/PATH]; without a path, /healthz. Default: /healthz on
    /// --metrics-addr
    #[arg(long, value_name = "URL", value_parser = HealthUrl::parse)]
    pub url: Option<HealthUrl>,

    /// The address `run` serves /metrics and /healthz on (its --metrics-addr, read from the same
    /// PRECISE_TTL_METRICS_ADDR), asked when no --url is given; 0.0.0.0 and [::] are asked on
    /// loopback
    #[arg(long, env = "PRECISE_TTL_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// Longest wait for the answer, connecting included
    #[arg(long, default_value = "2s", value_parser = super::duration)]
    pub timeout: Duration,
}

/// `status --metrics-url`: an `http://` URL (without a path, `/metrics`), or the `HOST:PORT` a
/// worker was given as `--metrics-addr`, asked as `health` asks it.
pub(super) fn metrics_url(text: &str) -> Result<HealthUrl, String> {
    let text = text.trim();
    match text.parse::<std::net::SocketAddr>() {
        Ok(addr) => Ok(HealthUrl::of_listener(addr, "/metrics")),
        Err(_) => HealthUrl::parse_with_default_path(text, "/metrics"),
    }
}

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

    #[test]
    fn a_metrics_url_is_a_url_or_the_address_run_listens_on() {
        let url = |text: &str| super::metrics_url(text).map(|u| u.to_string());
        assert_eq!(
            url("http://10.0.0.5:9464/metrics").unwrap(),
            "http://10.0.0.5:9464/metrics"
        );
        assert_eq!(
            url("http://10.0.0.5:9464").unwrap(),
            "http://10.0.0.5:9464/metrics"
        );
        assert_eq!(
            url("0.0.0.0:9464").unwrap(),
            "http://127.0.0.1:9464/metrics"
        );
        assert_eq!(url("[::1]:9464").unwrap(), "http://[::1]:9464/metrics");
        let e = url("https://10.0.0.5:9464").unwrap_err();
        assert!(e.contains("http://127.0.0.1:9464/metrics"), "{e}");
    }
}
