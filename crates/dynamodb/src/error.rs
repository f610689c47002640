//! Errors of the adapter, and the mapping of SDK failures onto the engine's [`ErrorClass`].

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use precise_ttl_core::{ErrorClass, ThrottleScope};
use precise_ttl_engine::StoreError;
use thiserror::Error;

/// Error codes DynamoDB uses to ask for less traffic.
const THROTTLING_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
];

/// Error codes that mean "try again" without asking for less traffic.
const TRANSIENT_CODES: &[&str] = &[
    "InternalServerError",
    "InternalFailure",
    "ServiceUnavailable",
    "TransactionConflictException",
    "RequestTimeout",
    // Too many control-plane operations at once (e.g. "only 5 tables with online indexes can be
    // created simultaneously"): `setup` waits and tries again rather than failing.
    "LimitExceededException",
];

const ACCESS_CODES: &[&str] = &[
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "MissingAuthenticationTokenException",
    "ExpiredTokenException",
    "IncompleteSignatureException",
];

#[derive(Debug, Error)]
pub enum AdapterError {
    #[error("table {table:?} was not found at {endpoint}")]
    TableNotFound { table: String, endpoint: String },
    #[error(
        "table {table:?} is not an expiry queue: its key is {found}, the queue's is shard (N) + due (S)"
    )]
    QueueTableKeys { table: String, found: String },
    #[error(
        "table {table:?} has no stream: the expiry queue is fed from it; `precise-ttl setup --index-layout stream-queue` turns one on (NEW_AND_OLD_IMAGES)"
    )]
    NoStream { table: String },
    #[error(
        "table {table:?}'s stream carries no new images ({view}): the expiry queue needs NEW_AND_OLD_IMAGES (or NEW_IMAGE). A stream's view type cannot be changed in place: disable it (aws dynamodb update-table --table-name {table} --stream-specification StreamEnabled=false), enable it again (--stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES), then run `precise-ttl backfill --index-layout stream-queue` for the writes made in between. That makes a new stream with a new ARN: every other reader of the old one (Lambda triggers, Kinesis adapter or KCL applications, EventBridge Pipes) must be moved to it, and the old one's records stay readable for 24 hours only"
    )]
    StreamView { table: String, view: String },
    #[error("lease table {table:?} was not found at {endpoint}")]
    LeaseTableMissing { table: String, endpoint: String },
    #[error("table {table:?} has no index named {index:?}")]
    IndexMissing { table: String, index: String },
    #[error(
        "index {index:?} on table {table:?} has another schema: expected {expected}, found {found}"
    )]
    IndexSchema {
        table: String,
        index: String,
        expected: String,
        found: String,
    },
    #[error(
        "index {index:?} on table {table:?} is {status}, not ACTIVE yet (DynamoDB is still building it)"
    )]
    IndexNotActive {
        table: String,
        index: String,
        status: String,
    },
    #[error(
        "native TTL on table {table:?} is already enabled on attribute {enabled:?}, not {wanted:?}; DynamoDB allows one TTL attribute per table"
    )]
    NativeTtlOnOtherAttribute {
        table: String,
        enabled: String,
        wanted: String,
    },
    #[error(
        "native TTL on table {table:?} is {status}; DynamoDB allows no change until that finishes (up to an hour)"
    )]
    NativeTtlBusy { table: String, status: String },
    #[error(
        "{attribute:?} is a key attribute of table {table:?}; the {role} attribute cannot be part of the table's primary key"
    )]
    KeyAttribute {
        table: String,
        attribute: String,
        role: &'static str,
    },
    #[error(
        "attribute {attribute:?} is already defined as type {defined} on table {table:?} (another index uses it); the {role} attribute must be a Number"
    )]
    AttributeType {
        table: String,
        attribute: String,
        defined: String,
        role: &'static str,
    },
    #[error("table {table:?} exists with key {found}, not the requested {expected}")]
    TableKeyMismatch {
        table: String,
        expected: String,
        found: String,
    },
    #[error(
        "table {table:?} is provisioned ({table_read} read, {table_write} write units/s), so the new expiry index needs capacity of its own and setup will not guess it: copying the table's can double the cost, and too little write capacity throttles the table's own writes. Suggested: {suggested_write} write units (the table's: every write of an item with a TTL and every delete writes the index too) and {suggested_read} read units (one Query per shard per 1 s poll at 0.5 units, {shards} shards, doubled)"
    )]
    IndexCapacityRequired {
        table: String,
        table_read: i64,
        table_write: i64,
        shards: u64,
        suggested_read: i64,
        suggested_write: i64,
    },
    #[error(
        "table {table:?} {}: its indexes are billed per request and take no provisioned capacity",
        if *created { "would be created on demand" } else { "is on demand" }
    )]
    IndexCapacityOnDemand { table: String, created: bool },
    #[error("gave up after {waited_secs} s waiting for {what}")]
    WaitTimedOut { what: String, waited_secs: u64 },
    #[error(
        "no AWS credentials found for {endpoint} (looked in the environment, the shared config and credentials files, web identity, the container and the instance metadata)"
    )]
    NoCredentials { endpoint: String },
    /// A credential source was found but gave no credentials: a `credential_process` that
    /// failed, a metadata service or STS that refused, a profile that does not exist. The
    /// message is aws-config's, which names the source.
    #[error("cannot get AWS credentials for {endpoint}: {message}")]
    Credentials { endpoint: String, message: String },
    /// The SSO (IAM Identity Center) session behind a profile has expired, could not be
    /// refreshed, or was never started: only signing in again brings credentials back.
    #[error(
        "the SSO session has expired or was never started, so no AWS credentials for {endpoint}: {message}"
    )]
    SsoSession { endpoint: String, message: String },
    #[error("no AWS region set (neither AWS_REGION nor the profile names one)")]
    NoRegion,
    #[error("cannot reach {endpoint}: {message}")]
    Unreachable { endpoint: String, message: String },
    #[error("access denied by {endpoint}: {message}")]
    AccessDenied { endpoint: String, message: String },
    /// An `AccessDeniedException` whose message names the IAM action (AWS's documented
    /// format): the line leads with the action, so the policy to fix is plain.
    #[error("{denial} (from {endpoint})")]
    PermissionDenied {
        denial: precise_ttl_core::access::Denial,
        endpoint: String,
    },
    #[error("{operation} failed: {message}")]
    Call {
        operation: &'static str,
        class: ErrorClass,
        message: String,
    },
}

impl AdapterError {
    pub fn class(&self) -> ErrorClass {
        match self {
            AdapterError::Call { class, .. } => *class,
            AdapterError::IndexNotActive { .. } | AdapterError::Unreachable { .. } => {
                ErrorClass::Transient
            }
            _ => ErrorClass::Fatal,
        }
    }

    /// Maps an SDK failure of a control-plane call, naming the endpoint where that helps.
    pub fn from_sdk<E>(
        operation: &'static str,
        endpoint: &str,
        err: SdkError<E, HttpResponse>,
    ) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let message = describe(&err);
        if let Some(failure) = credentials_failure(endpoint, &err) {
            return failure;
        }
        if let Some(denial) = denial(&err) {
            return AdapterError::PermissionDenied {
                denial,
                endpoint: endpoint.to_string(),
            };
        }
        match &err {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => AdapterError::Unreachable {
                endpoint: endpoint.to_string(),
                message,
            },
            SdkError::ServiceError(se)
                if se.err().code().is_some_and(|c| ACCESS_CODES.contains(&c)) =>
            {
                AdapterError::AccessDenied {
                    endpoint: endpoint.to_string(),
                    message,
                }
            }
            _ => AdapterError::Call {
                operation,
                class: classify(&err),
                message,
            },
        }
    }
}

/// A failure to get credentials, found among `err`'s causes (the SDK reports it as a dispatch
/// failure, which would otherwise read as "cannot reach"). The default chain finding nothing
/// anywhere is [`AdapterError::NoCredentials`]; a source that was found but failed is named in
/// aws-config's words. aws-config's SSO errors are private types, so an SSO failure is known by
/// its text: "SSO" in aws-config's own messages, or the SSO portal's `UnauthorizedException`.
pub fn credentials_failure(
    endpoint: &str,
    err: &(dyn std::error::Error + 'static),
) -> Option<AdapterError> {
    use aws_config::meta::ProviderChainError;
    use aws_credential_types::provider::error::CredentialsError;
    let failure = credentials_error(err)?;
    let endpoint = endpoint.to_string();
    if let CredentialsError::CredentialsNotLoaded(_) = failure {
        match std::error::Error::source(failure) {
            None => return Some(AdapterError::NoCredentials { endpoint }),
            Some(e) => {
                if let Some(chain) = e.downcast_ref::<ProviderChainError<CredentialsError>>() {
                    // The chain went on past a profile that does not exist (`AWS_PROFILE`
                    // naming no profile); the AWS CLI stops there, and so does the message.
                    return Some(match missing_profile(chain) {
                        Some(message) => AdapterError::Credentials { endpoint, message },
                        None => AdapterError::NoCredentials { endpoint },
                    });
                }
            }
        }
    }
    // Providers wrap each other's errors, each adding a generic line ("an error occurred while
    // loading credentials"); the innermost one's causes name the source.
    let mut innermost = failure;
    while let Some(inner) = std::error::Error::source(innermost)
        .and_then(|e| credentials_error(e))
        .filter(|inner| !std::ptr::eq(*inner, innermost))
    {
        innermost = inner;
    }
    let message =
        std::error::Error::source(innermost).map_or_else(|| innermost.to_string(), causes);
    Some(
        if message.contains("SSO") || message.contains("UnauthorizedException") {
            AdapterError::SsoSession { endpoint, message }
        } else {
            AdapterError::Credentials { endpoint, message }
        },
    )
}

/// "profile `NAME` was not defined", when the default chain's profile step says so of a
/// profile other than `default` (which a machine without shared config files lacks anyway).
fn missing_profile(
    chain: &aws_config::meta::ProviderChainError<
        aws_credential_types::provider::error::CredentialsError,
    >,
) -> Option<String> {
    let attempt = chain.attempts().iter().find(|a| a.name() == "Profile")?;
    let reason = causes(std::error::Error::source(attempt.error())?);
    (reason.contains("was not defined") && !reason.contains("`default`")).then_some(reason)
}

/// Whether a call failed for want of credentials: no retry brings them back.
pub fn is_credentials_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    credentials_error(err).is_some()
}

/// The credentials error among `err`'s causes, if the call failed for want of credentials.
fn credentials_error<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a aws_credential_types::provider::error::CredentialsError> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(found) =
            e.downcast_ref::<aws_credential_types::provider::error::CredentialsError>()
        {
            return Some(found);
        }
        cause = e.source();
    }
    None
}

/// The engine's view of an SDK failure.
pub fn classify<E>(err: &SdkError<E, HttpResponse>) -> ErrorClass
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    // No retry brings credentials back (an expired SSO session, a refused role): a daemon
    // stops with the reason, for its supervisor to see, instead of retrying for ever.
    if credentials_error(err).is_some() {
        return ErrorClass::Fatal;
    }
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            ErrorClass::Transient
        }
        SdkError::ServiceError(se) => {
            let code = se.err().code().unwrap_or_default();
            if code == "ConditionalCheckFailedException" {
                ErrorClass::ConditionFailed
            } else if THROTTLING_CODES.contains(&code) {
                ErrorClass::Throttled
            } else if TRANSIENT_CODES.contains(&code) || se.raw().status().as_u16() >= 500 {
                ErrorClass::Transient
            } else {
                ErrorClass::Fatal
            }
        }
        _ => ErrorClass::Fatal,
    }
}

/// What refused a throttled call, from the `ThrottlingReasons` DynamoDB sends with
/// `ThrottlingException`, `ProvisionedThroughputExceededException` and `RequestLimitExceeded`;
/// [`ThrottleScope::Unknown`] for an answer without reasons (DynamoDB Local, an older endpoint)
/// or a failure that is no throttle.
///
/// The SDK deserializes the reasons into the exception's typed `throttling_reasons()`. Every
/// operation's error enum (DeleteItemError, QueryError, BatchExecuteStatementError, ...) gives
/// its exception as `source()`, so downcasting that reads the reasons of any operation without
/// naming each operation's enum; both JSON spellings of the member (`throttlingReasons` on
/// ThrottlingException, `ThrottlingReasons` on the other two) are the SDK's concern.
pub fn throttle_scope<E>(err: &SdkError<E, HttpResponse>) -> ThrottleScope
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    use aws_sdk_dynamodb::types::error::{
        ProvisionedThroughputExceededException, RequestLimitExceeded, ThrottlingException,
    };
    let SdkError::ServiceError(se) = err else {
        return ThrottleScope::Unknown;
    };
    let Some(exception) = std::error::Error::source(se.err()) else {
        return ThrottleScope::Unknown;
    };
    let reasons = if let Some(e) = exception.downcast_ref::<ThrottlingException>() {
        e.throttling_reasons()
    } else if let Some(e) = exception.downcast_ref::<ProvisionedThroughputExceededException>() {
        e.throttling_reasons()
    } else if let Some(e) = exception.downcast_ref::<RequestLimitExceeded>() {
        e.throttling_reasons()
    } else {
        &[]
    };
    ThrottleScope::of_reasons(reasons.iter().filter_map(|r| r.reason()))
}

/// One line: the service's code and message, or the transport failure with its causes.
pub fn describe<E>(err: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err {
        SdkError::ServiceError(se) => {
            let e = se.err();
            match (e.code(), e.message()) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                (Some(c), None) => c.to_string(),
                _ => format!(
                    "HTTP {}: {}",
                    se.raw().status().as_u16(),
                    DisplayErrorContext(err)
                ),
            }
        }
        SdkError::TimeoutError(_) => "the request timed out".to_string(),
        _ => causes(err),
    }
}

/// An error and its causes on one line, each said once: the SDK's own rendering spans lines and
/// repeats the chain in Debug form.
fn causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        let text = e
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = e.source();
    }
    parts.join(": ")
}

pub fn store_error<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let class = classify(&err);
    // Only a throttle keeps a scope (`with_throttle_scope` ignores the others).
    let scope = throttle_scope(&err);
    StoreError::new(class, format!("{operation}: {}", describe(&err)))
        .with_throttle_scope(scope)
        .with_source(err)
}

/// The IAM action (and resource) an `AccessDeniedException` names, when its message is in
/// AWS's documented format ([`precise_ttl_core::access`]). DynamoDB answers it with HTTP 400 and
/// `{"__type":"com.amazon.coral.service#AccessDeniedException","Message":"User: ... is not
/// authorized to perform: dynamodb:Query on resource: ..."}`; the SDK strips the namespace.
pub fn denial<E: ProvideErrorMetadata>(
    err: &SdkError<E, HttpResponse>,
) -> Option<precise_ttl_core::access::Denial> {
    let SdkError::ServiceError(se) = err else {
        return None;
    };
    if se.err().code() != Some("AccessDeniedException") {
        return None;
    }
    precise_ttl_core::access::Denial::parse(se.err().message()?)
}

/// Runs a control-plane call, and again with `backoff` after a throttle or a 5xx (an
/// [`AdapterError::Call`] of those classes): DynamoDB Local answers InternalFailure while another
/// table's index is being built, and DynamoDB may answer any call with a 500. Every other
/// failure (an unreachable endpoint, missing credentials, a refused change) returns at once.
pub async fn again_if_transient<T, F, Fut>(
    backoff: &precise_ttl_core::Backoff,
    call: F,
) -> Result<T, AdapterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AdapterError>>,
{
    precise_ttl_engine::retry::with_backoff_by(
        backoff,
        |e: &AdapterError| match e {
            AdapterError::Call { class, .. } => *class,
            _ => ErrorClass::Fatal,
        },
        || {},
        call,
    )
    .await
}

#[cfg(test)]
mod tests;
