//! The OIDC verifier against a real issuer: a private kube-apiserver whose issuer is its
//! own address, so its service-account tokens are ID tokens with a discovery document
//! and keys it serves itself. Forgeries are made with its own signing key file.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use karpor_api::{OidcConfig, OidcError, OidcIdentity, OidcVerifier};
use karpor_testkit::services::{free_port, Apiserver, APISERVER_TOKEN};
use reqwest::StatusCode;
use serde_json::{json, Value};

const NS: &str = "oidc";
const SA: &str = "viewer";

/// The apiserver, and a client trusting its certificate.
struct Issuer {
    apiserver: Apiserver,
    client: reqwest::Client,
}

impl Issuer {
    /// `None` (skipped, or failed under `CI=true`) without `KARPOR_TEST_APISERVER_BIN`.
    async fn start() -> Option<Issuer> {
        let apiserver = Apiserver::start()?;
        let pem = std::fs::read(apiserver.ca_pem_path()).unwrap();
        let mut client = reqwest::Client::builder().timeout(Duration::from_secs(10));
        for certificate in reqwest::Certificate::from_pem_bundle(&pem).unwrap() {
            client = client.add_root_certificate(certificate);
        }
        let issuer = Issuer {
            apiserver,
            client: client.build().unwrap(),
        };
        // Listening is not ready: RBAC's bootstrap roles come after.
        issuer
            .until(
                "the apiserver is ready",
                |status, _| status == StatusCode::OK,
                || issuer.call("GET", "/readyz", None, true),
            )
            .await;
        Some(issuer)
    }

    fn url(&self) -> String {
        self.apiserver.url()
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        admin: bool,
    ) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.client.request(method, format!("{}{path}", self.url()));
        if admin {
            request = request.bearer_auth(APISERVER_TOKEN);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn create(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self.call("POST", path, Some(body), true).await;
        assert!(status.is_success(), "POST {path}: {status} {answer}");
        answer
    }

    /// Polls `call` until `done` holds, for at most 30 s.
    async fn until<F, Fut>(&self, what: &str, done: impl Fn(StatusCode, &Value) -> bool, call: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = (StatusCode, Value)>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = call().await;
            if done(status, &body) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: still {status} {body}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The namespace and service account, and the discovery document open to anyone.
    async fn prepare(&self) {
        self.create("/api/v1/namespaces", json!({"metadata": {"name": NS}}))
            .await;
        self.create(
            &format!("/api/v1/namespaces/{NS}/serviceaccounts"),
            json!({"metadata": {"name": SA}}),
        )
        .await;
        self.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"metadata": {"name": "oidc-anonymous"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:service-account-issuer-discovery"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                    "name": "system:unauthenticated"}]}),
        )
        .await;
        // The binding reaches the authorizer's cache shortly after.
        self.until(
            "anonymous discovery",
            |status, body| status == StatusCode::OK && body["issuer"] == self.url(),
            || self.call("GET", "/.well-known/openid-configuration", None, false),
        )
        .await;
    }

    /// A service-account token for `audience`, as the apiserver issues it.
    async fn token(&self, audience: &str) -> String {
        let answer = self
            .create(
                &format!("/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token"),
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": [audience], "expirationSeconds": 600}}),
            )
            .await;
        answer["status"]["token"].as_str().unwrap().to_owned()
    }

    fn config(&self) -> OidcConfig {
        let mut config = OidcConfig::new(self.url(), vec!["karpor".into()]);
        config.ca_file = Some(self.apiserver.ca_pem_path());
        config
    }

    /// A token signed with the apiserver's own key, naming `kid`.
    fn sign(&self, kid: &str, claims: Value) -> String {
        let pem = std::fs::read(self.apiserver.signing_key_path()).unwrap();
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_pem(&pem).unwrap()).unwrap()
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn part(token: &str, index: usize) -> &str {
    token.split('.').nth(index).unwrap()
}

fn payload(token: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part(token, 1)).unwrap()).unwrap()
}

fn encode(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

#[track_caller]
fn refused(result: Result<OidcIdentity, OidcError>, reason: &str) -> OidcError {
    let error = result.expect_err(reason);
    assert!(
        error.to_string().contains(reason),
        "expected `{reason}`, got `{error}`"
    );
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_issuers_tokens_are_accepted_and_forgeries_refused() {
    let Some(issuer) = Issuer::start().await else {
        return;
    };
    issuer.prepare().await;
    let verifier = OidcVerifier::new(&issuer.config()).unwrap();

    let token = issuer.token("karpor").await;
    assert!(verifier.claims_issuer(&token));
    assert_eq!(
        verifier.verify(&token).await.unwrap(),
        OidcIdentity {
            user: format!("system:serviceaccount:{NS}:{SA}"),
            groups: Vec::new(),
        }
    );

    refused(
        verifier.verify(&issuer.token("other").await).await,
        "audience not accepted",
    );

    let mut elsewhere = issuer.config();
    elsewhere.issuer = format!("{}/elsewhere", issuer.url());
    let elsewhere = OidcVerifier::new(&elsewhere).unwrap();
    assert!(!elsewhere.claims_issuer(&token));
    refused(elsewhere.verify(&token).await, "issuer not accepted");

    // Tokens of our own making, signed with the issuer's key: first a good one, so the
    // refusals below are for what each changes.
    let kid = jsonwebtoken::decode_header(&token).unwrap().kid.unwrap();
    let claims = |changes: Value| {
        let mut claims = json!({
            "iss": issuer.url(), "aud": ["karpor", "else"], "sub": "alice",
            "groups": ["dev", "ops"], "iat": now(), "nbf": now(), "exp": now() + 600,
        });
        for (key, value) in changes.as_object().unwrap() {
            claims[key] = value.clone();
        }
        claims
    };
    let mut prefixed = issuer.config();
    prefixed.username_prefix = "oidc:".into();
    prefixed.groups_prefix = "oidc:".into();
    let prefixed = OidcVerifier::new(&prefixed).unwrap();
    assert_eq!(
        prefixed
            .verify(&issuer.sign(&kid, claims(json!({}))))
            .await
            .unwrap(),
        OidcIdentity {
            user: "oidc:alice".into(),
            groups: vec!["oidc:dev".into(), "oidc:ops".into()],
        }
    );
    let expired = claims(json!({"iat": now() - 700, "nbf": now() - 700, "exp": now() - 100}));
    refused(
        verifier.verify(&issuer.sign(&kid, expired)).await,
        "expired",
    );
    let early = claims(json!({"nbf": now() + 300}));
    refused(
        verifier.verify(&issuer.sign(&kid, early)).await,
        "not valid yet",
    );
    let future = claims(json!({"iat": now() + 300}));
    refused(
        verifier.verify(&issuer.sign(&kid, future)).await,
        "issued in the future",
    );
    let endless = claims(json!({"exp": null}));
    refused(
        verifier.verify(&issuer.sign(&kid, endless)).await,
        "claim `exp` missing",
    );
    refused(
        verifier
            .verify(&issuer.sign("rotated-away", claims(json!({}))))
            .await,
        "unknown signing key `rotated-away`",
    );

    // Unsigned: the real token's claims, no signature.
    let unsigned = format!("{}.{}.", encode(&json!({"alg": "none"})), part(&token, 1));
    refused(verifier.verify(&unsigned).await, "unsigned token");

    // Tampered: another subject under the real signature.
    let mut other = payload(&token);
    other["sub"] = json!(format!("system:serviceaccount:{NS}:admin"));
    let tampered = format!("{}.{}.{}", part(&token, 0), encode(&other), part(&token, 2));
    refused(verifier.verify(&tampered).await, "bad signature");

    // HS256 keyed with the issuer's public key, which anyone can read.
    let public =
        std::fs::read(issuer.apiserver.signing_key_path().with_file_name("sa.pub")).unwrap();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.clone());
    let confused = jsonwebtoken::encode(
        &header,
        &payload(&token),
        &EncodingKey::from_secret(&public).unwrap(),
    )
    .unwrap();
    refused(
        verifier.verify(&confused).await,
        "algorithm `HS256` not accepted",
    );

    // After all of that, the real token still passes.
    assert!(verifier.verify(&token).await.is_ok());
}

/// A token naming `issuer`, unsigned in effect: it never gets as far as its signature.
fn token_of(issuer: &str) -> String {
    let claims = json!({"iss": issuer, "aud": "karpor", "sub": "a", "exp": now() + 600});
    format!(
        "{}.{}.c2lnbmF0dXJl",
        encode(&json!({"alg": "RS256", "kid": "k"})),
        encode(&claims)
    )
}

#[tokio::test]
async fn an_issuer_that_refuses_connections_is_an_error_at_once() {
    let issuer = format!("https://127.0.0.1:{}", free_port());
    let verifier =
        OidcVerifier::new(&OidcConfig::new(issuer.clone(), vec!["karpor".into()])).unwrap();
    let token = token_of(&issuer);
    for _ in 0..2 {
        let outcome = tokio::time::timeout(Duration::from_secs(6), verifier.verify(&token))
            .await
            .expect("answered within the fetch's 5 s bound");
        let error = refused(outcome, "issuer's keys unavailable");
        assert!(error.is_unavailable());
        assert!(!error.to_string().contains(&token));
    }
}

#[tokio::test]
async fn an_issuer_that_never_answers_is_an_error_within_the_bound() {
    // Connections complete in the backlog and are never served.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let issuer = format!("https://{}", silent.local_addr().unwrap());
    let verifier =
        OidcVerifier::new(&OidcConfig::new(issuer.clone(), vec!["karpor".into()])).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(8), verifier.verify(&token_of(&issuer)))
        .await
        .expect("answered within the fetch's 5 s bound");
    let error = refused(outcome, "issuer's keys unavailable");
    assert!(error.is_unavailable());
    // Within the refetch interval the same failure is told without asking again.
    let again = tokio::time::timeout(Duration::from_secs(1), verifier.verify(&token_of(&issuer)))
        .await
        .expect("the last failure, at once");
    refused(again, "issuer's keys unavailable");
    drop(silent);
}

/// A policy granting the test's ServiceAccount a viewer's reads of its own namespace.
fn service_account_policy() -> karpor_core::access::AccessPolicy {
    serde_json::from_value(json!({
        "name": "sa-viewers",
        "subjects": {"users": [format!("system:serviceaccount:{NS}:{SA}")]},
        "role": "viewer",
        "scope": {"namespaces": [NS]},
    }))
    .unwrap()
}

/// Through the API: an ID token of the issuer logs in as its user and gets the policies
/// naming it; a token of the issuer for another audience, and a forgery, are 401s
/// without detail.
#[tokio::test]
async fn an_oidc_login_gets_the_policies_naming_its_user() {
    let Some(issuer) = Issuer::start().await else {
        return;
    };
    issuer.prepare().await;
    let api = crate::app::Setup {
        policies: vec![service_account_policy()],
        oidc: Some(OidcVerifier::new(&issuer.config()).unwrap()),
        ..crate::app::Setup::default()
    }
    .start()
    .await;
    let token = issuer.token("karpor").await;
    let (code, answer) = api
        .client(Some(&token))
        .call("GET", "/rest-api/v1/authn", None)
        .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["data"]["user"],
        format!("system:serviceaccount:{NS}:{SA}")
    );
    assert_eq!(answer["data"]["policies"], json!(["sa-viewers"]));
    assert_eq!(answer["data"]["scope"][0]["namespaces"], json!([NS]));
    let other = issuer.token("other").await;
    let (code, answer) = api
        .client(Some(&other))
        .call("GET", "/rest-api/v1/authn", None)
        .await;
    assert_eq!(code, 401, "{answer}");
    assert_eq!(answer["message"], "the token is not accepted");
    api.assert_no_secret_answered();
}

/// Through the API: a Kubernetes token is reviewed by the registered cluster the config
/// names; its user gets the policies naming it, a user no policy names is 403, a token
/// the cluster does not accept 401.
#[tokio::test]
async fn a_kubernetes_token_is_reviewed_by_the_configured_cluster() {
    let Some(issuer) = Issuer::start().await else {
        return;
    };
    issuer.prepare().await;
    let review: karpor_api::TokenReviewConfig =
        serde_json::from_value(json!({"cluster": "hub"})).unwrap();
    let api = crate::app::Setup {
        policies: vec![service_account_policy()],
        token_review: Some(review),
        ..crate::app::Setup::default()
    }
    .start()
    .await;
    let body = json!({"kubeConfig": issuer.apiserver.kubeconfig()});
    let (code, answer) = api
        .admin()
        .call("POST", "/rest-api/v1/cluster/hub", Some(body))
        .await;
    assert_eq!(code, 201, "{answer}");
    // A token for the cluster's own audience, as `kubectl create token` makes.
    let token = issuer.token(&issuer.url()).await;
    let (code, answer) = api
        .client(Some(&token))
        .call("GET", "/rest-api/v1/authn", None)
        .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(
        answer["data"]["user"],
        format!("system:serviceaccount:{NS}:{SA}")
    );
    let groups = answer["data"]["groups"].to_string();
    assert!(groups.contains("system:serviceaccounts"), "{groups}");
    // Another ServiceAccount of the cluster: known, and granted nothing.
    issuer
        .create(
            &format!("/api/v1/namespaces/{NS}/serviceaccounts"),
            json!({"metadata": {"name": "stranger"}}),
        )
        .await;
    let (_, minted) = issuer
        .call(
            "POST",
            &format!("/api/v1/namespaces/{NS}/serviceaccounts/stranger/token"),
            Some(
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600}}),
            ),
            true,
        )
        .await;
    let stranger = minted["status"]["token"].as_str().unwrap();
    let (code, answer) = api
        .client(Some(stranger))
        .call("GET", "/rest-api/v1/clusters", None)
        .await;
    assert_eq!(code, 403, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("no policy grants"),
        "{answer}"
    );
    for refused in ["not-a-token", &format!("{token}x")] {
        let (code, answer) = api
            .client(Some(refused))
            .call("GET", "/rest-api/v1/authn", None)
            .await;
        assert_eq!(code, 401, "{answer}");
        assert_eq!(answer["message"], "the token is not accepted");
    }
    api.assert_no_secret_answered();
}
