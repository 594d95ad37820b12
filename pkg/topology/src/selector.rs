//! Label selectors as Karpor's topology reads them: a map of labels at a path, which
//! selects the objects whose labels hold every pair (an empty map selects nothing).

use std::collections::BTreeMap;

use serde_json::Value;

/// The label map at `path`, when it is one and not empty.
pub fn selector_at(object: &Value, path: &str) -> Option<BTreeMap<String, String>> {
    let map = crate::path::values(object, path)
        .into_iter()
        .find_map(Value::as_object)?;
    let selector: BTreeMap<String, String> = map
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    (!selector.is_empty()).then_some(selector)
}

/// Whether `labels` hold every pair of `selector`.
pub fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_selector_needs_every_pair() {
        let service = json!({"spec": {"selector": {"app": "web", "tier": "fe"}}});
        let selector = selector_at(&service, "spec.selector").unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(selects(
            &selector,
            &labels(&[("app", "web"), ("tier", "fe"), ("x", "y")])
        ));
        assert!(!selects(&selector, &labels(&[("app", "web")])));
        assert!(selector_at(&json!({"spec": {"selector": {}}}), "spec.selector").is_none());
        assert!(selector_at(&json!({"spec": {}}), "spec.selector").is_none());
    }
}
