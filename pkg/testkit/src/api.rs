//! A client for the REST API in tests: every answer's envelope is checked, and every body
//! is kept so a test can scan them all for credentials.

use std::sync::Mutex;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::process::Karpor;

/// Credentials the tests put in kubeconfigs and config: none may ever be answered or logged.
pub const SECRETS: &[&str] = &[
    "secret-token-1",
    "S0VZLXNlY3JldA==",
    "exec-secret-arg",
    "exec-secret-env",
    "admin-token-xyz",
    "guest-token-xyz",
    "test-admin-token",
];

pub const ADMIN: &str = "admin-token-xyz";
pub const GUEST: &str = "guest-token-xyz";

/// Two tokens, no anonymous access.
pub const WITH_TOKENS: &str = "shutdown: {drain_delay: 1s}
auth:
  anonymous: none
  tokens:
  - {name: ops, role: admin, token: admin-token-xyz}
  - {name: viewer, role: guest, token: {env: GUEST_TOKEN}}
";

/// A kubeconfig of three contexts: token, client certificate and exec users; the server
/// is closed (nothing listens on port 1).
pub const THREE_CONTEXTS: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://127.0.0.1:1", certificate-authority-data: "Q0E="}
- name: two
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: token-user
  user: {token: secret-token-1}
- name: cert-user
  user: {client-certificate-data: "Q0VSVA==", client-key-data: "S0VZLXNlY3JldA=="}
- name: exec-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: /bin/false
      args: [--secret, exec-secret-arg]
      env: [{name: TOKEN, value: exec-secret-env}]
contexts:
- name: first
  context: {cluster: one, user: token-user}
- name: second
  context: {cluster: two, user: cert-user, namespace: apps}
- name: third
  context: {cluster: one, user: exec-user}
current-context: first
"#;

pub struct Client {
    base: String,
    http: reqwest::Client,
    pub token: Option<String>,
    bodies: Mutex<Vec<String>>,
}

impl Client {
    pub fn new(karpor: &Karpor) -> Client {
        Client {
            base: karpor.url(""),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                // Below the server's 10 s wait for a kept-alive connection's next request
                // (`server.connections.header_read_timeout`): a connection it is closing
                // is never reused for a request (hyper's IncompleteMessage).
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            token: None,
            bodies: Mutex::new(Vec::new()),
        }
    }

    /// With the admin token a local install made at first start.
    pub fn local_admin(karpor: &Karpor) -> Client {
        Client::with_token(karpor, &karpor.local_token())
    }

    pub fn with_token(karpor: &Karpor, token: &str) -> Client {
        Client {
            token: Some(token.to_owned()),
            ..Client::new(karpor)
        }
    }

    /// `(status, envelope)`; the envelope's shape is asserted for every answer.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        self.send(request).await
    }

    /// `GET path`'s `data` read as `T` (one of `karpor_api::types`); any other status
    /// than 2xx, or data of another shape, fails the test.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> T {
        self.typed("GET", path, None).await
    }

    /// `POST path` with `body`, its `data` read as `T`.
    pub async fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> T {
        let body = serde_json::to_value(body).unwrap();
        self.typed("POST", path, Some(body)).await
    }

    /// `PUT path` with `body`, its `data` read as `T`.
    pub async fn put<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> T {
        let body = serde_json::to_value(body).unwrap();
        self.typed("PUT", path, Some(body)).await
    }

    /// A call whose envelope is checked as [`Client::call`] does, its `data` read as `T`.
    pub async fn typed<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> T {
        let (status, envelope) = self.call(method, path, body).await;
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status}: {envelope}"
        );
        serde_json::from_value(envelope["data"].clone()).unwrap_or_else(|e| {
            panic!("{method} {path}: data is not the type asked for ({e}): {envelope}")
        })
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        self.send_echoing(request, None).await
    }

    /// As [`Client::send`], for an answer whose `data.<echo>` is the caller's own input
    /// sent back (an uploaded kubeconfig's `content`): that field is left out of the
    /// bodies [`Client::assert_no_secret_answered`] looks at; the rest is checked.
    pub async fn send_echoing(
        &self,
        request: reqwest::RequestBuilder,
        echo: Option<&str>,
    ) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let id = response
            .headers()
            .get("x-request-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let envelope: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"));
        let mut recorded = envelope.clone();
        if let (Some(field), Some(data)) = (echo, recorded["data"].as_object_mut()) {
            data.remove(field);
        }
        let recorded = match echo {
            Some(_) => recorded.to_string(),
            None => text.clone(),
        };
        self.bodies.lock().unwrap().push(recorded);
        let success = envelope["success"].as_bool().expect("success");
        assert_eq!(success, (200..300).contains(&status), "{status}: {text}");
        assert!(envelope["message"].is_string(), "{text}");
        if !success {
            assert!(envelope["data"].is_null(), "{text}");
        }
        assert_eq!(envelope["traceID"].as_str(), id.as_deref(), "{text}");
        for key in ["startTime", "endTime", "costTime"] {
            assert!(envelope[key].is_string(), "{key}: {text}");
        }
        (status, envelope)
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A request to `path` with this client's token, to be finished by the caller.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, self.url(path));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Asserts that no answer so far carried a credential.
    pub fn assert_no_secret_answered(&self) {
        for body in self.bodies.lock().unwrap().iter() {
            for secret in SECRETS {
                assert!(!body.contains(secret), "{secret} answered in {body}");
            }
        }
    }
}

pub fn assert_no_secret_logged(karpor: &Karpor) {
    let logs = karpor.logs();
    for secret in SECRETS {
        assert!(!logs.contains(secret), "{secret} logged:\n{logs}");
    }
}
