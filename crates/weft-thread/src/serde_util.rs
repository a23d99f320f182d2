//! Serde helpers shared by the typed model: keeping an explicit `null`, and objects tagged by a
//! discriminator field (`part_kind`, `turn_type`, `message_type`, `kind`).

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Deserializes an optional `any` field so that an explicit `null` is kept as `Some(Value::Null)`
/// (and serialized back as `null`), while an absent field stays `None`.
pub(crate) fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Reads a JSON object and removes its discriminator field, returning the tag and the rest.
pub(crate) fn split_tag<'de, D: Deserializer<'de>>(
    deserializer: D,
    tag: &'static str,
) -> Result<(String, Map<String, Value>), D::Error> {
    let mut map = Map::<String, Value>::deserialize(deserializer)?;
    match map.remove(tag) {
        Some(Value::String(value)) => Ok((value, map)),
        Some(_) => Err(D::Error::custom(format_args!("`{tag}` must be a string"))),
        None => Err(D::Error::missing_field(tag)),
    }
}

/// Deserializes the body of a tagged object (the tag already removed).
pub(crate) fn from_body<T: DeserializeOwned, E: serde::de::Error>(
    body: Map<String, Value>,
) -> Result<T, E> {
    serde_json::from_value(Value::Object(body)).map_err(E::custom)
}

/// Serializes `inner` (a struct serializing to an object) with `tag: value` as its first member.
pub(crate) fn serialize_tagged<S: Serializer, T: Serialize>(
    serializer: S,
    tag: &'static str,
    value: &str,
    inner: &T,
) -> Result<S::Ok, S::Error> {
    use serde::ser::{Error as _, SerializeMap};
    let Value::Object(body) = serde_json::to_value(inner).map_err(S::Error::custom)? else {
        return Err(S::Error::custom(
            "a tagged value must serialize to an object",
        ));
    };
    let mut map = serializer.serialize_map(Some(body.len() + 1))?;
    map.serialize_entry(tag, value)?;
    for (key, value) in &body {
        map.serialize_entry(key, value)?;
    }
    map.end()
}
