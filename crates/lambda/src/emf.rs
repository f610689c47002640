//! CloudWatch Embedded Metric Format: one JSON log line per document, from which CloudWatch Logs
//! extracts metrics (the namespace, dimension sets and metric names in the `_aws` member; every
//! value a member of the root object). Written here because the maintained crate
//! (`metrics_cloudwatch_embedded`) emits every histogram sample in one array, beyond the
//! specification's 100 values per metric at our rates; the lag goes out as percentiles instead.
//!
//! Specification: <https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>

use serde_json::{Map, Value, json};

/// A CloudWatch unit name as the specification spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Seconds,
    Milliseconds,
    None,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Seconds => "Seconds",
            Unit::Milliseconds => "Milliseconds",
            Unit::None => "None",
        }
    }
}

/// One EMF document: metrics sharing one namespace and one dimension set.
#[derive(Debug, Clone)]
pub struct Document {
    pub namespace: String,
    pub timestamp_ms: u64,
    /// Dimension name and value, in order; all form one dimension set.
    pub dimensions: Vec<(String, String)>,
    pub metrics: Vec<(String, Unit, f64)>,
    /// Members that are not metrics (searchable in CloudWatch Logs Insights).
    pub properties: Vec<(String, Value)>,
}

/// The specification's limits.
pub const MAX_METRICS: usize = 100;
pub const MAX_DIMENSIONS: usize = 30;

impl Document {
    pub fn to_json(&self) -> Value {
        let mut root = Map::new();
        let metrics: Vec<Value> = self
            .metrics
            .iter()
            .take(MAX_METRICS)
            .map(|(name, unit, _)| json!({"Name": name, "Unit": unit.as_str()}))
            .collect();
        let dimension_set: Vec<&String> = self
            .dimensions
            .iter()
            .take(MAX_DIMENSIONS)
            .map(|(k, _)| k)
            .collect();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": self.timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [dimension_set],
                    "Metrics": metrics,
                }],
            }),
        );
        for (k, v) in &self.dimensions {
            root.insert(k.clone(), Value::String(v.clone()));
        }
        for (k, v) in &self.properties {
            root.insert(k.clone(), v.clone());
        }
        for (name, _, value) in self.metrics.iter().take(MAX_METRICS) {
            // Non-finite numbers are not JSON: leave such a value out rather than the line.
            if let Some(n) = serde_json::Number::from_f64(*value) {
                root.insert(name.clone(), Value::Number(n));
            }
        }
        Value::Object(root)
    }

    /// The log line.
    pub fn line(&self) -> String {
        self.to_json().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the specification ("Embedded metric format example"), rebuilt.
    #[test]
    fn the_specifications_example_comes_out_as_written() {
        let doc = Document {
            namespace: "lambda-function-metrics".into(),
            timestamp_ms: 1574109732004,
            dimensions: vec![("functionVersion".into(), "$LATEST".into())],
            metrics: vec![("time".into(), Unit::Milliseconds, 100.0)],
            properties: vec![(
                "requestId".into(),
                "989ffbf8-9ace-4817-a57c-e4dd734019ee".into(),
            )],
        };
        let expected = json!({
            "_aws": {
                "Timestamp": 1574109732004u64,
                "CloudWatchMetrics": [{
                    "Namespace": "lambda-function-metrics",
                    "Dimensions": [["functionVersion"]],
                    "Metrics": [{"Name": "time", "Unit": "Milliseconds"}]
                }]
            },
            "functionVersion": "$LATEST",
            "time": 100.0,
            "requestId": "989ffbf8-9ace-4817-a57c-e4dd734019ee"
        });
        assert_eq!(doc.to_json(), expected);
    }

    /// The specification's rules: every metric and dimension named in `_aws` has a root member
    /// (a number for a metric, a string for a dimension), at most 100 metrics, one line.
    #[test]
    fn every_named_metric_and_dimension_has_its_value_and_limits_hold() {
        let doc = Document {
            namespace: "precise-ttl".into(),
            timestamp_ms: 1,
            dimensions: vec![
                ("function".into(), "f".into()),
                ("table".into(), "t".into()),
            ],
            metrics: (0..150)
                .map(|i| (format!("m{i}"), Unit::Count, i as f64))
                .chain([("nan".into(), Unit::Count, f64::NAN)])
                .collect(),
            properties: vec![],
        };
        let v = doc.to_json();
        let named = v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap();
        assert_eq!(named.len(), MAX_METRICS);
        for m in named {
            assert!(v[m["Name"].as_str().unwrap()].is_number());
        }
        for d in v["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]
            .as_array()
            .unwrap()
        {
            assert!(v[d.as_str().unwrap()].is_string());
        }
        assert!(!doc.line().contains('\n'));
    }
}
