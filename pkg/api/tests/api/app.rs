//! The API as `src/app.rs` builds it (`karpor_api::routes` over [`karpor_api::ApiParts`]),
//! on SQLite files in a temporary directory, driven with `oneshot`: no socket, no
//! process. A [`Client`] checks every envelope and keeps every body for the credential
//! scan.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, Response};
use axum::Router;
use karpor_api::{
    ApiParts, Authenticator, LimitsConfig, LiveBounds, OidcVerifier, Policies, Role,
    TokenReviewConfig,
};
use karpor_core::access::AccessPolicy;
use karpor_kube::ExecSettings;
use karpor_metastore::{Metastore, MetastoreConfig};
use karpor_storage::{Storage, StorageConfig};
use karpor_testkit::api::{ADMIN, GUEST, SECRETS};
use prometheus_client::registry::Registry;
use serde_json::Value;
use tower::ServiceExt;

/// What the server is configured with; [`Setup::start`] builds it.
pub(crate) struct Setup {
    /// `(name, role, token)`.
    pub(crate) tokens: Vec<(String, Role, String)>,
    /// The role of a request without a token.
    pub(crate) anonymous: Option<Role>,
    pub(crate) read_only: bool,
    pub(crate) limits: LimitsConfig,
    pub(crate) exec: ExecSettings,
    /// `auth.policies`.
    pub(crate) policies: Vec<AccessPolicy>,
    /// `auth.oidc`, made.
    pub(crate) oidc: Option<OidcVerifier>,
    /// `auth.token_review`.
    pub(crate) token_review: Option<TokenReviewConfig>,
    /// `ai`.
    pub(crate) ai: Option<karpor_ai::AiConfig>,
}

impl Default for Setup {
    /// Two tokens, `ops` (admin, [`ADMIN`]) and `viewer` (guest, [`GUEST`]); nothing
    /// anonymous.
    fn default() -> Self {
        Setup {
            tokens: vec![
                ("ops".to_owned(), Role::Admin, ADMIN.to_owned()),
                ("viewer".to_owned(), Role::Viewer, GUEST.to_owned()),
            ],
            anonymous: None,
            read_only: false,
            limits: LimitsConfig::default(),
            exec: ExecSettings::default(),
            policies: Vec::new(),
            oidc: None,
            token_review: None,
            ai: None,
        }
    }
}

impl Setup {
    pub(crate) async fn start(self) -> Api {
        crate::logs::capture();
        let dir = tempfile::tempdir().unwrap();
        let metastore = karpor_metastore::connect(&MetastoreConfig::Sqlite {
            path: dir.path().join("metadata.db"),
            encryption_key_file: None,
        })
        .await
        .unwrap();
        let storage = karpor_storage::connect(&StorageConfig::Sqlite {
            path: dir.path().join("resources.db"),
        })
        .await
        .unwrap();
        let exec = Arc::new(self.exec);
        let mut registry = Registry::default();
        let router = karpor_api::routes(ApiParts {
            metastore: metastore.clone(),
            storage: storage.clone(),
            // The syncer runs apart: sync states are `unknown`.
            sync: None,
            exec: exec.clone(),
            auth: authenticator(self.tokens, self.anonymous, self.policies, self.oidc),
            token_review: self.token_review,
            read_only: self.read_only,
            pod_logs: Role::Admin,
            live: LiveBounds::new(self.limits.live.clone(), &mut registry),
            limits: self.limits,
            audit: Default::default(),
            clients: karpor_syncer::client_cache(exec),
            rule_limits: Default::default(),
            ai: self
                .ai
                .map(|config| karpor_ai::Ai::new(&config, &mut registry).unwrap()),
            agents: None,
        });
        Api {
            router,
            storage,
            metastore,
            bodies: Mutex::new(Vec::new()),
            _dir: dir,
        }
    }
}

fn authenticator(
    tokens: Vec<(String, Role, String)>,
    anonymous: Option<Role>,
    policies: Vec<AccessPolicy>,
    oidc: Option<OidcVerifier>,
) -> Authenticator {
    let tokens = tokens
        .into_iter()
        .map(|(name, role, token)| (name, Some(role), token))
        .collect();
    let auth = Authenticator::new(tokens, anonymous).with_policies(Policies::new(policies));
    match oidc {
        Some(verifier) => auth.with_oidc(verifier),
        None => auth,
    }
}

/// The API's router and the stores under it.
pub(crate) struct Api {
    router: Router,
    /// Resource storage, for documents written straight in.
    pub(crate) storage: Arc<dyn Storage>,
    #[allow(dead_code)] // not every module reads the store behind the API
    pub(crate) metastore: Metastore,
    /// Every enveloped body answered so far, by any client.
    bodies: Mutex<Vec<String>>,
    _dir: tempfile::TempDir,
}

impl Api {
    /// One request through the router, as a socket would hand it over.
    pub(crate) async fn raw(&self, request: Request<Body>) -> Response<Body> {
        self.router.clone().oneshot(request).await.unwrap()
    }

    /// A caller with `token` (none: anonymous).
    pub(crate) fn client(&self, token: Option<&str>) -> Client<'_> {
        Client {
            api: self,
            token: token.map(str::to_owned),
        }
    }

    pub(crate) fn admin(&self) -> Client<'_> {
        self.client(Some(ADMIN))
    }

    pub(crate) fn guest(&self) -> Client<'_> {
        self.client(Some(GUEST))
    }

    pub(crate) fn anonymous(&self) -> Client<'_> {
        self.client(None)
    }

    /// Asserts that no answer so far carried a credential.
    pub(crate) fn assert_no_secret_answered(&self) {
        for body in self.bodies.lock().unwrap().iter() {
            for secret in SECRETS {
                assert!(!body.contains(secret), "{secret} answered in {body}");
            }
        }
    }
}

/// The body of a response, as text.
pub(crate) async fn text(response: Response<Body>) -> String {
    let bytes = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// Request ids, unique within the test binary.
fn request_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("test-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

pub(crate) struct Client<'a> {
    api: &'a Api,
    token: Option<String>,
}

impl Client<'_> {
    /// A request to `path` with this client's token, to be finished by the caller.
    pub(crate) fn request(&self, method: &str, path: &str) -> axum::http::request::Builder {
        let request = Request::builder().method(method).uri(path);
        match &self.token {
            Some(token) => request.header(header::AUTHORIZATION, format!("Bearer {token}")),
            None => request,
        }
    }

    /// `(status, envelope)`; `body`, when given, is sent as JSON.
    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let request = self.request(method, path);
        let request = match body {
            Some(body) => request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        };
        self.send(request.unwrap()).await
    }

    pub(crate) async fn send(&self, request: Request<Body>) -> (u16, Value) {
        self.send_echoing(request, None).await
    }

    /// As [`Client::send`], for an answer whose `data.<echo>` is the caller's own input
    /// sent back (an uploaded kubeconfig's `content`): that field is left out of the
    /// credential scan; the rest is scanned.
    pub(crate) async fn send_echoing(
        &self,
        mut request: Request<Body>,
        echo: Option<&str>,
    ) -> (u16, Value) {
        let id = request_id();
        request
            .headers_mut()
            .insert("x-request-id", id.parse().unwrap());
        let response = self.api.raw(request).await;
        let status = response.status().as_u16();
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        let text = text(response).await;
        assert_eq!(
            content_type.as_ref().and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "{status}: {text}"
        );
        let envelope: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"));
        let mut recorded = envelope.clone();
        if let (Some(field), Some(data)) = (echo, recorded["data"].as_object_mut()) {
            data.remove(field);
        }
        self.api.bodies.lock().unwrap().push(recorded.to_string());
        let success = envelope["success"].as_bool().expect("success");
        assert_eq!(success, (200..300).contains(&status), "{status}: {text}");
        assert!(envelope["message"].is_string(), "{text}");
        if !success {
            assert!(envelope["data"].is_null(), "{text}");
        }
        assert_eq!(envelope["traceID"], id.as_str(), "{text}");
        for key in ["startTime", "endTime", "costTime"] {
            assert!(envelope[key].is_string(), "{key}: {text}");
        }
        (status, envelope)
    }
}
