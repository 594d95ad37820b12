//! `karpor rule list|get|apply|rm`: sync rules as YAML files a user keeps in git, applied
//! as kubectl applies manifests (created, updated when they differ, left alone when they
//! do not), and tried first with `--dry-run` (what each cluster would sync, counted now).

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use karpor_api::types::{DryRunView, SelectionView, SyncRuleList, SyncRuleView};
use karpor_core::model::{ClusterSelector, SyncRule, TransformMode};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde_json::Value;

use super::output::{or, print_json, print_list, print_yaml, Column};
use super::{encode, finish, refused, time_text, Api, Failed};
use crate::args::{DryRunArgs, Output, RuleCommand, ServerArgs};

/// What the API answers beside a rule's own fields; a file written from `get -o yaml`
/// holds them, and `apply` leaves them out.
const ANSWERED_ONLY: [&str; 5] = ["version", "createdAt", "updatedAt", "builtIn", "inForce"];
/// The largest rules file read.
const MAX_FILE: u64 = 4 * 1024 * 1024;

pub(crate) async fn run(server: &ServerArgs, command: &RuleCommand) -> ExitCode {
    finish(dispatch(server, command).await)
}

async fn dispatch(server: &ServerArgs, command: &RuleCommand) -> Result<(), Failed> {
    let api = Api::new(server)?;
    match command {
        RuleCommand::List { output } => {
            let list: SyncRuleList = api.get(Method::GET, "/sync-rules", None).await?;
            print_list(output.format(), &list.items, &COLUMNS, rule_name)?;
        }
        RuleCommand::Get {
            name,
            output,
            dry_run,
        } => {
            if dry_run.dry_run {
                let answer = try_rule(&api, name, None, dry_run).await?;
                print_dry_run(output.format(), answer)?;
                return Ok(());
            }
            let rule: SyncRuleView = api
                .get(Method::GET, &format!("/sync-rule/{}", encode(name)), None)
                .await?;
            match output.format() {
                Output::Json => print_json(&rule),
                Output::Yaml => print_yaml(&rule)?,
                format => print_list(format, &[rule], &COLUMNS, rule_name)?,
            }
        }
        RuleCommand::Apply {
            file,
            dry_run,
            output,
        } => {
            let rules = read_rules(file)?;
            let mut failures = Vec::new();
            for (name, rule) in rules {
                let done = if dry_run.dry_run {
                    match try_rule(&api, &name, Some(rule), dry_run).await {
                        Ok(answer) => print_dry_run(output.format(), answer),
                        Err(e) => Err(e),
                    }
                } else {
                    apply(&api, &name, rule).await.map(|outcome| {
                        if output.format() == Output::Name {
                            println!("syncrule/{name}");
                        } else {
                            println!("syncrule/{name} {outcome}");
                        }
                    })
                };
                if let Err(Failed(code, message)) = done {
                    // As kubectl: the other rules of the file are still applied.
                    eprintln!("karpor: syncrule/{name}: {message}");
                    failures.push(code);
                }
            }
            if let Some(code) = failures.into_iter().max() {
                return Err(Failed(
                    code,
                    "not every rule of the file was applied".into(),
                ));
            }
        }
        RuleCommand::Rm { name } => {
            api.call(
                Method::DELETE,
                &format!("/sync-rule/{}", encode(name)),
                None,
            )
            .await?;
            println!("syncrule/{name} deleted");
        }
    }
    Ok(())
}

/// Creates the rule, or updates it when the stored one differs: `created`,
/// `configured` or `unchanged`. The update is compare-and-swap on the version read, so a
/// rule changed meanwhile is refused (409), not overwritten.
async fn apply(api: &Api, name: &str, rule: Value) -> Result<&'static str, Failed> {
    let path = format!("/sync-rule/{}", encode(name));
    let current = match api.try_get::<SyncRuleView>(Method::GET, &path).await? {
        Ok(current) if !current.built_in => Some(current),
        Ok(_built_in) => None,
        Err(refusal) if refusal.status == StatusCode::NOT_FOUND => None,
        Err(refusal) => return Err(refused(super::describe(&refusal))),
    };
    let Some(current) = current else {
        api.call(Method::POST, &path, Some(rule)).await?;
        return Ok("created");
    };
    if same(&current.rule, &rule) {
        return Ok("unchanged");
    }
    let version = current.version.unwrap_or_default();
    api.call(
        Method::PUT,
        &format!("{path}?version={version}"),
        Some(rule),
    )
    .await?;
    Ok("configured")
}

/// Whether the stored rule is the file's, defaults filled in.
fn same(current: &SyncRule, proposed: &Value) -> bool {
    // A rule that does not read: the server says what is wrong with it.
    serde_json::from_value::<SyncRule>(proposed.clone()).is_ok_and(|rule| rule == *current)
}

fn without_answered(value: &Value) -> Value {
    let mut value = value.clone();
    if let Some(fields) = value.as_object_mut() {
        for key in ANSWERED_ONLY {
            fields.remove(key);
        }
    }
    value
}

/// A rule (`proposed`, else the stored or built-in one) tried against the clusters.
async fn try_rule(
    api: &Api,
    name: &str,
    proposed: Option<Value>,
    args: &DryRunArgs,
) -> Result<DryRunView, Failed> {
    let mut path = format!("/sync-rule/{}/dry-run", encode(name));
    if let Some(cluster) = &args.cluster {
        path.push_str(&format!("?cluster={}", encode(cluster)));
    }
    api.get(Method::POST, &path, proposed).await
}

/// The rules of a file (or stdin for `-`), each with its name, the API's own fields left
/// out.
fn read_rules(file: &Path) -> Result<Vec<(String, Value)>, Failed> {
    let fail = |m: String| refused(format!("{}: {m}", file.display()));
    let mut text = String::new();
    let read = if file == Path::new("-") {
        std::io::stdin().take(MAX_FILE).read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(MAX_FILE).read_to_string(&mut text))
    };
    read.map_err(|e| fail(format!("cannot read: {e}")))?;
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| fail(format!("not YAML: {e}")))?;
    let mut rules = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        let name = document["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| fail(format!("document {} has no name", i + 1)))?
            .to_owned();
        rules.push((name, without_answered(&document)));
    }
    if rules.is_empty() {
        return Err(fail("holds no rule".to_owned()));
    }
    Ok(rules)
}

fn rule_name(r: &SyncRuleView) -> String {
    format!("syncrule/{}", r.rule.name)
}

/// `*`, `a,b`, or `env=prod` (a label selector).
fn clusters(r: &SyncRuleView) -> String {
    match &r.rule.clusters {
        ClusterSelector::All => "*".to_owned(),
        ClusterSelector::Names(names) => names.join(","),
        ClusterSelector::Selector(selector) => format!("labels: {selector}"),
    }
}

/// kubectl's `RESOURCE[.VERSION].GROUP` for each selector.
fn resources(r: &SyncRuleView) -> String {
    let resources: Vec<String> = r
        .rule
        .resources
        .iter()
        .map(|s| {
            let mut parts = vec![s.resource.clone()];
            if s.version != "*" {
                parts.push(s.version.clone());
            }
            if !s.group.is_empty() {
                parts.push(s.group.clone());
            }
            parts.join(".")
        })
        .collect();
    resources.join(",")
}

/// The namespaces, or `*` for all.
fn namespaces(namespaces: &[String]) -> String {
    if namespaces.is_empty() {
        "*".to_owned()
    } else {
        namespaces.join(",")
    }
}

/// `full` or `metadataOnly`, `+trim` when it drops paths.
fn mode(r: &SyncRuleView) -> String {
    let transform = &r.rule.transform;
    let mut mode = match transform.mode {
        TransformMode::Full => "full",
        TransformMode::MetadataOnly => "metadataOnly",
    }
    .to_owned();
    if !transform.trim.is_empty() {
        mode.push_str("+trim");
    }
    mode
}

fn selectors(r: &SyncRuleView) -> String {
    let parts: Vec<String> = [
        ("labels", &r.rule.label_selector),
        ("fields", &r.rule.field_selector),
    ]
    .iter()
    .filter_map(|(what, selector)| {
        selector
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| format!("{what}: {s}"))
    })
    .collect();
    if parts.is_empty() {
        "<none>".to_owned()
    } else {
        parts.join("; ")
    }
}

const COLUMNS: [Column<SyncRuleView>; 10] = [
    Column {
        header: "NAME",
        cell: |r| r.rule.name.clone(),
        wide: false,
    },
    Column {
        header: "CLUSTERS",
        cell: clusters,
        wide: false,
    },
    Column {
        header: "RESOURCES",
        cell: resources,
        wide: false,
    },
    Column {
        header: "NAMESPACES",
        cell: |r| namespaces(&r.rule.namespaces),
        wide: false,
    },
    Column {
        header: "MODE",
        cell: mode,
        wide: false,
    },
    Column {
        header: "VERSION",
        cell: |r| match r.version {
            Some(v) => v.to_string(),
            None => "built-in".to_owned(),
        },
        wide: false,
    },
    Column {
        header: "SELECTORS",
        cell: selectors,
        wide: true,
    },
    Column {
        header: "KEEP DELETED",
        cell: |r| r.rule.keep_after_delete.to_string(),
        wide: true,
    },
    Column {
        header: "UPDATED",
        cell: |r| or(&r.updated_at.as_ref().map(time_text), "<none>"),
        wide: true,
    },
    Column {
        header: "DESCRIPTION",
        cell: |r| r.rule.description.clone(),
        wide: true,
    },
];

/// A dry run's row: a cluster's type, or the cluster alone with why it was not asked.
#[derive(Serialize)]
struct DryRunRow {
    cluster: String,
    #[serde(flatten)]
    selection: Option<SelectionView>,
    note: String,
}

/// A dry run: a row per cluster and type (a cluster that could not be asked is one row
/// with why).
fn print_dry_run(format: Output, answer: DryRunView) -> Result<(), Failed> {
    match format {
        Output::Json => {
            print_json(&answer);
            return Ok(());
        }
        Output::Yaml => return print_yaml(&answer),
        _ => {}
    }
    let rule = answer.rule;
    let mut rows = Vec::new();
    for cluster in answer.clusters {
        let name = cluster.cluster;
        if let Some(error) = cluster.error {
            rows.push(DryRunRow {
                cluster: name,
                selection: None,
                note: error,
            });
            continue;
        }
        for r in cluster.resources {
            let mut notes = Vec::new();
            if !cluster.selected {
                notes.push(format!("rule {rule} does not select cluster {name}"));
            }
            if let Some(error) = &r.error {
                notes.push(error.clone());
            }
            if r.watched_by != rule {
                notes.push(format!("watched by rule {}", r.watched_by));
            }
            rows.push(DryRunRow {
                cluster: name.clone(),
                selection: Some(r),
                note: notes.join("; "),
            });
        }
    }
    if rows.is_empty() {
        eprintln!("karpor: rule {rule} selects no registered cluster (try --cluster NAME)");
    }
    print_list(format, &rows, &DRY_RUN_COLUMNS, |r| {
        let resource = r.selection.as_ref().map(|s| {
            [s.resource.as_str(), s.group.as_str()]
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(".")
        });
        format!("{}/{}", r.cluster, resource.unwrap_or_default())
    })
}

/// A cell of a row's type: empty for a cluster that was not asked.
fn of(r: &DryRunRow, cell: fn(&SelectionView) -> String) -> String {
    r.selection.as_ref().map(cell).unwrap_or_default()
}

fn api_version(s: &SelectionView) -> String {
    if s.group.is_empty() {
        s.version.clone()
    } else {
        format!("{}/{}", s.group, s.version)
    }
}

const DRY_RUN_COLUMNS: [Column<DryRunRow>; 8] = [
    Column {
        header: "CLUSTER",
        cell: |r| r.cluster.clone(),
        wide: false,
    },
    Column {
        header: "APIVERSION",
        cell: |r| of(r, api_version),
        wide: false,
    },
    Column {
        header: "KIND",
        cell: |r| of(r, |s| s.kind.clone()),
        wide: false,
    },
    Column {
        header: "NAMESPACED",
        cell: |r| of(r, |s| s.namespaced.to_string()),
        wide: false,
    },
    Column {
        header: "OBJECTS",
        cell: |r| match &r.selection {
            Some(s) => or(&s.objects, "<unknown>"),
            None => "<unknown>".to_owned(),
        },
        wide: false,
    },
    Column {
        header: "NOTE",
        cell: |r| r.note.clone(),
        wide: false,
    },
    Column {
        header: "RESOURCE",
        cell: |r| of(r, |s| s.resource.clone()),
        wide: true,
    },
    Column {
        header: "NAMESPACES",
        cell: |r| match &r.selection {
            Some(s) => namespaces(&s.namespaces),
            None => "*".to_owned(),
        },
        wide: true,
    },
];
