//! A stop at any moment is clean: SIGTERM to `run` or `archive` while it starts (parsing its
//! flags, connecting, opening the lease table or the stream) ends it in order with exit status
//! 0, as a stop later does.
//!
//! The handlers are installed by the first statement of `main`; before it (the dynamic loader's
//! work) a signal has its default effect, as for any process. So each spawn here waits until
//! the process has its SIGTERM handler (`SigCgt` in /proc/PID/status, which says exactly that
//! and nothing later), then signals it after 0 to 475 ms: from the first instant the claim holds
//! through the start-up of the command.

use crate::support::{delete_table_if_any, endpoint, table_with_index};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Waits until `child` catches SIGTERM (Linux: bit 15 of `SigCgt`). If it exits first, or
/// has no handler after 10 s, it is killed and the test fails saying so.
fn await_sigterm_handler(child: &mut Child) {
    let status = format!("/proc/{}/status", child.id());
    let started = Instant::now();
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            panic!("it exited ({exit}) before it caught SIGTERM");
        }
        let caught = std::fs::read_to_string(&status)
            .ok()
            .and_then(|text| {
                let mask = text.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            .is_some_and(|mask| mask & (1 << (15 - 1)) != 0);
        if caught {
            return;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no SIGTERM handler after 10 s");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// `precise-ttl ARGS` with an empty environment and its output piped, once it has caught
/// SIGTERM (so that a signal sent now meets its handler, not the default action).
fn spawn_caught<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Child {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("precise-ttl"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    await_sigterm_handler(&mut child);
    child
}

/// Spawns `args` `times` times; each is sent SIGTERM as soon as it catches it, plus 25 ms more
/// each time, and must exit 0 within 20 s.
fn stopped_while_starting(args: &[&str], times: u64) {
    for i in 0..times {
        let mut child = spawn_caught(args);
        let delay = Duration::from_millis(25 * i);
        std::thread::sleep(delay);
        crate::support::terminate(&child);
        let stopping = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if stopping.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{} stopped {delay:?} after it caught SIGTERM: {}\nstdout: {}\nstderr: {}",
            args[0],
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_run_starts_exits_0() {
    let table = table_with_index().await;
    let name = table.name.clone();
    tokio::task::spawn_blocking(move || {
        stopped_while_starting(&["run", "--table", &name, "--endpoint-url", endpoint()], 20);
    })
    .await
    .unwrap();
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_archive_starts_exits_0() {
    let table = crate::support::table_with_stream().await;
    let dir = std::env::temp_dir().join(format!("precise-ttl-stop-{:016x}", fastrand::u64(..)));
    let checkpoints = format!("precise-ttl-test-cp-{:08x}", fastrand::u32(..));
    let (name, to) = (table.name.clone(), format!("file://{}", dir.display()));
    let cp = checkpoints.clone();
    tokio::task::spawn_blocking(move || {
        stopped_while_starting(
            &[
                "archive",
                "--table",
                &name,
                "--endpoint-url",
                endpoint(),
                "--to",
                &to,
                "--checkpoint-table",
                &cp,
            ],
            10,
        );
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    delete_table_if_any(&table.dynamo, &checkpoints).await;
}

/// The earliest stop there is: SIGTERM while `main` has not even read its config file (a FIFO
/// here, so the process waits on it, before its flags are parsed and any runtime exists).
/// Caught by the first statement of `main`, it is kept until `run` looks, and `run` ends in
/// order once the file has been read.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_before_the_flags_are_parsed_still_ends_run_in_order() {
    let table = table_with_index().await;
    let dir = std::env::temp_dir().join(format!("precise-ttl-stop-{:016x}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("config.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let name = table.name.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut args = vec![std::ffi::OsString::from("--config"), fifo.clone().into()];
        args.extend(["run", "--table", &name, "--endpoint-url", endpoint()].map(Into::into));
        let mut child = spawn_caught(args);
        crate::support::terminate(&child);
        // Give the signal time to land while the process still waits for its config.
        std::thread::sleep(Duration::from_millis(200));
        if let Some(exit) = child.try_wait().unwrap() {
            panic!("it ended by the signal while it read its config: {exit}");
        }
        // An empty config: opening the FIFO for writing waits for the reader, closing ends it.
        std::fs::write(&fifo, "").unwrap();
        // Bounded: a stop that was lost must fail the test, not hang the run.
        let stopping = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if stopping.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
