//! A rule's path (`spec.volumes[*].configMap`) over an object: each key steps into a map,
//! `[*]` into every element of an array, and a key over an array steps into every element
//! (so `spec.imagePullSecrets.name` works as Karpor's JSONPath does).

use serde_json::Value;

/// Every value at `path` (none when a key is missing).
pub(crate) fn values<'a>(root: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![root];
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (key, all) = match segment.strip_suffix("[*]") {
            Some(key) => (key, true),
            None => (segment, false),
        };
        let mut next = Vec::new();
        for value in flatten(current) {
            if let Some(found) = value.get(key) {
                next.push(found);
            }
        }
        current = if all { flatten(next) } else { next };
    }
    current
}

fn flatten(values: Vec<&Value>) -> Vec<&Value> {
    values
        .into_iter()
        .flat_map(|v| match v {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        })
        .collect()
}

/// The text at `path` of one value: a string, or nothing.
pub(crate) fn text<'a>(value: &'a Value, path: &str) -> Option<&'a str> {
    values(value, path).into_iter().find_map(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_arrays_and_missing_keys() {
        let pod = json!({"spec": {
            "volumes": [{"configMap": {"name": "a"}}, {"secret": {"secretName": "s"}},
                        {"configMap": {"name": "b"}}],
            "imagePullSecrets": [{"name": "p1"}, {"name": "p2"}],
            "nodeName": "n1"
        }});
        let names: Vec<&str> = values(&pod, "spec.volumes[*].configMap")
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let pulls: Vec<&Value> = values(&pod, "spec.imagePullSecrets.name");
        assert_eq!(pulls, [&json!("p1"), &json!("p2")]);
        assert_eq!(text(&pod, "spec.nodeName"), Some("n1"));
        assert!(values(&pod, "spec.missing.name").is_empty());
        assert!(values(&pod, "spec.nodeName.deeper").is_empty());
    }
}
