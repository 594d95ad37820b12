//! Sync rules over REST: the built-in ones while none is stored, CRUD with roles,
//! versions (409) and errors naming the field (400); a dry run with no cluster.

use serde_json::{json, Value};

use crate::app::Setup;

fn rule_body(resources: Value) -> Value {
    json!({"description": "test", "clusters": "*", "resources": resources})
}

#[tokio::test]
async fn sync_rules_have_crud_with_roles_versions_and_errors_that_name_the_field() {
    let api = Setup::default().start().await;
    let (admin, guest) = (api.admin(), api.guest());

    // No rule stored: the built-in ones are in force, and shown.
    let (code, list) = guest.call("GET", "/rest-api/v1/sync-rules", None).await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["data"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "default-metadata-only"]);
    let default = &list["data"]["items"][0];
    assert_eq!(
        (
            &default["builtIn"],
            &default["inForce"],
            &default["version"]
        ),
        (&json!(true), &json!(true), &Value::Null)
    );
    assert_eq!(
        default["resources"],
        json!([{"group": "*", "version": "*", "resource": "*"}])
    );

    let body = rule_body(json!([{"group": "", "version": "v1", "resource": "configmaps"}]));
    let (code, refused) = guest
        .call("POST", "/rest-api/v1/sync-rule/cms", Some(body.clone()))
        .await;
    assert_eq!(code, 403, "{refused}");
    let (code, created) = admin
        .call("POST", "/rest-api/v1/sync-rule/cms", Some(body.clone()))
        .await;
    assert_eq!(code, 201, "{created}");
    let v1 = created["data"]["version"].as_i64().unwrap();
    assert_eq!(created["data"]["builtIn"], false);
    assert_eq!(
        created["data"]["transform"],
        json!({"mode": "full", "trim": []})
    );
    let (code, again) = admin
        .call("POST", "/rest-api/v1/sync-rule/cms", Some(body.clone()))
        .await;
    assert_eq!(code, 409, "{again}");

    // The stored rule replaces the built-in ones; those stay readable, not in force.
    let (_, list) = guest.call("GET", "/rest-api/v1/sync-rules", None).await;
    assert_eq!(list["data"]["total"], 1, "{list}");
    let (code, built_in) = guest
        .call("GET", "/rest-api/v1/sync-rule/default", None)
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        (&built_in["data"]["builtIn"], &built_in["data"]["inForce"]),
        (&json!(true), &json!(false))
    );
    let (code, _) = admin
        .call("DELETE", "/rest-api/v1/sync-rule/default", None)
        .await;
    assert_eq!(code, 409, "a built-in rule is not stored");

    // Versions: compare-and-swap.
    let mut changed = body.clone();
    changed["namespaces"] = json!(["web"]);
    let (code, stale) = admin
        .call(
            "PUT",
            &format!("/rest-api/v1/sync-rule/cms?version={}", v1 + 100),
            Some(changed.clone()),
        )
        .await;
    assert_eq!(code, 409, "{stale}");
    let (code, updated) = admin
        .call(
            "PUT",
            &format!("/rest-api/v1/sync-rule/cms?version={v1}"),
            Some(changed.clone()),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    let v2 = updated["data"]["version"].as_i64().unwrap();
    assert!(v2 > v1);
    assert_eq!(updated["data"]["namespaces"], json!(["web"]));
    let (code, _) = admin
        .call(
            "PUT",
            &format!("/rest-api/v1/sync-rule/cms?version={v1}"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(code, 409, "the version read before is stale now");
    let (code, _) = guest
        .call("PUT", "/rest-api/v1/sync-rule/cms", Some(body.clone()))
        .await;
    assert_eq!(code, 403);
    let (code, _) = admin
        .call("PUT", "/rest-api/v1/sync-rule/nothing", Some(body.clone()))
        .await;
    assert_eq!(code, 404);

    // Bad input: 400, the message naming the field.
    let cases = [
        (
            "bad",
            rule_body(json!([{"group": "", "version": "", "resource": "pods"}])),
            "resources[0].version",
        ),
        (
            "bad",
            rule_body(json!([{"group": "Apps", "version": "v1", "resource": "pods"}])),
            "resources[0].group",
        ),
        ("bad", rule_body(json!([])), "resources"),
        (
            "bad",
            json!({"clusters": {"names": ["ok", "Not OK"]}, "resources": [{"version": "v1", "resource": "pods"}]}),
            "clusters.names[1]",
        ),
        (
            "bad",
            json!({"clusters": "*", "resources": [{"version": "v1", "resource": "pods"}], "namespaces": ["a_b"]}),
            "namespaces[0]",
        ),
        (
            "bad",
            json!({"clusters": "*", "resources": [{"version": "v1", "resource": "pods"}], "colour": "red"}),
            "colour",
        ),
        (
            "bad",
            json!({"clusters": "*", "resources": [{"version": "v1", "resource": "pods"}], "namespaces": "web"}),
            "namespaces",
        ),
        (
            "bad",
            json!({"clusters": "*", "resources": [{"version": "v1", "resource": "pods"}], "transform": {"mode": "everything"}}),
            "transform.mode",
        ),
        ("Bad_Name", body.clone(), "name"),
    ];
    for (name, body, field) in cases {
        let path = format!("/rest-api/v1/sync-rule/{name}");
        let (code, answer) = admin.call("POST", &path, Some(body.clone())).await;
        let message = answer["message"].as_str().unwrap_or_default();
        assert_eq!(code, 400, "{body}: {answer}");
        assert!(
            message.contains(field),
            "{body}: {message:?} names no {field}"
        );
    }

    // A dry run stores nothing; with no cluster registered it tries none.
    let (code, dry) = admin
        .call("POST", "/rest-api/v1/sync-rule/cms/dry-run", None)
        .await;
    assert_eq!(code, 200, "{dry}");
    assert_eq!(dry["data"]["rule"], "cms", "{dry}");
    assert_eq!(dry["data"]["clusters"], json!([]), "{dry}");
    let (code, _) = guest
        .call("POST", "/rest-api/v1/sync-rule/cms/dry-run", None)
        .await;
    assert_eq!(code, 403);

    // Deleted: compare-and-swap too; with none left, the built-in ones apply again.
    let (code, _) = admin
        .call(
            "DELETE",
            &format!("/rest-api/v1/sync-rule/cms?version={v1}"),
            None,
        )
        .await;
    assert_eq!(code, 409);
    let (code, _) = guest
        .call("DELETE", "/rest-api/v1/sync-rule/cms", None)
        .await;
    assert_eq!(code, 403);
    let (code, deleted) = admin
        .call(
            "DELETE",
            &format!("/rest-api/v1/sync-rule/cms?version={v2}"),
            None,
        )
        .await;
    assert_eq!((code, &deleted["data"]), (200, &json!("SyncRule deleted")));
    let (code, _) = guest.call("GET", "/rest-api/v1/sync-rule/cms", None).await;
    assert_eq!(code, 404);
    let (_, list) = guest.call("GET", "/rest-api/v1/sync-rules", None).await;
    assert_eq!(list["data"]["total"], 2, "{list}");
    api.assert_no_secret_answered();
}
