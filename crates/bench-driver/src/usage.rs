//! The daemon child's CPU time and peak memory, sampled from /proc while it runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub peak_rss_kb: u64,
}

/// Samples a process every 100 ms until stopped or until it is gone. The last sample before
/// the process exits is the measurement: /proc forgets a process once it is reaped.
#[derive(Debug)]
pub struct UsageSampler {
    usage: Arc<Mutex<Usage>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl UsageSampler {
    pub fn start(pid: u32) -> UsageSampler {
        let usage = Arc::new(Mutex::new(Usage::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let usage = Arc::clone(&usage);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Some(now) = sample(pid) else { break };
                    let mut u = usage.lock().unwrap_or_else(|p| p.into_inner());
                    u.cpu_seconds = u.cpu_seconds.max(now.cpu_seconds);
                    u.peak_rss_kb = u.peak_rss_kb.max(now.peak_rss_kb);
                    drop(u);
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        UsageSampler {
            usage,
            stop,
            thread,
        }
    }

    pub fn stop(self) -> Usage {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        *self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One reading; `None` once the process is gone.
#[cfg(target_os = "linux")]
pub fn sample(pid: u32) -> Option<Usage> {
    let process = procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?;
    let stat = process.stat().ok()?;
    let peak_rss_kb = process.status().ok().and_then(|s| s.vmhwm).unwrap_or(0);
    Some(Usage {
        cpu_seconds: (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64,
        peak_rss_kb,
    })
}

/// Elsewhere there is no /proc: the report shows zero.
#[cfg(not(target_os = "linux"))]
pub fn sample(_pid: u32) -> Option<Usage> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_used_some_memory_and_no_negative_time() {
        let u = sample(std::process::id()).expect("our own /proc entry");
        assert!(u.peak_rss_kb > 0);
        assert!(u.cpu_seconds >= 0.0);
        assert_eq!(sample(u32::MAX), None);
    }
}
