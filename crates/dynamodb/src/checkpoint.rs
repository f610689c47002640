//! A durable "swept until" instant per swept index, kept in a small control table, so a sweep of
//! the blog's window index resumes with every window missed while it was down.

use crate::connect::Dynamo;
use crate::error::AdapterError;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::Timestamp;

#[derive(Debug, Clone)]
pub struct CheckpointTable {
    dynamo: Dynamo,
    name: String,
}

impl CheckpointTable {
    /// Uses the control table `name`, creating it (on demand billing, key `id`) if missing.
    pub async fn open_or_create(dynamo: Dynamo, name: &str) -> Result<Self, AdapterError> {
        crate::control::ensure_table(&dynamo, name, &["id"], "the checkpoint table").await?;
        Ok(CheckpointTable {
            dynamo,
            name: name.to_string(),
        })
    }

    pub async fn load(&self, id: &str) -> Result<Option<Timestamp>, AdapterError> {
        let out = self
            .dynamo
            .query
            .get_item()
            .table_name(&self.name)
            .key("id", AttributeValue::S(id.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| AdapterError::from_sdk("GetItem", &self.dynamo.describe_endpoint(), e))?;
        Ok(out
            .item
            .and_then(|i| match i.get("swept_until_ms") {
                Some(AttributeValue::N(n)) => n.parse::<i64>().ok(),
                _ => None,
            })
            .map(Timestamp::from_millis))
    }

    /// Moves the checkpoint forward to `to`; never backward, whoever else writes it.
    pub async fn advance(&self, id: &str, to: Timestamp) -> Result<(), AdapterError> {
        let result = self
            .dynamo
            .write
            .put_item()
            .table_name(&self.name)
            .item("id", AttributeValue::S(id.to_string()))
            .item(
                "swept_until_ms",
                AttributeValue::N(to.as_millis().to_string()),
            )
            .item("swept_until", AttributeValue::S(to.to_string()))
            .condition_expression("attribute_not_exists(id) OR swept_until_ms < :to")
            .expression_attribute_values(":to", AttributeValue::N(to.as_millis().to_string()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(AdapterError::from_sdk(
                "PutItem",
                &self.dynamo.describe_endpoint(),
                e,
            )),
        }
    }
}
