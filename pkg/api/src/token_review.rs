//! Kubernetes tokens (what Karpor's login page asks for): a ServiceAccount's or a user's
//! bearer token, checked by a `TokenReview` against one registered cluster
//! (`auth.token_review.cluster`). Answers are cached briefly by the token's digest, the
//! refusals too, and reviews in flight are bounded, so callers with made-up tokens cannot
//! turn karpor into a load on that cluster.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use karpor_config::ConfigIssue;
use karpor_core::model::Cluster;
use karpor_core::names::ClusterName;
use karpor_kube::ClientCache;
use karpor_metastore::Metastore;
use kube::api::PostParams;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::policy::Identity;

/// `auth.token_review`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenReviewConfig {
    /// The registered cluster that reviews tokens (its users and ServiceAccounts log in).
    pub cluster: ClusterName,
    /// Audiences a token must be for; empty: the cluster's own.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// How long an answer (either way) is kept.
    #[serde(default = "default_cache_for", with = "humantime_serde")]
    pub cache_for: Duration,
    /// Reviews in flight at once; more wait, within the request's timeout.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
}

fn default_cache_for() -> Duration {
    Duration::from_secs(30)
}

fn default_concurrency() -> usize {
    16
}

/// Tokens a cache keeps at most.
const CACHED_TOKENS: u64 = 10_000;
/// Longest a review may take.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest token reviewed: a larger one is refused unread.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

impl TokenReviewConfig {
    pub fn validate(&self) -> Result<(), ConfigIssue> {
        let key = |field: &str| format!("auth.token_review.{field}");
        if self.cache_for > Duration::from_secs(600) {
            return Err(ConfigIssue::new(
                key("cache_for"),
                "at most 10m: a revoked token would be honoured that long",
            ));
        }
        if self.concurrency == 0 {
            return Err(ConfigIssue::new(key("concurrency"), "must be at least 1"));
        }
        if self.audiences.iter().any(|a| a.trim().is_empty()) {
            return Err(ConfigIssue::new(key("audiences"), "an entry is empty"));
        }
        Ok(())
    }
}

type Answer = Result<Identity, String>;

/// Checks tokens with the cluster's `TokenReview`.
pub(crate) struct TokenReviewer {
    config: TokenReviewConfig,
    metastore: Metastore,
    clients: Arc<ClientCache>,
    answers: moka::future::Cache<[u8; 32], Answer>,
    in_flight: Semaphore,
}

impl TokenReviewer {
    pub(crate) fn new(
        config: TokenReviewConfig,
        metastore: Metastore,
        clients: Arc<ClientCache>,
    ) -> Self {
        let answers = moka::future::Cache::builder()
            .max_capacity(CACHED_TOKENS)
            .time_to_live(config.cache_for)
            .build();
        let in_flight = Semaphore::new(config.concurrency);
        TokenReviewer {
            config,
            metastore,
            clients,
            answers,
            in_flight,
        }
    }

    /// Who the token belongs to; `Err` says why not, for the log only.
    pub(crate) async fn review(&self, token: &str) -> Answer {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(format!("longer than {MAX_TOKEN_BYTES} bytes"));
        }
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // One review per token at a time; others asking wait for its answer. An answer is
        // kept; a failure to get one (the cluster down) is not.
        let asked = self.answers.try_get_with(key, async {
            match tokio::time::timeout(REVIEW_TIMEOUT, self.ask(token)).await {
                Ok(answer) => answer,
                Err(_) => Err(format!(
                    "the review took longer than {}s",
                    REVIEW_TIMEOUT.as_secs()
                )),
            }
        });
        asked.await.map_err(|e| e.to_string())?
    }

    /// The cluster's answer; `Err` when there was none.
    async fn ask(&self, token: &str) -> Result<Answer, String> {
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| "shutting down".to_owned())?;
        let cluster = self.config.cluster.as_str();
        let record = self
            .metastore
            .get::<Cluster>(cluster)
            .await
            .map_err(|e| format!("cannot read cluster {cluster:?}: {e}"))?
            .ok_or_else(|| format!("the reviewing cluster {cluster:?} is not registered"))?;
        if !record.record.synced_by_hub() {
            return Err(format!(
                "the reviewing cluster {cluster:?} is in agent mode: the hub holds no credential to review tokens with"
            ));
        }
        let client = self
            .clients
            .get(cluster, &record.record.kubeconfig.0)
            .await
            .map_err(|e| format!("no client for cluster {cluster:?}: {e}"))?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: (!self.config.audiences.is_empty())
                    .then(|| self.config.audiences.clone()),
            },
            ..Default::default()
        };
        let answered = kube::Api::<TokenReview>::all(client)
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| format!("cluster {cluster:?} did not review: {e}"))?;
        let status = answered.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(Err(status
                .error
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "not authenticated".to_owned())));
        }
        let user = status.user.unwrap_or_default();
        let Some(name) = user.username.filter(|u| !u.is_empty()) else {
            return Ok(Err("the review names no user".to_owned()));
        };
        Ok(Ok(Identity {
            user: name,
            groups: user.groups.unwrap_or_default(),
            token: None,
            anonymous: false,
        }))
    }
}
