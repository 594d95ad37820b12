//! `karpor audit [CLUSTER[/NAMESPACE]] [--severity S]`: the scope's score, then one row per
//! finding and resource, most severe first, from `/insight/score` and `/insight/audit`.

use std::process::ExitCode;

use serde_json::{json, Value};

use super::output::{print_json, print_list, print_yaml, Column};
use super::{encode, finish, text, Api, Failed};
use crate::args::{AuditArgs, Output, SeverityArg};

pub(crate) async fn run(args: &AuditArgs) -> ExitCode {
    finish(audit(args).await)
}

async fn audit(args: &AuditArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let locator = match args.scope.as_deref().map(|s| s.split_once('/')) {
        None => String::new(),
        Some(Some((cluster, namespace))) => {
            format!(
                "cluster={}&namespace={}",
                encode(cluster),
                encode(namespace)
            )
        }
        Some(None) => format!(
            "cluster={}",
            encode(args.scope.as_deref().unwrap_or_default())
        ),
    };
    let score = api
        .call(
            reqwest::Method::GET,
            &format!("/insight/score?{locator}"),
            None,
        )
        .await?;
    let audit = api
        .call(
            reqwest::Method::GET,
            &format!("/insight/audit?{locator}"),
            None,
        )
        .await?;
    let wanted = args.severity.map(|s| match s {
        SeverityArg::High => "High",
        SeverityArg::Medium => "Medium",
        SeverityArg::Low => "Low",
    });
    // One row per finding and resource.
    let rows: Vec<Value> = audit["issueGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| wanted.is_none_or(|w| g["issue"]["severity"] == w))
        .flat_map(|g| {
            g["resourceGroups"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| json!({"issue": g["issue"], "resource": r}))
                .collect::<Vec<_>>()
        })
        .collect();
    let format = args.output.format();
    match format {
        Output::Json => print_json(&json!({"score": score, "audit": audit})),
        Output::Yaml => print_yaml(&json!({"score": score, "audit": audit}))?,
        _ => {
            if format != Output::Name {
                println!(
                    "score {:.1} · {} resources · {} findings{}",
                    score["score"].as_f64().unwrap_or(100.0),
                    text(&score["resourceTotal"]),
                    text(&score["issuesTotal"]),
                    by_severity(&score["severityStatistic"])
                );
            }
            print_list(format, &rows, &COLUMNS, row_name)?;
        }
    }
    Ok(())
}

fn by_severity(counts: &Value) -> String {
    let parts: Vec<String> = ["High", "Medium", "Low"]
        .iter()
        .filter_map(|s| counts[s].as_u64().map(|n| format!("{s} {n}")))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// `CLUSTER/KIND/[NAMESPACE/]NAME`.
fn resource(r: &Value) -> String {
    let mut parts = vec![text(&r["cluster"]), text(&r["kind"]).to_lowercase()];
    if !text(&r["namespace"]).is_empty() {
        parts.push(text(&r["namespace"]));
    }
    parts.push(text(&r["name"]));
    parts.join("/")
}

fn row_name(row: &Value) -> String {
    format!(
        "{} {}",
        text(&row["issue"]["rule"]),
        resource(&row["resource"])
    )
}

const COLUMNS: [Column; 6] = [
    Column {
        header: "SEVERITY",
        cell: |r| text(&r["issue"]["severity"]),
        wide: false,
    },
    Column {
        header: "RULE",
        cell: |r| text(&r["issue"]["rule"]),
        wide: false,
    },
    Column {
        header: "RESOURCE",
        cell: |r| resource(&r["resource"]),
        wide: false,
    },
    Column {
        header: "TITLE",
        cell: |r| text(&r["issue"]["title"]),
        wide: false,
    },
    Column {
        header: "MESSAGE",
        cell: |r| text(&r["issue"]["message"]),
        wide: true,
    },
    Column {
        header: "FIX",
        cell: |r| text(&r["issue"]["remediation"]),
        wide: true,
    },
];
