//! `karpor cluster add|get|update|list|rm`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use karpor_kube::kubeconfig;
use reqwest::Method;
use serde_json::{json, Value};

use super::output::{or, print_json, print_list, print_yaml, Column};
use super::{encode, finish, refused, text, Api, Failed};
use crate::args::{ClusterCommand, ClusterFields, Output, ServerArgs};

/// How often `--wait` asks how far the first sync got.
const WAIT_POLL: Duration = Duration::from_secs(1);
/// How long a state of `unknown` may last before `--wait` concludes no syncer reports here.
const UNKNOWN_FOR: Duration = Duration::from_secs(15);

pub(crate) async fn run(server: &ServerArgs, command: &ClusterCommand) -> ExitCode {
    finish(dispatch(server, command).await)
}

async fn dispatch(server: &ServerArgs, command: &ClusterCommand) -> Result<(), Failed> {
    let api = Api::new(server)?;
    match command {
        ClusterCommand::Add {
            name,
            kubeconfig,
            context,
            fields,
            no_validate,
            wait,
            wait_timeout,
        } => {
            let text = read_kubeconfig(kubeconfig, context.as_deref())?;
            if !no_validate {
                validate(&api, &text).await?;
            }
            let mut body = fields_body(fields);
            body["kubeConfig"] = json!(text);
            let data = api
                .call(
                    Method::POST,
                    &format!("/cluster/{}", encode(name)),
                    Some(body),
                )
                .await?;
            let summary = &data["kubeconfigSummary"];
            println!(
                "cluster {name} added (context {}, server {})",
                text_of(&summary["context"]),
                text_of(&summary["server"])
            );
            if *wait {
                wait_for_first_sync(&api, name, *wait_timeout).await?;
            }
        }
        ClusterCommand::Get { name, output } => {
            let data = api
                .call(Method::GET, &format!("/cluster/{}", encode(name)), None)
                .await?;
            match output.format() {
                Output::Json => print_json(&data),
                Output::Yaml => print_yaml(&data)?,
                format => print_list(format, &[data], &COLUMNS, cluster_name)?,
            }
        }
        ClusterCommand::Update {
            name,
            kubeconfig,
            context,
            fields,
            no_validate,
        } => {
            let mut body = fields_body(fields);
            if let Some(path) = kubeconfig {
                let text = read_kubeconfig(path, context.as_deref())?;
                if !no_validate {
                    validate(&api, &text).await?;
                }
                body["kubeConfig"] = json!(text);
            }
            api.call(
                Method::PUT,
                &format!("/cluster/{}", encode(name)),
                Some(body),
            )
            .await?;
            println!("cluster {name} updated");
        }
        ClusterCommand::List { output } => {
            let data = api.call(Method::GET, "/clusters", None).await?;
            let items = data["items"].as_array().cloned().unwrap_or_default();
            print_list(output.format(), &items, &COLUMNS, cluster_name)?;
        }
        ClusterCommand::Rm { name } => {
            api.call(Method::DELETE, &format!("/cluster/{}", encode(name)), None)
                .await?;
            println!("cluster {name} removed");
        }
    }
    Ok(())
}

const COLUMNS: [Column; 12] = [
    Column {
        header: "NAME",
        cell: |c| text(&c["name"]),
        wide: false,
    },
    Column {
        header: "DISPLAY NAME",
        cell: |c| text(&c["displayName"]),
        wide: false,
    },
    Column {
        header: "SERVER",
        cell: |c| text(&c["kubeconfigSummary"]["server"]),
        wide: false,
    },
    Column {
        header: "SYNC",
        cell: sync_state,
        wide: false,
    },
    Column {
        header: "OBJECTS",
        cell: |c| or(&c["syncStatus"]["objectsStored"], "<unknown>"),
        wide: false,
    },
    Column {
        header: "AUTH",
        cell: |c| text(&c["kubeconfigSummary"]["authKind"]),
        wide: true,
    },
    Column {
        header: "OWNER",
        cell: |c| or(&c["syncStatus"]["owner"], "<none>"),
        wide: true,
    },
    Column {
        header: "EPOCH",
        cell: |c| or(&c["syncStatus"]["epoch"], "<none>"),
        wide: true,
    },
    Column {
        header: "LAST EVENT",
        cell: |c| or(&c["syncStatus"]["lastEvent"], "<none>"),
        wide: true,
    },
    Column {
        header: "TYPES",
        cell: types,
        wide: true,
    },
    Column {
        header: "LABELS",
        cell: labels,
        wide: true,
    },
    Column {
        header: "CREATED",
        cell: |c| text(&c["createdAt"]),
        wide: true,
    },
];

fn cluster_name(c: &Value) -> String {
    format!("cluster/{}", text(&c["name"]))
}

/// `synced`, or `error (unreachable)` with the reason.
fn sync_state(c: &Value) -> String {
    let status = &c["syncStatus"];
    match status["reason"].as_str() {
        Some(reason) => format!("{} ({reason})", text(&status["state"])),
        None => text(&status["state"]),
    }
}

/// `41/42 synced; secrets: forbidden`: the watched types, and each one that cannot be
/// listed with why (the others sync regardless).
fn types(c: &Value) -> String {
    let Some(types) = c["syncStatus"]["types"].as_array() else {
        return "<unknown>".to_owned();
    };
    let synced = types.iter().filter(|t| t["state"] == "synced").count();
    let mut summary = format!("{synced}/{} synced", types.len());
    for t in types.iter().filter(|t| t["state"] == "error") {
        let mut name = text(&t["resource"]);
        if !text(&t["group"]).is_empty() {
            name = format!("{name}.{}", text(&t["group"]));
        }
        if let Some(namespace) = t["namespace"].as_str() {
            name = format!("{name} in {namespace}");
        }
        summary.push_str(&format!("; {name}: {}", text(&t["reason"])));
    }
    summary
}

fn labels(c: &Value) -> String {
    let labels: Vec<String> = c["labels"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect())
        .unwrap_or_default();
    if labels.is_empty() {
        "<none>".to_owned()
    } else {
        labels.join(",")
    }
}

fn text_of(value: &Value) -> String {
    value.as_str().unwrap_or("?").to_owned()
}

fn fields_body(fields: &ClusterFields) -> Value {
    let mut body = json!({});
    if let Some(v) = &fields.display_name {
        body["displayName"] = json!(v);
    }
    if let Some(v) = &fields.description {
        body["description"] = json!(v);
    }
    if !fields.labels.is_empty() {
        let labels: BTreeMap<&str, &str> = fields
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        body["labels"] = json!(labels);
    }
    body
}

/// The server reaches the cluster with this kubeconfig before it is registered.
async fn validate(api: &Api, kubeconfig: &str) -> Result<(), Failed> {
    let data = api
        .try_call(
            Method::POST,
            "/cluster/config/validate",
            Some(json!({"kubeConfig": kubeconfig})),
        )
        .await?
        .map_err(|refusal| {
            refused(format!(
                "{}: {} (--no-validate registers it anyway)",
                refusal.status, refusal.message
            ))
        })?;
    eprintln!(
        "karpor: the API server answers (Kubernetes {})",
        text_of(&data["gitVersion"])
    );
    Ok(())
}

/// Polls the cluster until its first sync settles, printing the objects synced so far.
async fn wait_for_first_sync(api: &Api, name: &str, limit: Duration) -> Result<(), Failed> {
    let started = Instant::now();
    let mut unknown_since: Option<Instant> = None;
    let mut last_line = String::new();
    loop {
        let data = api
            .call(Method::GET, &format!("/cluster/{}", encode(name)), None)
            .await?;
        let status = &data["syncStatus"];
        let state = status["state"].as_str().unwrap_or("unknown");
        let synced = status["objectsSynced"].as_u64().unwrap_or(0);
        let line = format!("{state}: {synced} objects synced");
        if line != last_line {
            eprintln!("karpor: {line}");
            last_line = line;
        }
        match state {
            "synced" => {
                println!("cluster {name} synced ({synced} objects)");
                return Ok(());
            }
            "error" => {
                return Err(refused(format!(
                    "cluster {name}'s sync failed: {}",
                    text(&status["reason"])
                )))
            }
            "unknown" => {
                let since = *unknown_since.get_or_insert_with(Instant::now);
                if since.elapsed() > UNKNOWN_FOR {
                    return Err(refused(format!(
                        "no syncer reports cluster {name} on this server (the syncer may run apart: karpor syncer); it is registered"
                    )));
                }
            }
            _ => unknown_since = None,
        }
        if started.elapsed() > limit {
            return Err(refused(format!(
                "cluster {name} did not finish its first sync within {}",
                humantime_serde::re::humantime::format_duration(limit)
            )));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// The kubeconfig's chosen context alone, with the files it names read here (relative to
/// the file) and inlined: the server accepts only self-contained kubeconfigs, as `kubectl
/// config view --flatten --minify` makes them.
fn read_kubeconfig(path: &Path, context: Option<&str>) -> Result<String, Failed> {
    let fail = |m: String| refused(format!("{}: {m}", path.display()));
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(kubeconfig::MAX_BYTES as u64 + 1)
                .read_to_string(&mut text)
        })
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    let config = kubeconfig::parse(&text).map_err(|p| fail(p.0))?;
    let mut selected = kubeconfig::select(&config, context).map_err(|p| fail(p.0))?;
    kubeconfig::inline_files(&mut selected, path.parent()).map_err(|p| fail(p.0))?;
    Ok(kubeconfig::to_yaml(&selected))
}
