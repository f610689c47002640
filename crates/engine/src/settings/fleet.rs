//! How a worker shares a table with others, defined once for `precise-ttl run` and the Lambda:
//! the lease table (`lease-table`, or none with `no-leases`), the lease duration and the
//! worker's name (`worker-id`). Its default name is the host's to give ([`FleetSettings::worker`]):
//! `run` names its process so a restart proves its predecessor dead, the Lambda its execution
//! environment's log stream; either way a name given is used as it is.

use super::lookup::Lookup;
use super::{Invalid, LEASE_DURATION, LEASE_TABLE, Setting, SettingError, lease_duration};
use crate::lease::LeaseConfig;
use std::time::Duration;

pub const WORKER_ID: Setting = Setting {
    name: "worker-id",
    default: None,
    meaning: "This worker's name in the lease table. The default names the process (host, PID, start time, user, boot, PID namespace), so a restart on the same host proves its predecessor dead and takes its leases at once. Set it to a name that stays the same across restarts (a Kubernetes pod's name) or leave it; never give two running workers one name",
};
pub const NO_LEASES: Setting = Setting {
    name: "no-leases",
    default: Some("false"),
    meaning: "Work alone, without leases: every shard, whatever other processes do (deletes stay conditional, so two such processes are safe, only wasteful)",
};

/// A switch's value: `true` or `false`, as `run`'s flags take them from their variables.
pub fn switch(s: &str) -> Result<bool, Invalid> {
    match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Invalid(format!("{s:?} is not true or false"))),
    }
}

/// A worker's fleet settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetSettings {
    /// `None`: no leases (`no-leases`).
    pub lease_table: Option<String>,
    pub lease_duration: Duration,
    /// `None`: the host's default name.
    pub worker_id: Option<String>,
}

impl FleetSettings {
    /// Reads each setting by name from `get` (absent or empty: its default) with its parser.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, SettingError> {
        let get = Lookup(get);
        let no_leases = get.required(NO_LEASES, switch)?;
        Ok(FleetSettings {
            lease_table: (!no_leases)
                .then(|| get.required(LEASE_TABLE, |s| Ok(s.to_string())))
                .transpose()?,
            lease_duration: get.required(LEASE_DURATION, lease_duration)?,
            worker_id: get.given(WORKER_ID),
        })
    }

    /// The worker's name: the one given, else `default`, the host's.
    pub fn worker(&self, default: impl FnOnce() -> String) -> String {
        self.worker_id.clone().unwrap_or_else(default)
    }

    /// The lease settings of `worker` (named by [`FleetSettings::worker`]).
    pub fn lease_config(&self, worker: String) -> LeaseConfig {
        LeaseConfig::new(worker, self.lease_duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Result<FleetSettings, SettingError> {
        let pairs = pairs.to_vec();
        FleetSettings::from_lookup(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn defaults_switches_and_names() {
        let f = from(&[]).unwrap();
        assert_eq!(f.lease_table.as_deref(), LEASE_TABLE.default);
        assert_eq!(f.lease_duration, Duration::from_secs(10));
        assert_eq!(f.worker(|| "host-1".into()), "host-1");
        let f = from(&[("no-leases", "true"), ("worker-id", "pod-0")]).unwrap();
        assert_eq!(f.lease_table, None);
        assert_eq!(f.worker(|| unreachable!()), "pod-0");
        assert_eq!(f.lease_config("w".into()).duration, f.lease_duration);
        for (name, bad) in [
            ("no-leases", "1"),
            ("no-leases", "maybe"),
            ("lease-duration", "1h"),
        ] {
            let e = from(&[(name, bad)]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{name}: ")), "{e}");
        }
    }
}
