//! Enrollment over the metadata store, for every hub replica alike: a join token issued
//! for a cluster (its digest stored, one outstanding per cluster), redeemed once for a
//! certificate (the enrollment updated at the version read, so one token cannot win two
//! joins), certificates renewed while their generation is current, and revoked by raising
//! it.

use std::sync::Arc;
use std::time::Duration;

use karpor_core::model::{
    AgentAuthority, AgentEnrollment, JoinGrant, PendingJoin, AUTHORITY_RECORD,
};
use karpor_core::names::ClusterName;
use karpor_metastore::{Metastore, StoreError};
use time::OffsetDateTime;

use crate::authority::{Authority, Issued};
use crate::identity::AgentIdentity;
use crate::pin::HubPin;
use crate::token::JoinToken;
use crate::{AgentError, CERTIFICATE_LIFETIME, MAX_JOIN_TTL};

/// Writes lost to another replica are retried this many times.
const CONFLICT_RETRIES: usize = 5;

#[derive(Clone)]
pub struct Enrollment {
    store: Metastore,
    certificate_lifetime: Duration,
    /// Joins wait for an admin's approval of their key (`agents.approve_joins`).
    approval: bool,
}

/// What a join answers: the agent's certificate and the authority to trust.
#[derive(Debug, Clone)]
pub struct Joined {
    pub identity: AgentIdentity,
    pub certificate: Issued,
    pub authority_pem: String,
}

impl Enrollment {
    pub fn new(store: Metastore) -> Enrollment {
        Enrollment {
            store,
            certificate_lifetime: CERTIFICATE_LIFETIME,
            approval: false,
        }
    }

    /// Joins held until an admin approves the key ([`Enrollment::approve`]).
    pub fn with_approval(mut self, approval: bool) -> Enrollment {
        self.approval = approval;
        self
    }

    /// Certificates valid for `lifetime` instead (tests of renewal and expiry).
    pub fn with_certificate_lifetime(mut self, lifetime: Duration) -> Enrollment {
        self.certificate_lifetime = lifetime;
        self
    }

    /// The authority, made and stored by the first replica that needs it.
    pub async fn authority(&self) -> Result<Arc<Authority>, AgentError> {
        if let Some(stored) = self.store.get::<AgentAuthority>(AUTHORITY_RECORD).await? {
            return Ok(Arc::new(Authority::from_record(&stored.record)?));
        }
        let made = Authority::generate(OffsetDateTime::now_utc())?;
        match self.store.create(made.to_record()).await {
            Ok(_) => Ok(Arc::new(made)),
            Err(StoreError::AlreadyExists { .. }) => {
                let stored = self
                    .store
                    .get::<AgentAuthority>(AUTHORITY_RECORD)
                    .await?
                    .ok_or_else(|| AgentError::Authority("made and gone at once".into()))?;
                Ok(Arc::new(Authority::from_record(&stored.record)?))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A new join token for `cluster`, valid for `ttl`; any earlier token of the cluster
    /// stops being accepted. Certificates already issued stay valid.
    pub async fn issue_token(
        &self,
        cluster: &ClusterName,
        ttl: Duration,
    ) -> Result<(JoinToken, HubPin), AgentError> {
        if ttl.is_zero() || ttl > MAX_JOIN_TTL {
            return Err(AgentError::Malformed(format!(
                "a join token lives between 1 s and {} s",
                MAX_JOIN_TTL.as_secs()
            )));
        }
        let pin = self.authority().await?.pin()?;
        let token = JoinToken::generate(cluster.clone())?;
        let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        let join = JoinGrant {
            digest: token.digest(),
            expires_at: crate::now_unix().saturating_add(ttl),
        };
        self.change(cluster, |enrollment| {
            enrollment.join = Some(join.clone());
            // A join held for the old token waits for nothing now.
            enrollment.pending = None;
            Ok(())
        })
        .await?;
        Ok((token, pin))
    }

    /// The token redeemed for a certificate over the key of `request_pem`.
    pub async fn join(&self, token: &JoinToken, request_pem: &str) -> Result<Joined, AgentError> {
        let refused = AgentError::JoinRefused;
        let stored = self
            .store
            .get::<AgentEnrollment>(token.cluster())
            .await?
            .ok_or(refused("no join token was issued for this cluster"))?;
        let grant = stored
            .record
            .join
            .as_ref()
            .ok_or(refused("it was used already or replaced"))?;
        if !token.matches(&grant.digest) {
            return Err(refused("it is not the cluster's current token"));
        }
        if grant.expires_at <= crate::now_unix() {
            return Err(refused("it has expired"));
        }
        if self.approval {
            self.held(token.cluster(), &stored, request_pem).await?;
        }
        let identity = AgentIdentity {
            cluster: token.cluster().clone(),
            generation: stored.record.generation,
        };
        let authority = self.authority().await?;
        let certificate = authority.issue_agent(
            &identity,
            request_pem,
            OffsetDateTime::now_utc(),
            self.certificate_lifetime,
        )?;
        let mut used = stored.record.clone();
        used.join = None;
        used.pending = None;
        used.joined_at = Some(crate::now_unix());
        match self.store.update(used, stored.version).await {
            Ok(_) => Ok(Joined {
                identity,
                certificate,
                authority_pem: authority.certificate_pem().to_owned(),
            }),
            // Another join, a new token or a revocation got there first.
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {
                Err(refused("it was used already or replaced"))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `Ok` when the join's key is the one an admin approved; otherwise the join is held
    /// (recorded as pending for this key, replacing another key's) and refused for now.
    async fn held(
        &self,
        cluster: &ClusterName,
        stored: &karpor_metastore::Stored<AgentEnrollment>,
        request_pem: &str,
    ) -> Result<(), AgentError> {
        let key = Authority::request_fingerprint(request_pem)?;
        match &stored.record.pending {
            Some(pending) if pending.key == key && pending.approved => return Ok(()),
            Some(pending) if pending.key == key => {
                return Err(AgentError::AwaitingApproval(key));
            }
            _ => {}
        }
        let mut record = stored.record.clone();
        record.pending = Some(PendingJoin {
            key: key.clone(),
            requested_at: crate::now_unix(),
            approved: false,
        });
        match self.store.update(record, stored.version).await {
            Ok(_) => {
                tracing::info!(%cluster, %key, "an agent's join waits for approval");
                Err(AgentError::AwaitingApproval(key))
            }
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {
                Err(AgentError::JoinRefused("it was used already or replaced"))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Approves the pending join of `cluster` whose key is `key`: the agent's next try
    /// joins. Refused when no join waits, or one with another key does.
    pub async fn approve(&self, cluster: &ClusterName, key: &str) -> Result<(), AgentError> {
        self.change(cluster, |enrollment| match &mut enrollment.pending {
            Some(pending) if pending.key == key => {
                pending.approved = true;
                Ok(())
            }
            Some(_) => Err(AgentError::Malformed(
                "the join that waits is for another key: compare the key the agent logged".into(),
            )),
            None => Err(AgentError::Malformed("no join waits for approval".into())),
        })
        .await
        .map(|_| ())
    }

    /// `cluster`'s enrollment as stored, if any.
    pub async fn enrollment(
        &self,
        cluster: &ClusterName,
    ) -> Result<Option<AgentEnrollment>, AgentError> {
        Ok(self
            .store
            .get::<AgentEnrollment>(cluster)
            .await?
            .map(|s| s.record))
    }

    /// When `cluster`'s agent joined (seconds since the epoch); `None` when none has.
    pub async fn joined_at(&self, cluster: &ClusterName) -> Result<Option<i64>, AgentError> {
        let stored = self.store.get::<AgentEnrollment>(cluster).await?;
        Ok(stored.and_then(|stored| stored.record.joined_at))
    }

    /// `Ok` while `identity`'s generation is its cluster's current one.
    pub async fn check(&self, identity: &AgentIdentity) -> Result<(), AgentError> {
        let current = self
            .store
            .get::<AgentEnrollment>(&identity.cluster)
            .await?
            .map(|stored| stored.record.generation);
        match current {
            Some(generation) if generation == identity.generation => Ok(()),
            _ => Err(AgentError::CertificateRefused("it was revoked")),
        }
    }

    /// A new certificate for a current identity, over the key of `request_pem`.
    pub async fn renew(
        &self,
        identity: &AgentIdentity,
        request_pem: &str,
    ) -> Result<Issued, AgentError> {
        self.check(identity).await?;
        self.authority().await?.issue_agent(
            identity,
            request_pem,
            OffsetDateTime::now_utc(),
            self.certificate_lifetime,
        )
    }

    /// Every certificate of `cluster` refused from now on, and its outstanding token;
    /// the new generation.
    pub async fn revoke(&self, cluster: &ClusterName) -> Result<u64, AgentError> {
        let stored = self
            .change(cluster, |enrollment| {
                enrollment.generation = enrollment.generation.saturating_add(1);
                enrollment.join = None;
                enrollment.pending = None;
                Ok(())
            })
            .await?;
        Ok(stored.generation)
    }

    /// `edit` applied to the cluster's enrollment (a new one at generation 1 when it has
    /// none), retried when another replica wrote in between.
    async fn change(
        &self,
        cluster: &ClusterName,
        edit: impl Fn(&mut AgentEnrollment) -> Result<(), AgentError>,
    ) -> Result<AgentEnrollment, AgentError> {
        for _ in 0..CONFLICT_RETRIES {
            let written = match self.store.get::<AgentEnrollment>(cluster).await? {
                Some(stored) => {
                    let mut record = stored.record;
                    edit(&mut record)?;
                    self.store.update(record, stored.version).await
                }
                None => {
                    let mut record = AgentEnrollment {
                        name: cluster.to_string(),
                        generation: 1,
                        join: None,
                        joined_at: None,
                        pending: None,
                    };
                    edit(&mut record)?;
                    self.store.create(record).await
                }
            };
            match written {
                Ok(stored) => return Ok(stored.record),
                Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) => continue,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(AgentError::Store(StoreError::Unavailable(
            "the enrollment kept changing under this write".into(),
        )))
    }
}
