//! Small control tables precise-ttl keeps next to the user's (window checkpoints, shard leases,
//! stream checkpoints): created on demand billing if missing, idempotently, and waited for until
//! ACTIVE; one partition of them read back whole.

use crate::connect::Dynamo;
use crate::error::AdapterError;
use crate::table::{TableShape, attribute, key_element};
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::query::QueryError;
use aws_sdk_dynamodb::types::{AttributeValue, BillingMode, KeyType, ScalarAttributeType};
use std::collections::HashMap;
use std::time::Duration;

/// Every item of `table` whose partition key `attribute` is `value`, read consistently, page
/// after page (a scope's leases, a stream's shard checkpoints).
pub async fn read_partition(
    dynamo: &Dynamo,
    table: &str,
    attribute: &str,
    value: AttributeValue,
) -> Result<Vec<HashMap<String, AttributeValue>>, SdkError<QueryError, HttpResponse>> {
    dynamo
        .query
        .query()
        .table_name(table)
        .key_condition_expression("#p = :p")
        .expression_attribute_names("#p", attribute)
        .expression_attribute_values(":p", value)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
}

/// Creates table `name` keyed by the String attributes `keys` (partition key first) unless it
/// exists, then waits until it is ACTIVE. Returns whether this call created it. `what` names
/// the table in errors ("the lease table").
pub async fn ensure_table(
    dynamo: &Dynamo,
    name: &str,
    keys: &[&str],
    what: &str,
) -> Result<bool, AdapterError> {
    let endpoint = dynamo.describe_endpoint();
    let mut created = false;
    if TableShape::describe(dynamo, name).await?.is_none() {
        let mut create = dynamo
            .query
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::PayPerRequest);
        for (i, key) in keys.iter().enumerate() {
            let role = if i == 0 {
                KeyType::Hash
            } else {
                KeyType::Range
            };
            create = create
                .attribute_definitions(attribute(key, ScalarAttributeType::S))
                .key_schema(key_element(key, role));
        }
        match create.send().await {
            Ok(_) => created = true,
            // Another process creating it at the same moment is fine.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_resource_in_use_exception()) => {}
            Err(e) => return Err(AdapterError::from_sdk("CreateTable", &endpoint, e)),
        }
    }
    wait_active(dynamo, name, what).await?;
    Ok(created)
}

/// Waits (two minutes at most) until table `name` is ACTIVE; `what` names it in errors.
pub async fn wait_active(dynamo: &Dynamo, name: &str, what: &str) -> Result<(), AdapterError> {
    let started = std::time::Instant::now();
    loop {
        match TableShape::describe(dynamo, name).await? {
            Some(shape) if shape.status == "ACTIVE" => return Ok(()),
            _ if started.elapsed() > Duration::from_secs(120) => {
                return Err(AdapterError::WaitTimedOut {
                    what: format!("{what} {name:?} to become ACTIVE"),
                    waited_secs: 120,
                });
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
