//! `setup` for the expiry queue layout: the application table is checked and never changed but
//! for its stream (turned on with new and old images when it has none: there is no reader to cut
//! off) and native TTL (the backstop, unless asked not to); the queue table and the lease table
//! are created when missing. A stream without new images stops setup with what to do about it,
//! since changing its view type makes a new stream and moves every other reader.

use crate::setup::{SetupAction, SetupReport};
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::AdapterError;
use precise_ttl_dynamodb::table::TableShape;
use precise_ttl_stream::queue::QueueTable;

/// What the queue layout's setup does beyond the queue table.
#[derive(Debug, Clone)]
pub struct QueueSetupOptions {
    pub queue_table: String,
    pub native_ttl: bool,
    pub lease_table: Option<String>,
}

/// Brings `table` and its queue to what the stream-queue layout needs; running it again changes
/// nothing.
pub async fn setup_queue(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    options: &QueueSetupOptions,
) -> Result<SetupReport, AdapterError> {
    let shape = TableShape::require(dynamo, table).await?;
    if shape.key_names().contains(&layout.ttl_attribute) {
        return Err(AdapterError::AttributeType {
            table: table.to_string(),
            attribute: layout.ttl_attribute.clone(),
            defined: "a key attribute".into(),
            role: "TTL",
        });
    }
    let mut actions = Vec::new();
    let (view, _) = precise_ttl_stream::stream::current_stream(dynamo, table).await?;
    match view {
        None => actions.push(crate::setup::enable_old_image_stream(dynamo, table).await?),
        Some(view) => {
            precise_ttl_stream::queue::indexer::check_view(table, Some(view.clone()))?;
            actions.push(SetupAction::StreamWithNewImages {
                view: view.as_str().to_string(),
            });
        }
    }
    let queue = QueueTable::new(dynamo.clone(), &options.queue_table);
    let name = options.queue_table.clone();
    actions.push(match queue.create().await? {
        true => SetupAction::QueueTableCreated { name },
        false => SetupAction::QueueTableAlreadyPresent { name },
    });
    if options.native_ttl {
        actions.push(crate::setup::native_ttl(dynamo, table, layout).await?);
    } else {
        actions.push(SetupAction::NativeTtlLeftAlone);
    }
    if let Some(name) = &options.lease_table {
        actions.push(crate::setup::lease_table(dynamo, name).await?);
    }
    Ok(SetupReport {
        table: table.to_string(),
        actions,
    })
}
