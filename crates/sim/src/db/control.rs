//! Tables and their settings: CreateTable, DescribeTable, DeleteTable, ListTables, UpdateTable
//! (indexes, billing, stream settings), DescribeTimeToLive, UpdateTimeToLive.

use super::*;

impl Db {
    // -----------------------------------------------------------------------------------------
    // Tables.

    pub fn create_table(
        &mut self,
        input: CreateTableInput,
        now: Now,
    ) -> Result<serde_json::Value, DbError> {
        if self.tables.contains_key(&input.table_name) {
            return Err(DbError::ResourceInUse(format!(
                "Table already exists: {}",
                input.table_name
            )));
        }
        let table = Table::create(&input, self.defaults, now.instant, now.wall_ms / 1000.0)?;
        let description = table.describe("ACTIVE");
        self.tables.insert(input.table_name, table);
        Ok(serde_json::json!({ "TableDescription": description }))
    }

    pub fn describe_table(&self, input: TableNameInput) -> Result<serde_json::Value, DbError> {
        let table = self.named_table(&input.table_name)?;
        Ok(serde_json::json!({ "Table": table.describe("ACTIVE") }))
    }

    pub fn delete_table(&mut self, input: TableNameInput) -> Result<serde_json::Value, DbError> {
        let table = self
            .tables
            .remove(&input.table_name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(input.table_name.clone())))?;
        Ok(serde_json::json!({ "TableDescription": table.describe("DELETING") }))
    }

    pub fn list_tables(&self, input: ListTablesInput) -> Result<serde_json::Value, DbError> {
        let limit = input.limit.unwrap_or(100).clamp(1, 100) as usize;
        let start = match &input.exclusive_start_table_name {
            Some(s) => Bound::Excluded(s.clone()),
            None => Bound::Unbounded,
        };
        let names: Vec<&String> = self
            .tables
            .range((start, Bound::Unbounded))
            .map(|(n, _)| n)
            .take(limit + 1)
            .collect();
        let more = names.len() > limit;
        let names: Vec<&String> = names.into_iter().take(limit).collect();
        let mut out = serde_json::json!({ "TableNames": names });
        if more && let Some(last) = names.last() {
            out["LastEvaluatedTableName"] = (*last).clone().into();
        }
        Ok(out)
    }

    pub fn update_table(
        &mut self,
        input: UpdateTableInput,
        now: Now,
    ) -> Result<serde_json::Value, DbError> {
        let defaults = self.defaults.limits;
        let table = self.named_table_mut(&input.table_name)?;
        for d in &input.attribute_definitions {
            let kind = crate::value::ScalarType::parse(&d.attribute_type).ok_or_else(|| {
                DbError::validation(format!("invalid attribute type {}", d.attribute_type))
            })?;
            match table.attribute_types.get(&d.attribute_name) {
                Some(existing) if *existing != kind => {
                    return Err(DbError::validation(format!(
                        "Cannot change the type of attribute {} from {} to {}",
                        d.attribute_name,
                        existing.as_str(),
                        kind.as_str()
                    )));
                }
                _ => {
                    table.attribute_types.insert(d.attribute_name.clone(), kind);
                }
            }
        }
        if input.billing_mode.is_some() || input.provisioned_throughput.is_some() {
            let billing = crate::table::billing(
                input.billing_mode.as_deref(),
                input.provisioned_throughput.as_ref(),
            )?;
            table.set_billing(billing, defaults, now.instant);
        }
        for update in &input.global_secondary_index_updates {
            match (&update.create, &update.delete, &update.update) {
                (Some(create), None, None) => table.add_index(create, defaults, now.instant)?,
                (None, Some(delete), None) => table.remove_index(&delete.index_name)?,
                (None, None, Some(_)) => {
                    return Err(DbError::validation(
                        "updating an index's throughput is not supported by the simulator",
                    ));
                }
                _ => {
                    return Err(DbError::validation(
                        "One or more parameter values were invalid: One of GlobalSecondaryIndexUpdate.Create, Update or Delete must be specified",
                    ));
                }
            }
        }
        if let Some(stream) = &input.stream_specification {
            table.stream_view = stream.stream_enabled.then(|| {
                stream
                    .stream_view_type
                    .clone()
                    .unwrap_or_else(|| "KEYS_ONLY".into())
            });
        }
        Ok(serde_json::json!({ "TableDescription": table.describe("ACTIVE") }))
    }

    pub fn describe_time_to_live(
        &self,
        input: TableNameInput,
    ) -> Result<serde_json::Value, DbError> {
        let table = self.named_table(&input.table_name)?;
        Ok(match &table.ttl {
            Some((attribute, true)) => serde_json::json!({
                "TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": attribute}
            }),
            _ => serde_json::json!({"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}),
        })
    }

    pub fn update_time_to_live(
        &mut self,
        input: UpdateTimeToLiveInput,
    ) -> Result<serde_json::Value, DbError> {
        let table = self.named_table_mut(&input.table_name)?;
        let spec = &input.time_to_live_specification;
        match (&table.ttl, spec.enabled) {
            (Some((_, true)), true) => {
                return Err(DbError::validation("TimeToLive is already enabled"));
            }
            (None | Some((_, false)), false) => {
                return Err(DbError::validation("TimeToLive is already disabled"));
            }
            _ => {}
        }
        table.ttl = Some((spec.attribute_name.clone(), spec.enabled));
        Ok(serde_json::json!({
            "TimeToLiveSpecification": {"Enabled": spec.enabled, "AttributeName": spec.attribute_name}
        }))
    }
}
