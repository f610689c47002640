//! `health`'s options, and the URLs it (and `status --metrics-url`) asks: plain `http://` URLs,
//! `precise_ttl_ops::probe`'s [`HealthUrl`].

use clap::Args;
pub use precise_ttl_ops::probe::HealthUrl;
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

impl HealthArgs {
    /// The URL to ask: `--url`, else /healthz on `--metrics-addr`; `None` when neither is given.
    pub fn target(&self) -> Option<HealthUrl> {
        match (&self.url, self.metrics_addr) {
            (Some(url), _) => Some(url.clone()),
            (None, Some(addr)) => Some(HealthUrl::of_listener(addr, "/healthz")),
            (None, None) => None,
        }
    }
}

/// `status --metrics-url`: an `http://` URL (without a path, `/metrics`), or the `HOST:PORT` a
/// worker was given as `--metrics-addr`, asked as `health` asks it.
pub fn metrics_url(text: &str) -> Result<HealthUrl, String> {
    let text = text.trim();
    match text.parse::<std::net::SocketAddr>() {
        Ok(addr) => Ok(HealthUrl::of_listener(addr, "/metrics")),
        Err(_) => HealthUrl::parse_with_default_path(text, "/metrics"),
    }
}

#[cfg(test)]
mod tests {
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
