//! What is taken out of everything sent to a model, decided from the content itself
//! (whatever route it came through): a Secret's values, managed fields, the
//! last-applied annotation, values under credential-like keys (tokens, passwords,
//! kubeconfig key data), environment variables named like credentials, and in any text
//! bearer tokens, JWTs, private keys and `password=...` pairs. Then the text is cut to
//! the configured size, saying so.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

/// What replaces a removed value.
pub const REDACTED: &str = "(redacted)";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Keys whose values are credentials wherever they appear (compared lowercased, `_`
/// as `-`).
const CREDENTIAL_KEYS: [&str; 16] = [
    "token",
    "id-token",
    "refresh-token",
    "access-token",
    "password",
    "passwd",
    "secret",
    "client-secret",
    "client-key-data",
    "client-key",
    "api-key",
    "apikey",
    "private-key",
    "bearer-token",
    "auth",
    "authorization",
];

/// Environment variables named like credentials (`DB_PASSWORD`, `API_TOKEN`).
static CREDENTIAL_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(pass(word|wd)?|token|secret|api[_-]?key|private[_-]?key|credential)")
        .expect("a valid pattern")
});

/// Credentials in free text.
static IN_TEXT: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // PEM private keys, whole.
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        // JWTs (ServiceAccount tokens, OIDC ID tokens).
        r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        // `Authorization: Bearer ...`, `Basic ...`.
        r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}",
        // `password=...`, `DB_PASSWORD=...`, `token: ...`, `"apiKey":"..."`.
        r#"(?i)[a-z0-9_.-]*(pass(word|wd)?|token|secret|api[_-]?key|access[_-]?key)["']?\s*[:=]\s*["']?[^\s"',;]+"#,
    ]
    .iter()
    .map(|p| Regex::new(p).expect("a valid pattern"))
    .collect()
});

/// `text` with the credentials it holds replaced.
pub fn text(text: &str) -> String {
    let mut out = text.to_owned();
    for pattern in IN_TEXT.iter() {
        if pattern.is_match(&out) {
            out = pattern.replace_all(&out, REDACTED).into_owned();
        }
    }
    out
}

fn is_credential_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('_', "-");
    CREDENTIAL_KEYS.contains(&key.as_str())
}

/// A Kubernetes object (or any JSON) with what must not reach a model taken out.
pub fn object(mut value: Value) -> Value {
    if value.get("kind").and_then(Value::as_str) == Some("Secret") {
        for field in ["data", "stringData"] {
            if let Some(Value::Object(data)) = value.get_mut(field) {
                for v in data.values_mut() {
                    *v = Value::String(REDACTED.to_owned());
                }
            }
        }
    }
    if let Some(Value::Object(metadata)) = value.get_mut("metadata") {
        metadata.remove("managedFields");
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
            annotations.remove(LAST_APPLIED);
        }
    }
    walk(&mut value);
    value
}

fn walk(value: &mut Value) {
    match value {
        Value::Object(map) => {
            env_value(map);
            for (key, v) in map.iter_mut() {
                if is_credential_key(key) && !v.is_object() && !v.is_array() {
                    *v = Value::String(REDACTED.to_owned());
                } else {
                    walk(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(walk),
        Value::String(s) => {
            let scrubbed = text(s);
            if scrubbed != *s {
                *s = scrubbed;
            }
        }
        _ => {}
    }
}

/// A container's `{name: DB_PASSWORD, value: ...}`.
fn env_value(map: &mut Map<String, Value>) {
    let named = map
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|name| CREDENTIAL_NAME.is_match(name));
    if named {
        if let Some(v @ Value::String(_)) = map.get_mut("value") {
            *v = Value::String(REDACTED.to_owned());
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with a note when cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[cut by karpor: the first {end} of {} bytes are shown]",
        &text[..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secret_keeps_its_keys_not_its_values() {
        let secret = object(json!({
            "kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": "db", "managedFields": [{"manager": "kubectl"}],
                "annotations": {LAST_APPLIED: "{\"data\":{\"pw\":\"aHVudGVyMg==\"}}", "team": "a"}},
            "data": {"pw": "aHVudGVyMg=="}, "stringData": {"user": "root"}
        }));
        let text = secret.to_string();
        assert!(!text.contains("aHVudGVyMg"), "{text}");
        assert!(!text.contains("root"), "{text}");
        assert!(!text.contains("managedFields"), "{text}");
        assert_eq!(secret["data"]["pw"], REDACTED);
        assert_eq!(secret["metadata"]["annotations"]["team"], "a");
    }

    #[test]
    fn credentials_anywhere_are_taken_out() {
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl";
        let pod = object(json!({
            "kind": "Pod",
            "spec": {"containers": [{"name": "app",
                "env": [{"name": "DB_PASSWORD", "value": "hunter2"}, {"name": "MODE", "value": "prod"}],
                "args": [format!("--token={jwt}"), "--header=Authorization: Bearer abcdefghijkl"]}]},
            "users": [{"name": "u", "user": {"client-key-data": "LS0tLS1CRUdJTi", "token": "sekrit-value"}}]
        }));
        let text = pod.to_string();
        for leaked in [
            "hunter2",
            jwt,
            "abcdefghijkl",
            "LS0tLS1CRUdJTi",
            "sekrit-value",
        ] {
            assert!(!text.contains(leaked), "{leaked} in {text}");
        }
        assert!(text.contains("prod"));
    }

    #[test]
    fn free_text_loses_keys_and_pairs() {
        let env = super::text("starting with DB_PASSWORD=hunter2, max_tokens: 5");
        assert_eq!(env, "starting with (redacted), max_tokens: 5");
        let line = "connecting with password=hunter2 and -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- ok";
        let scrubbed = super::text(line);
        assert!(
            !scrubbed.contains("hunter2") && !scrubbed.contains("MIIE"),
            "{scrubbed}"
        );
        assert!(scrubbed.ends_with(" ok"));
    }

    #[test]
    fn cutting_says_so_and_keeps_characters_whole() {
        assert_eq!(cut("short", 10), "short");
        let cut = cut("ééééé", 3);
        assert!(
            cut.starts_with("é\n[cut by karpor: the first 2 of 10 bytes"),
            "{cut}"
        );
    }
}
