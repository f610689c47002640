//! The processes of the crash test: `precise-ttl` started on our own DynamoDB Local, waited
//! for until it is up, SIGKILLed on a timer and started again, or stopped cleanly at the end.

use super::{KILL_AFTER_MS, START_WITHIN};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, killed (SIGKILL) when dropped, so that a failing test leaves nothing running.
pub(super) struct Proc {
    pub(super) child: Option<Child>,
    /// Its log, and where in it its own output begins (the log is appended to by each process
    /// in turn).
    pub(super) log: PathBuf,
    pub(super) from: u64,
}

impl Proc {
    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("a running process")
    }

    /// Waits until the process has printed `ready` (its start line) into its log. It must not
    /// exit meanwhile.
    pub(super) async fn wait_ready(&mut self, ready: &str) {
        let started = Instant::now();
        loop {
            let text = std::fs::read(&self.log).unwrap_or_default();
            let mine = text
                .get(usize::try_from(self.from).unwrap()..)
                .unwrap_or_default();
            if String::from_utf8_lossy(mine).contains(ready) {
                return;
            }
            if let Some(status) = self.child().try_wait().unwrap() {
                panic!("exited before it was up: {status}\n{}", tail(&self.log));
            }
            assert!(
                started.elapsed() < START_WITHIN,
                "not up after {START_WITHIN:?}: {}",
                tail(&self.log)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops it with SIGTERM, as a service manager does. It must exit cleanly.
    pub(super) async fn terminate(mut self) {
        let mut child = self.child.take().expect("a running process");
        crate::support::terminate(&child);
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status}: {}", tail(&self.log));
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The last lines of a log, for failure messages.
pub(super) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The line a command prints once it is up: `run` once it has its store and leases, `archive`
/// once its stream is open.
pub(super) fn start_line(args: &[String]) -> String {
    format!("precise-ttl {}: table", args[0])
}

/// `precise-ttl ARGS`, pointed at our own DynamoDB Local and nothing else from this environment.
/// Its output is appended to `log`.
pub(super) fn spawn(args: &[String], log: &Path) -> Proc {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let from = out.metadata().unwrap().len();
    let child = Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    Proc {
        child: Some(child),
        log: log.to_path_buf(),
        from,
    }
}

/// Starts `args`, then until `until` SIGKILLs it `KILL_AFTER_MS` after its start, but not before
/// it is up, and starts it again at once. Returns at `until` (or once the last process is up,
/// if later) with the last process, up and running, and how many kills there were.
pub(super) async fn kill_loop(args: Vec<String>, log: PathBuf, until: Instant) -> (Proc, u32) {
    let ready = start_line(&args);
    let mut kills = 0;
    loop {
        let mut proc = spawn(&args, &log);
        let at = Instant::now() + Duration::from_millis(fastrand::u64(KILL_AFTER_MS));
        proc.wait_ready(&ready).await;
        if at >= until {
            // The last process runs to the end of the load, so what falls due meanwhile is
            // due before anyone counts what is left.
            tokio::time::sleep_until(until.into()).await;
            return (proc, kills);
        }
        tokio::time::sleep_until(at.into()).await;
        let child = proc.child();
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{} exited by itself: {status}\n{}", args[0], tail(&log));
        }
        crate::support::signal(child, nix::sys::signal::Signal::SIGKILL);
        let status = child.wait().unwrap();
        assert!(!status.success(), "killed");
        kills += 1;
    }
}

/// `precise-ttl ARGS` to completion against `endpoint`; it must succeed.
pub(super) fn cli(endpoint: &str, args: &[&str]) {
    assert_cmd::Command::cargo_bin("precise-ttl")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PRECISE_TTL_ENDPOINT_URL", endpoint)
        .args(args)
        .timeout(Duration::from_secs(120))
        .assert()
        .success();
}
