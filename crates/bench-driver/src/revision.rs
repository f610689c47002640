//! The source revision a benchmark ran from, so every artifact can be traced to a commit.

use serde::Serialize;
use std::path::Path;
use std::process::Command;

/// `git rev-parse HEAD` of a checkout, and whether it had uncommitted changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Revision {
    Known {
        commit: String,
        dirty: bool,
    },
    /// Not run from a git checkout (an installed binary whose sources are gone, no git).
    #[serde(serialize_with = "unknown")]
    Unknown,
}

fn unknown<S: serde::Serializer>(s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("unknown")
}

impl Revision {
    /// The revision of the checkout containing `dir`, or [`Revision::Unknown`].
    pub fn of_checkout(dir: &Path) -> Revision {
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let Some(commit) = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty()) else {
            return Revision::Unknown;
        };
        // Untracked files (bench output, scratch) do not change what was built.
        match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) => Revision::Known {
                commit,
                dirty: !changes.is_empty(),
            },
            None => Revision::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_outside_any_checkout_has_an_unknown_revision() {
        let dir = std::env::temp_dir().join(format!("no-git-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Revision::of_checkout(&dir), Revision::Unknown);
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(serde_json::to_value(Revision::Unknown).unwrap(), "unknown");
    }

    #[test]
    fn this_checkout_has_a_commit() {
        // Built from a clone in CI and here; a source tarball without git is Unknown, also fine.
        if let Revision::Known { commit, .. } =
            Revision::of_checkout(Path::new(env!("CARGO_MANIFEST_DIR")))
        {
            assert_eq!(commit.len(), 40, "{commit}");
            let v = serde_json::to_value(Revision::Known {
                commit,
                dirty: true,
            })
            .unwrap();
            assert_eq!(v["dirty"], true);
        }
    }
}
