//! `setup`: give a table the sparse expiry index and (by default) native TTL as a backstop.
//!
//! Every step first looks at what is there and only changes what is missing, so running setup
//! again is a no-op that says so. Conflicts that setup cannot resolve safely (an index of that
//! name with other keys, native TTL on another attribute) are errors, never silent changes.
//! On a provisioned table the index's capacity is the caller's choice ([`capacity`]); without
//! one, setup stops before it changes anything.

pub mod capacity;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, KeySchemaElement, KeyType as AwsKeyRole, Projection,
    ProjectionType, ProvisionedThroughput, ScalarAttributeType, TimeToLiveSpecification,
    TimeToLiveStatus,
};
pub use capacity::{IndexCapacity, IndexPlan};
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::{AdapterError, again_if_transient};
pub use precise_ttl_dynamodb::table::{KeyAttribute, KeyType};
use precise_ttl_dynamodb::table::{TableShape, attribute, key_element};
use std::fmt;
use std::time::{Duration, Instant};

/// The primary key for `--create-table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTable {
    pub partition_key: KeyAttribute,
    pub sort_key: Option<KeyAttribute>,
}

#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// Create an on-demand table with this key if it does not exist.
    pub create_table: Option<CreateTable>,
    /// Enable DynamoDB's own TTL on the TTL attribute as a backstop.
    pub native_ttl: bool,
    /// How long to wait for the table and index to become ACTIVE; `None`: do not wait.
    pub wait: Option<Duration>,
    /// How often to look while waiting.
    pub poll_interval: Duration,
    /// Create this lease table (for `run`'s fleet coordination) if missing; `None`: leave it.
    pub lease_table: Option<String>,
    /// Turn the table's stream on with old images (for archiving expiry records) if it is off.
    pub stream: bool,
    /// The new index's provisioned capacity on a provisioned table: required there, refused on
    /// an on-demand table, ignored (the index left as it is) when the index exists.
    pub index_capacity: Option<IndexCapacity>,
}

impl Default for SetupOptions {
    fn default() -> Self {
        SetupOptions {
            create_table: None,
            native_ttl: true,
            wait: Some(Duration::from_secs(3600)),
            poll_interval: Duration::from_secs(2),
            lease_table: Some(precise_ttl_dynamodb::lease::DEFAULT_LEASE_TABLE.to_string()),
            stream: false,
            index_capacity: None,
        }
    }
}

/// One thing setup found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupAction {
    TableCreated,
    TableAlreadyExists,
    IndexCreated,
    IndexAlreadyPresent {
        projection: String,
    },
    IndexBuilding {
        status: String,
    },
    WaitedForActive {
        seconds: u64,
    },
    NativeTtlEnabled,
    NativeTtlAlreadyEnabled,
    NativeTtlLeftAlone,
    LeaseTableCreated {
        name: String,
    },
    LeaseTableAlreadyPresent {
        name: String,
    },
    StreamEnabled,
    /// The expiry queue's: the stream carries what the indexer needs.
    StreamWithNewImages {
        view: String,
    },
    QueueTableCreated {
        name: String,
    },
    QueueTableAlreadyPresent {
        name: String,
    },
    StreamAlreadyWithOldImages {
        view: String,
    },
    /// On, but without old images: changing the view type means a new stream, which would cut
    /// off whoever reads the current one, so setup leaves it and says so.
    StreamWithoutOldImages {
        view: String,
    },
}

impl SetupAction {
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            SetupAction::TableCreated
                | SetupAction::IndexCreated
                | SetupAction::NativeTtlEnabled
                | SetupAction::LeaseTableCreated { .. }
                | SetupAction::StreamEnabled
                | SetupAction::QueueTableCreated { .. }
        )
    }
}

impl fmt::Display for SetupAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupAction::TableCreated => {
                f.write_str("created the table (on-demand) with the expiry index")
            }
            SetupAction::TableAlreadyExists => f.write_str("table already exists with that key"),
            SetupAction::IndexCreated => f.write_str("added the expiry index (KEYS_ONLY)"),
            SetupAction::IndexAlreadyPresent { projection } if projection == "KEYS_ONLY" => {
                f.write_str("expiry index already present and ACTIVE")
            }
            SetupAction::IndexAlreadyPresent { projection } => write!(
                f,
                "expiry index already present and ACTIVE (projection {projection}: KEYS_ONLY would store less)"
            ),
            SetupAction::IndexBuilding { status } => {
                write!(f, "expiry index is {status}; not waiting for it, as asked")
            }
            SetupAction::WaitedForActive { seconds } => {
                write!(
                    f,
                    "waited {seconds} s for the table and index to become ACTIVE"
                )
            }
            SetupAction::NativeTtlEnabled => f.write_str("enabled native TTL as a backstop"),
            SetupAction::NativeTtlAlreadyEnabled => {
                f.write_str("native TTL already enabled on the TTL attribute")
            }
            SetupAction::NativeTtlLeftAlone => f.write_str("native TTL left as it is, as asked"),
            SetupAction::LeaseTableCreated { name } => {
                write!(f, "created the lease table {name:?} (on-demand)")
            }
            SetupAction::StreamEnabled => {
                f.write_str("turned the table's stream on (NEW_AND_OLD_IMAGES)")
            }
            SetupAction::StreamWithNewImages { view } => {
                write!(
                    f,
                    "the table's stream is on with new images ({view}), as the expiry queue's indexer needs"
                )
            }
            SetupAction::QueueTableCreated { name } => {
                write!(f, "created the expiry queue table {name:?} (on-demand)")
            }
            SetupAction::QueueTableAlreadyPresent { name } => {
                write!(f, "expiry queue table {name:?} already present")
            }
            SetupAction::StreamAlreadyWithOldImages { view } => {
                write!(f, "the table's stream is on with old images ({view})")
            }
            SetupAction::StreamWithoutOldImages { view } => write!(
                f,
                "warning: the table's stream is on as {view}, without old images, so expiry records cannot come from it; changing the view type starts a new stream (disable it, then enable it with NEW_AND_OLD_IMAGES) and cuts off its readers, so setup leaves it to you"
            ),
            SetupAction::LeaseTableAlreadyPresent { name } => {
                write!(f, "lease table {name:?} already present")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupReport {
    pub table: String,
    pub actions: Vec<SetupAction>,
}

impl SetupReport {
    pub fn changed(&self) -> bool {
        self.actions.iter().any(SetupAction::is_change)
    }
}

/// What setup will do about the index's capacity, without changing anything: describes the
/// table and applies [`capacity::plan`]. An error here is the error [`setup`] would stop with.
pub async fn plan(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    options: &SetupOptions,
) -> Result<IndexPlan, AdapterError> {
    let shape = TableShape::describe(dynamo, table).await?;
    if shape.is_none() && options.create_table.is_none() {
        return Err(AdapterError::TableNotFound {
            table: table.to_string(),
            endpoint: dynamo.describe_endpoint(),
        });
    }
    let plan = capacity::plan(table, shape.as_ref(), layout, options.index_capacity)?;
    Ok(match plan {
        // Shown with its capacity when one was asked for (and is not applied).
        IndexPlan::Present {
            requested: requested @ Some(_),
            ..
        } => IndexPlan::Present {
            capacity: shape
                .as_ref()
                .and_then(|s| capacity::index_capacity(s, &layout.index_name)),
            requested,
        },
        other => other,
    })
}

/// Brings `table` to the layout precise-ttl needs. See the module docs.
pub async fn setup(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    options: &SetupOptions,
) -> Result<SetupReport, AdapterError> {
    let mut actions = Vec::new();
    let started = Instant::now();
    let described = TableShape::describe(dynamo, table).await?;
    // Before any change: a provisioned table without a capacity for the index (or a capacity
    // for an on-demand one) stops here.
    let index_plan = match (&described, &options.create_table) {
        (None, None) => None,
        _ => Some(capacity::plan(
            table,
            described.as_ref(),
            layout,
            options.index_capacity,
        )?),
    };
    let shape = match (described, &options.create_table) {
        (Some(shape), Some(create)) => {
            check_key(&shape, create)?;
            actions.push(SetupAction::TableAlreadyExists);
            shape
        }
        (Some(shape), None) => shape,
        (None, Some(create)) => {
            check_names(
                table,
                layout,
                &create.partition_key,
                create.sort_key.as_ref(),
            )?;
            step_again_if_transient(|retry| async move {
                if retry && TableShape::describe(dynamo, table).await?.is_some() {
                    return Ok(());
                }
                create_table(dynamo, table, layout, create).await
            })
            .await?;
            actions.push(SetupAction::TableCreated);
            TableShape::require(dynamo, table).await?
        }
        (None, None) => {
            return Err(AdapterError::TableNotFound {
                table: table.to_string(),
                endpoint: dynamo.describe_endpoint(),
            });
        }
    };
    check_names(table, layout, &shape.partition, shape.sort.as_ref())?;
    for (attribute, role) in [
        (&layout.ttl_attribute, "TTL"),
        (&layout.shard_attribute, "shard"),
    ] {
        if let Some(defined) = shape.attribute_types.get(attribute).filter(|t| *t != "N") {
            return Err(AdapterError::AttributeType {
                table: table.to_string(),
                attribute: attribute.clone(),
                defined: defined.clone(),
                role,
            });
        }
    }

    let mut shape = shape;
    match shape.expiry_index(layout)? {
        Some(_) => {}
        None => {
            if shape.status != "ACTIVE" {
                shape = wait_active(dynamo, table, layout, options, started, false).await?;
            }
            step_again_if_transient(|retry| {
                let shape = &shape;
                let index_plan = index_plan.as_ref();
                async move {
                    if retry
                        && TableShape::require(dynamo, table)
                            .await?
                            .expiry_index(layout)?
                            .is_some()
                    {
                        return Ok(());
                    }
                    add_index(dynamo, shape, layout, index_plan).await
                }
            })
            .await?;
            actions.push(SetupAction::IndexCreated);
            shape = TableShape::require(dynamo, table).await?;
        }
    }
    let index_status = shape
        .expiry_index(layout)?
        .map(|i| (i.status.clone(), i.projection.clone()));
    match index_status {
        Some((status, projection)) if status == "ACTIVE" && shape.status == "ACTIVE" => {
            if !actions.contains(&SetupAction::IndexCreated)
                && !actions.contains(&SetupAction::TableCreated)
            {
                actions.push(SetupAction::IndexAlreadyPresent { projection });
            }
        }
        Some((status, _)) => match options.wait {
            None => actions.push(SetupAction::IndexBuilding { status }),
            Some(_) => {
                wait_active(dynamo, table, layout, options, started, true).await?;
                actions.push(SetupAction::WaitedForActive {
                    seconds: started.elapsed().as_secs(),
                });
            }
        },
        None => unreachable_index(table, layout)?,
    }

    if options.native_ttl {
        // It describes the setting before it changes it, so running it again is safe.
        actions.push(step_again_if_transient(|_| native_ttl(dynamo, table, layout)).await?);
    } else {
        actions.push(SetupAction::NativeTtlLeftAlone);
    }
    if options.stream {
        actions.push(enable_old_image_stream(dynamo, table).await?);
    }
    if let Some(name) = &options.lease_table {
        actions.push(lease_table(dynamo, name).await?);
    }
    Ok(SetupReport {
        table: table.to_string(),
        actions,
    })
}

fn unreachable_index(table: &str, layout: &TtlLayout) -> Result<(), AdapterError> {
    // We just created it; DescribeTable not listing it is a store inconsistency worth reporting.
    Err(AdapterError::IndexMissing {
        table: table.to_string(),
        index: layout.index_name.clone(),
    })
}

fn check_key(shape: &TableShape, create: &CreateTable) -> Result<(), AdapterError> {
    let same = shape.partition == create.partition_key && shape.sort == create.sort_key;
    if same {
        return Ok(());
    }
    let wanted = match &create.sort_key {
        Some(s) => format!("{} + {}", create.partition_key, s),
        None => create.partition_key.to_string(),
    };
    Err(AdapterError::TableKeyMismatch {
        table: shape.name.clone(),
        expected: wanted,
        found: shape.describe_key(),
    })
}

fn check_names(
    table: &str,
    layout: &TtlLayout,
    partition: &KeyAttribute,
    sort: Option<&KeyAttribute>,
) -> Result<(), AdapterError> {
    for key in std::iter::once(partition).chain(sort) {
        for (attribute, role) in [
            (&layout.ttl_attribute, "TTL"),
            (&layout.shard_attribute, "shard"),
        ] {
            if &key.name == attribute {
                return Err(AdapterError::KeyAttribute {
                    table: table.to_string(),
                    attribute: attribute.clone(),
                    role,
                });
            }
        }
    }
    Ok(())
}

fn number_definition(name: &str) -> AttributeDefinition {
    attribute(name, ScalarAttributeType::N)
}

fn index_keys(layout: &TtlLayout) -> Vec<KeySchemaElement> {
    vec![
        key_element(&layout.shard_attribute, AwsKeyRole::Hash),
        key_element(&layout.ttl_attribute, AwsKeyRole::Range),
    ]
}

fn keys_only() -> Projection {
    Projection::builder()
        .projection_type(ProjectionType::KeysOnly)
        .build()
}

async fn create_table(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    create: &CreateTable,
) -> Result<(), AdapterError> {
    let mut definitions = vec![
        number_definition(&layout.shard_attribute),
        number_definition(&layout.ttl_attribute),
    ];
    let mut keys = Vec::new();
    for (key, role) in [
        (Some(&create.partition_key), AwsKeyRole::Hash),
        (create.sort_key.as_ref(), AwsKeyRole::Range),
    ] {
        if let Some(key) = key {
            definitions.push(attribute(&key.name, key.kind.to_aws()));
            keys.push(key_element(&key.name, role));
        }
    }
    let index = GlobalSecondaryIndex::builder()
        .index_name(&layout.index_name)
        .set_key_schema(Some(index_keys(layout)))
        .projection(keys_only())
        .build()
        .expect("name, keys and projection are set");
    dynamo
        .query
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(definitions))
        .set_key_schema(Some(keys))
        .global_secondary_indexes(index)
        .send()
        .await
        .map_err(|e| AdapterError::from_sdk("CreateTable", &dynamo.describe_endpoint(), e))?;
    Ok(())
}

/// Runs a setup step with [`again_if_transient`]. `step(true)` is a retry: a failed attempt's
/// change may have been made before its answer was lost, so a retry looks first.
async fn step_again_if_transient<T, Fut>(
    mut step: impl FnMut(bool) -> Fut,
) -> Result<T, AdapterError>
where
    Fut: std::future::Future<Output = Result<T, AdapterError>>,
{
    let backoff = precise_ttl_core::Backoff {
        base: std::time::Duration::from_millis(200),
        cap: std::time::Duration::from_secs(3),
        max_attempts: 8,
    };
    let mut retry = false;
    again_if_transient(&backoff, || step(std::mem::replace(&mut retry, true))).await
}

async fn add_index(
    dynamo: &Dynamo,
    shape: &TableShape,
    layout: &TtlLayout,
    plan: Option<&IndexPlan>,
) -> Result<(), AdapterError> {
    let mut create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(&layout.index_name)
        .set_key_schema(Some(index_keys(layout)))
        .projection(keys_only());
    if shape.provisioned.is_some() {
        // A provisioned table needs capacity for its index, and it is the caller's choice
        // (capacity.rs says why): the plan made before any change carries it. Without one
        // (the table turned provisioned since), stop rather than guess.
        let Some(IndexPlan::Provisioned { capacity, .. }) = plan else {
            return capacity::plan(&shape.name, Some(shape), layout, None).map(|_| ());
        };
        create = create.provisioned_throughput(
            ProvisionedThroughput::builder()
                .read_capacity_units(capacity.read)
                .write_capacity_units(capacity.write)
                .build()
                .expect("both capacities are set"),
        );
    }
    let create = create.build().expect("name, keys and projection are set");
    dynamo
        .query
        .update_table()
        .table_name(&shape.name)
        .attribute_definitions(number_definition(&layout.shard_attribute))
        .attribute_definitions(number_definition(&layout.ttl_attribute))
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder().create(create).build(),
        )
        .send()
        .await
        .map_err(|e| AdapterError::from_sdk("UpdateTable", &dynamo.describe_endpoint(), e))?;
    Ok(())
}

async fn wait_active(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    options: &SetupOptions,
    started: Instant,
    with_index: bool,
) -> Result<TableShape, AdapterError> {
    let limit = options.wait.unwrap_or(Duration::from_secs(3600));
    loop {
        let shape = TableShape::require(dynamo, table).await?;
        let index_ready = !with_index
            || shape
                .expiry_index(layout)?
                .is_some_and(|i| i.status == "ACTIVE");
        if shape.status == "ACTIVE" && index_ready {
            return Ok(shape);
        }
        if started.elapsed() >= limit {
            return Err(AdapterError::WaitTimedOut {
                what: format!(
                    "table {table:?} and index {:?} to become ACTIVE",
                    layout.index_name
                ),
                waited_secs: started.elapsed().as_secs(),
            });
        }
        tracing::info!(table, status = %shape.status, "waiting for the table and index to become ACTIVE");
        tokio::time::sleep(options.poll_interval).await;
    }
}

/// Creates the lease table `name` unless it exists, and says which.
pub(crate) async fn lease_table(dynamo: &Dynamo, name: &str) -> Result<SetupAction, AdapterError> {
    let name = name.to_string();
    Ok(
        match precise_ttl_dynamodb::lease::create_lease_table(dynamo, &name).await? {
            true => SetupAction::LeaseTableCreated { name },
            false => SetupAction::LeaseTableAlreadyPresent { name },
        },
    )
}

pub(crate) async fn native_ttl(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
) -> Result<SetupAction, AdapterError> {
    let endpoint = dynamo.describe_endpoint();
    let described = dynamo
        .query
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(|e| AdapterError::from_sdk("DescribeTimeToLive", &endpoint, e))?;
    let current = described.time_to_live_description();
    let status = current.and_then(|d| d.time_to_live_status().cloned());
    let attribute = current.and_then(|d| d.attribute_name()).map(str::to_string);
    match status {
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling) => match attribute {
            Some(a) if a == layout.ttl_attribute => Ok(SetupAction::NativeTtlAlreadyEnabled),
            other => Err(AdapterError::NativeTtlOnOtherAttribute {
                table: table.to_string(),
                enabled: other.unwrap_or_default(),
                wanted: layout.ttl_attribute.clone(),
            }),
        },
        Some(TimeToLiveStatus::Disabling) => Err(AdapterError::NativeTtlBusy {
            table: table.to_string(),
            status: "DISABLING".into(),
        }),
        _ => {
            dynamo
                .query
                .update_time_to_live()
                .table_name(table)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .enabled(true)
                        .attribute_name(&layout.ttl_attribute)
                        .build()
                        .expect("enabled and name are set"),
                )
                .send()
                .await
                .map_err(|e| AdapterError::from_sdk("UpdateTimeToLive", &endpoint, e))?;
            Ok(SetupAction::NativeTtlEnabled)
        }
    }
}

/// Turns the table's stream on with new and old images if it is off; says what it found.
pub async fn enable_old_image_stream(
    dynamo: &Dynamo,
    table: &str,
) -> Result<SetupAction, AdapterError> {
    let spec = precise_ttl_stream::stream::describe_table(dynamo, table)
        .await?
        .stream_specification()
        .cloned();
    if let Some(spec) = spec.filter(|s| s.stream_enabled()) {
        let view = spec
            .stream_view_type()
            .map(|v| v.as_str().to_string())
            .unwrap_or_else(|| "unknown".into());
        return Ok(match spec.stream_view_type() {
            Some(
                aws_sdk_dynamodb::types::StreamViewType::OldImage
                | aws_sdk_dynamodb::types::StreamViewType::NewAndOldImages,
            ) => SetupAction::StreamAlreadyWithOldImages { view },
            _ => SetupAction::StreamWithoutOldImages { view },
        });
    }
    precise_ttl_stream::stream::turn_on_stream(
        dynamo,
        table,
        aws_sdk_dynamodb::types::StreamViewType::NewAndOldImages,
    )
    .await?;
    Ok(SetupAction::StreamEnabled)
}
