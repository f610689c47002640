//! What an invocation's event may carry: settings that override the function's environment.
//!
//! Accepted: EventBridge Scheduler's default payload and a scheduled rule's event (the settings,
//! if any, in `detail`, which the Scheduler sends as a JSON string, often `"{}"`), a plain JSON
//! object of settings (the Scheduler's `Input`, a test invoke), and `{}` or `null`.

use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum EventError {
    #[error("the event is not a JSON object of settings (got {0})")]
    NotAnObject(&'static str),
    #[error("the event's detail is a string that is not a JSON object: {0}")]
    BadDetail(String),
    #[error("setting {0:?} must be a string, number or boolean")]
    BadValue(String),
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The settings an event overrides, by flag name (`poll_interval` is read as `poll-interval`).
pub fn overrides(event: &serde_json::Value) -> Result<BTreeMap<String, String>, EventError> {
    let object = match event {
        serde_json::Value::Null => return Ok(BTreeMap::new()),
        serde_json::Value::Object(o) => o,
        other => return Err(EventError::NotAnObject(kind(other))),
    };
    // An EventBridge event (Scheduler or rule): the settings are its detail.
    let is_eventbridge = object.contains_key("detail-type") && object.contains_key("source");
    let settings = if is_eventbridge {
        match object.get("detail") {
            None | Some(serde_json::Value::Null) => serde_json::Map::new(),
            Some(serde_json::Value::Object(o)) => o.clone(),
            Some(serde_json::Value::String(s)) if s.trim().is_empty() => serde_json::Map::new(),
            Some(serde_json::Value::String(s)) => match serde_json::from_str(s) {
                Ok(serde_json::Value::Object(o)) => o,
                _ => return Err(EventError::BadDetail(s.clone())),
            },
            Some(other) => return Err(EventError::NotAnObject(kind(other))),
        }
    } else {
        object.clone()
    };
    settings
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                serde_json::Value::String(s) => s,
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => return Err(EventError::BadValue(k)),
            };
            Ok((k.replace('_', "-"), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_schedule_payload_is_accepted() {
        // EventBridge Scheduler's default payload for a Lambda target.
        let scheduler = json!({
            "version": "0", "id": "53dc4d37", "detail-type": "Scheduled Event",
            "source": "aws.scheduler", "account": "123456789012",
            "time": "2026-11-25T12:00:00Z", "region": "eu-west-1",
            "resources": ["arn:aws:scheduler:eu-west-1:123456789012:schedule/default/precise-ttl"],
            "detail": "{}"
        });
        assert!(overrides(&scheduler).unwrap().is_empty());
        let rule = json!({
            "version": "0", "id": "89d1a02d", "detail-type": "Scheduled Event",
            "source": "aws.events", "account": "123456789012",
            "time": "2026-11-25T12:00:00Z", "region": "eu-west-1",
            "resources": ["arn:aws:events:eu-west-1:123456789012:rule/precise-ttl"],
            "detail": {}
        });
        assert!(overrides(&rule).unwrap().is_empty());
        assert!(overrides(&json!({})).unwrap().is_empty());
        assert!(overrides(&serde_json::Value::Null).unwrap().is_empty());
        let custom = overrides(&json!({"table": "carts", "shards": 8, "no_leases": true})).unwrap();
        assert_eq!(custom["table"], "carts");
        assert_eq!(custom["shards"], "8");
        assert_eq!(custom["no-leases"], "true");
        let in_detail = json!({"detail-type": "x", "source": "y", "detail": "{\"table\":\"t\"}"});
        assert_eq!(overrides(&in_detail).unwrap()["table"], "t");
    }

    #[test]
    fn other_shapes_are_refused_with_the_reason() {
        assert_eq!(
            overrides(&json!([1])).unwrap_err(),
            EventError::NotAnObject("an array")
        );
        assert!(matches!(
            overrides(&json!({"detail-type": "x", "source": "y", "detail": "nope"})),
            Err(EventError::BadDetail(_))
        ));
        assert_eq!(
            overrides(&json!({"shards": [1]})).unwrap_err(),
            EventError::BadValue("shards".into())
        );
    }
}
