//! `karpor cluster add|get|update|list|rm|agent|approve|revoke`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use karpor_api::types::{
    AgentApproveBody, AgentRevokedView, AgentStatusView, AgentTokenBody, AgentTokenView,
    ClusterBody, ClusterList, ClusterView, ValidateBody, ValidateView,
};
use karpor_core::model::ClusterMode;
use karpor_kube::kubeconfig;
use reqwest::Method;

use super::output::{or, print_json, print_list, print_yaml, Column};
use super::{body, encode, finish, refused, time_text, Api, Failed};
use crate::args::{AddMode, ClusterCommand, ClusterFields, Output, ServerArgs};

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
            mode: Some(AddMode::Agent),
            fields,
            ..
        } => {
            let request = ClusterBody {
                mode: Some(ClusterMode::Agent),
                ..fields_body(fields)
            };
            let _: ClusterView = api
                .get(
                    Method::POST,
                    &format!("/cluster/{}", encode(name)),
                    body(&request),
                )
                .await?;
            let issued: AgentTokenView = api
                .get(
                    Method::POST,
                    &format!("/cluster/{}/agent-token", encode(name)),
                    body(&AgentTokenBody::default()),
                )
                .await?;
            println!("cluster {name} added in agent mode; run its agent with (token single-use, until {}):", issued.expires_at);
            println!();
            println!(
                "  KARPOR_AGENT__TOKEN={} karpor agent --hub {} --pin {}",
                issued.token, issued.hub, issued.pin
            );
        }
        ClusterCommand::Add {
            name,
            kubeconfig,
            context,
            fields,
            no_validate,
            wait,
            wait_timeout,
            ..
        } => {
            let Some(kubeconfig) = kubeconfig else {
                return Err(refused("--kubeconfig is required unless --mode agent"));
            };
            let text = read_kubeconfig(kubeconfig, context.as_deref())?;
            if !no_validate {
                validate(&api, &text).await?;
            }
            let request = ClusterBody {
                kube_config: Some(text),
                ..fields_body(fields)
            };
            let added: ClusterView = api
                .get(
                    Method::POST,
                    &format!("/cluster/{}", encode(name)),
                    body(&request),
                )
                .await?;
            let (context, server) = added
                .kubeconfig_summary
                .map_or(("?".to_owned(), "?".to_owned()), |s| (s.context, s.server));
            println!("cluster {name} added (context {context}, server {server})");
            if *wait {
                wait_for_first_sync(&api, name, *wait_timeout).await?;
            }
        }
        ClusterCommand::Get { name, output } => {
            let cluster: ClusterView = api
                .get(Method::GET, &format!("/cluster/{}", encode(name)), None)
                .await?;
            match output.format() {
                Output::Json => print_json(&cluster),
                Output::Yaml => print_yaml(&cluster)?,
                format => print_list(format, &[cluster], &COLUMNS, cluster_name)?,
            }
        }
        ClusterCommand::Update {
            name,
            kubeconfig,
            context,
            fields,
            no_validate,
        } => {
            let mut request = fields_body(fields);
            if let Some(path) = kubeconfig {
                let text = read_kubeconfig(path, context.as_deref())?;
                if !no_validate {
                    validate(&api, &text).await?;
                }
                request.kube_config = Some(text);
            }
            api.call(
                Method::PUT,
                &format!("/cluster/{}", encode(name)),
                body(&request),
            )
            .await?;
            println!("cluster {name} updated");
        }
        ClusterCommand::List { output } => {
            let list: ClusterList = api.get(Method::GET, "/clusters", None).await?;
            print_list(output.format(), &list.items, &COLUMNS, cluster_name)?;
        }
        ClusterCommand::Rm { name } => {
            api.call(Method::DELETE, &format!("/cluster/{}", encode(name)), None)
                .await?;
            println!("cluster {name} removed");
        }
        ClusterCommand::Agent { name, output } => {
            let status: AgentStatusView = api
                .get(
                    Method::GET,
                    &format!("/cluster/{}/agent", encode(name)),
                    None,
                )
                .await?;
            match output.format() {
                Output::Json => print_json(&status),
                Output::Yaml => print_yaml(&status)?,
                _ => print_agent(&status),
            }
        }
        ClusterCommand::Approve { name, key } => {
            let request = AgentApproveBody { key: key.clone() };
            let _: AgentStatusView = api
                .get(
                    Method::POST,
                    &format!("/cluster/{}/agent/approve", encode(name)),
                    body(&request),
                )
                .await?;
            println!("the join of cluster {name}'s agent with key {key} is approved");
        }
        ClusterCommand::Revoke { name } => {
            let revoked: AgentRevokedView = api
                .get(
                    Method::DELETE,
                    &format!("/cluster/{}/agent", encode(name)),
                    None,
                )
                .await?;
            println!(
                "cluster {name}'s agent revoked: its certificates stop working and its session ended (a new token joins generation {})",
                revoked.generation
            );
        }
    }
    Ok(())
}

/// An agent's standing, a line a fact.
fn print_agent(status: &AgentStatusView) {
    println!("cluster:    {}", status.cluster);
    println!("generation: {}", status.generation);
    println!(
        "joined:     {}",
        status.joined_at.as_deref().unwrap_or("never")
    );
    println!(
        "connected:  {}",
        if status.connected { "yes" } else { "no" }
    );
    if let Some(expires) = &status.token_expires_at {
        println!("token:      unused, until {expires}");
    }
    if let Some(pending) = &status.pending {
        let state = if pending.approved {
            "approved"
        } else {
            "waiting for approval: karpor cluster approve NAME --key KEY"
        };
        println!(
            "join:       key {} since {} ({state})",
            pending.key, pending.requested_at
        );
    }
}

const COLUMNS: [Column<ClusterView>; 12] = [
    Column {
        header: "NAME",
        cell: |c| c.name.clone(),
        wide: false,
    },
    Column {
        header: "DISPLAY NAME",
        cell: |c| c.display_name.clone(),
        wide: false,
    },
    Column {
        header: "SERVER",
        cell: |c| {
            c.kubeconfig_summary
                .as_ref()
                .map(|s| s.server.clone())
                .unwrap_or_default()
        },
        wide: false,
    },
    Column {
        header: "SYNC",
        cell: sync_state,
        wide: false,
    },
    Column {
        header: "OBJECTS",
        cell: |c| or(&c.sync_status.objects_stored, "<unknown>"),
        wide: false,
    },
    Column {
        header: "AUTH",
        cell: |c| {
            c.kubeconfig_summary
                .as_ref()
                .map(|s| s.auth_kind.clone())
                .unwrap_or_default()
        },
        wide: true,
    },
    Column {
        header: "OWNER",
        cell: |c| or(&c.sync_status.owner, "<none>"),
        wide: true,
    },
    Column {
        header: "EPOCH",
        cell: |c| or(&c.sync_status.epoch, "<none>"),
        wide: true,
    },
    Column {
        header: "LAST EVENT",
        cell: |c| or(&c.sync_status.last_event.as_ref().map(time_text), "<none>"),
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
        cell: |c| time_text(&c.created_at),
        wide: true,
    },
];

fn cluster_name(c: &ClusterView) -> String {
    format!("cluster/{}", c.name)
}

/// `synced`, or `error (unreachable)` with the reason.
fn sync_state(c: &ClusterView) -> String {
    let status = &c.sync_status;
    match &status.reason {
        Some(reason) => format!("{} ({reason})", status.state),
        None => status.state.clone(),
    }
}

/// `41/42 synced; secrets: forbidden`: the watched types, and each one that cannot be
/// listed with why (the others sync regardless).
fn types(c: &ClusterView) -> String {
    let Some(types) = &c.sync_status.types else {
        return "<unknown>".to_owned();
    };
    let synced = types.iter().filter(|t| t.state == "synced").count();
    let mut summary = format!("{synced}/{} synced", types.len());
    for t in types.iter().filter(|t| t.state == "error") {
        let mut name = t.resource.clone();
        if !t.group.is_empty() {
            name = format!("{name}.{}", t.group);
        }
        if let Some(namespace) = &t.namespace {
            name = format!("{name} in {namespace}");
        }
        let reason = t.reason.clone().unwrap_or_default();
        summary.push_str(&format!("; {name}: {reason}"));
    }
    summary
}

fn labels(c: &ClusterView) -> String {
    let labels: Vec<String> = c.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if labels.is_empty() {
        "<none>".to_owned()
    } else {
        labels.join(",")
    }
}

fn fields_body(fields: &ClusterFields) -> ClusterBody {
    ClusterBody {
        display_name: fields.display_name.clone(),
        description: fields.description.clone(),
        labels: (!fields.labels.is_empty()).then(|| fields.labels.iter().cloned().collect()),
        ..ClusterBody::default()
    }
}

/// The server reaches the cluster with this kubeconfig before it is registered.
async fn validate(api: &Api, kubeconfig: &str) -> Result<(), Failed> {
    let request = ValidateBody {
        kube_config: kubeconfig.to_owned(),
        context: None,
    };
    let answer = api
        .try_call(Method::POST, "/cluster/config/validate", body(&request))
        .await?
        .map_err(|refusal| {
            refused(format!(
                "{}: {} (--no-validate registers it anyway)",
                refusal.status, refusal.message
            ))
        })?;
    let answer: ValidateView = super::decode(answer)?;
    eprintln!(
        "karpor: the API server answers (Kubernetes {})",
        answer.git_version
    );
    Ok(())
}

/// Polls the cluster until its first sync settles, printing the objects synced so far.
async fn wait_for_first_sync(api: &Api, name: &str, limit: Duration) -> Result<(), Failed> {
    let started = Instant::now();
    let mut unknown_since: Option<Instant> = None;
    let mut last_line = String::new();
    loop {
        let cluster: ClusterView = api
            .get(Method::GET, &format!("/cluster/{}", encode(name)), None)
            .await?;
        let status = cluster.sync_status;
        let state = status.state.as_str();
        let synced = status.objects_synced.unwrap_or(0);
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
                    status.reason.unwrap_or_default()
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
