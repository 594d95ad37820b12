//! `karpor history`, `karpor diff` and `karpor changes` against a real `karpor serve` and
//! a real kube-apiserver: a Deployment created, its image changed twice and scaled once.
//! History shows the four revisions with a readable line per changed field, diff shows
//! the image lines between two revisions (and "no change" for one against itself), changes
//! lists them with their counts (also searched in the dialect, `--query "select * from
//! changes where ..."`), and `-o json` is the API's answer.

use karpor_testkit::cluster::{namespaces, resource, Kube, LIMIT};
use karpor_testkit::process::{flat_kubeconfig, wait_for, Spawn, EMBEDDED};
use karpor_testkit::service;
use serde_json::{json, Value};

use crate::cli::{karpor, text};

/// The headings of `karpor history`'s blocks (the lines that are not indented).
fn headings(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| !l.is_empty() && !l.starts_with(' '))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_diff_and_changes_show_a_deployments_revisions() {
    let Some(kubeconfig) = service("KARPOR_TEST_KUBECONFIG_A") else {
        return;
    };
    let kube = Kube::from_text(flat_kubeconfig(&kubeconfig)).await;
    // Removed at the end: the synced cluster's documents are not small.
    let dir = tempfile::tempdir().unwrap();
    let server = Spawn::serve(EMBEDDED).in_dir(dir.path()).start();
    let url = server.url("");
    let run = |args: &[&str]| text(&karpor(args, &url, server.dir(), &[]));
    let (code, _, err) = run(&[
        "cluster",
        "add",
        "hist",
        "--kubeconfig",
        &kubeconfig,
        "--wait",
    ]);
    assert_eq!(code, 0, "{err}");

    let ns = karpor_testkit::cluster::kube_name("history");
    kube.create(&namespaces(), None, json!({"metadata": {"name": ns}}))
        .await;
    let deployments = resource("apps", "v1", "Deployment", "deployments");
    kube.create(
        &deployments,
        Some(&ns),
        json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}
                }
            }
        }),
    )
    .await;
    let target = format!("hist/deployment/{ns}/web");
    let history_json = || {
        let (code, out, err) = run(&["history", &target, "-o", "json"]);
        (code == 0)
            .then(|| serde_json::from_str::<Value>(&out).unwrap())
            .ok_or(err)
    };
    let image = |image: &str| {
        json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": image}]}}}})
    };
    let changes = [
        image("nginx:1.26"),
        image("nginx:1.27"),
        json!({"spec": {"replicas": 3}}),
    ];
    // Each change is seen before the next is made, so each is a revision of its own.
    for (seen, patch) in changes.into_iter().enumerate() {
        wait_for(LIMIT, &format!("revision {} is kept", seen + 1), || {
            let answer = history_json();
            async move {
                answer.is_ok_and(|a| a["revisions"].as_array().unwrap().len() == seen + 1)
            }
        })
        .await;
        kube.patch(&deployments, &ns, "web", patch).await;
    }
    wait_for(LIMIT, "all four revisions are kept", || {
        let answer = history_json();
        async move { answer.is_ok_and(|a| a["revisions"].as_array().unwrap().len() == 4) }
    })
    .await;

    // The text: four blocks, newest first, a line per changed field, no colors in a pipe.
    let (code, out, err) = run(&["history", &target]);
    assert_eq!(code, 0, "{err}");
    let blocks = headings(&out);
    assert_eq!(blocks.len(), 4, "{out}");
    assert!(
        blocks[..3].iter().all(|h| h.contains("  updated  ")),
        "{out}"
    );
    assert!(blocks[3].contains("  created  "), "{out}");
    for line in [
        "    ~ spec.template.spec.containers[0].image: nginx:1.25 → nginx:1.26",
        "    ~ spec.template.spec.containers[0].image: nginx:1.26 → nginx:1.27",
        "    ~ spec.replicas: 1 → 3",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} in\n{out}");
    }
    assert!(!out.contains('\x1b'), "{out}");
    // The oldest block shown still has its old values.
    let (code, two, err) = run(&["history", &target, "--limit", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(headings(&two).len(), 2, "{two}");
    assert!(two.contains("nginx:1.26 → nginx:1.27"), "{two}");

    // `-o json` is the API's answer: the revisions, their versions and diffs.
    let answer = history_json().unwrap();
    let revisions = answer["revisions"].as_array().unwrap();
    let kinds: Vec<&str> = revisions
        .iter()
        .map(|r| r["change"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["updated", "updated", "updated", "created"]);
    assert!(
        revisions[0]["diff"]
            .as_array()
            .unwrap()
            .contains(&json!({"op": "replace", "path": "/spec/replicas", "value": 3})),
        "{answer}"
    );
    let version = |i: usize| revisions[i]["resourceVersion"].as_str().unwrap().to_owned();

    // Two revisions: the image lines, nothing about replicas.
    let (code, out, err) = run(&["diff", &target, "--from", &version(3), "--to", &version(2)]);
    assert_eq!(code, 0, "{err}");
    let changed: Vec<&str> = out
        .lines()
        .skip(2)
        .filter(|l| l.starts_with('-') || l.starts_with('+'))
        .collect();
    assert!(
        changed
            .iter()
            .any(|l| l.starts_with('-') && l.ends_with("image: nginx:1.25")),
        "{out}"
    );
    assert!(
        changed
            .iter()
            .any(|l| l.starts_with('+') && l.ends_with("image: nginx:1.26")),
        "{out}"
    );
    assert!(!changed.iter().any(|l| l.contains("replicas")), "{out}");
    let (code, out, _) = run(&["diff", &target, "--from", &version(1), "--to", &version(1)]);
    assert_eq!((code, out.as_str()), (0, "no change\n"));
    // Then (the second revision's time) against now: the newest image and the replicas.
    let then = revisions[2]["seenAt"].as_str().unwrap();
    let (code, out, err) = run(&["diff", &target, "--since", then]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with('+') && l.ends_with("image: nginx:1.27")),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "+  replicas: 3"), "{out}");
    let (code, _, err) = run(&["diff", &target]);
    assert_eq!(code, 2, "nothing to compare: {err}");

    // What changed in the namespace: the four, newest first, and their counts.
    let scope = format!("hist/{ns}");
    let (code, out, err) = run(&["changes", &scope, "--since", "10m"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("TIME"), "{out}");
    let rows = &lines[1..lines.len() - 1];
    assert_eq!(rows.len(), 4, "{out}");
    for (row, change) in rows
        .iter()
        .zip(["updated", "updated", "updated", "created"])
    {
        let cells: Vec<&str> = row.split_whitespace().collect();
        let web = format!("{ns}/web");
        assert_eq!(
            cells[1..5],
            [change, "Deployment", web.as_str(), "hist"],
            "{out}"
        );
    }
    assert_eq!(
        lines.last().copied(),
        Some("4 changes: 3 updated, 1 created"),
        "{out}"
    );
    let (code, out, err) = run(&["changes", &scope, "--change", "created", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["total"], 1, "{answer}");
    assert_eq!(answer["items"][0]["change"], "created", "{answer}");
    // The same in the dialect: the three updates of the last 10 minutes, and none before.
    let sql = format!(
        "select * from changes where cluster = 'hist' and namespace = '{ns}' \
         and kind = 'Deployment' and change = 'updated' and time > now() - interval 10 minute"
    );
    let (code, out, err) = run(&["changes", "--query", &sql, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["total"], 3, "{answer}");
    let counted: Vec<&Value> = answer["byChange"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["count"] != 0)
        .collect();
    assert_eq!(
        counted,
        [&json!({"key": "updated", "count": 3})],
        "{answer}"
    );
    let before =
        format!("select * from changes where namespace = '{ns}' and time < now() - interval 1 day");
    let (code, out, err) = run(&["changes", "--query", &before, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["total"],
        0,
        "{out}"
    );
    // A column changes do not have: the server's message naming it, exit 1.
    let (code, _, err) = run(&[
        "changes",
        "--query",
        "select * from changes where labels.app = 'web'",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("400") && err.contains("no column labels"),
        "{err}"
    );

    // A name karpor kept nothing of: the server's message, exit 1.
    let (code, _, err) = run(&["history", &format!("hist/deployment/{ns}/none")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("404") && err.contains("no history"), "{err}");

    kube.delete_namespace(&ns).await;
}
