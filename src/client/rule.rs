//! `karpor rule list|get|apply|rm`: sync rules as YAML files a user keeps in git, applied
//! as kubectl applies manifests (created, updated when they differ, left alone when they
//! do not), and tried first with `--dry-run` (what each cluster would sync, counted now).

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use karpor_core::model::SyncRule;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use super::output::{or, print_json, print_list, print_yaml, Column};
use super::{encode, finish, refused, text, Api, Failed};
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
            let data = api.call(Method::GET, "/sync-rules", None).await?;
            let items = data["items"].as_array().cloned().unwrap_or_default();
            print_list(output.format(), &items, &COLUMNS, rule_name)?;
        }
        RuleCommand::Get {
            name,
            output,
            dry_run,
        } => {
            if dry_run.dry_run {
                let answer = try_rule(&api, name, None, dry_run).await?;
                print_dry_run(output.format(), &answer)?;
                return Ok(());
            }
            let data = api
                .call(Method::GET, &format!("/sync-rule/{}", encode(name)), None)
                .await?;
            match output.format() {
                Output::Json => print_json(&data),
                Output::Yaml => print_yaml(&data)?,
                format => print_list(format, &[data], &COLUMNS, rule_name)?,
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
                        Ok(answer) => print_dry_run(output.format(), &answer),
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
    let current = match api.try_call(Method::GET, &path, None).await? {
        Ok(current) if current["builtIn"] != json!(true) => Some(current),
        Ok(_built_in) => None,
        Err(refusal) if refusal.status == StatusCode::NOT_FOUND => None,
        Err(refusal) => return Err(refused(super::describe(&refusal))),
    };
    let Some(current) = current else {
        api.call(Method::POST, &path, Some(rule)).await?;
        return Ok("created");
    };
    if same(&current, &rule) {
        return Ok("unchanged");
    }
    let version = current["version"].as_i64().unwrap_or_default();
    api.call(
        Method::PUT,
        &format!("{path}?version={version}"),
        Some(rule),
    )
    .await?;
    Ok("configured")
}

/// Whether a stored rule (as answered) is the file's, defaults filled in on both sides.
fn same(current: &Value, proposed: &Value) -> bool {
    let rule = |value: &Value| serde_json::from_value::<SyncRule>(without_answered(value)).ok();
    match (rule(current), rule(proposed)) {
        (Some(a), Some(b)) => a == b,
        // The server says what is wrong with it.
        _ => false,
    }
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
) -> Result<Value, Failed> {
    let mut path = format!("/sync-rule/{}/dry-run", encode(name));
    if let Some(cluster) = &args.cluster {
        path.push_str(&format!("?cluster={}", encode(cluster)));
    }
    api.call(Method::POST, &path, proposed).await
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

fn rule_name(r: &Value) -> String {
    format!("syncrule/{}", text(&r["name"]))
}

/// `*`, `a,b`, or `env=prod` (a label selector).
fn clusters(r: &Value) -> String {
    let clusters = &r["clusters"];
    if let Some(names) = clusters["names"].as_array() {
        return names.iter().map(text).collect::<Vec<_>>().join(",");
    }
    if let Some(selector) = clusters["selector"].as_str() {
        return format!("labels: {selector}");
    }
    text(clusters)
}

/// kubectl's `RESOURCE[.VERSION].GROUP` for each selector.
fn resources(r: &Value) -> String {
    let resources: Vec<String> = r["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let mut parts = vec![text(&s["resource"])];
            if s["version"] != "*" {
                parts.push(text(&s["version"]));
            }
            if !text(&s["group"]).is_empty() {
                parts.push(text(&s["group"]));
            }
            parts.join(".")
        })
        .collect();
    resources.join(",")
}

fn namespaces(r: &Value) -> String {
    match r["namespaces"].as_array() {
        Some(list) if !list.is_empty() => list.iter().map(text).collect::<Vec<_>>().join(","),
        _ => "*".to_owned(),
    }
}

/// `full` or `metadataOnly`, `+trim` when it drops paths.
fn mode(r: &Value) -> String {
    let mut mode = text(&r["transform"]["mode"]);
    if r["transform"]["trim"]
        .as_array()
        .is_some_and(|t| !t.is_empty())
    {
        mode.push_str("+trim");
    }
    mode
}

fn selectors(r: &Value) -> String {
    let parts: Vec<String> = [("labels", "labelSelector"), ("fields", "fieldSelector")]
        .iter()
        .filter_map(|(what, key)| {
            r[key]
                .as_str()
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

const COLUMNS: [Column; 10] = [
    Column {
        header: "NAME",
        cell: |r| text(&r["name"]),
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
        cell: namespaces,
        wide: false,
    },
    Column {
        header: "MODE",
        cell: mode,
        wide: false,
    },
    Column {
        header: "VERSION",
        cell: |r| match r["version"].as_i64() {
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
        cell: |r| text(&r["keepAfterDelete"]),
        wide: true,
    },
    Column {
        header: "UPDATED",
        cell: |r| or(&r["updatedAt"], "<none>"),
        wide: true,
    },
    Column {
        header: "DESCRIPTION",
        cell: |r| text(&r["description"]),
        wide: true,
    },
];

/// A dry run: a row per cluster and type (a cluster that could not be asked is one row
/// with why).
fn print_dry_run(format: Output, answer: &Value) -> Result<(), Failed> {
    match format {
        Output::Json => {
            print_json(answer);
            return Ok(());
        }
        Output::Yaml => return print_yaml(answer),
        _ => {}
    }
    let rule = text(&answer["rule"]);
    let mut rows = Vec::new();
    for cluster in answer["clusters"].as_array().into_iter().flatten() {
        let name = text(&cluster["cluster"]);
        let selected = cluster["selected"] == json!(true);
        if let Some(error) = cluster["error"].as_str() {
            rows.push(json!({"cluster": name, "note": error}));
            continue;
        }
        for r in cluster["resources"].as_array().into_iter().flatten() {
            let mut row = r.clone();
            row["cluster"] = json!(name);
            let mut notes = Vec::new();
            if !selected {
                notes.push(format!("rule {rule} does not select cluster {name}"));
            }
            if let Some(error) = r["error"].as_str() {
                notes.push(error.to_owned());
            }
            if r["watchedBy"] != json!(rule) {
                notes.push(format!("watched by rule {}", text(&r["watchedBy"])));
            }
            row["note"] = json!(notes.join("; "));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        eprintln!("karpor: rule {rule} selects no registered cluster (try --cluster NAME)");
    }
    print_list(format, &rows, &DRY_RUN_COLUMNS, |r| {
        format!(
            "{}/{}",
            text(&r["cluster"]),
            [text(&r["resource"]), text(&r["group"])]
                .iter()
                .filter(|p| !p.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join(".")
        )
    })
}

fn api_version(r: &Value) -> String {
    match (text(&r["group"]), text(&r["version"])) {
        (group, version) if group.is_empty() => version,
        (group, version) => format!("{group}/{version}"),
    }
}

const DRY_RUN_COLUMNS: [Column; 8] = [
    Column {
        header: "CLUSTER",
        cell: |r| text(&r["cluster"]),
        wide: false,
    },
    Column {
        header: "APIVERSION",
        cell: api_version,
        wide: false,
    },
    Column {
        header: "KIND",
        cell: |r| text(&r["kind"]),
        wide: false,
    },
    Column {
        header: "NAMESPACED",
        cell: |r| text(&r["namespaced"]),
        wide: false,
    },
    Column {
        header: "OBJECTS",
        cell: |r| or(&r["objects"], "<unknown>"),
        wide: false,
    },
    Column {
        header: "NOTE",
        cell: |r| text(&r["note"]),
        wide: false,
    },
    Column {
        header: "RESOURCE",
        cell: |r| text(&r["resource"]),
        wide: true,
    },
    Column {
        header: "NAMESPACES",
        cell: namespaces,
        wide: true,
    },
];
