//! Agent mode's two config sections: `agents:` on the hub (the listener agents connect
//! to) and `agent:` in the agent role (the hub it pushes to and how it proves itself).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use karpor_config::ConfigIssue;
use karpor_core::SecretSource;
use serde::{Deserialize, Serialize};

use crate::pin::HubPin;

/// `agents:` (hub): agents connect here, with TLS whose certificate the hub's authority
/// issues and whose client certificates name one cluster each.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentListenerConfig {
    pub listen: SocketAddr,
    /// DNS names or IP addresses agents reach the hub by; the listener's certificate
    /// names each of them.
    pub names: Vec<String>,
    /// The URL an install line gives agents; `https://` + the first name + the listen
    /// port when unset.
    #[serde(default)]
    pub advertise: Option<String>,
    /// How long an agent's certificate is valid; agents renew it past two thirds.
    #[serde(default = "default_certificate_lifetime", with = "humantime_serde")]
    pub certificate_lifetime: Duration,
    /// Each join waits until an admin approves the key it came with
    /// (`POST /cluster/NAME/agent/approve`), as well as bringing a good token.
    #[serde(default)]
    pub approve_joins: bool,
    /// The URL the other hub replicas reach this one's agent listener by (its pod's
    /// address): a live read for an agent connected to another replica is forwarded
    /// there. Unset: a replica serves only the agents connected to it.
    #[serde(default)]
    pub peer_url: Option<String>,
}

fn default_certificate_lifetime() -> Duration {
    crate::CERTIFICATE_LIFETIME
}

/// The shortest certificate lifetime: renewal needs time to happen.
const MIN_CERTIFICATE_LIFETIME: Duration = Duration::from_secs(30);
/// The longest: a stolen certificate lives until revoked or expired.
const MAX_CERTIFICATE_LIFETIME: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Where `agents.peer_url` comes from when the file leaves it out.
pub const PEER_URL_ENV: &str = "KARPOR_AGENTS_PEER_URL";

/// How many names the listener's certificate may hold.
const MAX_NAMES: usize = 32;

impl AgentListenerConfig {
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        if self.names.is_empty() || self.names.len() > MAX_NAMES {
            return Err(ConfigIssue::new(
                "agents.names",
                format_args!("between 1 and {MAX_NAMES} names agents reach the hub by"),
            ));
        }
        for (i, name) in self.names.iter().enumerate() {
            if name.parse::<IpAddr>().is_err() && !is_dns_name(name) {
                return Err(ConfigIssue::new(
                    format!("agents.names[{i}]"),
                    format_args!("{name:?} is neither an IP address nor a DNS name"),
                ));
            }
        }
        if let Some(advertise) = &self.advertise {
            hub_url(advertise).map_err(|why| ConfigIssue::new("agents.advertise", why))?;
        }
        if let Some(peer) = self.peer() {
            let key = match &self.peer_url {
                Some(_) => "agents.peer_url".to_owned(),
                None => format!("agents.peer_url (from ${PEER_URL_ENV})"),
            };
            hub_url(&peer).map_err(|why| ConfigIssue::new(key, why))?;
        }
        let lifetime = self.certificate_lifetime;
        if !(MIN_CERTIFICATE_LIFETIME..=MAX_CERTIFICATE_LIFETIME).contains(&lifetime) {
            return Err(ConfigIssue::new(
                "agents.certificate_lifetime",
                format_args!(
                    "between {MIN_CERTIFICATE_LIFETIME:?} and {MAX_CERTIFICATE_LIFETIME:?}"
                ),
            ));
        }
        Ok(())
    }

    /// This replica's address for the others, without a trailing slash: `peer_url`, else
    /// `$KARPOR_AGENTS_PEER_URL` (the chart sets it from the pod's IP).
    pub fn peer(&self) -> Option<String> {
        self.peer_url
            .clone()
            .or_else(|| std::env::var(PEER_URL_ENV).ok().filter(|u| !u.is_empty()))
            .map(|url| url.trim_end_matches('/').to_owned())
    }

    /// The hub's address as an install line gives it.
    pub fn advertised(&self) -> String {
        match &self.advertise {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => {
                let name = self.names.first().map_or("localhost", String::as_str);
                let host = match name.parse::<IpAddr>() {
                    Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
                    _ => name.to_owned(),
                };
                format!("https://{host}:{}", self.listen.port())
            }
        }
    }
}

/// `agent:` (the agent role; `karpor agent --hub --pin` fill the first two).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The hub's agent listener: `https://HOST:PORT`.
    #[serde(default)]
    pub hub: String,
    /// The hub authority's pin (`sha256:HEX`), from the install line.
    #[serde(default)]
    pub pin: String,
    /// The join token, needed only until the state file holds a certificate.
    #[serde(default)]
    pub token: Option<SecretSource>,
    /// The agent's key and certificate (written 0600).
    #[serde(default = "default_state_file")]
    pub state_file: PathBuf,
    /// The member cluster's kubeconfig; in the cluster's own pod config when unset.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// `/livez`, `/readyz` and `/metrics` of the agent.
    #[serde(default = "default_probe_listen")]
    pub probe_listen: SocketAddr,
    /// How often the agent asks the hub for its plan.
    #[serde(default = "default_plan_interval", with = "humantime_serde")]
    pub plan_interval: Duration,
    /// Each request to the hub, a batch's upload included.
    #[serde(default = "default_request_timeout", with = "humantime_serde")]
    pub request_timeout: Duration,
}

fn default_state_file() -> PathBuf {
    PathBuf::from("data/agent-state.json")
}

fn default_probe_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7445))
}

fn default_plan_interval() -> Duration {
    Duration::from_secs(10)
}

fn default_request_timeout() -> Duration {
    Duration::from_secs(30)
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            hub: String::new(),
            pin: String::new(),
            token: None,
            state_file: default_state_file(),
            kubeconfig: None,
            probe_listen: default_probe_listen(),
            plan_interval: default_plan_interval(),
            request_timeout: default_request_timeout(),
        }
    }
}

impl AgentConfig {
    /// Checked by the agent role alone: a server ignores this section.
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        hub_url(&self.hub).map_err(|why| ConfigIssue::new("agent.hub", why))?;
        self.hub_pin()?;
        let bounded = |key: &str, value: Duration, low: Duration, high: Duration| {
            if value < low || value > high {
                Err(ConfigIssue::new(
                    key,
                    format_args!("between {low:?} and {high:?}"),
                ))
            } else {
                Ok(())
            }
        };
        let second = Duration::from_secs(1);
        bounded(
            "agent.plan_interval",
            self.plan_interval,
            second,
            Duration::from_secs(3600),
        )?;
        bounded(
            "agent.request_timeout",
            self.request_timeout,
            second,
            Duration::from_secs(600),
        )
    }

    pub fn hub_pin(&self) -> Result<HubPin, ConfigIssue> {
        self.pin
            .parse()
            .map_err(|e: crate::AgentError| ConfigIssue::new("agent.pin", e))
    }

    /// Secrets, by key, for the binary to check resolve.
    pub fn secrets(&self) -> Vec<(&'static str, &SecretSource)> {
        self.token.iter().map(|t| ("agent.token", t)).collect()
    }
}

/// `https://HOST[:PORT]` with nothing after it: no credentials, path or query.
fn hub_url(text: &str) -> Result<(), String> {
    let rest = text
        .strip_prefix("https://")
        .ok_or_else(|| format!("{text:?} is not an https:// URL"))?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "{text:?}: only https://HOST[:PORT], with no credentials, path or query"
        ));
    }
    Ok(())
}

fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_urls_are_https_and_bare() {
        assert!(hub_url("https://hub.example:7446").is_ok());
        assert!(hub_url("https://10.0.0.1:7446/").is_ok());
        for bad in [
            "http://hub:1",
            "https://",
            "https://u:p@hub",
            "https://hub/x",
            "https://hub?q",
        ] {
            assert!(hub_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_listener_names_what_its_certificate_can_hold() {
        let mut config = AgentListenerConfig {
            listen: "0.0.0.0:7446".parse().unwrap(),
            names: vec!["hub.example".into(), "10.0.0.1".into()],
            advertise: None,
            certificate_lifetime: default_certificate_lifetime(),
            approve_joins: false,
            peer_url: None,
        };
        assert!(config.validate().is_ok());
        config.peer_url = Some("http://hub-0:7446".into());
        assert_eq!(config.validate().unwrap_err().key(), "agents.peer_url");
        config.peer_url = Some("https://hub-0.hub:7446/".into());
        assert!(config.validate().is_ok());
        assert_eq!(config.peer().as_deref(), Some("https://hub-0.hub:7446"));
        config.peer_url = None;
        assert_eq!(config.advertised(), "https://hub.example:7446");
        config.names.push("bad name".into());
        assert_eq!(config.validate().unwrap_err().key(), "agents.names[2]");
        config.names.clear();
        assert_eq!(config.validate().unwrap_err().key(), "agents.names");
        config.names.push("hub.example".into());
        config.certificate_lifetime = Duration::from_secs(1);
        assert_eq!(
            config.validate().unwrap_err().key(),
            "agents.certificate_lifetime"
        );
    }
}
