//! `karpor cluster add|list|rm` and `karpor search`: clients of a running server's REST
//! API. Exit 0 done, 1 refused by the server (its message on stderr), 2 unreachable.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use karpor_api::local_token;
use karpor_kube::kubeconfig;
use serde_json::{json, Value};

use crate::args::{ClusterCommand, SearchArgs, ServerArgs};

const EXIT_REFUSED: u8 = 1;
const EXIT_UNREACHABLE: u8 = 2;

struct Api {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

/// Why a command failed: its exit status and a line for stderr.
struct Failed(u8, String);

impl Api {
    fn new(args: &ServerArgs) -> Result<Api, Failed> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Failed(EXIT_UNREACHABLE, format!("cannot make an HTTP client: {e}")))?;
        Ok(Api {
            base: format!("{}/rest-api/v1", args.server.trim_end_matches('/')),
            token: token(args)?,
            http,
        })
    }

    /// The envelope's `data` of a 2xx answer.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failed> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Failed(EXIT_UNREACHABLE, format!("cannot reach {}: {e}", self.base)))?;
        let status = response.status();
        let envelope: Value = response.json().await.map_err(|e| {
            Failed(
                EXIT_REFUSED,
                format!("{status}: the answer is not karpor's JSON: {e}"),
            )
        })?;
        if !status.is_success() {
            let message = envelope["message"].as_str().unwrap_or("no message");
            let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
                " (give a token with --token or KARPOR_TOKEN, or its file with --token-file or \
                 KARPOR_TOKEN_FILE; a local install keeps its own in data/admin-token)"
            } else {
                ""
            };
            return Err(Failed(EXIT_REFUSED, format!("{status}: {message}{hint}")));
        }
        Ok(envelope["data"].clone())
    }
}

/// `--token`, else the token file (`--token-file`, else a local install's admin token when
/// the server is on loopback and the file exists).
fn token(args: &ServerArgs) -> Result<Option<String>, Failed> {
    if let Some(token) = args.token.clone().filter(|t| !t.is_empty()) {
        return Ok(Some(token));
    }
    let (path, required) = match &args.token_file {
        Some(path) => (path.clone(), true),
        None if on_loopback(&args.server) => (local_token::default_path(), false),
        None => return Ok(None),
    };
    match karpor_core::private_file::read(&path, 4096) {
        Ok(Some(bytes)) => Ok(Some(String::from_utf8_lossy(&bytes).trim().to_owned())),
        Ok(None) if !required => Ok(None),
        Ok(None) => Err(Failed(
            EXIT_REFUSED,
            format!("token file {} does not exist", path.display()),
        )),
        Err(e) => Err(Failed(
            EXIT_REFUSED,
            format!("cannot read the token file: {e}"),
        )),
    }
}

fn on_loopback(server: &str) -> bool {
    let host = url::Url::parse(server)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

pub async fn cluster(server: &ServerArgs, command: &ClusterCommand) -> ExitCode {
    finish(run_cluster(server, command).await)
}

pub async fn search(args: &SearchArgs) -> ExitCode {
    finish(run_search(args).await)
}

fn finish(result: Result<(), Failed>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(code, message)) => {
            eprintln!("karpor: {message}");
            ExitCode::from(code)
        }
    }
}

async fn run_cluster(server: &ServerArgs, command: &ClusterCommand) -> Result<(), Failed> {
    let api = Api::new(server)?;
    match command {
        ClusterCommand::Add {
            name,
            kubeconfig,
            context,
            display_name,
            description,
        } => {
            let text = read_kubeconfig(kubeconfig, context.as_deref())?;
            let body = json!({
                "displayName": display_name.clone().unwrap_or_default(),
                "description": description.clone().unwrap_or_default(),
                "kubeConfig": text,
            });
            let data = api
                .call(
                    reqwest::Method::POST,
                    &format!("/cluster/{name}"),
                    Some(body),
                )
                .await?;
            let summary = &data["kubeconfigSummary"];
            println!(
                "cluster {name} added (context {}, server {})",
                summary["context"].as_str().unwrap_or("?"),
                summary["server"].as_str().unwrap_or("?")
            );
        }
        ClusterCommand::List { json } => {
            let data = api
                .call(reqwest::Method::GET, "/clusters?summary=true", None)
                .await?;
            if *json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&data["items"]).unwrap_or_default()
                );
                return Ok(());
            }
            let rows = data["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|c| {
                            vec![
                                text(&c["name"]),
                                text(&c["displayName"]),
                                text(&c["kubeconfigSummary"]["server"]),
                                text(&c["syncStatus"]["state"]),
                                text(&c["syncStatus"]["objectsStored"]),
                            ]
                        })
                        .collect()
                })
                .unwrap_or_default();
            print!(
                "{}",
                table(&["NAME", "DISPLAY NAME", "SERVER", "SYNC", "OBJECTS"], rows)
            );
        }
        ClusterCommand::Rm { name } => {
            api.call(reqwest::Method::DELETE, &format!("/cluster/{name}"), None)
                .await?;
            println!("cluster {name} removed");
        }
    }
    Ok(())
}

/// The kubeconfig's chosen context alone, with the files it names read here (relative to
/// the file) and inlined: the server accepts only self-contained kubeconfigs, as `kubectl
/// config view --flatten --minify` makes them.
fn read_kubeconfig(path: &Path, context: Option<&str>) -> Result<String, Failed> {
    use std::io::Read;
    let refused = |m: String| Failed(EXIT_REFUSED, format!("{}: {m}", path.display()));
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(kubeconfig::MAX_BYTES as u64 + 1)
                .read_to_string(&mut text)
        })
        .map_err(|e| refused(format!("cannot read: {e}")))?;
    let config = kubeconfig::parse(&text).map_err(|p| refused(p.0))?;
    let mut selected = kubeconfig::select(&config, context).map_err(|p| refused(p.0))?;
    kubeconfig::inline_files(&mut selected, path.parent()).map_err(|p| refused(p.0))?;
    Ok(kubeconfig::to_yaml(&selected))
}

async fn run_search(args: &SearchArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let query = format!(
        "/search?pattern=sql&query={}&page={}&pageSize={}",
        encode(&args.query),
        args.page,
        args.page_size
    );
    let data = api.call(reqwest::Method::GET, &query, None).await?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&data).unwrap_or_default()
        );
        return Ok(());
    }
    let items = data["items"].as_array().cloned().unwrap_or_default();
    let rows = items
        .iter()
        .map(|item| {
            let object = &item["object"];
            vec![
                text(&item["cluster"]),
                text(&object["apiVersion"]),
                text(&object["kind"]),
                text(&object["metadata"]["namespace"]),
                text(&object["metadata"]["name"]),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &["CLUSTER", "APIVERSION", "KIND", "NAMESPACE", "NAME"],
            rows
        )
    );
    println!(
        "{} of {} (page {})",
        items.len(),
        text(&data["total"]),
        text(&data["currentPage"])
    );
    Ok(())
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let cells: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row);
    }
    out
}

/// Percent-encoding of a query parameter's value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
