//! Kubeconfigs, read with kube-rs's own types within [`crate::yaml`]'s limits: every context
//! selectable (the current one by default); token, client-certificate, basic and exec
//! users. What karpor stores is the selected context alone ("minified") and
//! self-contained: a kubeconfig that names a file is refused on the server, and only the
//! CLI, on the user's own machine, reads such files to inline them ([`inline_files`]).
//! Responses carry only [`mask`]ed text and a [`Summary`]; no error quotes the text.

use std::io::Read;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use kube::config::{AuthInfo, Kubeconfig, NamedAuthInfo, NamedContext, NamedExtension};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::yaml;

/// What replaces a credential in a masked kubeconfig.
pub const MASK: &str = "******";

pub use karpor_core::model::MAX_KUBECONFIG_BYTES as MAX_BYTES;

/// A file a kubeconfig names (CA, certificate, key, token) is read up to this size.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Why a kubeconfig was refused; safe to show (no credential in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(pub String);

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Problem {}

pub(crate) fn problem<T>(message: impl Into<String>) -> Result<T, Problem> {
    Err(Problem(message.into()))
}

/// A context of a kubeconfig, as listed to users.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextInfo {
    pub name: String,
    pub cluster: String,
    pub user: Option<String>,
    /// The server's URL, without user-info.
    pub server: Option<String>,
    pub namespace: Option<String>,
}

/// What a kubeconfig's selected context is, without credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub context: String,
    pub cluster: String,
    /// The server's URL, without user-info.
    pub server: String,
    pub user: Option<String>,
    pub namespace: Option<String>,
    /// `token`, `tokenFile`, `clientCertificate`, `exec`, `basic`, `authProvider` or `none`.
    pub auth_kind: String,
    /// Whether the server's CA is given.
    pub has_ca: bool,
    pub insecure_skip_tls_verify: bool,
}

/// Parses a kubeconfig's text (one YAML document, within the limits); it must have at
/// least one context.
pub fn parse(text: &str) -> Result<Kubeconfig, Problem> {
    if text.len() > MAX_BYTES {
        return problem(format!(
            "the kubeconfig is {} bytes, above the limit of {MAX_BYTES}",
            text.len()
        ));
    }
    if text.trim().is_empty() {
        return problem("the kubeconfig is empty");
    }
    let config: Kubeconfig = yaml::from_str(text).map_err(|p| {
        Problem(format!(
            "the text is not a kubeconfig (clusters, users and contexts lists expected): {}{}",
            p.what,
            p.position()
        ))
    })?;
    if config.contexts.is_empty() {
        return problem("the kubeconfig has no contexts");
    }
    Ok(config)
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
                .and_then(|c| c.server.as_deref())
                .map(mask_url);
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
/// its cluster, user and context only, `current-context` set. Reads nothing.
pub fn select(config: &Kubeconfig, context: Option<&str>) -> Result<Kubeconfig, Problem> {
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
    let Some(c) = cluster.cluster.as_ref() else {
        return problem(format!("cluster {:?} is empty", cluster.name));
    };
    match c.server.as_deref() {
        None | Some("") => return problem(format!("cluster {:?} has no server", cluster.name)),
        Some(server) if !(server.starts_with("https://") || server.starts_with("http://")) => {
            return problem(format!(
                "cluster {:?}: server is not an http(s) URL",
                cluster.name
            ))
        }
        Some(_) => {}
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
            Some(found.clone())
        }
    };
    let mut selected = Kubeconfig {
        clusters: vec![cluster.clone()],
        auth_infos: user.into_iter().collect::<Vec<NamedAuthInfo>>(),
        contexts: vec![NamedContext {
            name: named.name.clone(),
            context: Some(ctx.clone()),
            ..Default::default()
        }],
        current_context: Some(named.name.clone()),
        kind: Some("Config".to_owned()),
        api_version: Some("v1".to_owned()),
        ..Default::default()
    };
    drop_unknown_fields(&mut selected);
    Ok(selected)
}

/// Keys kube-rs does not know are not kept: what is stored is what karpor understands,
/// and masking never has to guess whether an unknown key holds a credential.
fn drop_unknown_fields(config: &mut Kubeconfig) {
    config.other.clear();
    for named in &mut config.clusters {
        named.other.clear();
        if let Some(c) = named.cluster.as_mut() {
            c.other.clear();
        }
    }
    for named in &mut config.contexts {
        named.other.clear();
        if let Some(c) = named.context.as_mut() {
            c.other.clear();
        }
    }
    for named in &mut config.auth_infos {
        named.other.clear();
        if let Some(info) = named.auth_info.as_mut() {
            info.other.clear();
            if let Some(exec) = info.exec.as_mut() {
                exec.other.clear();
            }
            if let Some(provider) = info.auth_provider.as_mut() {
                provider.other.clear();
            }
        }
    }
}

/// Refuses a kubeconfig that would make karpor read a file on its own host, or use an
/// auth provider; the field is named, the path never touched. The server's check of
/// every kubeconfig it is sent or holds.
pub fn self_contained(config: &Kubeconfig) -> Result<(), Problem> {
    let hint = "karpor accepts only self-contained kubeconfigs (`karpor cluster add` inlines \
                your local files, as `kubectl config view --flatten` does)";
    for named in &config.clusters {
        if let Some(c) = &named.cluster {
            if c.certificate_authority.is_some() {
                return problem(format!(
                    "cluster {:?}: certificate-authority names a file on the server; use certificate-authority-data: {hint}",
                    named.name
                ));
            }
        }
    }
    for named in &config.auth_infos {
        let Some(info) = &named.auth_info else {
            continue;
        };
        let user = &named.name;
        for (field, set, instead) in [
            (
                "client-certificate",
                info.client_certificate.is_some(),
                "client-certificate-data",
            ),
            ("client-key", info.client_key.is_some(), "client-key-data"),
            ("tokenFile", info.token_file.is_some(), "token"),
        ] {
            if set {
                return problem(format!(
                    "user {user:?}: {field} names a file on the server; use {instead}: {hint}"
                ));
            }
        }
        if info.auth_provider.is_some() {
            return problem(format!(
                "user {user:?}: auth-provider is not supported (kubectl dropped it in 1.26); \
                 use an exec plugin (gke-gcloud-auth-plugin, kubelogin) or a token"
            ));
        }
        if info.client_certificate_data.is_some() != info.client_key_data.is_some() {
            return problem(format!(
                "user {user:?}: a client certificate needs both client-certificate-data and client-key-data"
            ));
        }
        if let Some(exec) = &info.exec {
            if exec.command.as_deref().unwrap_or_default().is_empty() {
                return problem(format!("user {user:?}: exec has no command"));
            }
        }
    }
    Ok(())
}

/// On the user's own machine (the CLI): reads the files the kubeconfig names (relative to
/// `base`) and inlines them, so the server is sent a self-contained kubeconfig.
pub fn inline_files(config: &mut Kubeconfig, base: Option<&Path>) -> Result<(), Problem> {
    for named in &mut config.clusters {
        let what = format!("cluster {:?}: certificate-authority", named.name);
        if let Some(c) = named.cluster.as_mut() {
            if let Some(file) = c.certificate_authority.take() {
                c.certificate_authority_data = Some(STANDARD.encode(read(base, &file, &what)?));
            }
        }
    }
    for named in &mut config.auth_infos {
        let user = named.name.clone();
        if let Some(info) = named.auth_info.as_mut() {
            inline_user(info, &user, base)?;
        }
    }
    Ok(())
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
    if let Some(file) = info.token_file.take() {
        let token = read(base, &file, &format!("user {user:?}: tokenFile"))?;
        let token = String::from_utf8(token)
            .map_err(|_| Problem(format!("user {user:?}: tokenFile is not text")))?;
        info.token = Some(token.trim().to_owned().into());
    }
    Ok(())
}

fn read(base: Option<&Path>, file: &str, what: &str) -> Result<Vec<u8>, Problem> {
    let mut path = PathBuf::from(file);
    if let (Some(base), true) = (base, path.is_relative()) {
        path = base.join(path);
    }
    let fail = |e: std::io::Error| {
        Problem(format!(
            "{what} file {} cannot be read: {}",
            path.display(),
            e.kind()
        ))
    };
    let file = std::fs::File::open(&path).map_err(fail)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return problem(format!(
            "{what} file {} is above {MAX_FILE_BYTES} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

/// The text karpor stores.
pub fn to_yaml(config: &Kubeconfig) -> String {
    // kube's types are strings, lists and maps: serialising them cannot fail.
    serde_saphyr::to_string(config).unwrap_or_default()
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
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.clone())
        .unwrap_or_default();
    let user = ctx
        .user
        .as_ref()
        .and_then(|u| config.auth_infos.iter().find(|n| &n.name == u))
        .and_then(|n| n.auth_info.clone());
    Summary {
        context,
        cluster: ctx.cluster.clone(),
        server: cluster.server.as_deref().map(mask_url).unwrap_or_default(),
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

/// A URL with any user-info (`user:password@`) replaced by [`MASK`].
pub fn mask_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://{MASK}@{}{tail}", &authority[at + 1..]),
        None => url.to_owned(),
    }
}

/// The kubeconfig with every credential replaced by [`MASK`]: tokens, passwords, client
/// keys, user-info in URLs, auth-provider settings, exec arguments and environment,
/// file paths and extensions (which may hold anything). What is kept is what tells a
/// person which cluster and identity this is.
pub fn mask(config: &Kubeconfig) -> Kubeconfig {
    let mut masked = config.clone();
    masked.extensions = masked.extensions.as_ref().map(|e| mask_extensions(e));
    masked.preferences = None;
    for named in &mut masked.clusters {
        if let Some(c) = named.cluster.as_mut() {
            c.server = c.server.as_deref().map(mask_url);
            c.proxy_url = c.proxy_url.as_deref().map(mask_url);
            c.certificate_authority = c.certificate_authority.as_ref().map(|_| MASK.to_owned());
            c.extensions = c.extensions.as_ref().map(|e| mask_extensions(e));
        }
    }
    for named in &mut masked.contexts {
        if let Some(c) = named.context.as_mut() {
            c.extensions = c.extensions.as_ref().map(|e| mask_extensions(e));
        }
    }
    for named in &mut masked.auth_infos {
        if let Some(info) = named.auth_info.as_mut() {
            mask_user(info);
        }
    }
    masked
}

fn mask_user(info: &mut AuthInfo) {
    let secret = || Some(MASK.to_owned().into());
    if info.password.is_some() {
        info.password = secret();
    }
    if info.token.is_some() {
        info.token = secret();
    }
    if info.client_key_data.is_some() {
        info.client_key_data = secret();
    }
    for path in [
        &mut info.token_file,
        &mut info.client_certificate,
        &mut info.client_key,
    ] {
        if path.is_some() {
            *path = Some(MASK.to_owned());
        }
    }
    if let Some(extra) = info.impersonate_user_extra.as_mut() {
        for values in extra.values_mut() {
            *values = vec![MASK.to_owned()];
        }
    }
    info.extensions = info.extensions.as_ref().map(|e| mask_extensions(e));
    if let Some(provider) = info.auth_provider.as_mut() {
        for value in provider.config.values_mut() {
            *value = MASK.to_owned();
        }
    }
    if let Some(exec) = info.exec.as_mut() {
        if let Some(args) = exec.args.as_mut() {
            args.iter_mut().for_each(|a| *a = MASK.to_owned());
        }
        if let Some(env) = exec.env.as_mut() {
            for var in env {
                if let Some(value) = var.get_mut("value") {
                    *value = MASK.to_owned();
                }
            }
        }
    }
}

fn mask_extensions(extensions: &[NamedExtension]) -> Vec<NamedExtension> {
    extensions
        .iter()
        .map(|e| NamedExtension {
            name: e.name.clone(),
            extension: serde_json::Value::String(MASK.to_owned()),
        })
        .collect()
}

/// The masked text of a stored kubeconfig (empty when it does not parse).
pub fn masked_text(stored: &str) -> String {
    parse(stored)
        .map(|config| to_yaml(&mask(&config)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
