//! This process as the kernel describes it, and the kernel's answer about another process of the
//! same host: what a default worker name holds and what proves its owner dead
//! ([`precise_ttl_core::owner`] decides). Linux only, through `/proc`; elsewhere there is no
//! identity, and leases expire by KCL's rule alone.

use crate::lease::OwnerCheck;
use precise_ttl_core::owner::{ProcessIdentity, ProcessState, proven_dead};

/// This process's identity, read once at start.
#[derive(Debug, Clone)]
pub struct ThisProcess {
    me: ProcessIdentity,
}

impl ThisProcess {
    /// `None` where `/proc` does not say enough (not Linux, `/proc` not mounted).
    pub fn identify(host: &str) -> Option<ThisProcess> {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let pid_namespace = pid_namespace("/proc/self/ns/pid")?;
        let pid = std::process::id();
        let uid = uid_of(pid)?;
        let start = state_of(pid)?.start_ticks;
        Some(ThisProcess {
            me: ProcessIdentity::new(host, boot.trim(), pid_namespace, uid, pid, start),
        })
    }

    pub fn identity(&self) -> &ProcessIdentity {
        &self.me
    }
}

impl OwnerCheck for ThisProcess {
    fn proven_dead(&self, owner: &str) -> bool {
        proven_dead(owner, &self.me, state_of)
    }
}

/// `pid:[4026531836]` → 4026531836.
fn pid_namespace(link: &str) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    let target = target.to_str()?;
    target
        .strip_prefix("pid:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

#[cfg(unix)]
fn uid_of(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

#[cfg(not(unix))]
fn uid_of(_pid: u32) -> Option<u32> {
    None
}

/// The process's state and start time from `/proc/PID/stat`; `None`: no such process.
fn state_of(pid: u32) -> Option<ProcessState> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// Fields after the command name, which is in parentheses and may hold spaces and parentheses
/// itself: state is the first, the start time (clock ticks since boot) the twentieth.
fn parse_stat(stat: &str) -> Option<ProcessState> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?;
    let start_ticks = fields.get(19)?.parse().ok()?;
    Some(ProcessState {
        start_ticks,
        // Z: a zombie, X: dead.
        exited: matches!(*state, "Z" | "X" | "x"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_line_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 300 0 0 0 5 3 0 0 20 0 4 0 \
                    987654 123456 789 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";
        assert_eq!(
            parse_stat(stat),
            Some(ProcessState {
                start_ticks: 987_654,
                exited: false
            })
        );
        let zombie = stat.replace(") S ", ") Z ");
        assert!(parse_stat(&zombie).unwrap().exited);
        assert_eq!(parse_stat("4242 (cut"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_alive_and_an_exited_child_is_proven_dead() {
        let me = ThisProcess::identify("test-host").expect("a Linux /proc");
        assert!(!me.proven_dead(&me.identity().to_string()));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = state_of(pid).unwrap().start_ticks;
        let name = ProcessIdentity {
            pid,
            start_ticks: start,
            ..me.identity().clone()
        }
        .to_string();
        assert!(!me.proven_dead(&name), "running");
        child.kill().unwrap();
        // Killed, not yet reaped: a zombie is dead too.
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(me.proven_dead(&name), "a zombie");
        child.wait().unwrap();
        assert!(me.proven_dead(&name), "reaped");
        let reused = ProcessIdentity {
            start_ticks: start + 1,
            ..me.identity().clone()
        };
        assert!(me.proven_dead(&reused.to_string()), "another start time");
    }
}
