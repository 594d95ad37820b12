//! `ai:`: the model service (any OpenAI-compatible chat-completions endpoint), what one
//! generation may take, and how many callers may generate at once. Off when absent.

use std::time::Duration;

use karpor_config::ConfigIssue;
use karpor_core::SecretSource;
use serde::{Deserialize, Serialize};
use url::Url;

/// `ai`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AiConfig {
    /// The API's base, `/chat/completions` and `/models` are below it: OpenAI
    /// `https://api.openai.com/v1`, Ollama `http://127.0.0.1:11434/v1`, llama.cpp's and
    /// vLLM's servers `http://HOST:PORT/v1`, Azure OpenAI `https://NAME.openai.azure.com/openai/v1`.
    pub base_url: Url,
    /// The model's name as the service knows it.
    pub model: String,
    /// The key, sent as `Authorization: Bearer` (or as `api-key`, see `key_header`).
    #[serde(default)]
    pub api_key: Option<SecretSource>,
    /// How the key is sent: `bearer` (OpenAI and most others) or `api-key` (Azure OpenAI's
    /// key header).
    #[serde(default)]
    pub key_header: KeyHeader,
    /// Longest wait for the service to accept the connection.
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Longest wait for the first token (or a whole answer that is not streamed).
    #[serde(default = "default_first_token_timeout", with = "humantime_serde")]
    pub first_token_timeout: Duration,
    /// Longest one generation may take, first token to last.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Tokens one answer may have.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "default_temperature")]
    pub temperature: f32,
    /// Generations in flight, all callers together; more are refused with 429.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Generations in flight for one caller (one user or token; all anonymous callers
    /// together).
    #[serde(default = "default_per_caller")]
    pub per_caller: usize,
    /// Generations one caller may start in a minute.
    #[serde(default = "default_per_caller_per_minute")]
    pub per_caller_per_minute: u32,
    /// Bytes of a YAML, a log or an event list sent at most; the rest is cut, and the
    /// prompt says so.
    #[serde(default = "default_max_input_bytes")]
    pub max_input_bytes: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyHeader {
    #[default]
    Bearer,
    ApiKey,
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_first_token_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_timeout() -> Duration {
    Duration::from_secs(180)
}
fn default_max_tokens() -> u32 {
    1024
}
fn default_temperature() -> f32 {
    0.2
}
fn default_concurrency() -> usize {
    8
}
fn default_per_caller() -> usize {
    2
}
fn default_per_caller_per_minute() -> u32 {
    20
}
fn default_max_input_bytes() -> usize {
    32 * 1024
}

/// The largest values accepted: beyond them a setting is a mistake, not a choice.
const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const MAX_INPUT_BYTES: usize = 1 << 20;

impl AiConfig {
    /// A config with every default, for tests and examples.
    pub fn new(base_url: Url, model: impl Into<String>) -> AiConfig {
        AiConfig {
            base_url,
            model: model.into(),
            api_key: None,
            key_header: KeyHeader::Bearer,
            connect_timeout: default_connect_timeout(),
            first_token_timeout: default_first_token_timeout(),
            timeout: default_timeout(),
            max_tokens: default_max_tokens(),
            temperature: default_temperature(),
            concurrency: default_concurrency(),
            per_caller: default_per_caller(),
            per_caller_per_minute: default_per_caller_per_minute(),
            max_input_bytes: default_max_input_bytes(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigIssue> {
        let key = |field: &str| format!("ai.{field}");
        let url = &self.base_url;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ConfigIssue::new(
                key("base_url"),
                "must be an http or https URL",
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ConfigIssue::new(
                key("base_url"),
                "must not hold credentials: put the key in ai.api_key",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(ConfigIssue::new(
                key("base_url"),
                "must have no query or fragment",
            ));
        }
        if self.model.trim().is_empty() {
            return Err(ConfigIssue::new(key("model"), "must not be empty"));
        }
        for (field, value) in [
            ("connect_timeout", self.connect_timeout),
            ("first_token_timeout", self.first_token_timeout),
            ("timeout", self.timeout),
        ] {
            if value.is_zero() || value > MAX_TIMEOUT {
                return Err(ConfigIssue::new(key(field), "must be between 1ms and 30m"));
            }
        }
        if !(1..=32_768).contains(&self.max_tokens) {
            return Err(ConfigIssue::new(key("max_tokens"), "must be 1 to 32768"));
        }
        if !(0.0..=2.0).contains(&self.temperature) {
            return Err(ConfigIssue::new(key("temperature"), "must be 0 to 2"));
        }
        for (field, value) in [
            ("concurrency", self.concurrency),
            ("per_caller", self.per_caller),
            ("per_caller_per_minute", self.per_caller_per_minute as usize),
        ] {
            if value == 0 {
                return Err(ConfigIssue::new(key(field), "must be at least 1"));
            }
        }
        if !(1024..=MAX_INPUT_BYTES).contains(&self.max_input_bytes) {
            return Err(ConfigIssue::new(
                key("max_input_bytes"),
                "must be 1 KiB to 1 MiB",
            ));
        }
        Ok(())
    }

    /// The config's secrets, by key, for the checks run at load.
    pub fn secrets(&self) -> impl Iterator<Item = (&'static str, &SecretSource)> {
        self.api_key.iter().map(|s| ("ai.api_key", s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AiConfig {
        AiConfig::new("http://127.0.0.1:8080/v1".parse().unwrap(), "m")
    }

    #[test]
    fn each_bad_setting_names_its_key() {
        type Change = Box<dyn Fn(&mut AiConfig)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "ai.base_url",
                Box::new(|c| c.base_url = "ftp://x/v1".parse().unwrap()),
            ),
            (
                "ai.base_url",
                Box::new(|c| c.base_url = "http://u:p@x/v1".parse().unwrap()),
            ),
            (
                "ai.base_url",
                Box::new(|c| c.base_url = "http://x/v1?k=1".parse().unwrap()),
            ),
            ("ai.model", Box::new(|c| c.model = " ".into())),
            ("ai.timeout", Box::new(|c| c.timeout = Duration::ZERO)),
            ("ai.max_tokens", Box::new(|c| c.max_tokens = 0)),
            ("ai.temperature", Box::new(|c| c.temperature = 3.0)),
            ("ai.per_caller", Box::new(|c| c.per_caller = 0)),
            ("ai.max_input_bytes", Box::new(|c| c.max_input_bytes = 10)),
        ];
        assert!(config().validate().is_ok());
        for (key, change) in cases {
            let mut c = config();
            change(&mut c);
            assert_eq!(c.validate().unwrap_err().key(), key);
        }
    }
}
