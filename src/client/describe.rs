//! `karpor describe CLUSTER/KIND/[NAMESPACE/]NAME`: what kubectl describe shows, from
//! karpor: the object's key fields, its relations (the topology, one hop each way), its
//! audit findings and its recent events (live from the cluster; said so when it does not
//! answer). `-o yaml|json` prints the object instead.

use std::fmt::Write as _;
use std::process::ExitCode;

use karpor_api::types::{AuditData, DetailedObject, ScoreData, TopologyAnswer};
use serde_json::{Map, Value};

use super::output::{emit, print_json, print_yaml, table};
use super::{encode, finish, refused, text, time_text, Api, Failed, Refusal};
use crate::args::{DescribeArgs, Output};

/// Events shown (newest first).
const EVENTS: usize = 10;

pub(crate) async fn run(args: &DescribeArgs) -> ExitCode {
    finish(describe(args).await)
}

/// `(cluster, kind, namespace, name)` of `CLUSTER/KIND/[NAMESPACE/]NAME`.
pub(super) fn target(text: &str) -> Result<(&str, &str, &str, &str), Failed> {
    let parts: Vec<&str> = text.split('/').collect();
    match parts.as_slice() {
        [cluster, kind, name] => Ok((cluster, kind, "", name)),
        [cluster, kind, namespace, name] => Ok((cluster, kind, namespace, name)),
        _ => Err(refused(format!(
            "{text:?}: give CLUSTER/KIND/NAME or CLUSTER/KIND/NAMESPACE/NAME"
        ))),
    }
}

/// The query naming the object of `CLUSTER/KIND/[NAMESPACE/]NAME` (no namespace for a
/// cluster-scoped one).
pub(super) fn locator(target_text: &str) -> Result<String, Failed> {
    let (cluster, kind, namespace, name) = target(target_text)?;
    let mut locator = format!(
        "cluster={}&kind={}&name={}",
        encode(cluster),
        encode(kind),
        encode(name)
    );
    if !namespace.is_empty() {
        locator.push_str(&format!("&namespace={}", encode(namespace)));
    }
    Ok(locator)
}

/// The object `CLUSTER/KIND/[NAMESPACE/]NAME` names, and its full locator (the object's
/// own apiVersion and spelling), for the routes that need one.
pub(super) async fn fetch(
    api: &Api,
    target_text: &str,
) -> Result<(DetailedObject, String), Failed> {
    let (cluster, ..) = target(target_text)?;
    let locator = locator(target_text)?;
    let detailed: DetailedObject = api
        .get(
            reqwest::Method::GET,
            &format!("/insight/detail?{locator}"),
            None,
        )
        .await?;
    // The object is any kind's, as stored: its fields are read by name.
    let object = Value::Object(detailed.object.clone());
    let mut full = format!(
        "cluster={}&apiVersion={}&kind={}&name={}",
        encode(cluster),
        encode(&text(&object["apiVersion"])),
        encode(&text(&object["kind"])),
        encode(&text(&object["metadata"]["name"]))
    );
    let namespace = text(&object["metadata"]["namespace"]);
    if !namespace.is_empty() {
        full.push_str(&format!("&namespace={}", encode(&namespace)));
    }
    Ok((detailed, full))
}

async fn describe(args: &DescribeArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let (detailed, full) = fetch(&api, &args.target).await?;
    let (cluster, ..) = target(&args.target)?;
    match args.output.format() {
        Output::Json => {
            print_json(&detailed);
            return Ok(());
        }
        Output::Yaml => return print_yaml(&detailed),
        _ => {}
    }
    let mut out = String::new();
    fields(&mut out, cluster, &detailed);
    let topology = api
        .try_get(
            reqwest::Method::GET,
            &format!("/insight/topology?{full}&hops=1"),
        )
        .await?;
    relations(&mut out, cluster, &detailed.object, topology);
    let audit = api
        .try_get(reqwest::Method::GET, &format!("/insight/audit?{full}"))
        .await?;
    let score = api
        .try_get(reqwest::Method::GET, &format!("/insight/score?{full}"))
        .await?;
    findings(&mut out, audit, score);
    let events = api
        .try_get(reqwest::Method::GET, &format!("/insight/events?{full}"))
        .await?;
    recent_events(&mut out, events);
    emit(&out);
    Ok(())
}

fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{:<16}{value}", format!("{label}:"));
}

fn pairs(map: &Value) -> String {
    let pairs: Vec<String> = map
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect())
        .unwrap_or_default();
    if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(", ")
    }
}

/// The fields kubectl describe leads with, and a few by kind.
fn fields(out: &mut String, cluster: &str, detailed: &DetailedObject) {
    let o = &Value::Object(detailed.object.clone());
    let m = &o["metadata"];
    line(out, "Name", text(&m["name"]));
    if !text(&m["namespace"]).is_empty() {
        line(out, "Namespace", text(&m["namespace"]));
    }
    line(
        out,
        "Kind",
        format!("{} ({})", text(&o["kind"]), text(&o["apiVersion"])),
    );
    line(out, "Cluster", cluster);
    line(out, "Labels", pairs(&m["labels"]));
    line(out, "Annotations", pairs(&m["annotations"]));
    line(out, "Created", text(&m["creationTimestamp"]));
    let owners: Vec<String> = m["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| format!("{}/{}", text(&r["kind"]), text(&r["name"])))
        .collect();
    if !owners.is_empty() {
        line(out, "Controlled By", owners.join(", "));
    }
    let spec = &o["spec"];
    let status = &o["status"];
    match text(&o["kind"]).as_str() {
        "Pod" => {
            line(out, "Status", text(&status["phase"]));
            line(out, "Node", text(&spec["nodeName"]));
            line(out, "IP", text(&status["podIP"]));
            let containers: Vec<String> = spec["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| format!("{} ({})", text(&c["name"]), text(&c["image"])))
                .collect();
            line(out, "Containers", containers.join(", "));
        }
        "Deployment" | "StatefulSet" | "ReplicaSet" => {
            line(
                out,
                "Replicas",
                format!(
                    "{} desired, {} ready",
                    text(&spec["replicas"]),
                    status["readyReplicas"].as_u64().unwrap_or(0)
                ),
            );
            line(out, "Selector", pairs(&spec["selector"]["matchLabels"]));
        }
        "Service" => {
            line(out, "Type", text(&spec["type"]));
            line(out, "IP", text(&spec["clusterIP"]));
            line(out, "Selector", pairs(&spec["selector"]));
        }
        _ => {}
    }
    if let Some(conditions) = status["conditions"].as_array() {
        let shown: Vec<String> = conditions
            .iter()
            .map(|c| format!("{}={}", text(&c["type"]), text(&c["status"])))
            .collect();
        line(out, "Conditions", shown.join(", "));
    }
    let karpor = &detailed.karpor;
    let copy = if karpor.deleted {
        "stored copy (deleted from the cluster)"
    } else {
        "stored copy"
    };
    line(
        out,
        "Synced",
        format!("{} ({copy})", time_text(&karpor.sync_at)),
    );
}

/// `KIND/NAME` of a topology node id (`GROUP/VERSION.KIND:NAMESPACE.NAME`).
fn short(id: &str) -> String {
    let (gvk, object) = id.split_once(':').unwrap_or((id, ""));
    let kind = gvk.rsplit_once('.').map_or(gvk, |(_, k)| k);
    let name = object.split_once('.').map_or(object, |(_, n)| n);
    format!("{kind}/{name}")
}

fn relations(
    out: &mut String,
    cluster: &str,
    object: &Map<String, Value>,
    topology: Result<TopologyAnswer, Refusal>,
) {
    let _ = writeln!(out, "\nRelations:");
    let nodes = match topology {
        Ok(TopologyAnswer::Resources(mut graph)) => graph.remove(cluster).unwrap_or_default(),
        Ok(TopologyAnswer::Kinds(_)) => Default::default(),
        Err(refusal) => {
            let _ = writeln!(out, "  <unavailable: {}>", refusal.message);
            return;
        }
    };
    let metadata = |key: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(key))
            .map(text)
            .unwrap_or_default()
    };
    let kind = object.get("kind").map(text).unwrap_or_default();
    let Some(me) = nodes.values().find(|n| {
        let group = &n.resource_group;
        group.kind == kind
            && group.name == metadata("name")
            && group.namespace == metadata("namespace")
    }) else {
        let _ = writeln!(out, "  <none>");
        return;
    };
    for (label, ids) in [("Parents", &me.parents), ("Children", &me.children)] {
        let ids: Vec<String> = ids.iter().map(|id| short(id)).collect();
        let shown = if ids.is_empty() {
            "<none>".to_owned()
        } else {
            ids.join(", ")
        };
        let _ = writeln!(out, "  {label}: {shown}");
    }
}

fn findings(
    out: &mut String,
    audit: Result<AuditData, Refusal>,
    score: Result<ScoreData, Refusal>,
) {
    let score = score
        .ok()
        .map_or_else(String::new, |s| format!(", score {:.1}", s.score));
    let groups = match audit {
        Ok(audit) => audit.issue_groups,
        Err(refusal) => {
            let _ = writeln!(out, "\nFindings:\n  <unavailable: {}>", refusal.message);
            return;
        }
    };
    let _ = writeln!(out, "\nFindings ({}{score}):", groups.len());
    if groups.is_empty() {
        let _ = writeln!(out, "  <none>");
        return;
    }
    let rows = groups
        .into_iter()
        .map(|g| vec![g.issue.severity, g.issue.rule, g.issue.message])
        .collect();
    for row in table(&["SEVERITY", "RULE", "FINDING"], rows).lines() {
        let _ = writeln!(out, "  {row}");
    }
}

/// The cluster's Event objects (core/v1, any fields the server sent), newest first.
fn recent_events(out: &mut String, events: Result<Vec<Value>, Refusal>) {
    let events = match events {
        Ok(events) => events,
        Err(refusal) => {
            let _ = writeln!(out, "\nEvents:\n  <unavailable: {}>", refusal.message);
            return;
        }
    };
    let _ = writeln!(out, "\nEvents:");
    if events.is_empty() {
        let _ = writeln!(out, "  <none>");
        return;
    }
    let rows = events
        .iter()
        .take(EVENTS)
        .map(|e| {
            let last = [
                &e["lastTimestamp"],
                &e["eventTime"],
                &e["metadata"]["creationTimestamp"],
            ]
            .into_iter()
            .map(text)
            .find(|t| !t.is_empty())
            .unwrap_or_default();
            vec![
                text(&e["type"]),
                text(&e["reason"]),
                last,
                e["count"].as_u64().unwrap_or(1).to_string(),
                text(&e["message"]),
            ]
        })
        .collect();
    for row in table(&["TYPE", "REASON", "LAST SEEN", "COUNT", "MESSAGE"], rows).lines() {
        let _ = writeln!(out, "  {row}");
    }
}
