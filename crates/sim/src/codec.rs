//! The wire format: DynamoDB's JSON (`{"S": "..."}` attribute values, base64 binaries), the
//! request shapes of the supported operations (unknown members are ignored, as DynamoDB's
//! newer members would be), and the response shapes. Values that fail DynamoDB's own checks
//! (a malformed Number) become ValidationException, malformed JSON SerializationException.

use crate::error::DbError;
use crate::value::{BINARY_TEXT, Item, Name, Number, Value};
use base64::Engine;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Marks a serde error message as a validation failure rather than malformed JSON.
const VALIDATION: &str = "\u{1}validation:";

/// Decodes a request body.
pub fn decode<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, DbError> {
    serde_json::from_slice(body).map_err(|e| {
        let message = e.to_string();
        match message.split_once(VALIDATION) {
            Some((_, rest)) => {
                let rest = rest.split(" at line ").next().unwrap_or(rest);
                DbError::Validation(rest.to_string())
            }
            None => DbError::Serialization(message),
        }
    })
}

/// A string borrowed from the request body when it has no escapes.
struct Text<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

fn validation<E: de::Error>(message: impl fmt::Display) -> E {
    E::custom(format!("{VALIDATION}{message}"))
}

// ---------------------------------------------------------------------------------------------
// Attribute values.

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an attribute value object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Some(tag) = map.next_key::<Text<'de>>()? else {
            return Err(validation(
                "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes",
            ));
        };
        let value = match &*tag.0 {
            "S" => Value::S(std::sync::Arc::from(&*map.next_value::<Text<'de>>()?.0)),
            "N" => Value::N(number(&map.next_value::<Text<'de>>()?.0)?),
            "B" => Value::B(binary(&map.next_value::<Text<'de>>()?.0)?),
            "BOOL" => Value::Bool(map.next_value()?),
            "NULL" => {
                let null: bool = map.next_value()?;
                if !null {
                    return Err(validation(
                        "One or more parameter values were invalid: Null attribute value types must have the value of true",
                    ));
                }
                Value::Null
            }
            "L" => Value::L(map.next_value::<Vec<Value>>()?.into_boxed_slice()),
            "M" => {
                let m: Item = map.next_value()?;
                Value::M(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            }
            "SS" => {
                let set: Vec<String> = map.next_value()?;
                if set.is_empty() {
                    return Err(validation(
                        "One or more parameter values were invalid: An string set  may not be empty",
                    ));
                }
                Value::Ss(set.into_iter().map(String::into_boxed_str).collect())
            }
            "NS" => {
                let set: Vec<Text<'de>> = map.next_value()?;
                if set.is_empty() {
                    return Err(validation(
                        "One or more parameter values were invalid: An number set  may not be empty",
                    ));
                }
                Value::Ns(set.iter().map(|t| number(&t.0)).collect::<Result<_, _>>()?)
            }
            "BS" => {
                let set: Vec<Text<'de>> = map.next_value()?;
                if set.is_empty() {
                    return Err(validation(
                        "One or more parameter values were invalid: Binary sets should not be empty",
                    ));
                }
                Value::Bs(set.iter().map(|t| binary(&t.0)).collect::<Result<_, _>>()?)
            }
            other => {
                return Err(validation(format!(
                    "Supplied AttributeValue has an unknown datatype: {other}"
                )));
            }
        };
        if map.next_key::<de::IgnoredAny>()?.is_some() {
            return Err(validation(
                "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes",
            ));
        }
        Ok(value)
    }
}

fn number<E: de::Error>(text: &str) -> Result<Number, E> {
    Number::parse(text).map_err(validation)
}

fn binary<E: de::Error>(text: &str) -> Result<Box<[u8]>, E> {
    BINARY_TEXT
        .decode(text)
        .map(Vec::into_boxed_slice)
        .map_err(|_| E::custom("Base64 encoded length is expected a multiple of 4 bytes"))
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self {
            Value::S(s) => map.serialize_entry("S", &**s)?,
            Value::N(n) => map.serialize_entry("N", n.as_str())?,
            Value::B(b) => map.serialize_entry("B", &BINARY_TEXT.encode(b))?,
            Value::Bool(b) => map.serialize_entry("BOOL", b)?,
            Value::Null => map.serialize_entry("NULL", &true)?,
            Value::L(l) => map.serialize_entry("L", &**l)?,
            Value::M(m) => map.serialize_entry("M", &Pairs(m))?,
            Value::Ss(s) => map.serialize_entry("SS", &**s)?,
            Value::Ns(n) => map.serialize_entry("NS", &NumberList(n))?,
            Value::Bs(b) => map.serialize_entry(
                "BS",
                &b.iter().map(|b| BINARY_TEXT.encode(b)).collect::<Vec<_>>(),
            )?,
        }
        map.end()
    }
}

struct Pairs<'a>(&'a [(Name, Value)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(&**k, v)?;
        }
        map.end()
    }
}

struct NumberList<'a>(&'a [Number]);

impl Serialize for NumberList<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for n in self.0 {
            seq.serialize_element(n.as_str())?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of attribute values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
                let mut item = Item::new();
                while let Some(name) = map.next_key::<Text<'de>>()? {
                    let value: Value = map.next_value()?;
                    item.set(Name::from(&*name.0), value);
                }
                Ok(item)
            }
        }
        deserializer.deserialize_map(ItemVisitor)
    }
}

impl Serialize for Item {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(&**k, v)?;
        }
        map.end()
    }
}

/// A list of values (PartiQL parameters).
#[derive(Debug, Default)]
pub struct Values(pub Vec<Value>);

impl<'de> Deserialize<'de> for Values {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = Values;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of attribute values")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Values, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(4));
                while let Some(v) = seq.next_element::<Value>()? {
                    out.push(v);
                }
                Ok(Values(out))
            }
        }
        deserializer.deserialize_seq(ListVisitor)
    }
}

// ---------------------------------------------------------------------------------------------
// Requests.

pub type Names = HashMap<String, String>;
pub type ValueMap = HashMap<String, Value>;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttributeDefinition {
    pub attribute_name: String,
    pub attribute_type: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct KeySchemaElement {
    pub attribute_name: String,
    pub key_type: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProjectionInput {
    pub projection_type: Option<String>,
    pub non_key_attributes: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ThroughputInput {
    pub read_capacity_units: Option<i64>,
    pub write_capacity_units: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IndexInput {
    pub index_name: String,
    pub key_schema: Vec<KeySchemaElement>,
    #[serde(default)]
    pub projection: ProjectionInput,
    pub provisioned_throughput: Option<ThroughputInput>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StreamSpecificationInput {
    pub stream_enabled: bool,
    pub stream_view_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateTableInput {
    pub table_name: String,
    #[serde(default)]
    pub attribute_definitions: Vec<AttributeDefinition>,
    #[serde(default)]
    pub key_schema: Vec<KeySchemaElement>,
    pub global_secondary_indexes: Option<Vec<IndexInput>>,
    pub local_secondary_indexes: Option<serde_json::Value>,
    pub billing_mode: Option<String>,
    pub provisioned_throughput: Option<ThroughputInput>,
    pub stream_specification: Option<StreamSpecificationInput>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TableNameInput {
    pub table_name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListTablesInput {
    pub exclusive_start_table_name: Option<String>,
    pub limit: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IndexNameInput {
    pub index_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IndexUpdateInput {
    pub create: Option<IndexInput>,
    pub delete: Option<IndexNameInput>,
    pub update: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UpdateTableInput {
    pub table_name: String,
    #[serde(default)]
    pub attribute_definitions: Vec<AttributeDefinition>,
    #[serde(default)]
    pub global_secondary_index_updates: Vec<IndexUpdateInput>,
    pub stream_specification: Option<StreamSpecificationInput>,
    pub billing_mode: Option<String>,
    pub provisioned_throughput: Option<ThroughputInput>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TtlSpecificationInput {
    pub enabled: bool,
    pub attribute_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UpdateTimeToLiveInput {
    pub table_name: String,
    pub time_to_live_specification: TtlSpecificationInput,
}

/// Declares a conditional write's input: its own members, then the members every conditional
/// write shares (no `#[serde(flatten)]`, which would buffer the whole request first).
macro_rules! conditional_input {
    ($name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        #[derive(Debug, Deserialize)]
        #[serde(rename_all = "PascalCase")]
        pub struct $name {
            pub table_name: String,
            $(pub $field: $ty,)*
            pub condition_expression: Option<String>,
            pub expression_attribute_names: Option<Names>,
            pub expression_attribute_values: Option<ValueMap>,
            pub return_values: Option<String>,
            pub return_consumed_capacity: Option<String>,
            pub return_values_on_condition_check_failure: Option<String>,
            /// Legacy parameters, refused.
            pub expected: Option<serde_json::Value>,
            pub conditional_operator: Option<serde_json::Value>,
            pub attribute_updates: Option<serde_json::Value>,
        }

        impl $name {
            /// The members every conditional write shares, borrowed.
            pub fn shared(&self) -> Conditional<'_> {
                Conditional {
                    table_name: &self.table_name,
                    condition: self.condition_expression.as_deref(),
                    names: self.expression_attribute_names.as_ref(),
                    values: self.expression_attribute_values.as_ref(),
                    return_values: self.return_values.as_deref(),
                    rcc: self.return_consumed_capacity.as_deref(),
                    on_failure: self.return_values_on_condition_check_failure.as_deref(),
                    legacy: [
                        ("Expected", self.expected.is_some()),
                        ("ConditionalOperator", self.conditional_operator.is_some()),
                        ("AttributeUpdates", self.attribute_updates.is_some()),
                    ],
                }
            }
        }
    };
}

/// What every conditional write's input holds besides its item or key (see
/// `conditional_input!`), for the writes that read it alike.
#[derive(Debug)]
pub struct Conditional<'a> {
    pub table_name: &'a str,
    pub condition: Option<&'a str>,
    pub names: Option<&'a Names>,
    pub values: Option<&'a ValueMap>,
    pub return_values: Option<&'a str>,
    pub rcc: Option<&'a str>,
    pub on_failure: Option<&'a str>,
    /// Each legacy parameter, and whether the request has it.
    pub legacy: [(&'static str, bool); 3],
}

conditional_input!(PutItemInput { item: Item });
conditional_input!(DeleteItemInput { key: Item });
conditional_input!(UpdateItemInput {
    key: Item,
    update_expression: Option<String>
});

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetItemInput {
    pub table_name: String,
    pub key: Item,
    pub consistent_read: Option<bool>,
    pub projection_expression: Option<String>,
    pub expression_attribute_names: Option<Names>,
    pub return_consumed_capacity: Option<String>,
    pub attributes_to_get: Option<serde_json::Value>,
}

/// Query and Scan.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReadInput {
    pub table_name: String,
    pub index_name: Option<String>,
    pub key_condition_expression: Option<String>,
    pub filter_expression: Option<String>,
    pub projection_expression: Option<String>,
    pub expression_attribute_names: Option<Names>,
    pub expression_attribute_values: Option<ValueMap>,
    pub limit: Option<i64>,
    pub exclusive_start_key: Option<Item>,
    pub scan_index_forward: Option<bool>,
    pub consistent_read: Option<bool>,
    pub select: Option<String>,
    pub segment: Option<i64>,
    pub total_segments: Option<i64>,
    pub return_consumed_capacity: Option<String>,
    /// Legacy parameters, refused.
    pub key_conditions: Option<serde_json::Value>,
    pub scan_filter: Option<serde_json::Value>,
    pub query_filter: Option<serde_json::Value>,
    pub attributes_to_get: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PutRequestInput {
    pub item: Item,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteRequestInput {
    pub key: Item,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct WriteRequestInput {
    pub put_request: Option<PutRequestInput>,
    pub delete_request: Option<DeleteRequestInput>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchWriteItemInput {
    pub request_items: BTreeMap<String, Vec<WriteRequestInput>>,
    pub return_consumed_capacity: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StatementInput {
    pub statement: String,
    #[serde(default)]
    pub parameters: Values,
    pub consistent_read: Option<bool>,
    pub return_values_on_condition_check_failure: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchExecuteStatementInput {
    pub statements: Vec<StatementInput>,
    pub return_consumed_capacity: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExecuteStatementInput {
    #[serde(flatten)]
    pub statement: StatementInput,
    pub return_consumed_capacity: Option<String>,
    pub next_token: Option<String>,
    pub limit: Option<i64>,
}

// ---------------------------------------------------------------------------------------------
// Responses.

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Capacity {
    pub capacity_units: f64,
}

/// One table's `ConsumedCapacity`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ConsumedCapacity {
    pub table_name: String,
    pub capacity_units: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_capacity_units: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_capacity_units: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<Capacity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub global_secondary_indexes: Option<BTreeMap<String, Capacity>>,
}

/// PutItem, DeleteItem, UpdateItem.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct WriteOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Item>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<ConsumedCapacity>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetItemOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<Item>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<ConsumedCapacity>,
}

/// Query and Scan.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReadOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<Item>>,
    pub count: u64,
    pub scanned_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_evaluated_key: Option<Item>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<ConsumedCapacity>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct UnprocessedPut {
    pub item: Item,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct UnprocessedDelete {
    pub key: Item,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct UnprocessedRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub put_request: Option<UnprocessedPut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_request: Option<UnprocessedDelete>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchWriteItemOutput {
    pub unprocessed_items: BTreeMap<String, Vec<UnprocessedRequest>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<Vec<ConsumedCapacity>>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StatementError {
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<Item>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StatementResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<Item>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StatementError>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchExecuteStatementOutput {
    pub responses: Vec<StatementResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<Vec<ConsumedCapacity>>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExecuteStatementOutput {
    pub items: Vec<Item>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<ConsumedCapacity>,
}

#[cfg(test)]
mod tests;
