//! A worker's default name in the lease table, and what a newcomer on the same host can prove
//! from it: whether the process that holds a lease is still running.
//!
//! KCL's rule (a lease is expired once its counter has not moved for a full lease duration on
//! the taker's clock) is the only one that works across hosts, but it makes a restart on the same
//! host a stranger to the leases its predecessor held: a process restarted every few seconds by
//! a supervisor never watches them for a whole duration, and nothing deletes. So the default
//! name carries enough to look the owner up: host name, kernel boot id, PID namespace, user, PID
//! and the process's start time (clock ticks since boot). A newcomer whose host, boot, PID
//! namespace and user are the same asks the kernel about that PID: none running, one that has
//! exited, or one started at another time (the PID was reused) proves the owner dead, and its
//! leases may be taken at once. Anything else (another host or boot, a container with its own
//! PID namespace, another user whose processes may be hidden from us, a name given with
//! `--worker-id`) proves nothing, and the lease expires as before.
//!
//! Pure: the caller reads its own identity and the process table and passes them in.

use std::fmt;
use std::str::FromStr;

/// One running process, as the default worker name spells it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProcessIdentity {
    pub host: String,
    /// The kernel's boot id (a restart of the host gives a new one), shortened.
    pub boot: String,
    /// The inode of the PID namespace: PIDs compare only within one.
    pub pid_namespace: u64,
    pub uid: u32,
    pub pid: u32,
    /// When the process started, in clock ticks since boot: tells a reused PID apart.
    pub start_ticks: u64,
}

/// What the process table says of one PID of the caller's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessState {
    pub start_ticks: u64,
    /// Exited but not yet reaped (a zombie): it deletes nothing any more.
    pub exited: bool,
}

/// Characters of the boot id kept in the name: 48 bits tell two boots of one host apart.
pub const BOOT_ID_CHARS: usize = 12;

impl ProcessIdentity {
    /// `boot_id` as the kernel gives it (a UUID); only its first hex digits are kept.
    pub fn new(
        host: &str,
        boot_id: &str,
        pid_namespace: u64,
        uid: u32,
        pid: u32,
        start_ticks: u64,
    ) -> Self {
        // A '/' would make the name ambiguous; host names never hold one, but a container's
        // may be set to anything.
        let host = host.replace('/', "_");
        let boot = boot_id
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(BOOT_ID_CHARS)
            .collect::<String>()
            .to_ascii_lowercase();
        ProcessIdentity {
            host,
            boot,
            pid_namespace,
            uid,
            pid,
            start_ticks,
        }
    }

    /// Whether `self` and `other` are processes whose PIDs this process can look up and compare:
    /// same host, boot, PID namespace and user.
    fn comparable(&self, other: &ProcessIdentity) -> bool {
        self.host == other.host
            && self.boot == other.boot
            && self.pid_namespace == other.pid_namespace
            && self.uid == other.uid
    }
}

impl fmt::Display for ProcessIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/pid={}/start={}/uid={}/boot={}/pidns={}",
            self.host, self.pid, self.start_ticks, self.uid, self.boot, self.pid_namespace
        )
    }
}

/// The name is not a default worker name (a `--worker-id`, or another program's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAProcessName;

impl FromStr for ProcessIdentity {
    type Err = NotAProcessName;

    fn from_str(s: &str) -> Result<Self, NotAProcessName> {
        let mut parts = s.rsplitn(6, '/');
        let mut field = |key: &str| {
            parts
                .next()
                .and_then(|p| p.strip_prefix(key))
                .and_then(|p| p.strip_prefix('='))
                .map(str::to_string)
                .ok_or(NotAProcessName)
        };
        let number = |v: String| v.parse::<u64>().map_err(|_| NotAProcessName);
        let pid_namespace = number(field("pidns")?)?;
        let boot = field("boot")?;
        let uid = number(field("uid")?)?;
        let start_ticks = number(field("start")?)?;
        let pid = number(field("pid")?)?;
        let host = parts.next().ok_or(NotAProcessName)?.to_string();
        let valid_boot = boot.len() == BOOT_ID_CHARS && boot.chars().all(|c| c.is_ascii_hexdigit());
        if host.is_empty() || !valid_boot {
            return Err(NotAProcessName);
        }
        Ok(ProcessIdentity {
            host,
            boot,
            pid_namespace,
            uid: u32::try_from(uid).map_err(|_| NotAProcessName)?,
            pid: u32::try_from(pid).map_err(|_| NotAProcessName)?,
            start_ticks,
        })
    }
}

/// Whether the process named `owner` is proven not to run any more, as seen by `me`. `lookup`
/// answers for a PID of `me`'s namespace (`None`: no such process) and is asked only when the
/// answer can prove something.
pub fn proven_dead(
    owner: &str,
    me: &ProcessIdentity,
    lookup: impl FnOnce(u32) -> Option<ProcessState>,
) -> bool {
    let Ok(owner) = owner.parse::<ProcessIdentity>() else {
        return false;
    };
    if !me.comparable(&owner) || owner == *me {
        return false;
    }
    match lookup(owner.pid) {
        None => true,
        Some(state) => state.exited || state.start_ticks != owner.start_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn me() -> ProcessIdentity {
        ProcessIdentity::new(
            "web-1",
            "3f1c0e5a-9b2d-4c77-8e11-0a2b3c4d5e6f",
            4026531836,
            1000,
            4242,
            987_654,
        )
    }

    fn other(pid: u32, start: u64) -> ProcessIdentity {
        ProcessIdentity {
            pid,
            start_ticks: start,
            ..me()
        }
    }

    #[test]
    fn the_name_reads_back_and_says_what_it_holds() {
        let id = me();
        assert_eq!(
            id.to_string(),
            "web-1/pid=4242/start=987654/uid=1000/boot=3f1c0e5a9b2d/pidns=4026531836"
        );
        assert_eq!(id.to_string().parse::<ProcessIdentity>(), Ok(id));
    }

    #[test]
    fn names_given_by_hand_prove_nothing() {
        for name in [
            "w1",
            "web-1-4242",
            "pod-7c9f/pid=1",
            "/pid=1/start=2/uid=0/boot=3f1c0e5a9b2d/pidns=4",
            "h/pid=x/start=2/uid=0/boot=3f1c0e5a9b2d/pidns=4",
            "h/pid=1/start=2/uid=0/boot=short/pidns=4",
        ] {
            assert!(name.parse::<ProcessIdentity>().is_err(), "{name}");
            assert!(!proven_dead(name, &me(), |_| None), "{name}");
        }
    }

    #[test]
    fn a_predecessor_that_is_gone_exited_or_replaced_is_dead() {
        let old = other(4100, 900_000).to_string();
        assert!(proven_dead(&old, &me(), |_| None), "no such process");
        let zombie = ProcessState {
            start_ticks: 900_000,
            exited: true,
        };
        assert!(proven_dead(&old, &me(), |_| Some(zombie)));
        let reused = ProcessState {
            start_ticks: 950_000,
            exited: false,
        };
        assert!(proven_dead(&old, &me(), |_| Some(reused)), "PID reused");
        let running = ProcessState {
            start_ticks: 900_000,
            exited: false,
        };
        assert!(!proven_dead(&old, &me(), |_| Some(running)));
    }

    #[test]
    fn only_the_same_host_boot_namespace_and_user_can_judge() {
        let gone = |_| None;
        let elsewhere = [
            ProcessIdentity {
                host: "web-2".into(),
                ..other(1, 1)
            },
            ProcessIdentity {
                boot: "aaaaaaaaaaaa".into(),
                ..other(1, 1)
            },
            ProcessIdentity {
                pid_namespace: 7,
                ..other(1, 1)
            },
            ProcessIdentity {
                uid: 0,
                ..other(1, 1)
            },
        ];
        for owner in elsewhere {
            assert!(!proven_dead(&owner.to_string(), &me(), gone), "{owner}");
        }
        assert!(!proven_dead(&me().to_string(), &me(), gone), "itself");
    }

    proptest! {
        #[test]
        fn every_default_name_reads_back(
            host in "[a-zA-Z0-9._/-]{1,40}",
            boot in "[0-9a-f]{32}",
            ns: u64, uid: u32, pid: u32, start: u64,
        ) {
            let id = ProcessIdentity::new(&host, &boot, ns, uid, pid, start);
            prop_assert_eq!(id.to_string().parse::<ProcessIdentity>(), Ok(id));
        }
    }
}
