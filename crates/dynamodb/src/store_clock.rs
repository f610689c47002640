//! Reading the store's clock off its answers: every response's `Date` header goes to a
//! [`StoreTime`] (the engine's clock held back by this host's lead, see
//! [`precise_ttl_engine::skew`]). Error answers count as well: they are dated too.

use aws_sdk_dynamodb::config::interceptors::BeforeDeserializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::primitives::{DateTime, DateTimeFormat};
use precise_ttl_engine::skew::StoreTime;
use std::sync::Arc;

/// The SDK interceptor that reports each answer's `Date`.
#[derive(Clone)]
pub struct DateHeader(Arc<dyn StoreTime>);

impl DateHeader {
    pub fn new(to: Arc<dyn StoreTime>) -> Self {
        DateHeader(to)
    }
}

impl std::fmt::Debug for DateHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DateHeader")
    }
}

/// The epoch second an HTTP `Date` header names (`Tue, 24 Nov 2026 23:53:57 GMT`).
pub fn parse_date(value: &str) -> Option<i64> {
    DateTime::from_str(value, DateTimeFormat::HttpDate)
        .ok()
        .map(|t| t.secs())
}

impl Intercept for DateHeader {
    fn name(&self) -> &'static str {
        "PreciseTtlStoreClock"
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(second) = context
            .response()
            .headers()
            .get("date")
            .and_then(parse_date)
        {
            self.0.observe(second);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn http_dates_parse_to_epoch_seconds() {
        assert_eq!(
            super::parse_date("Wed, 25 Nov 2026 00:10:31 GMT"),
            Some(1_795_565_431)
        );
        assert_eq!(super::parse_date("yesterday"), None);
    }
}
