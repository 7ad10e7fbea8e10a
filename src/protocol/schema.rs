//! JSON schemas generated from the Rust types that arguments parse into, so
//! a tool's advertised schema and its `Args` cannot drift apart.
//!
//! [`tool_args!`] takes a struct definition and emits the serde struct (with
//! `deny_unknown_fields`) and its [`SchemaType`] and [`ToolArgs`] impls.
//! Field types map through [`SchemaType`]: strings, booleans, integers,
//! `Option<T>` (not required), `Vec<T>`, nested `tool_args!` structs and
//! [`string_enum!`] enums. A field is required unless it is an `Option` or
//! marked `#[serde(default)]`. Per field, `#[schema(...)]` adds what a type
//! cannot say: `values = [...]` (an `enum` narrower than the type),
//! `minimum = N`, `description = "..."`, or `skip` (left out of the schema;
//! the tool adds it itself). Keys come out in the order the catalog has
//! always had: `type` (with `items`, `enum` or `properties`), `enum`,
//! `minimum`, `description`.
//!
//! The catalog is byte-identical across builds (the provider's prompt cache
//! depends on it): `serde_json`'s `preserve_order` keeps keys in insertion
//! order, and these functions insert them in one fixed order.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A type whose values a tool's arguments can hold, with its JSON schema.
pub trait SchemaType {
    /// Whether a field of this type must be present.
    const REQUIRED: bool = true;
    /// The schema of one value, `type` first.
    fn schema() -> Map<String, Value>;
}

/// The arguments of a tool: parsed from the model's JSON, described by
/// [`ToolArgs::parameters`].
pub trait ToolArgs: DeserializeOwned {
    /// The `parameters` schema advertised in the tool's spec.
    fn parameters() -> Value;
}

fn typed(name: &str) -> Map<String, Value> {
    let mut schema = Map::new();
    schema.insert("type".into(), Value::from(name));
    schema
}

impl SchemaType for String {
    fn schema() -> Map<String, Value> {
        typed("string")
    }
}

impl SchemaType for bool {
    fn schema() -> Map<String, Value> {
        typed("boolean")
    }
}

macro_rules! integer_schema {
    ($($int:ty),*) => {$(
        impl SchemaType for $int {
            fn schema() -> Map<String, Value> {
                typed("integer")
            }
        }
    )*};
}
integer_schema!(u32, u64, usize);

impl<T: SchemaType> SchemaType for Option<T> {
    const REQUIRED: bool = false;
    fn schema() -> Map<String, Value> {
        T::schema()
    }
}

impl<T: SchemaType> SchemaType for Vec<T> {
    fn schema() -> Map<String, Value> {
        let mut schema = typed("array");
        schema.insert("items".into(), Value::Object(T::schema()));
        schema
    }
}

/// The schema of a string that takes one of `values`.
pub fn string_enum_schema(values: &[&str]) -> Map<String, Value> {
    let mut schema = typed("string");
    schema.insert("enum".into(), Value::from(values));
    schema
}

/// What `#[schema(...)]` says about one field.
#[derive(Debug, Clone, Copy, Default)]
pub struct FieldDoc {
    pub values: Option<&'static [&'static str]>,
    pub minimum: Option<u64>,
    pub description: Option<&'static str>,
    pub skip: bool,
}

impl FieldDoc {
    /// `schema` (a type's) with this field's additions, in catalog order.
    pub fn apply(&self, mut schema: Map<String, Value>) -> Value {
        if let Some(values) = self.values {
            schema.insert("enum".into(), Value::from(values));
        }
        if let Some(minimum) = self.minimum {
            schema.insert("minimum".into(), Value::from(minimum));
        }
        if let Some(description) = self.description {
            schema.insert("description".into(), Value::from(description));
        }
        Value::Object(schema)
    }
}

/// Builds an object's schema field by field.
#[derive(Debug, Default)]
pub struct ObjectSchema {
    properties: Map<String, Value>,
    required: Vec<Value>,
}

impl ObjectSchema {
    /// Adds field `name` of type `T`; `defaulted` is its `#[serde(default)]`.
    pub fn field<T: SchemaType>(&mut self, name: &str, doc: FieldDoc, defaulted: bool) {
        if doc.skip {
            return;
        }
        self.properties.insert(name.into(), doc.apply(T::schema()));
        if T::REQUIRED && !defaulted {
            self.required.push(Value::from(name));
        }
    }

    /// The schema of a nested object: no `additionalProperties`, as the
    /// catalog always had it (serde still refuses unknown fields).
    pub fn nested(self) -> Map<String, Value> {
        let mut schema = typed("object");
        schema.insert("properties".into(), Value::Object(self.properties));
        if !self.required.is_empty() {
            schema.insert("required".into(), Value::Array(self.required));
        }
        schema
    }
}

/// A tool's `parameters`: the object's schema, closed to other properties.
pub fn tool_parameters(object: Map<String, Value>) -> Value {
    let mut schema = object;
    schema.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(schema)
}

/// Declares a tool's argument struct and derives its schema; see the module
/// documentation for what a field may say.
macro_rules! tool_args {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[schema($($key:ident $(= $val:expr)?),* $(,)?)])?
                $(#[serde($serde:ident $(, alias = $alias:literal)?)])?
                $fvis:vis $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde($serde $(, alias = $alias)?)])?
                $fvis $field: $ty,
            )*
        }

        impl $crate::protocol::schema::SchemaType for $name {
            fn schema() -> serde_json::Map<String, serde_json::Value> {
                let mut object = $crate::protocol::schema::ObjectSchema::default();
                $(
                    object.field::<$ty>(
                        stringify!($field),
                        $crate::protocol::schema::FieldDoc {
                            $($($key: $crate::protocol::schema::field_doc_value!($key $($val)?),)*)?
                            ..Default::default()
                        },
                        $crate::protocol::schema::serde_default!($($serde)?),
                    );
                )*
                object.nested()
            }
        }

        impl $crate::protocol::schema::ToolArgs for $name {
            fn parameters() -> serde_json::Value {
                $crate::protocol::schema::tool_parameters(
                    <$name as $crate::protocol::schema::SchemaType>::schema(),
                )
            }
        }
    };
}
pub(crate) use tool_args;

/// One `#[schema(...)]` key's value for [`FieldDoc`].
macro_rules! field_doc_value {
    (skip) => {
        true
    };
    (values $val:expr) => {
        Some(&$val)
    };
    ($key:ident $val:expr) => {
        Some($val)
    };
}
pub(crate) use field_doc_value;

/// Whether a field's `#[serde(...)]` gives it a default; only `default` is
/// accepted, so no other serde attribute can change what parses unseen.
macro_rules! serde_default {
    () => {
        false
    };
    (default) => {
        true
    };
}
pub(crate) use serde_default;

/// Declares an enum that travels as one of a fixed set of strings, with its
/// schema listing exactly the strings serde accepts.
// For argument fields that take a closed set of strings; the tools' own
// arguments have none yet.
#[allow(unused_macros)]
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[doc = $doc:literal])* $variant:ident = $text:literal),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $($(#[doc = $doc])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The string this value travels as.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value that travels as `text`, if any.
            pub fn parse(text: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|value| value.as_str() == text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::protocol::schema::SchemaType for $name {
            fn schema() -> serde_json::Map<String, serde_json::Value> {
                $crate::protocol::schema::string_enum_schema(&[$($text),*])
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use string_enum;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    string_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Speed {
            Slow = "slow",
            FullAhead = "full_ahead",
        }
    }

    tool_args! {
        #[derive(Debug, PartialEq)]
        struct Inner {
            name: String,
            #[serde(default)]
            tags: Vec<String>,
        }
    }

    tool_args! {
        #[derive(Debug)]
        struct Sample {
            /// Developer docs stay docs; descriptions are explicit.
            #[schema(description = "What to do.")]
            task: String,
            #[schema(minimum = 1, description = "Default 10.")]
            count: Option<u64>,
            #[serde(default)]
            flag: bool,
            #[schema(values = ["slow"])]
            narrowed: Option<String>,
            speed: Option<Speed>,
            inner: Option<Vec<Inner>>,
            #[schema(skip)]
            hidden: Option<String>,
        }
    }

    #[test]
    fn the_schema_follows_the_struct_in_catalog_key_order() {
        let expected = json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What to do."},
                "count": {"type": "integer", "minimum": 1, "description": "Default 10."},
                "flag": {"type": "boolean"},
                "narrowed": {"type": "string", "enum": ["slow"]},
                "speed": {"type": "string", "enum": ["slow", "full_ahead"]},
                "inner": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}}
                        },
                        "required": ["name"]
                    }
                }
            },
            "required": ["task"],
            "additionalProperties": false
        });
        // Compared as text: key order is part of the bytes.
        assert_eq!(Sample::parameters().to_string(), expected.to_string());
    }

    #[test]
    fn the_struct_parses_what_the_schema_describes_and_refuses_the_rest() {
        let full = json!({
            "task": "t", "count": 2, "flag": true, "narrowed": "slow",
            "speed": "full_ahead", "inner": [{"name": "n"}], "hidden": "h"
        });
        let sample: Sample = serde_json::from_value(full).unwrap();
        assert_eq!((sample.task.as_str(), sample.count), ("t", Some(2)));
        assert!(sample.flag);
        assert_eq!(sample.narrowed.as_deref(), Some("slow"));
        assert_eq!(sample.speed, Some(Speed::FullAhead));
        assert_eq!(
            sample.inner,
            Some(vec![Inner {
                name: "n".into(),
                tags: vec![]
            }])
        );
        assert_eq!(sample.hidden.as_deref(), Some("h"));
        assert!(serde_json::from_value::<Sample>(json!({})).is_err());
        assert!(serde_json::from_value::<Sample>(json!({"task": "t", "x": 1})).is_err());
        assert!(serde_json::from_value::<Sample>(json!({"task": "t", "speed": "fast"})).is_err());
    }

    #[test]
    fn a_string_enum_travels_as_its_strings() {
        let texts: Vec<&str> = Speed::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(texts, ["slow", "full_ahead"]);
        for speed in Speed::ALL {
            assert_eq!(serde_json::to_value(speed).unwrap(), json!(speed.as_str()));
            assert_eq!(Speed::parse(speed.as_str()), Some(*speed));
            assert_eq!(speed.to_string(), speed.as_str());
        }
        assert_eq!(Speed::parse("fast"), None);
    }
}
