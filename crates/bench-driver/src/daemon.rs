//! The daemon under test, run as a child process the way users run it, and stopped with SIGTERM
//! as a service manager would. Its command line is the scenario's
//! ([`BenchConfig::run_command`](crate::config::BenchConfig::run_command)): this module only
//! starts, watches and stops processes, so it depends on no scenario type.

use crate::error::BenchError;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct DaemonProcess {
    child: Child,
    /// Where it serves /metrics, from the line it prints at start.
    pub metrics_url: Option<String>,
}

impl DaemonProcess {
    pub fn spawn(mut cmd: Command) -> Result<DaemonProcess, BenchError> {
        let program = cmd.get_program().into();
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| BenchError::DaemonSpawn { program, source })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(i) = line.find("http://") {
                    let _ = url_tx.send(line[i..].trim().to_string());
                }
            }
        });
        let metrics_url = url_rx.recv_timeout(Duration::from_secs(30)).ok();
        Ok(DaemonProcess { child, metrics_url })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails if the daemon already exited.
    pub fn check_running(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait().map_err(BenchError::DaemonIo)? {
            Some(status) => Err(BenchError::DaemonExitedEarly(status)),
            None => Ok(()),
        }
    }

    /// SIGKILL, as a crash: the worker's leases stay until they expire.
    pub fn kill(mut self) -> Result<(), BenchError> {
        let _ = self.child.kill();
        self.child.wait().map_err(BenchError::DaemonIo)?;
        Ok(())
    }

    /// Sends SIGTERM and waits up to 15 s for the exit; returns its status and how long it took.
    pub async fn terminate(mut self) -> Result<(ExitStatus, Duration), BenchError> {
        let stopping = Instant::now();
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // It may have exited meanwhile (ESRCH): the wait below reports how.
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        loop {
            if let Some(status) = self.child.try_wait().map_err(BenchError::DaemonIo)? {
                return Ok((status, stopping.elapsed()));
            }
            if stopping.elapsed() > Duration::from_secs(15) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(BenchError::DaemonHung);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A daemon the run no longer holds (it failed between starting it and stopping it) is killed:
/// it would otherwise outlive the bench, sweeping a table about to be deleted. Once it was
/// stopped and reaped, `kill` signals nothing.
impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Query and delete capacity units, from the daemon's /metrics (`None` if unavailable).
pub async fn scrape_capacity(url: Option<&str>) -> Option<(f64, f64)> {
    capacity_from_metrics(&scrape(url).await?)
}

/// The daemon's /metrics page (`None` if unavailable).
pub async fn scrape(url: Option<&str>) -> Option<String> {
    let url = url?;
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, "metrics"));
    let body = tokio::task::spawn_blocking({
        let host = host.to_string();
        let path = format!("/{path}");
        move || -> std::io::Result<String> {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(&host)?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
            let mut body = String::new();
            s.read_to_string(&mut body)?;
            Ok(body)
        }
    })
    .await
    .ok()?
    .ok()?;
    Some(body)
}

fn capacity_from_metrics(body: &str) -> Option<(f64, f64)> {
    let mut query = 0.0;
    let mut delete = 0.0;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix(precise_ttl_engine::metrics::CAPACITY_UNITS) {
            let value: f64 = rest.rsplit(' ').next()?.parse().ok()?;
            // Every other op is a write: the deletes, and the expiry queue's entry puts.
            if rest.contains("op=\"query\"") {
                query += value / 100.0;
            } else {
                delete += value / 100.0;
            }
        }
    }
    Some((query, delete))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_read_in_hundredths() {
        let name = precise_ttl_engine::metrics::CAPACITY_UNITS;
        let body = format!(
            "{name}{{op=\"query\"}} 150\n{name}{{op=\"delete\"}} 1000\n{name}{{op=\"queue_put\"}} 100\nother 3\n"
        );
        assert_eq!(capacity_from_metrics(&body), Some((1.5, 11.0)));
    }
}
