//! The adapter's error classification against recorded SDK failures.

use super::*;
use aws_sdk_dynamodb::error::ErrorMetadata;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;

/// An error as the SDK hands it over for an HTTP answer with this status, `__type` code and
/// message.
fn answered(status: u16, code: &str, message: &str) -> SdkError<DeleteItemError, HttpResponse> {
    let meta = ErrorMetadata::builder().code(code).message(message).build();
    SdkError::service_error(
        DeleteItemError::generic(meta),
        HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::empty()),
    )
}

/// The library says what went wrong; how to fix it with the command line is the binary's
/// hint. A message naming a flag would be wrong for every other caller of the library.
#[test]
fn no_message_names_a_command_line_flag() {
    let s = || "x".to_string();
    let every = [
        AdapterError::TableNotFound {
            table: s(),
            endpoint: s(),
        },
        AdapterError::IndexMissing {
            table: s(),
            index: s(),
        },
        AdapterError::IndexSchema {
            table: s(),
            index: s(),
            expected: s(),
            found: s(),
        },
        AdapterError::IndexNotActive {
            table: s(),
            index: s(),
            status: s(),
        },
        AdapterError::NativeTtlOnOtherAttribute {
            table: s(),
            enabled: s(),
            wanted: s(),
        },
        AdapterError::NativeTtlBusy {
            table: s(),
            status: s(),
        },
        AdapterError::KeyAttribute {
            table: s(),
            attribute: s(),
            role: "TTL",
        },
        AdapterError::AttributeType {
            table: s(),
            attribute: s(),
            defined: s(),
            role: "TTL",
        },
        AdapterError::TableKeyMismatch {
            table: s(),
            expected: s(),
            found: s(),
        },
        AdapterError::WaitTimedOut {
            what: s(),
            waited_secs: 1,
        },
        AdapterError::NoCredentials { endpoint: s() },
        AdapterError::Credentials {
            endpoint: s(),
            message: s(),
        },
        AdapterError::SsoSession {
            endpoint: s(),
            message: s(),
        },
        AdapterError::NoRegion,
        AdapterError::Unreachable {
            endpoint: s(),
            message: s(),
        },
        AdapterError::AccessDenied {
            endpoint: s(),
            message: s(),
        },
        AdapterError::PermissionDenied {
            denial: precise_ttl_core::access::Denial {
                principal: Some(s()),
                action: "dynamodb:Query".into(),
                resource: Some(s()),
                reason: Some(s()),
            },
            endpoint: s(),
        },
        AdapterError::Call {
            operation: "Query",
            class: ErrorClass::Fatal,
            message: s(),
        },
    ];
    for e in every {
        let text = e.to_string();
        assert!(!text.contains("--"), "{text}");
        assert!(!text.contains("precise-ttl "), "{text}");
    }
}

#[test]
fn service_answers_are_classified_as_the_engine_acts_on_them() {
    for (status, code, class) in [
        (400, "ThrottlingException", ErrorClass::Throttled),
        (
            400,
            "ProvisionedThroughputExceededException",
            ErrorClass::Throttled,
        ),
        (400, "RequestLimitExceeded", ErrorClass::Throttled),
        (500, "InternalServerError", ErrorClass::Transient),
        (503, "ServiceUnavailable", ErrorClass::Transient),
        (502, "", ErrorClass::Transient),
        (400, "TransactionConflictException", ErrorClass::Transient),
        (400, "LimitExceededException", ErrorClass::Transient),
        (
            400,
            "ConditionalCheckFailedException",
            ErrorClass::ConditionFailed,
        ),
        (400, "ResourceNotFoundException", ErrorClass::Fatal),
        (400, "AccessDeniedException", ErrorClass::Fatal),
        (400, "ValidationException", ErrorClass::Fatal),
    ] {
        let err = answered(status, code, "m");
        assert_eq!(classify(&err), class, "{status} {code}");
        let stored = store_error("DeleteItem", err);
        assert_eq!(stored.class, class);
        assert!(
            !stored.message.contains('\n'),
            "one line: {}",
            stored.message
        );
    }
}

/// A throttle as DynamoDB answers it since 2025: the exception with its `ThrottlingReasons`.
fn throttled(code: &str, reasons: &[&str]) -> SdkError<DeleteItemError, HttpResponse> {
    use aws_sdk_dynamodb::types::ThrottlingReason;
    use aws_sdk_dynamodb::types::error::{
        ProvisionedThroughputExceededException, RequestLimitExceeded, ThrottlingException,
    };
    let meta = ErrorMetadata::builder()
        .code(code)
        .message("slow down")
        .build();
    let reasons: Vec<ThrottlingReason> = reasons
        .iter()
        .map(|r| {
            ThrottlingReason::builder()
                .reason(*r)
                .resource("arn:aws:dynamodb:eu-west-1:123456789012:table/t")
                .build()
        })
        .collect();
    let err = match code {
        "ThrottlingException" => DeleteItemError::ThrottlingException(
            ThrottlingException::builder()
                .set_throttling_reasons(Some(reasons))
                .meta(meta)
                .build(),
        ),
        "ProvisionedThroughputExceededException" => {
            DeleteItemError::ProvisionedThroughputExceededException(
                ProvisionedThroughputExceededException::builder()
                    .set_throttling_reasons(Some(reasons))
                    .meta(meta)
                    .build(),
            )
        }
        "RequestLimitExceeded" => DeleteItemError::RequestLimitExceeded(
            RequestLimitExceeded::builder()
                .set_throttling_reasons(Some(reasons))
                .meta(meta)
                .build(),
        ),
        other => panic!("not a throttle: {other}"),
    };
    SdkError::service_error(
        err,
        HttpResponse::new(StatusCode::try_from(400).unwrap(), SdkBody::empty()),
    )
}

#[test]
fn a_throttle_carries_the_scope_of_its_reasons() {
    use ThrottleScope as S;
    for (code, reasons, scope) in [
        (
            "ThrottlingException",
            &["TableWriteKeyRangeThroughputExceeded"][..],
            S::TablePartition,
        ),
        (
            "ThrottlingException",
            &["IndexWriteKeyRangeThroughputExceeded"][..],
            S::IndexPartition,
        ),
        (
            "ThrottlingException",
            &["TableWriteAccountLimitExceeded"][..],
            S::Table,
        ),
        (
            "ThrottlingException",
            &["TableWriteMaxOnDemandThroughputExceeded"][..],
            S::Table,
        ),
        (
            "ProvisionedThroughputExceededException",
            &["TableWriteProvisionedThroughputExceeded"][..],
            S::Table,
        ),
        (
            "ProvisionedThroughputExceededException",
            &["IndexWriteProvisionedThroughputExceeded"][..],
            S::Index,
        ),
        (
            "ProvisionedThroughputExceededException",
            &["IndexReadKeyRangeThroughputExceeded"][..],
            S::IndexPartition,
        ),
        (
            "RequestLimitExceeded",
            &["TableReadAccountLimitExceeded"][..],
            S::Table,
        ),
        // The widest of several reasons: a partition's and the table's limit at once.
        (
            "ThrottlingException",
            &[
                "TableWriteKeyRangeThroughputExceeded",
                "IndexWriteAccountLimitExceeded",
            ][..],
            S::Index,
        ),
        // No reasons (DynamoDB Local, an older endpoint) or a reason not known here.
        ("ThrottlingException", &[][..], S::Unknown),
        ("RequestLimitExceeded", &[][..], S::Unknown),
        (
            "ThrottlingException",
            &["TableWriteSomethingNew"][..],
            S::Unknown,
        ),
    ] {
        let err = throttled(code, reasons);
        assert_eq!(classify(&err), ErrorClass::Throttled, "{code}");
        assert_eq!(throttle_scope(&err), scope, "{code} {reasons:?}");
        let stored = store_error("DeleteItem", err);
        assert_eq!(stored.class, ErrorClass::Throttled);
        assert_eq!(stored.throttle, Some(scope), "{code} {reasons:?}");
    }
    // A throttle known only by its code (no typed exception) has no known scope, and a
    // failure that is no throttle has none at all.
    let bare = store_error("DeleteItem", answered(400, "ThrottlingException", "m"));
    assert_eq!(bare.throttle, Some(S::Unknown));
    for code in ["InternalServerError", "ConditionalCheckFailedException"] {
        assert_eq!(
            store_error("DeleteItem", answered(400, code, "m")).throttle,
            None
        );
    }
    let timeout: SdkError<DeleteItemError, HttpResponse> = SdkError::timeout_error("slow");
    assert_eq!(throttle_scope(&timeout), S::Unknown);
    assert_eq!(store_error("DeleteItem", timeout).throttle, None);
}

/// DynamoDB's AccessDeniedException names the action: the error leads with it, is fatal,
/// and a store call's error keeps the service's sentence for the binary to find.
#[test]
fn a_denied_action_is_named_and_fatal() {
    let message = "User: arn:aws:sts::123456789012:assumed-role/r/s is not authorized to perform: dynamodb:DescribeTable on resource: arn:aws:dynamodb:eu-west-1:123456789012:table/t because no identity-based policy allows the dynamodb:DescribeTable action";
    let denied = AdapterError::from_sdk(
        "DescribeTable",
        "https://dynamodb.eu-west-1.amazonaws.com",
        answered(400, "AccessDeniedException", message),
    );
    let AdapterError::PermissionDenied { denial, .. } = &denied else {
        panic!("{denied}");
    };
    assert_eq!(denial.action, "dynamodb:DescribeTable");
    assert_eq!(denied.class(), ErrorClass::Fatal);
    assert!(
        denied
            .to_string()
            .starts_with("access denied: dynamodb:DescribeTable on arn:aws:dynamodb:"),
        "{denied}"
    );
    let stored = store_error("Query", answered(400, "AccessDeniedException", message));
    assert_eq!(stored.class, ErrorClass::Fatal);
    assert!(stored.message.contains(message), "{}", stored.message);
    // Another wording stays the plain AccessDenied it was, fatal too.
    let plain = AdapterError::from_sdk(
        "DescribeTable",
        "https://dynamodb.eu-west-1.amazonaws.com",
        answered(400, "AccessDeniedException", "not allowed"),
    );
    assert!(
        matches!(plain, AdapterError::AccessDenied { .. }),
        "{plain}"
    );
    assert_eq!(plain.class(), ErrorClass::Fatal);
}

/// The SDK reports a credentials failure as a dispatch failure; it must not read as an
/// unreachable store (which `run` would wait for).
#[test]
fn credentials_failures_are_named_and_fatal() {
    use aws_credential_types::provider::error::CredentialsError;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    let failing = |e: CredentialsError| -> SdkError<DeleteItemError, HttpResponse> {
        SdkError::dispatch_failure(ConnectorError::other(Box::new(e), None))
    };
    let mapped = |e| AdapterError::from_sdk("DescribeTable", "e", failing(e));
    let process = mapped(CredentialsError::provider_error(
        "external process exited with code 1. Stderr: sign in again",
    ));
    assert!(
        matches!(&process, AdapterError::Credentials { message, .. } if message.contains("sign in again")),
        "{process}"
    );
    assert_eq!(process.class(), ErrorClass::Fatal);
    let sso = mapped(CredentialsError::provider_error(
        "the SSO token has expired and cannot be refreshed",
    ));
    assert!(matches!(sso, AdapterError::SsoSession { .. }), "{sso}");
    let none = mapped(CredentialsError::not_loaded_no_source());
    assert!(matches!(none, AdapterError::NoCredentials { .. }), "{none}");
    let during_a_run = failing(CredentialsError::provider_error("403 from IMDS"));
    assert_eq!(classify(&during_a_run), ErrorClass::Fatal);
}

/// A timeout is transient; a service answer mapped to an [`AdapterError`] keeps its class (the
/// access denied case is [`a_denied_action_is_named_and_fatal`]'s).
#[test]
fn transport_failures_are_transient_and_answers_keep_their_class() {
    let timeout: SdkError<DeleteItemError, HttpResponse> = SdkError::timeout_error("slow");
    assert_eq!(classify(&timeout), ErrorClass::Transient);
    for (code, message, class) in [
        (
            "ResourceNotFoundException",
            "no such index",
            ErrorClass::Fatal,
        ),
        ("ThrottlingException", "slow down", ErrorClass::Throttled),
    ] {
        let mapped = AdapterError::from_sdk("Query", "e", answered(400, code, message));
        assert_eq!(mapped.class(), class, "{code}");
    }
}
