//! `karpor audit [CLUSTER[/NAMESPACE]] [--severity S]`: the scope's score, then one row per
//! finding and resource, most severe first, from `/insight/score` and `/insight/audit`.

use std::process::ExitCode;

use std::collections::BTreeMap;

use karpor_api::types::{AuditData, AuditedResource, Issue, ScoreData};
use serde::Serialize;

use super::output::{print_json, print_list, print_yaml, Column};
use super::{encode, finish, Api, Failed};
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
    let score: ScoreData = api
        .get(
            reqwest::Method::GET,
            &format!("/insight/score?{locator}"),
            None,
        )
        .await?;
    let audit: AuditData = api
        .get(
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
    let rows: Vec<Row> = audit
        .issue_groups
        .iter()
        .filter(|g| wanted.is_none_or(|w| g.issue.severity == w))
        .flat_map(|g| {
            g.resource_groups.iter().map(|resource| Row {
                issue: &g.issue,
                resource,
            })
        })
        .collect();
    let format = args.output.format();
    match format {
        Output::Json => print_json(&Both {
            score: &score,
            audit: &audit,
        }),
        Output::Yaml => print_yaml(&Both {
            score: &score,
            audit: &audit,
        })?,
        _ => {
            if format != Output::Name {
                println!(
                    "score {:.1} · {} resources · {} findings{}",
                    score.score,
                    score.resource_total,
                    score.issues_total,
                    by_severity(&score.severity_statistic)
                );
            }
            print_list(format, &rows, &columns(), row_name)?;
        }
    }
    Ok(())
}

/// `-o json|yaml`: both answers.
#[derive(Serialize)]
struct Both<'a> {
    score: &'a ScoreData,
    audit: &'a AuditData,
}

/// A finding of one resource.
#[derive(Serialize)]
struct Row<'a> {
    issue: &'a Issue,
    resource: &'a AuditedResource,
}

fn by_severity(counts: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = ["High", "Medium", "Low"]
        .iter()
        .filter_map(|s| counts.get(*s).map(|n| format!("{s} {n}")))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// `CLUSTER/KIND/[NAMESPACE/]NAME`.
fn resource(r: &AuditedResource) -> String {
    let mut parts = vec![r.cluster.clone(), r.kind.to_lowercase()];
    if !r.namespace.is_empty() {
        parts.push(r.namespace.clone());
    }
    parts.push(r.name.clone());
    parts.join("/")
}

fn row_name(row: &Row<'_>) -> String {
    format!("{} {}", row.issue.rule, resource(row.resource))
}

/// The table's columns (a function: a row borrows the answer).
fn columns<'a>() -> [Column<Row<'a>>; 6] {
    [
        Column {
            header: "SEVERITY",
            cell: |r| r.issue.severity.clone(),
            wide: false,
        },
        Column {
            header: "RULE",
            cell: |r| r.issue.rule.clone(),
            wide: false,
        },
        Column {
            header: "RESOURCE",
            cell: |r| resource(r.resource),
            wide: false,
        },
        Column {
            header: "TITLE",
            cell: |r| r.issue.title.clone(),
            wide: false,
        },
        Column {
            header: "MESSAGE",
            cell: |r| r.issue.message.clone(),
            wide: true,
        },
        Column {
            header: "FIX",
            cell: |r| r.issue.remediation.clone(),
            wide: true,
        },
    ]
}
