//! `karpor changes [CLUSTER[/NAMESPACE]] [--since T] [--until T] [--kind K] [--change C,..]`,
//! or `karpor changes --query "select * from changes where ..."`: what changed there over
//! the window, newest first, one row per change, then the total
//! and the counts by change type (`12 changes: 9 updated, 2 created, 1 deleted`), from
//! `/insight/changes`. `-o json|yaml` prints the API's answer.

use std::process::ExitCode;

use karpor_api::types::{ChangeView, ChangesAnswer, Count};

use super::history::{seen, who};
use super::output::{print_json, print_list, print_yaml, Column};
use super::{encode, finish, Api, Failed};
use crate::args::{ChangeArg, ChangesArgs, Output};

pub(crate) async fn run(args: &ChangesArgs) -> ExitCode {
    finish(changes(args).await)
}

async fn changes(args: &ChangesArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let mut query = Vec::new();
    if let Some(scope) = args.scope.as_deref() {
        match scope.split_once('/') {
            Some((cluster, namespace)) => {
                query.push(format!("cluster={}", encode(cluster)));
                query.push(format!("namespace={}", encode(namespace)));
            }
            None => query.push(format!("cluster={}", encode(scope))),
        }
    }
    let optional = [
        ("kind", &args.kind),
        ("since", &args.since),
        ("until", &args.until),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            query.push(format!("{key}={}", encode(value)));
        }
    }
    if !args.change.is_empty() {
        let changes: Vec<&str> = args.change.iter().map(|c| change_word(*c)).collect();
        query.push(format!("change={}", encode(&changes.join(","))));
    }
    if let Some(sql) = &args.query {
        query.push(format!("query={}", encode(sql)));
    }
    query.push(format!("page={}&pageSize={}", args.page, args.page_size));
    let answer: ChangesAnswer = api
        .get(
            reqwest::Method::GET,
            &format!("/insight/changes?{}", query.join("&")),
            None,
        )
        .await?;
    let format = args.output.format();
    match format {
        Output::Json => print_json(&answer),
        Output::Yaml => print_yaml(&answer)?,
        _ => {
            print_list(format, &answer.items, &COLUMNS, change_name)?;
            if format != Output::Name {
                println!("{}", summary(&answer));
            }
        }
    }
    Ok(())
}

fn change_word(change: ChangeArg) -> &'static str {
    match change {
        ChangeArg::Created => "created",
        ChangeArg::Updated => "updated",
        ChangeArg::Deleted => "deleted",
    }
}

/// `12 changes: 9 updated, 2 created, 1 deleted`, and the page when there are more.
fn summary(answer: &ChangesAnswer) -> String {
    let mut counts: Vec<&Count> = answer.by_change.iter().filter(|c| c.count > 0).collect();
    counts.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    let noun = if answer.total == 1 {
        "change"
    } else {
        "changes"
    };
    let mut line = format!("{} {noun}", answer.total);
    if !counts.is_empty() {
        let counts: Vec<String> = counts
            .iter()
            .map(|c| format!("{} {}", c.count, c.key))
            .collect();
        line.push_str(&format!(": {}", counts.join(", ")));
    }
    let pages = answer.total.div_ceil(answer.page_size.max(1));
    if pages > 1 {
        line.push_str(&format!(
            " (page {} of {pages}: {} shown)",
            answer.current_page,
            answer.items.len()
        ));
    }
    line
}

/// `NAMESPACE/NAME`, or `NAME` of a cluster-scoped object.
fn object(c: &ChangeView) -> String {
    if c.namespace.is_empty() {
        c.name.clone()
    } else {
        format!("{}/{}", c.namespace, c.name)
    }
}

/// `CLUSTER/KIND/[NAMESPACE/]NAME`, as `karpor history` takes it.
fn change_name(c: &ChangeView) -> String {
    format!("{}/{}/{}", c.cluster, c.kind.to_lowercase(), object(c))
}

const COLUMNS: [Column<ChangeView>; 10] = [
    Column {
        header: "TIME",
        cell: |c| seen(&c.seen_at),
        wide: false,
    },
    Column {
        header: "CHANGE",
        cell: |c| c.change.clone(),
        wide: false,
    },
    Column {
        header: "KIND",
        cell: |c| c.kind.clone(),
        wide: false,
    },
    Column {
        header: "APIVERSION",
        cell: |c| c.api_version.clone(),
        wide: true,
    },
    Column {
        header: "NAME",
        cell: object,
        wide: false,
    },
    Column {
        header: "CLUSTER",
        cell: |c| c.cluster.clone(),
        wide: false,
    },
    Column {
        header: "RESOURCEVERSION",
        cell: |c| c.resource_version.clone(),
        wide: true,
    },
    Column {
        header: "UID",
        cell: |c| c.uid.clone(),
        wide: true,
    },
    Column {
        header: "WHO",
        cell: |c| who(&c.managers).replace(", ", ","),
        wide: false,
    },
    Column {
        header: "LATE",
        cell: |c| if c.late { "yes" } else { "" }.to_owned(),
        wide: false,
    },
];
