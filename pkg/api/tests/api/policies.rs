//! The rules users tune over REST: the audit policy (the config file's until one is
//! stored; versions, unknown rules refused) and the relation rules behind the topology
//! (built-in ones listed and replaced by name, user rules for any kind).

use serde_json::{json, Value};

use crate::app::Setup;

#[tokio::test]
async fn the_audit_policy_is_the_config_files_until_one_is_stored() {
    let api = Setup::default().start().await;
    let (admin, guest) = (api.admin(), api.guest());
    let (code, rules) = guest.call("GET", "/rest-api/v1/audit/rules", None).await;
    assert_eq!(code, 200, "{rules}");
    let rules = rules["data"].as_array().unwrap().clone();
    assert!(!rules.is_empty());
    for key in [
        "id",
        "category",
        "severity",
        "effectiveSeverity",
        "title",
        "rationale",
        "remediation",
    ] {
        assert!(rules[0].get(key).is_some(), "{key}: {}", rules[0]);
    }
    let first = rules[0]["id"].as_str().unwrap().to_owned();
    let effective = |rules: &Value, id: &str| -> Value {
        rules["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()["effectiveSeverity"]
            .clone()
    };

    let (code, policy) = guest.call("GET", "/rest-api/v1/audit/policy", None).await;
    assert_eq!(code, 200, "{policy}");
    assert_eq!(policy["data"]["source"], "config", "{policy}");
    assert_eq!(policy["data"]["version"], Value::Null);
    assert_eq!(policy["data"]["config"]["enabled"], true);
    // No syncer in this process: nobody re-audits here.
    assert_eq!(policy["data"]["reaudit"], Value::Null, "{policy}");

    let disabled = json!({"enabled": true, "disabled": [first]});
    let (code, _) = guest
        .call("PUT", "/rest-api/v1/audit/policy", Some(disabled.clone()))
        .await;
    assert_eq!(code, 403);
    let (code, stored) = admin
        .call("PUT", "/rest-api/v1/audit/policy", Some(disabled.clone()))
        .await;
    assert_eq!(code, 200, "{stored}");
    assert_eq!(stored["data"]["source"], "stored", "{stored}");
    let version = stored["data"]["version"].as_i64().unwrap();
    let (_, rules) = guest.call("GET", "/rest-api/v1/audit/rules", None).await;
    assert_eq!(effective(&rules, &first), Value::Null, "off: {rules}");

    let (code, answer) = admin
        .call(
            "PUT",
            "/rest-api/v1/audit/policy",
            Some(json!({"disabled": ["no-such-rule"]})),
        )
        .await;
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("no-such-rule"),
        "{answer}"
    );
    let stale = format!("/rest-api/v1/audit/policy?version={}", version + 100);
    let (code, answer) = admin.call("PUT", &stale, Some(disabled)).await;
    assert_eq!(code, 409, "{answer}");

    let (code, reset) = admin
        .call("DELETE", "/rest-api/v1/audit/policy", None)
        .await;
    assert_eq!(code, 200, "{reset}");
    assert_eq!(reset["data"]["source"], "config", "{reset}");
    let (_, rules) = guest.call("GET", "/rest-api/v1/audit/rules", None).await;
    assert_ne!(effective(&rules, &first), Value::Null, "on again: {rules}");
    api.assert_no_secret_answered();
}

#[tokio::test]
async fn relation_rules_are_listed_replaced_and_added_by_name() {
    let api = Setup::default().start().await;
    let (admin, guest) = (api.admin(), api.guest());
    let (code, list) = guest.call("GET", "/rest-api/v1/relation-rules", None).await;
    assert_eq!(code, 200, "{list}");
    let items = list["data"]
        .as_array()
        .or_else(|| list["data"]["items"].as_array())
        .unwrap_or_else(|| panic!("a list: {list}"))
        .clone();
    let service_pods = items
        .iter()
        .find(|r| r["name"] == "service-pods")
        .unwrap_or_else(|| panic!("built-in service-pods: {list}"));
    assert_eq!(
        (&service_pods["builtIn"], &service_pods["stored"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(
        service_pods["relation"],
        json!({"type": "selector", "path": "spec.selector"})
    );

    let widget = json!({
        "description": "a widget's ConfigMap",
        "parent": {"group": "example.com", "kind": "Widget"},
        "child": {"group": "", "kind": "ConfigMap"},
        "relation": {"type": "reference", "path": "spec.configMap"},
    });
    let (code, _) = guest
        .call(
            "POST",
            "/rest-api/v1/relation-rule/widget-config",
            Some(widget.clone()),
        )
        .await;
    assert_eq!(code, 403);
    let (code, created) = admin
        .call(
            "POST",
            "/rest-api/v1/relation-rule/widget-config",
            Some(widget.clone()),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"]["name"], "widget-config");
    assert_eq!(
        (&created["data"]["builtIn"], &created["data"]["stored"]),
        (&json!(false), &json!(true))
    );
    let version = created["data"]["version"].as_i64().unwrap();
    let (code, _) = admin
        .call(
            "POST",
            "/rest-api/v1/relation-rule/widget-config",
            Some(widget.clone()),
        )
        .await;
    assert_eq!(code, 409);
    let mut bad = widget.clone();
    bad["relation"] = json!({"type": "reference", "path": "spec..x"});
    let (code, answer) = admin
        .call("POST", "/rest-api/v1/relation-rule/bad", Some(bad))
        .await;
    assert_eq!(code, 400, "{answer}");

    // A built-in rule is replaced by storing one of its name.
    let mut off = service_pods.clone();
    for key in ["name", "builtIn", "stored", "version", "updatedAt"] {
        off.as_object_mut().unwrap().remove(key);
    }
    off["enabled"] = json!(false);
    let (code, replaced) = admin
        .call("PUT", "/rest-api/v1/relation-rule/service-pods", Some(off))
        .await;
    assert_eq!(code, 200, "{replaced}");
    assert_eq!(
        (&replaced["data"]["enabled"], &replaced["data"]["stored"]),
        (&json!(false), &json!(true))
    );

    // PUT and DELETE are compare-and-swaps with a version.
    let stale = format!(
        "/rest-api/v1/relation-rule/widget-config?version={}",
        version + 100
    );
    let (code, answer) = admin.call("PUT", &stale, Some(widget.clone())).await;
    assert_eq!(code, 409, "{answer}");
    let current = format!("/rest-api/v1/relation-rule/widget-config?version={version}");
    let (code, answer) = admin.call("PUT", &current, Some(widget)).await;
    assert_eq!(code, 200, "{answer}");
    let (code, answer) = admin.call("DELETE", &stale, None).await;
    assert_eq!(code, 409, "a stale version deletes nothing: {answer}");
    let (code, _) = admin
        .call("DELETE", "/rest-api/v1/relation-rule/widget-config", None)
        .await;
    assert_eq!(code, 200);
    let (code, _) = guest
        .call("GET", "/rest-api/v1/relation-rule/widget-config", None)
        .await;
    assert_eq!(code, 404);
    api.assert_no_secret_answered();
}
