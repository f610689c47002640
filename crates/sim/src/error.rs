//! The errors the simulator answers, each with the `__type` and message DynamoDB answers it
//! with, and the errors of the library itself.

use crate::value::Item;
use serde::Serialize;

/// The message DynamoDB gives with `ThrottlingException` on an on-demand table (and with
/// `ThrottlingError` inside a batch).
pub const ON_DEMAND_THROTTLE_MESSAGE: &str = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html";

/// The message DynamoDB gives with `ProvisionedThroughputExceededException` on a provisioned table.
pub const PROVISIONED_THROTTLE_MESSAGE: &str = "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.";

pub const CONDITION_FAILED_MESSAGE: &str = "The conditional request failed";

/// Why a request was throttled: DynamoDB's `ThrottlingReason`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Throttle {
    /// `TableWriteKeyRangeThroughputExceeded`, `IndexWriteAccountLimitExceeded`, ...
    pub reason: String,
    /// The ARN of the table or index.
    pub resource: String,
    /// A provisioned table answers `ProvisionedThroughputExceededException`, an on-demand one
    /// `ThrottlingException`.
    #[serde(skip)]
    pub provisioned: bool,
}

/// A request DynamoDB would refuse, as it would refuse it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DbError {
    #[error("{0}")]
    Validation(String),
    #[error("{0}")]
    Serialization(String),
    #[error("Requested resource not found{}", .0.as_ref().map(|t| format!(": Table: {t} not found")).unwrap_or_default())]
    ResourceNotFound(Option<String>),
    #[error("{0}")]
    ResourceInUse(String),
    #[error("{CONDITION_FAILED_MESSAGE}")]
    ConditionalCheckFailed(Option<Item>),
    #[error("throttled: {}", .0.reason)]
    Throttled(Throttle),
    /// A second statement on the same item within one batch.
    #[error("Duplicate primary key exists in table")]
    DuplicateItem,
    #[error("{0}")]
    UnknownOperation(String),
    #[error("{0}")]
    Internal(String),
}

impl DbError {
    pub fn validation(message: impl Into<String>) -> DbError {
        DbError::Validation(message.into())
    }

    /// The `__type` of the error body.
    pub fn type_name(&self) -> &'static str {
        match self {
            DbError::Validation(_) | DbError::DuplicateItem => {
                "com.amazon.coral.validate#ValidationException"
            }
            DbError::Serialization(_) => "com.amazon.coral.service#SerializationException",
            DbError::ResourceNotFound(_) => {
                "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"
            }
            DbError::ResourceInUse(_) => "com.amazonaws.dynamodb.v20120810#ResourceInUseException",
            DbError::ConditionalCheckFailed(_) => {
                "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"
            }
            DbError::Throttled(t) if t.provisioned => {
                "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
            }
            DbError::Throttled(_) => "com.amazonaws.dynamodb.v20120810#ThrottlingException",
            DbError::UnknownOperation(_) => "com.amazon.coral.service#UnknownOperationException",
            DbError::Internal(_) => "com.amazon.coral.service#InternalFailure",
        }
    }

    /// The HTTP status: 500 for an internal failure, 400 for everything else.
    pub fn status(&self) -> u16 {
        match self {
            DbError::Internal(_) => 500,
            _ => 400,
        }
    }

    pub fn message(&self) -> String {
        match self {
            DbError::Throttled(t) if t.provisioned => PROVISIONED_THROTTLE_MESSAGE.to_string(),
            DbError::Throttled(_) => ON_DEMAND_THROTTLE_MESSAGE.to_string(),
            other => other.to_string(),
        }
    }

    /// The JSON error body.
    pub fn body(&self) -> Vec<u8> {
        let mut body = serde_json::Map::new();
        body.insert("__type".into(), self.type_name().into());
        body.insert("message".into(), self.message().into());
        match self {
            DbError::Throttled(t) => {
                // ThrottlingException spells the member `throttlingReasons`, the provisioned
                // exception `ThrottlingReasons`.
                let member = if t.provisioned {
                    "ThrottlingReasons"
                } else {
                    "throttlingReasons"
                };
                body.insert(
                    member.into(),
                    serde_json::json!([{"reason": t.reason, "resource": t.resource}]),
                );
            }
            DbError::ConditionalCheckFailed(Some(item)) => {
                body.insert(
                    "Item".into(),
                    serde_json::to_value(item).unwrap_or_default(),
                );
            }
            _ => {}
        }
        serde_json::to_vec(&serde_json::Value::Object(body)).unwrap_or_default()
    }

    /// The code of this error as one statement's error inside `BatchExecuteStatement`. A
    /// throttled statement gets no `ThrottlingReasons` beside it, as from DynamoDB: its
    /// `BatchStatementError` has only `Code`, `Message` and `Item` (API reference; the SDK's
    /// model as of aws-sdk-dynamodb 1.136 agrees).
    pub fn statement_code(&self) -> &'static str {
        match self {
            DbError::ConditionalCheckFailed(_) => "ConditionalCheckFailed",
            DbError::Throttled(t) if t.provisioned => "ProvisionedThroughputExceeded",
            DbError::Throttled(_) => "ThrottlingError",
            DbError::ResourceNotFound(_) => "ResourceNotFound",
            DbError::Internal(_) => "InternalServerError",
            DbError::DuplicateItem => "DuplicateItem",
            _ => "ValidationError",
        }
    }
}

/// Failures of the library's own API (starting the server, planting items).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("could not bind {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not start the simulator's thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("the simulator stopped before it was ready")]
    NotStarted,
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{0}")]
    Db(#[from] DbError),
}
