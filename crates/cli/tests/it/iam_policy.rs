//! The IAM side of the operation-recording test: which IAM action (and on which resource) each
//! recorded request needs, and whether a policy document of deploy/iam/ allows it.
//!
//! The mapping follows AWS's documentation: a DynamoDB or DynamoDB Streams API operation needs
//! the action of its own name (`GetRecords` → `dynamodb:GetRecords`), on the table, the index it
//! names, or the stream; PartiQL's `ExecuteStatement` and `BatchExecuteStatement` need the action
//! of each statement's verb (`DELETE` → `dynamodb:PartiQLDelete`, "IAM policies with PartiQL for
//! DynamoDB"); `BatchWriteItem` and `BatchGetItem` need their action on every table they name;
//! S3's `HeadBucket` needs `s3:ListBucket` on the bucket and `PutObject` `s3:PutObject` on the
//! object (the S3 API reference's permission notes). A request this module cannot map fails the
//! test: a new call must get its line here and in its policy.

use crate::recorder::Request;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// What one request needs from IAM.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub action: String,
    /// The resource's ARN; the region and account are those DynamoDB Local or the test gives.
    pub resource: String,
    /// Every String value the request carries (keys, items, expression values): where a
    /// `dynamodb:LeadingKeys` condition looks for the partition key's value.
    pub values: BTreeSet<String>,
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {}", self.action, self.resource)
    }
}

fn table_arn(table: &str) -> String {
    format!("arn:aws:dynamodb:local:000000000000:table/{table}")
}

/// The first double-quoted name after `FROM` (DELETE, SELECT) or `INTO`/`UPDATE` in a statement.
fn statement_table(statement: &str) -> Option<String> {
    let upper = statement.to_ascii_uppercase();
    let at = ["FROM ", "INTO ", "UPDATE "]
        .iter()
        .find_map(|k| upper.find(k).map(|i| i + k.len()))?;
    let rest = statement[at..].trim_start().strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

fn strings(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// What `request` needs; panics on a request this test does not know how to map.
pub fn needs(request: &Request) -> Vec<Need> {
    let body = &request.body;
    let mut values = BTreeSet::new();
    for field in ["Key", "Item", "ExpressionAttributeValues", "Parameters"] {
        strings(&body[field], &mut values);
    }
    let need = |action: String, resource: String| Need {
        action,
        resource,
        values: values.clone(),
    };
    let operation = request.operation();
    if request.target.starts_with("DynamoDB_20120810.") {
        if operation == "ExecuteStatement" || operation == "BatchExecuteStatement" {
            let statements: Vec<&Value> = match body["Statements"].as_array() {
                Some(s) => s.iter().collect(),
                None => vec![body],
            };
            return statements
                .into_iter()
                .map(|s| {
                    let text = s["Statement"].as_str().expect("a PartiQL statement");
                    let verb = text.split_whitespace().next().unwrap_or_default();
                    let verb = format!("{}{}", &verb[..1], verb[1..].to_ascii_lowercase());
                    let table = statement_table(text).expect("a table in the statement");
                    need(format!("dynamodb:PartiQL{verb}"), table_arn(&table))
                })
                .collect();
        }
        if operation == "BatchWriteItem" || operation == "BatchGetItem" {
            return batch_needs(operation, body);
        }
        let table = body["TableName"].as_str().expect("a TableName");
        let resource = match body["IndexName"].as_str() {
            Some(index) => format!("{}/index/{index}", table_arn(table)),
            None => table_arn(table),
        };
        return vec![need(format!("dynamodb:{operation}"), resource)];
    }
    if request.target.starts_with("DynamoDBStreams_20120810.") {
        // A shard iterator starts with its stream's ARN (DynamoDB's, and DynamoDB Local's).
        let arn = body["StreamArn"]
            .as_str()
            .or_else(|| {
                body["ShardIterator"]
                    .as_str()
                    .and_then(|i| i.split('|').find(|p| p.starts_with("arn:")))
            })
            .unwrap_or_else(|| panic!("no stream ARN in {operation}: {body}"));
        return vec![need(format!("dynamodb:{operation}"), arn.to_string())];
    }
    assert!(request.target.is_empty(), "an unknown service: {request:?}");
    // Path-style addressing (`--archive-endpoint-url`): /BUCKET[/KEY][?QUERY]. The Rust SDK
    // names some operations in the query (`PUT /b/k?x-id=PutObject`).
    let (path, query) = request.path.split_once('?').unwrap_or((&request.path, ""));
    let path = path.trim_start_matches('/');
    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
    match (request.method.as_str(), key.is_empty(), query) {
        ("HEAD", true, "") => vec![need(
            "s3:ListBucket".into(),
            format!("arn:aws:s3:::{bucket}"),
        )],
        ("PUT", false, "" | "x-id=PutObject") => {
            vec![need(
                "s3:PutObject".into(),
                format!("arn:aws:s3:::{bucket}/{key}"),
            )]
        }
        _ => panic!("an S3 call this test does not map to an IAM action: {request:?}"),
    }
}

/// `BatchWriteItem` and `BatchGetItem` name no `TableName`: IAM checks their action on each table
/// of `RequestItems` (the expiry queue's entry writes, `doctor`'s sample of items). A table's
/// `LeadingKeys` values are the strings of its own requests' items and keys only, so that one
/// table's keys never vouch for another's.
fn batch_needs(operation: &str, body: &Value) -> Vec<Need> {
    let tables = body["RequestItems"]
        .as_object()
        .unwrap_or_else(|| panic!("no RequestItems in {operation}: {body}"));
    tables
        .iter()
        .map(|(table, requests)| {
            let mut values = BTreeSet::new();
            // BatchWriteItem: a list of {PutRequest: {Item}} or {DeleteRequest: {Key}};
            // BatchGetItem: {Keys: [...]} (its projection and names are not keys).
            for request in requests.as_array().into_iter().flatten() {
                strings(&request["PutRequest"]["Item"], &mut values);
                strings(&request["DeleteRequest"]["Key"], &mut values);
            }
            strings(&requests["Keys"], &mut values);
            Need {
                action: format!("dynamodb:{operation}"),
                resource: table_arn(table),
                values,
            }
        })
        .collect()
}

/// One statement of a policy document, its placeholders filled in.
#[derive(Debug, Clone)]
pub struct Statement {
    pub sid: String,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
    /// The allowed `dynamodb:LeadingKeys` patterns, when the statement has that condition.
    pub leading_keys: Option<Vec<String>>,
}

/// A policy of deploy/iam/, read and with each placeholder segment of its ARNs (and condition
/// values) replaced: `fill` maps a whole segment between `:` or `/` (`TABLE`, `REGION`,
/// `precise-ttl-leases`) to its value in this test.
pub fn policy(file: &str, fill: &BTreeMap<&str, String>) -> Vec<Statement> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/iam")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).expect("the policy is JSON");
    let list = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    };
    doc["Statement"]
        .as_array()
        .expect("a Statement list")
        .iter()
        .map(|s| {
            assert_eq!(s["Effect"], "Allow", "{file}: only Allow statements");
            let condition = &s["Condition"];
            let leading_keys = ["ForAllValues:StringEquals", "ForAllValues:StringLike"]
                .iter()
                .find_map(|op| condition[op].get("dynamodb:LeadingKeys"))
                .map(|v| list(v).iter().map(|p| filled(p, fill)).collect());
            if leading_keys.is_none() {
                assert!(
                    condition.is_null(),
                    "{file}: a condition this test cannot check: {condition}"
                );
            }
            Statement {
                sid: s["Sid"]
                    .as_str()
                    .expect("every statement has a Sid")
                    .to_string(),
                actions: list(&s["Action"]),
                resources: list(&s["Resource"])
                    .iter()
                    .map(|r| filled(r, fill))
                    .collect(),
                leading_keys,
            }
        })
        .collect()
}

fn filled(text: &str, fill: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut segment = String::new();
    for c in text.chars().chain(std::iter::once('\0')) {
        if c == ':' || c == '/' || c == '\0' {
            out.push_str(
                fill.get(segment.as_str())
                    .map_or(segment.as_str(), String::as_str),
            );
            segment.clear();
            if c != '\0' {
                out.push(c);
            }
        } else {
            segment.push(c);
        }
    }
    out
}

/// `*` matches any run of characters (IAM's ARN and StringLike wildcard; `?` is not used here).
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            let Some(rest) = text.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| glob(tail, &rest[i..]))
        }
    }
}

/// The statement (and action) of `statements` that allows `need`, if any.
pub fn allowing<'a>(statements: &'a [Statement], need: &Need) -> Option<(&'a str, String)> {
    statements.iter().find_map(|s| {
        let action = s.actions.iter().find(|a| glob(a, &need.action))?;
        s.resources.iter().find(|r| glob(r, &need.resource))?;
        if let Some(keys) = &s.leading_keys
            && !need.values.iter().any(|v| keys.iter().any(|k| glob(k, v)))
        {
            return None;
        }
        Some((s.sid.as_str(), action.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_fill_whole_segments_only() {
        let fill = BTreeMap::from([("TABLE", "t1".to_string()), ("REGION", "*".to_string())]);
        assert_eq!(
            filled(
                "arn:aws:dynamodb:REGION:ACCOUNT:table/TABLE/index/precise-ttl",
                &fill
            ),
            "arn:aws:dynamodb:*:ACCOUNT:table/t1/index/precise-ttl"
        );
        assert_eq!(
            filled("dynamodb:DescribeTable", &fill),
            "dynamodb:DescribeTable"
        );
        assert!(glob("arn:aws:s3:::b/p/*", "arn:aws:s3:::b/p/x.jsonl.gz"));
        assert!(!glob("arn:aws:s3:::b/p/*", "arn:aws:s3:::b/q/x"));
        assert!(glob("a*c*e", "abcde"));
    }

    #[test]
    fn partiql_statements_need_the_action_of_their_verb() {
        assert_eq!(
            statement_table(r#"DELETE FROM "my-table" WHERE "pk" = ?"#).as_deref(),
            Some("my-table")
        );
    }

    #[test]
    fn batch_requests_need_their_action_on_each_table_they_name() {
        let request = Request {
            method: "POST".into(),
            path: "/".into(),
            target: "DynamoDB_20120810.BatchWriteItem".into(),
            body: serde_json::json!({"RequestItems": {
                "q": [{"DeleteRequest": {"Key": {"due": {"S": "0001#ab"}}}}],
                "r": [{"PutRequest": {"Item": {"stream": {"S": "arn:s"}}}}],
            }}),
        };
        let needs = needs(&request);
        assert_eq!(needs.len(), 2);
        assert_eq!(needs[0].action, "dynamodb:BatchWriteItem");
        assert!(needs[0].resource.ends_with(":table/q"));
        assert_eq!(needs[0].values, BTreeSet::from(["0001#ab".to_string()]));
        assert_eq!(needs[1].values, BTreeSet::from(["arn:s".to_string()]));
    }
}
