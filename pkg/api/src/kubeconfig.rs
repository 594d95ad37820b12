//! Kubeconfigs, read with kube-rs's own types: every context selectable (the current one
//! by default), token, client-certificate, exec and basic users, inline or file CAs. What
//! karpor stores is the selected context alone ("minified"), with its files inlined so it
//! works wherever the syncer runs. Responses carry only [`mask`]ed text and a [`Summary`].
//! No error message quotes the text: parse errors give a position only.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use kube::config::{AuthInfo, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use serde::{Deserialize, Serialize};
use serde_yaml::Value;
use utoipa::ToSchema;

/// What replaces a credential in a masked kubeconfig.
pub const MASK: &str = "******";

/// Why a kubeconfig was refused; safe to show (no credential in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(pub String);

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn problem<T>(message: impl Into<String>) -> Result<T, Problem> {
    Err(Problem(message.into()))
}

/// A context of a kubeconfig, as listed to users.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextInfo {
    pub name: String,
    pub cluster: String,
    pub user: Option<String>,
    pub server: Option<String>,
    pub namespace: Option<String>,
}

/// What a kubeconfig's selected context is, without credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub context: String,
    pub cluster: String,
    pub server: String,
    pub user: Option<String>,
    pub namespace: Option<String>,
    /// `token`, `tokenFile`, `clientCertificate`, `exec`, `basic`, `authProvider` or `none`.
    pub auth_kind: String,
    /// Whether the server's CA is given (inline or as a file).
    pub has_ca: bool,
    pub insecure_skip_tls_verify: bool,
}

/// Parses a kubeconfig's text; it must have at least one context.
pub fn parse(text: &str) -> Result<Kubeconfig, Problem> {
    if text.trim().is_empty() {
        return problem("the kubeconfig is empty");
    }
    // YAML first, for a position without quoting the text.
    for document in serde_yaml::Deserializer::from_str(text) {
        if let Err(e) = Value::deserialize(document) {
            return problem(format!("the kubeconfig is not YAML{}", position(&e)));
        }
    }
    let config = Kubeconfig::from_yaml(text).map_err(|e| {
        let at = match &e {
            kube::config::KubeconfigError::Parse(e)
            | kube::config::KubeconfigError::InvalidStructure(e) => position(e),
            _ => String::new(),
        };
        Problem(format!(
            "the text is not a kubeconfig (clusters, users and contexts lists expected){at}"
        ))
    })?;
    if config.contexts.is_empty() {
        return problem("the kubeconfig has no contexts");
    }
    Ok(config)
}

fn position(e: &serde_yaml::Error) -> String {
    match e.location() {
        Some(l) => format!(" at line {}, column {}", l.line(), l.column()),
        None => String::new(),
    }
}

/// Every context, in the file's order.
pub fn contexts(config: &Kubeconfig) -> Vec<ContextInfo> {
    config
        .contexts
        .iter()
        .map(|c| {
            let context = c.context.clone().unwrap_or_default();
            let server = config
                .clusters
                .iter()
                .find(|n| n.name == context.cluster)
                .and_then(|n| n.cluster.as_ref())
                .and_then(|c| c.server.clone());
            ContextInfo {
                name: c.name.clone(),
                cluster: context.cluster,
                user: context.user,
                server,
                namespace: context.namespace,
            }
        })
        .collect()
}

fn names(config: &Kubeconfig) -> String {
    config
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kubeconfig of one context (`context`, else the current one, else the only one):
/// its cluster, user and context only, files read from `base` (relative paths) and
/// inlined, `current-context` set.
pub fn select(
    config: &Kubeconfig,
    context: Option<&str>,
    base: Option<&Path>,
) -> Result<Kubeconfig, Problem> {
    let name = match (context, &config.current_context) {
        (Some(name), _) => name.to_owned(),
        (None, Some(current)) if !current.is_empty() => current.clone(),
        (None, _) if config.contexts.len() == 1 => config.contexts[0].name.clone(),
        (None, _) => {
            return problem(format!(
                "the kubeconfig has no current-context: choose one of {}",
                names(config)
            ))
        }
    };
    let Some(named) = config.contexts.iter().find(|c| c.name == name) else {
        return problem(format!(
            "context {name:?} is not in the kubeconfig (it has: {})",
            names(config)
        ));
    };
    let Some(ctx) = &named.context else {
        return problem(format!("context {name:?} is empty"));
    };
    let Some(cluster) = config.clusters.iter().find(|c| c.name == ctx.cluster) else {
        return problem(format!(
            "context {name:?} names cluster {:?}, which is not in the kubeconfig",
            ctx.cluster
        ));
    };
    let mut cluster = cluster.clone();
    let Some(c) = cluster.cluster.as_mut() else {
        return problem(format!("cluster {:?} is empty", cluster.name));
    };
    match c.server.as_deref() {
        None | Some("") => return problem(format!("cluster {:?} has no server", cluster.name)),
        Some(server) => {
            if !(server.starts_with("https://") || server.starts_with("http://")) {
                return problem(format!(
                    "cluster {:?}: server {server:?} is not an http(s) URL",
                    cluster.name
                ));
            }
        }
    }
    if let Some(file) = c.certificate_authority.take() {
        let pem = read(
            base,
            &file,
            &format!("cluster {:?}: certificate-authority", cluster.name),
        )?;
        c.certificate_authority_data = Some(STANDARD.encode(pem));
    }
    if let Some(data) = &c.certificate_authority_data {
        if STANDARD.decode(data.trim()).is_err() {
            return problem(format!(
                "cluster {:?}: certificate-authority-data is not base64",
                cluster.name
            ));
        }
    }
    let user = match &ctx.user {
        None => None,
        Some(user) => {
            let Some(found) = config.auth_infos.iter().find(|u| &u.name == user) else {
                return problem(format!(
                    "context {name:?} names user {user:?}, which is not in the kubeconfig"
                ));
            };
            let mut found = found.clone();
            if let Some(info) = found.auth_info.as_mut() {
                inline_user(info, &found.name, base)?;
            }
            Some(found)
        }
    };
    Ok(Kubeconfig {
        clusters: vec![cluster],
        auth_infos: user.into_iter().collect::<Vec<NamedAuthInfo>>(),
        contexts: vec![NamedContext {
            name: named.name.clone(),
            context: Some(ctx.clone()),
        }],
        current_context: Some(named.name.clone()),
        kind: Some("Config".to_owned()),
        api_version: Some("v1".to_owned()),
        preferences: None,
        extensions: None,
    })
}

fn inline_user(info: &mut AuthInfo, user: &str, base: Option<&Path>) -> Result<(), Problem> {
    if let Some(file) = info.client_certificate.take() {
        let pem = read(base, &file, &format!("user {user:?}: client-certificate"))?;
        info.client_certificate_data = Some(STANDARD.encode(pem));
    }
    if let Some(file) = info.client_key.take() {
        let pem = read(base, &file, &format!("user {user:?}: client-key"))?;
        info.client_key_data = Some(STANDARD.encode(pem).into());
    }
    if info.client_certificate_data.is_some() != info.client_key_data.is_some() {
        return problem(format!(
            "user {user:?}: a client certificate needs both a certificate and a key"
        ));
    }
    if let Some(exec) = &info.exec {
        if exec.command.as_deref().unwrap_or_default().is_empty() {
            return problem(format!("user {user:?}: exec has no command"));
        }
    }
    Ok(())
}

fn read(base: Option<&Path>, file: &str, what: &str) -> Result<Vec<u8>, Problem> {
    let mut path = PathBuf::from(file);
    if let (Some(base), true) = (base, path.is_relative()) {
        path = base.join(path);
    }
    std::fs::read(&path).map_err(|e| {
        Problem(format!(
            "{what} file {} cannot be read: {}",
            path.display(),
            e.kind()
        ))
    })
}

/// The text karpor stores.
pub fn to_yaml(config: &Kubeconfig) -> String {
    // Serialising kube's own types cannot fail: they are strings, lists and maps.
    serde_yaml::to_string(config).unwrap_or_default()
}

/// The selected context of a stored (minified) kubeconfig, without credentials.
pub fn summary(config: &Kubeconfig) -> Summary {
    let context = config
        .current_context
        .clone()
        .or_else(|| config.contexts.first().map(|c| c.name.clone()))
        .unwrap_or_default();
    let ctx = config
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.clone())
        .unwrap_or_default();
    let cluster: Option<&NamedCluster> = config.clusters.iter().find(|c| c.name == ctx.cluster);
    let cluster = cluster.and_then(|c| c.cluster.clone()).unwrap_or_default();
    let user = ctx
        .user
        .as_ref()
        .and_then(|u| config.auth_infos.iter().find(|n| &n.name == u))
        .and_then(|n| n.auth_info.clone());
    Summary {
        context,
        cluster: ctx.cluster.clone(),
        server: cluster.server.clone().unwrap_or_default(),
        user: ctx.user.clone(),
        namespace: ctx.namespace.clone(),
        auth_kind: user.as_ref().map_or("none", auth_kind).to_owned(),
        has_ca: cluster.certificate_authority.is_some()
            || cluster.certificate_authority_data.is_some(),
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
    }
}

fn auth_kind(user: &AuthInfo) -> &'static str {
    if user.exec.is_some() {
        "exec"
    } else if user.client_certificate_data.is_some() || user.client_certificate.is_some() {
        "clientCertificate"
    } else if user.token.is_some() {
        "token"
    } else if user.token_file.is_some() {
        "tokenFile"
    } else if user.auth_provider.is_some() {
        "authProvider"
    } else if user.password.is_some() {
        "basic"
    } else {
        "none"
    }
}

/// The kubeconfig's text with every credential replaced by [`MASK`]: tokens, passwords,
/// client keys, auth-provider settings, and the arguments and environment of exec users.
pub fn mask(text: &str) -> String {
    let Ok(mut value) = serde_yaml::from_str::<Value>(text) else {
        return String::new();
    };
    if let Some(users) = value.get_mut("users").and_then(Value::as_sequence_mut) {
        for user in users {
            if let Some(info) = user.get_mut("user") {
                mask_user(info);
            }
        }
    }
    serde_yaml::to_string(&value).unwrap_or_default()
}

fn mask_user(info: &mut Value) {
    let Some(map) = info.as_mapping_mut() else {
        return;
    };
    for key in ["token", "password", "client-key-data"] {
        if let Some(v) = map.get_mut(key) {
            *v = Value::String(MASK.to_owned());
        }
    }
    if let Some(config) = map
        .get_mut("auth-provider")
        .and_then(|p| p.get_mut("config"))
        .and_then(Value::as_mapping_mut)
    {
        for (_, v) in config.iter_mut() {
            *v = Value::String(MASK.to_owned());
        }
    }
    if let Some(exec) = map.get_mut("exec") {
        if let Some(args) = exec.get_mut("args").and_then(Value::as_sequence_mut) {
            args.iter_mut()
                .for_each(|a| *a = Value::String(MASK.to_owned()));
        }
        if let Some(env) = exec.get_mut("env").and_then(Value::as_sequence_mut) {
            for var in env {
                if let Some(v) = var.get_mut("value") {
                    *v = Value::String(MASK.to_owned());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
