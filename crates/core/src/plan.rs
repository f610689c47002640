//! What a read or a delete looks at: a window of expiries.

use crate::time::{NATIVE_TTL_MAX_AGE, Timestamp};

/// A range of expiries, bounds included. [`DueWindow::at`] gives the ones due at an instant:
/// `[now − 5 years, now]`.
///
/// Both the index query and the conditional delete use such a window, so the store itself
/// re-checks, at delete time, exactly the rule the query applied. A read-ahead query uses a
/// window that reaches into the future; a delete never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueWindow {
    pub oldest: Timestamp,
    pub until: Timestamp,
}

impl DueWindow {
    pub fn at(now: Timestamp) -> Self {
        DueWindow {
            oldest: now.saturating_sub(NATIVE_TTL_MAX_AGE),
            until: now,
        }
    }

    pub fn between(oldest: Timestamp, until: Timestamp) -> Self {
        DueWindow { oldest, until }
    }

    pub fn contains(&self, t: Timestamp) -> bool {
        self.oldest <= t && t <= self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_matches_native_ttl_verdicts() {
        let now = Timestamp::from_secs(2_000_000_000);
        let w = DueWindow::at(now);
        for t in [now, w.oldest, Timestamp::from_secs(1_900_000_000)] {
            assert!(w.contains(t));
            assert!(crate::Verdict::of_expiry(crate::Expiry::at_instant(t), now).is_due());
        }
        for t in [
            now.saturating_add(std::time::Duration::from_millis(1)),
            Timestamp::from_secs(0),
        ] {
            assert!(!w.contains(t));
            assert!(!crate::Verdict::of_expiry(crate::Expiry::at_instant(t), now).is_due());
        }
    }
}
