//! Exec credential plugins (`users[].user.exec`), off unless the operator allows their
//! command by name in `kubernetes.exec.allowed_commands`. An allowed command runs as a
//! child process of the async runtime (never on a worker thread), with a timeout, its
//! output capped, a minimal environment (`PATH`, `HOME`, the operator's `pass_env`, and
//! of the kubeconfig's own variables only those `kubernetes.exec.allowed_env` allows for
//! that command), in its own process group killed when it is late.
//!
//! The kubeconfig's variables are an allowlist, not a denylist: too many variables change
//! what an interpreter runs (`BASH_ENV`, `SHELLOPTS`, `PS4`, `NODE_OPTIONS`, `PERL5OPT`,
//! `PYTHONWARNINGS`, `GCONV_PATH`, ...) for any list of them to be complete.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use karpor_config::ConfigIssue;
use kube::config::{ExecConfig, Kubeconfig};
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::io::AsyncReadExt;

use crate::kubeconfig::{problem, Problem};

/// The most of a plugin's output read: an ExecCredential is a few kilobytes.
const MAX_OUTPUT_BYTES: u64 = 1024 * 1024;
/// Variables always passed, from karpor's own environment.
const BASE_ENV: &[&str] = &["PATH", "HOME"];
/// A credential is renewed this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// `kubernetes.exec` in the config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecSettings {
    /// Commands a kubeconfig's exec user may run, as the kubeconfig names them: a bare
    /// name (looked up in `PATH`) or an absolute path. Empty: exec users are refused.
    pub allowed_commands: Vec<String>,
    /// How long one run may take before it is killed.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Variables of karpor's environment passed to the command besides `PATH` and
    /// `HOME` (for example `AWS_ROLE_ARN`, `AWS_WEB_IDENTITY_TOKEN_FILE`).
    pub pass_env: Vec<String>,
    /// Per allowed command, the variables a kubeconfig's exec `env` may set for it (for
    /// example `{aws: [AWS_PROFILE]}`); a kubeconfig setting any other is refused.
    pub allowed_env: BTreeMap<String, Vec<String>>,
    /// `kubernetes.allow_link_local_servers`, copied here by
    /// [`crate::KubernetesConfig::exec_settings`]: these settings are what every path that
    /// checks a kubeconfig before use is handed (the API, the syncer, [`crate::build`]).
    #[serde(skip)]
    pub allow_link_local_servers: bool,
}

impl Default for ExecSettings {
    fn default() -> Self {
        ExecSettings {
            allowed_commands: Vec::new(),
            timeout: Duration::from_secs(10),
            pass_env: Vec::new(),
            allowed_env: BTreeMap::new(),
            allow_link_local_servers: false,
        }
    }
}

impl ExecSettings {
    /// What types cannot say, with keys under `kubernetes.exec`.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        for (i, command) in self.allowed_commands.iter().enumerate() {
            let bare = !command.contains('/');
            if command.trim().is_empty() || !(bare || command.starts_with('/')) {
                return Err(ConfigIssue::new(
                    format!("kubernetes.exec.allowed_commands[{i}]"),
                    "must be a command name or an absolute path",
                ));
            }
        }
        if self.timeout.is_zero() {
            return Err(ConfigIssue::new(
                "kubernetes.exec.timeout",
                "must be above zero",
            ));
        }
        self.validate_allowed_env()
    }

    fn validate_allowed_env(&self) -> Result<(), ConfigIssue> {
        for (command, names) in &self.allowed_env {
            let key = format!("kubernetes.exec.allowed_env.{command}");
            if !self.allowed_commands.contains(command) {
                return Err(ConfigIssue::new(
                    key,
                    "names a command that is not in kubernetes.exec.allowed_commands",
                ));
            }
            for (i, name) in names.iter().enumerate() {
                if !is_env_name(name) {
                    return Err(ConfigIssue::new(format!("{key}[{i}]"), format!("{name:?} is not a variable name (letters, digits and _, not starting with a digit)")));
                }
                if servers_variable(name) {
                    return Err(ConfigIssue::new(
                        format!("{key}[{i}]"),
                        format!("{name} is {SERVERS}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether a kubeconfig may set `name` for `command`.
    fn env_allowed(&self, command: &str, name: &str) -> bool {
        !servers_variable(name)
            && self
                .allowed_env
                .get(command)
                .is_some_and(|names| names.iter().any(|n| n == name))
    }

    /// Refuses a kubeconfig whose exec user's command is not allowed, whose variables are
    /// not allowed for that command, or whose server or proxy is a link-local or cloud
    /// metadata address (unless `kubernetes.allow_link_local_servers`). The server's
    /// check of every kubeconfig before use: at registration, at validation, and in
    /// [`crate::build`] for every client.
    pub fn check(&self, config: &Kubeconfig) -> Result<(), Problem> {
        if !self.allow_link_local_servers {
            crate::outbound::check_literal(config)?;
        }
        self.check_exec(config)
    }

    fn check_exec(&self, config: &Kubeconfig) -> Result<(), Problem> {
        for named in &config.auth_infos {
            let Some(exec) = named.auth_info.as_ref().and_then(|i| i.exec.as_ref()) else {
                continue;
            };
            let user = &named.name;
            let command = exec.command.as_deref().unwrap_or_default();
            if self.allowed_commands.is_empty() {
                return problem(format!(
                    "user {user:?}: exec users are off on this server; an operator can allow \
                     their command in kubernetes.exec.allowed_commands"
                ));
            }
            if !self.allowed_commands.iter().any(|c| c == command) {
                return problem(format!(
                    "user {user:?}: exec command {command:?} is not in kubernetes.exec.allowed_commands ({})",
                    self.allowed_commands.join(", ")
                ));
            }
            for var in exec.env.iter().flatten() {
                let name = var.get("name").map(String::as_str).unwrap_or_default();
                if servers_variable(name) {
                    return problem(format!(
                        "user {user:?}: exec env {name:?} is not accepted ({name} is {SERVERS})"
                    ));
                }
                if !self.env_allowed(command, name) {
                    return problem(format!(
                        "user {user:?}: exec env {name:?} is not allowed for command {command:?}; \
                         an operator can allow it in kubernetes.exec.allowed_env \
                         ({{{command:?}: [{name}]}})"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Why [`servers_variable`] names are never a kubeconfig's.
const SERVERS: &str =
    "the server's: PATH and HOME are karpor's own, LD_* and DYLD_* change how any command is loaded";

/// Variables no kubeconfig sets, whatever the operator allows.
fn servers_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    BASE_ENV.contains(&upper.as_str()) || upper.starts_with("LD_") || upper.starts_with("DYLD_")
}

/// A portable variable name: letters, digits and `_`, not starting with a digit.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What an exec plugin gave.
#[derive(Clone)]
pub(crate) struct Credential {
    pub token: Option<String>,
    /// PEM certificate and key.
    pub client_certificate: Option<(String, String)>,
    /// When to run the plugin again (before its expiry); `None`: never.
    pub renew_at: Option<Instant>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("client_certificate", &self.client_certificate.is_some())
            .field("renew_at", &self.renew_at)
            .finish()
    }
}

/// Why a plugin gave no credential: words that never quote its command line or output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("the exec plugin could not be started ({0})")]
    Spawn(std::io::ErrorKind),
    #[error("the exec plugin did not finish within {0:?}")]
    Timeout(Duration),
    #[error("the exec plugin failed (exit status {0})")]
    Failed(String),
    #[error("the exec plugin's output is not an ExecCredential")]
    Output,
    #[error("the exec plugin gave neither a token nor a client certificate")]
    Empty,
}

/// Runs one kubeconfig user's plugin.
#[derive(Clone)]
pub(crate) struct ExecRunner {
    exec: Arc<ExecConfig>,
    settings: Arc<ExecSettings>,
}

impl ExecRunner {
    pub(crate) fn new(exec: ExecConfig, settings: Arc<ExecSettings>) -> Self {
        ExecRunner {
            exec: Arc::new(exec),
            settings,
        }
    }

    /// Runs the command once and reads its ExecCredential.
    pub(crate) async fn run(&self) -> Result<Credential, ExecError> {
        let exec = &self.exec;
        let mut command = tokio::process::Command::new(exec.command.as_deref().unwrap_or("false"));
        command
            .args(exec.args.iter().flatten())
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        for name in BASE_ENV
            .iter()
            .copied()
            .chain(self.settings.pass_env.iter().map(String::as_str))
        {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        // Checked before, filtered again: a runner never passes what the check refuses.
        let program = exec.command.as_deref().unwrap_or_default();
        for var in exec.env.iter().flatten() {
            if let (Some(name), Some(value)) = (var.get("name"), var.get("value")) {
                if self.settings.env_allowed(program, name) {
                    command.env(name, value);
                }
            }
        }
        let api_version = exec
            .api_version
            .clone()
            .unwrap_or_else(|| "client.authentication.k8s.io/v1".to_owned());
        let info = serde_json::json!({
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": false},
        });
        command.env("KUBERNETES_EXEC_INFO", info.to_string());
        let mut child = command.spawn().map_err(|e| ExecError::Spawn(e.kind()))?;
        let group = child.id();
        let limit = self.settings.timeout;
        let mut stdout = child.stdout.take().ok_or(ExecError::Output)?;
        let outcome = tokio::time::timeout(limit, async {
            let mut output = Vec::new();
            (&mut stdout)
                .take(MAX_OUTPUT_BYTES)
                .read_to_end(&mut output)
                .await
                .map_err(|_| ExecError::Output)?;
            let status = child.wait().await.map_err(|e| ExecError::Spawn(e.kind()))?;
            Ok::<_, ExecError>((status, output))
        })
        .await;
        let (status, output) = match outcome {
            Ok(result) => result?,
            Err(_) => {
                // The whole group: a plugin's own children must not outlive it.
                if let Some(pid) = group.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
                let _ = child.kill().await;
                return Err(ExecError::Timeout(limit));
            }
        };
        if !status.success() {
            return Err(ExecError::Failed(
                status
                    .code()
                    .map_or("by a signal".to_owned(), |c| c.to_string()),
            ));
        }
        credential(&output)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential {
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    token: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
    expiration_timestamp: Option<String>,
}

fn credential(output: &[u8]) -> Result<Credential, ExecError> {
    let parsed: ExecCredential = serde_json::from_slice(output).map_err(|_| ExecError::Output)?;
    let status = parsed.status.ok_or(ExecError::Empty)?;
    let client_certificate = match (status.client_certificate_data, status.client_key_data) {
        (Some(cert), Some(key)) => Some((cert, key)),
        _ => None,
    };
    let token = status.token.filter(|t| !t.is_empty());
    if token.is_none() && client_certificate.is_none() {
        return Err(ExecError::Empty);
    }
    let renew_at = match status.expiration_timestamp {
        None => None,
        Some(text) => {
            let expires = OffsetDateTime::parse(&text, &Rfc3339).map_err(|_| ExecError::Output)?;
            let left = expires - OffsetDateTime::now_utc();
            let left = Duration::try_from(left).unwrap_or_default();
            Some(Instant::now() + left.saturating_sub(RENEW_BEFORE))
        }
    };
    Ok(Credential {
        token,
        client_certificate,
        renew_at,
    })
}

#[cfg(test)]
mod tests;
