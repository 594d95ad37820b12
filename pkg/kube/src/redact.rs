//! What never leaves karpor in an answered object, decided from the object itself (its
//! own `kind`, and each item of a list), never from what the caller asked for: a Secret's
//! values, the managed fields, and kubectl's last-applied copy (which holds a Secret's
//! values too). Every route that answers objects, stored or live, passes them through
//! [`object`], and so does an agent before a live answer leaves its cluster.

use serde_json::Value;

/// What Karpor writes where it keeps a field's place but not its value.
pub const REDACTED: &str = "[redacted]";

/// kubectl keeps the whole applied object here, Secret values included.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Fields of a Secret that hold its values.
const SECRET_VALUES: [&str; 2] = ["data", "stringData"];

/// The object (or list) as it may be answered.
pub fn object(mut object: Value) -> Value {
    redact_in_place(&mut object, 0);
    object
}

/// Lists nest at most this deep (a List of Lists); deeper is dropped, not walked.
const MAX_DEPTH: usize = 4;

fn redact_in_place(object: &mut Value, depth: usize) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    if let Some(items) = map.get_mut("items").and_then(Value::as_array_mut) {
        for item in items.iter_mut() {
            if depth < MAX_DEPTH {
                redact_in_place(item, depth + 1);
            } else {
                *item = Value::String(REDACTED.to_owned());
            }
        }
    }
    let is_secret = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.eq_ignore_ascii_case("Secret"));
    if is_secret {
        for key in SECRET_VALUES {
            if map.contains_key(key) {
                map.insert(key.to_owned(), Value::String(REDACTED.to_owned()));
            }
        }
    }
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        if metadata.contains_key("managedFields") {
            metadata.insert(
                "managedFields".to_owned(),
                Value::String(REDACTED.to_owned()),
            );
        }
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove(LAST_APPLIED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_known_by_their_own_kind_and_inside_lists() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="},
            "stringData": {"k": "v"}, "metadata": {"name": "s", "managedFields": [{}],
            "annotations": {LAST_APPLIED: "{\"data\":{}}", "keep": "1"}}});
        let redacted = object(secret.clone());
        assert_eq!(redacted["data"], REDACTED);
        assert_eq!(redacted["stringData"], REDACTED);
        assert_eq!(redacted["metadata"]["managedFields"], REDACTED);
        assert_eq!(redacted["metadata"]["annotations"], json!({"keep": "1"}));

        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "items": [secret.clone(), {"kind": "ConfigMap", "data": {"a": "b"}}]});
        let redacted = object(list);
        assert_eq!(redacted["items"][0]["data"], REDACTED);
        assert_eq!(redacted["items"][1]["data"], json!({"a": "b"}));

        let mut deep = secret;
        for _ in 0..10 {
            deep = json!({"kind": "List", "items": [deep]});
        }
        assert!(!object(deep).to_string().contains("dg=="));
    }
}
