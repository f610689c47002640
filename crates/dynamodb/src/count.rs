//! Counting what a Query matches (Select COUNT, page by page, with a page cap): the one counting
//! loop that `status`, `doctor`'s capacity check and the expiry queue's status share. It lives
//! here, under both the operator tools and the queue, so neither depends on the other for it.

use crate::error::store_error;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use precise_ttl_engine::StoreError;
use std::collections::HashMap;

/// Items counted (due in a window, over one or more shards), the pages read, and whether a count
/// stopped at the page cap (then `due` is a lower bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DueCount {
    pub due: u64,
    pub capped: bool,
    pub pages: u64,
}

/// Counts what `query` (given where to start) matches, page by page, stopping after
/// `max_pages` pages (`capped` then says the count is a lower bound).
pub async fn count_query<F>(query: F, max_pages: Option<u64>) -> Result<DueCount, StoreError>
where
    F: Fn(Option<HashMap<String, AttributeValue>>) -> QueryFluentBuilder,
{
    let mut count = DueCount::default();
    let mut start = None;
    loop {
        if max_pages.is_some_and(|max| count.pages >= max.max(1)) {
            count.capped = true;
            return Ok(count);
        }
        let out = query(start)
            .select(Select::Count)
            .send()
            .await
            .map_err(|e| store_error("Query", e))?;
        count.pages += 1;
        count.due += out.count.max(0) as u64;
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(count);
        }
    }
}
