//! The one way [`HideExpired`](crate::HideExpired) fails a request itself: the request already
//! binds a placeholder the interceptor needs to add.

use std::fmt;

/// A request already binds one of the `#precise_ttl_*` / `:precise_ttl_*` placeholders that
/// [`HideExpired`](crate::HideExpired) adds. Merging would change what the caller's expression
/// means, so the request fails before it is sent. The usual cause is a Query or Scan that went
/// through [`hide_expired_query`](crate::hide_expired_query) or
/// [`hide_expired_scan`](crate::hide_expired_scan) as well: use one or the other.
///
/// The SDK hands it back as the source of the call's `SdkError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceholderInUse {
    /// The operation, as DynamoDB names it (`Query`, `GetItem`, ...).
    pub operation: &'static str,
    /// The placeholder the request already binds.
    pub placeholder: String,
}

impl fmt::Display for PlaceholderInUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this {} request already binds {}, a placeholder that precise-ttl's HideExpired \
             interceptor adds to hide expired items; rename the request's placeholder, drop \
             hide_expired_query/hide_expired_scan if the request went through them too, or \
             switch the interceptor off for this call with ShowExpired",
            self.operation, self.placeholder
        )
    }
}

impl std::error::Error for PlaceholderInUse {}
