//! Label selectors (`matchLabels` and `matchExpressions`) matched against a label set.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects `labels`. An empty selector selects everything; one the
/// API server would refuse (an unknown operator, `In` without values) selects nothing.
pub(crate) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let equal = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    equal
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let label = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => !values.is_empty() && label.is_some_and(|l| values.contains(l)),
                "NotIn" => !values.is_empty() && label.is_none_or(|l| !values.contains(l)),
                "Exists" => values.is_empty() && label.is_some(),
                "DoesNotExist" => values.is_empty() && label.is_none(),
                _ => false,
            }
        })
}

/// Whether `selector` has no requirement at all.
pub(crate) fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn selector(value: serde_json::Value) -> LabelSelector {
        serde_json::from_value(value).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn match_labels() {
        let s = selector(json!({"matchLabels": {"app": "web", "tier": "front"}}));
        assert!(selects(
            &s,
            &labels(&[("app", "web"), ("tier", "front"), ("x", "y")])
        ));
        assert!(!selects(&s, &labels(&[("app", "web")])));
        assert!(!selects(&s, &labels(&[("app", "web"), ("tier", "back")])));
    }

    #[test]
    fn expressions() {
        let pod = labels(&[("app", "web"), ("env", "prod")]);
        let case =
            |expr: serde_json::Value| selects(&selector(json!({"matchExpressions": [expr]})), &pod);
        assert!(case(
            json!({"key": "env", "operator": "In", "values": ["prod", "stage"]})
        ));
        assert!(!case(
            json!({"key": "env", "operator": "In", "values": ["dev"]})
        ));
        assert!(!case(
            json!({"key": "zone", "operator": "In", "values": ["a"]})
        ));
        assert!(!case(json!({"key": "env", "operator": "In", "values": []})));
        assert!(case(
            json!({"key": "env", "operator": "NotIn", "values": ["dev"]})
        ));
        assert!(case(
            json!({"key": "zone", "operator": "NotIn", "values": ["a"]})
        ));
        assert!(!case(
            json!({"key": "env", "operator": "NotIn", "values": ["prod"]})
        ));
        assert!(case(json!({"key": "app", "operator": "Exists"})));
        assert!(!case(json!({"key": "zone", "operator": "Exists"})));
        assert!(case(json!({"key": "zone", "operator": "DoesNotExist"})));
        assert!(!case(json!({"key": "app", "operator": "DoesNotExist"})));
        assert!(!case(
            json!({"key": "app", "operator": "Exists", "values": ["web"]})
        ));
        assert!(!case(
            json!({"key": "app", "operator": "Matches", "values": ["web"]})
        ));
    }

    #[test]
    fn labels_and_expressions_together() {
        let s = selector(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]
        }));
        assert!(selects(&s, &labels(&[("app", "web"), ("env", "prod")])));
        assert!(!selects(&s, &labels(&[("app", "web"), ("env", "dev")])));
        assert!(!selects(&s, &labels(&[("app", "api"), ("env", "prod")])));
    }

    #[test]
    fn empty() {
        let s = selector(json!({}));
        assert!(is_empty(&s) && selects(&s, &labels(&[])));
        assert!(is_empty(&selector(
            json!({"matchLabels": {}, "matchExpressions": []})
        )));
        assert!(!is_empty(&selector(json!({"matchLabels": {"a": "b"}}))));
    }
}
