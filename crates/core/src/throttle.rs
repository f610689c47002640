//! Which resource refused a request: DynamoDB's throttling reasons, classified.
//!
//! Since 2025 DynamoDB names the refusing resource in `ThrottlingReasons` (on the exception and on
//! a batch statement's error): `{Table|Index}{Read|Write}{Limit}`, where the limit is
//! `KeyRangeThroughputExceeded` (one partition), `ProvisionedThroughputExceeded`,
//! `AccountLimitExceeded` or `MaxOnDemandThroughputExceeded` (the whole table or index). The
//! engine acts on the scope: a partition's refusal slows that partition's work only, a
//! table-wide one slows everything. See
//! <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TroubleshootingThrottling.html>.

/// What a throttle refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThrottleScope {
    /// One partition of the base table (a key range): the keys it holds, nothing else.
    TablePartition,
    /// The table as a whole (its provisioned capacity, on-demand maximum or the account limit).
    Table,
    /// One partition of the index: for our layout, one shard's (a lane's) index entries.
    IndexPartition,
    /// The index as a whole.
    Index,
    /// The store did not say (an older endpoint, DynamoDB Local, a reason not known here).
    Unknown,
}

impl ThrottleScope {
    /// The scope of one DynamoDB throttling reason (`TableWriteKeyRangeThroughputExceeded`, ...).
    /// An unknown reason is [`ThrottleScope::Unknown`]: new reasons must not be taken for a
    /// partition's when they may be the table's.
    pub fn of_reason(reason: &str) -> ThrottleScope {
        let (index, rest) = if let Some(rest) = reason.strip_prefix("Index") {
            (true, rest)
        } else if let Some(rest) = reason.strip_prefix("Table") {
            (false, rest)
        } else {
            return ThrottleScope::Unknown;
        };
        let Some(limit) = rest
            .strip_prefix("Write")
            .or_else(|| rest.strip_prefix("Read"))
        else {
            return ThrottleScope::Unknown;
        };
        let whole = matches!(
            limit,
            "ProvisionedThroughputExceeded"
                | "AccountLimitExceeded"
                | "MaxOnDemandThroughputExceeded"
        );
        match (index, limit == "KeyRangeThroughputExceeded", whole) {
            (false, true, _) => ThrottleScope::TablePartition,
            (true, true, _) => ThrottleScope::IndexPartition,
            (false, _, true) => ThrottleScope::Table,
            (true, _, true) => ThrottleScope::Index,
            _ => ThrottleScope::Unknown,
        }
    }

    /// The scope of several reasons given for one refusal: the widest one (a table-wide limit
    /// outranks a partition's), `Unknown` for none.
    pub fn of_reasons<'a>(reasons: impl IntoIterator<Item = &'a str>) -> ThrottleScope {
        reasons
            .into_iter()
            .map(ThrottleScope::of_reason)
            .max_by_key(|s| s.width())
            .unwrap_or(ThrottleScope::Unknown)
    }

    /// Whether the refusal concerns the whole table or index, not one partition of it.
    pub fn is_wide(self) -> bool {
        matches!(self, ThrottleScope::Table | ThrottleScope::Index)
    }

    /// A label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ThrottleScope::TablePartition => "table_partition",
            ThrottleScope::Table => "table",
            ThrottleScope::IndexPartition => "index_partition",
            ThrottleScope::Index => "index",
            ThrottleScope::Unknown => "unknown",
        }
    }

    fn width(self) -> u8 {
        match self {
            ThrottleScope::Unknown => 0,
            ThrottleScope::TablePartition | ThrottleScope::IndexPartition => 1,
            ThrottleScope::Table | ThrottleScope::Index => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ThrottleScope as S;

    #[test]
    fn reasons_map_to_their_scope() {
        for (reason, scope) in [
            ("TableWriteKeyRangeThroughputExceeded", S::TablePartition),
            ("TableReadKeyRangeThroughputExceeded", S::TablePartition),
            ("IndexWriteKeyRangeThroughputExceeded", S::IndexPartition),
            ("TableWriteProvisionedThroughputExceeded", S::Table),
            ("TableWriteAccountLimitExceeded", S::Table),
            ("TableWriteMaxOnDemandThroughputExceeded", S::Table),
            ("IndexReadAccountLimitExceeded", S::Index),
            ("IndexWriteProvisionedThroughputExceeded", S::Index),
            ("TableWriteSomethingNew", S::Unknown),
            ("", S::Unknown),
        ] {
            assert_eq!(S::of_reason(reason), scope, "{reason}");
        }
    }

    #[test]
    fn the_widest_of_several_reasons_wins() {
        assert_eq!(
            S::of_reasons([
                "TableWriteKeyRangeThroughputExceeded",
                "TableWriteAccountLimitExceeded"
            ]),
            S::Table
        );
        assert_eq!(S::of_reasons([]), S::Unknown);
        assert!(S::Index.is_wide() && !S::IndexPartition.is_wide());
    }
}
