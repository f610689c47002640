//! Small control tables precise-ttl keeps next to the user's (window checkpoints, shard leases):
//! created on demand billing if missing, idempotently, and waited for until ACTIVE.

use crate::connect::Dynamo;
use crate::error::AdapterError;
use crate::table::TableShape;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use std::time::Duration;

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
            create = create
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(*key)
                        .attribute_type(ScalarAttributeType::S)
                        .build()
                        .expect("name and type are set"),
                )
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name(*key)
                        .key_type(if i == 0 {
                            KeyType::Hash
                        } else {
                            KeyType::Range
                        })
                        .build()
                        .expect("name and type are set"),
                );
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
