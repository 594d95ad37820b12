//! etcd through etcd-client. Keys are `{prefix}/{kind}/{name}`; a record's version is its
//! mod revision; creates, updates and deletes are transactions that compare first, so a
//! stale version is a `Conflict` and never an overwrite. The change feed is an etcd watch.
//! The client is made on first use and kept; its channel reconnects by itself. With
//! several endpoints a prober keeps the channel to the members that answer with a leader.
//!
//! Members and claims are keys under `{prefix}/members/` and `{prefix}/claims/` attached
//! to the member's etcd lease, so they vanish when it expires or is revoked. Neither is a
//! kind, so lists never reach them and the change feed skips them.

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, Event, EventType, GetOptions,
    Identity, PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse, WatchOptions, WatchResponse,
};
use futures::StreamExt;
use karpor_core::model::Kind;
use tokio::sync::OnceCell;

use crate::config::{EtcdConfig, EtcdTls};
use crate::store::{
    Change, ChangeOp, ChangeStream, Claim, ListRequest, Member, MemberLease, MetadataStore,
    RawPage, RawRecord, Revision,
};
use crate::StoreError;

/// The key segments of members and claims, beside the kinds'.
const MEMBERS: &str = "members";
const CLAIMS: &str = "claims";

pub(crate) struct EtcdStore {
    endpoints: Vec<String>,
    options: ConnectOptions,
    prefix: String,
    client: OnceCell<(Client, Option<Prober>)>,
}

impl EtcdStore {
    pub(crate) fn new(config: &EtcdConfig) -> Result<Self, StoreError> {
        if config.endpoints.is_empty() {
            return Err(StoreError::Misconfigured(
                "metadata.etcd.endpoints is empty".to_owned(),
            ));
        }
        // A member without a leader (no quorum, or cut off from the others) refuses at
        // once: a request fails rather than waiting out the timeout, and so does the ping.
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(2))
            .with_require_leader(true);
        if let Some(user) = &config.username {
            let password = match &config.password {
                Some(p) => p.resolve()?.expose().to_owned(),
                None => String::new(),
            };
            options = options.with_user(user.clone(), password);
        }
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls_options(tls)?);
        }
        Ok(EtcdStore {
            endpoints: config.endpoints.clone(),
            options,
            prefix: config.prefix.trim_end_matches('/').to_owned(),
            client: OnceCell::new(),
        })
    }

    async fn client(&self) -> Result<Client, StoreError> {
        self.client
            .get_or_try_init(|| async {
                let client = Client::connect(&self.endpoints, Some(self.options.clone()))
                    .await
                    .map_err(from_etcd)?;
                let prober = (self.endpoints.len() > 1).then(|| {
                    Prober::spawn(client.clone(), self.endpoints.clone(), self.options.clone())
                });
                Ok((client, prober))
            })
            .await
            .map(|(client, _)| client.clone())
    }

    fn kind_prefix(&self, kind: Kind) -> String {
        format!("{}/{}/", self.prefix, kind.as_str())
    }

    fn key(&self, kind: Kind, name: &str) -> String {
        format!("{}{name}", self.kind_prefix(kind))
    }

    fn member_key(&self, member: &str) -> String {
        format!("{}/{MEMBERS}/{member}", self.prefix)
    }

    fn claim_key(&self, cluster: &str) -> String {
        format!("{}/{CLAIMS}/{cluster}", self.prefix)
    }

    /// Every key under `{prefix}/{segment}/`, with the rest of its key.
    async fn under(
        &self,
        segment: &str,
    ) -> Result<Vec<(String, etcd_client::KeyValue)>, StoreError> {
        let mut client = self.client().await?;
        let prefix = format!("{}/{segment}/", self.prefix);
        let response = client
            .get(prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(from_etcd)?;
        response
            .kvs()
            .iter()
            .map(|kv| Ok((utf8(kv.key())?[prefix.len()..].to_owned(), kv.clone())))
            .collect()
    }

    /// After a failed compare: absent is `NotFound`, present is `Conflict`.
    fn missing(kind: Kind, name: &str, responses: &[TxnOpResponse], expected: i64) -> StoreError {
        let exists = responses.iter().any(|r| match r {
            TxnOpResponse::Get(get) => !get.kvs().is_empty(),
            _ => false,
        });
        if exists {
            StoreError::Conflict {
                kind,
                name: name.to_owned(),
                expected,
            }
        } else {
            StoreError::NotFound {
                kind,
                name: name.to_owned(),
            }
        }
    }
}

/// How often the prober asks each member for its status.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// tonic's balanced channel keeps sending a share of requests to a member that died (a
/// reconnecting endpoint reports itself ready and fails the call) and drops for good one
/// that was down when the client was made. The prober asks every member for its status
/// twice a second and keeps in the channel exactly those that answer (with a leader, as
/// every request requires); when none does, it leaves the channel as it is. Stopped
/// with the store.
struct Prober(tokio::task::AbortHandle);

impl Drop for Prober {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Prober {
    fn spawn(channel: Client, endpoints: Vec<String>, options: ConnectOptions) -> Prober {
        let task = tokio::spawn(async move {
            let mut probes: Vec<Option<Client>> = vec![None; endpoints.len()];
            // Unknown at first: the channel may already have dropped a member.
            let mut inside: Vec<Option<bool>> = vec![None; endpoints.len()];
            loop {
                let answers = futures::future::join_all(
                    endpoints
                        .iter()
                        .zip(probes.iter_mut())
                        .map(|(endpoint, probe)| answers(endpoint, probe, &options)),
                )
                .await;
                if answers.contains(&true) {
                    // Additions first, so the channel is never left empty.
                    for wanted in [true, false] {
                        for (i, endpoint) in endpoints.iter().enumerate() {
                            if answers[i] != wanted || inside[i] == Some(wanted) {
                                continue;
                            }
                            let changed = if wanted {
                                channel.add_endpoint(endpoint).await
                            } else {
                                channel.remove_endpoint(endpoint).await
                            };
                            if changed.is_ok() {
                                inside[i] = Some(wanted);
                                tracing::debug!(endpoint, answers = wanted, "etcd endpoint");
                            }
                        }
                    }
                }
                tokio::time::sleep(PROBE_INTERVAL).await;
            }
        });
        Prober(task.abort_handle())
    }
}

/// Whether the member at `endpoint` answers a status request, through a client of its own;
/// made anew after a failure, since that client's channel may have dropped the member too.
async fn answers(endpoint: &str, probe: &mut Option<Client>, options: &ConnectOptions) -> bool {
    if probe.is_none() {
        *probe = Client::connect([endpoint], Some(options.clone()))
            .await
            .ok();
    }
    let up = match probe {
        Some(client) => client.status().await.is_ok(),
        None => false,
    };
    if !up {
        *probe = None;
    }
    up
}

fn tls_options(tls: &EtcdTls) -> Result<TlsOptions, StoreError> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| StoreError::Misconfigured(format!("cannot read {}: {e}", path.display())))
    };
    let mut options = TlsOptions::new().ca_certificate(Certificate::from_pem(read(&tls.ca_file)?));
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            options = options.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        (None, None) => {}
        _ => {
            return Err(StoreError::Misconfigured(
                "metadata.etcd.tls needs both cert_file and key_file".to_owned(),
            ))
        }
    }
    Ok(options)
}

fn from_etcd(e: etcd_client::Error) -> StoreError {
    match &e {
        etcd_client::Error::GRpcStatus(status)
            if matches!(
                status.code(),
                tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
            ) =>
        {
            StoreError::Unauthorized(e.to_string())
        }
        etcd_client::Error::GRpcStatus(status)
            if status.code() == tonic::Code::DeadlineExceeded =>
        {
            StoreError::Timeout
        }
        etcd_client::Error::GRpcStatus(status)
            if status.code() == tonic::Code::InvalidArgument
                && status.message().contains("too large") =>
        {
            StoreError::Invalid(format!(
                "record too large for etcd (raise etcd's --max-request-bytes): {}",
                status.message()
            ))
        }
        _ => StoreError::Unavailable(e.to_string()),
    }
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<Revision, StoreError> {
    header
        .map(|h| h.revision())
        .ok_or_else(|| StoreError::Corrupt("etcd response without a header".to_owned()))
}

fn utf8(bytes: &[u8]) -> Result<String, StoreError> {
    String::from_utf8(bytes.to_vec()).map_err(|e| StoreError::Corrupt(e.to_string()))
}

#[async_trait]
impl MetadataStore for EtcdStore {
    fn backend(&self) -> &'static str {
        "etcd"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        client.status().await.map(drop).map_err(from_etcd)
    }

    async fn get(&self, kind: Kind, name: &str) -> Result<Option<RawRecord>, StoreError> {
        let mut client = self.client().await?;
        let response = client
            .get(self.key(kind, name), None)
            .await
            .map_err(from_etcd)?;
        response
            .kvs()
            .first()
            .map(|kv| {
                Ok(RawRecord {
                    name: name.to_owned(),
                    version: kv.mod_revision(),
                    data: utf8(kv.value())?,
                })
            })
            .transpose()
    }

    async fn list(&self, kind: Kind, request: &ListRequest) -> Result<RawPage, StoreError> {
        let mut client = self.client().await?;
        let prefix = self.kind_prefix(kind);
        // Keys after the cursor ('\0' is the smallest byte), up to the end of the prefix.
        let start = match &request.after {
            Some(after) => format!("{prefix}{after}\0"),
            None => prefix.clone(),
        };
        let end = format!("{}/{}0", self.prefix, kind.as_str()); // '0' follows '/'
        let limit = request.limit.max(1);
        let options = GetOptions::new()
            .with_range(end)
            .with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        let response = client.get(start, Some(options)).await.map_err(from_etcd)?;
        let items = response
            .kvs()
            .iter()
            .map(|kv| {
                let key = utf8(kv.key())?;
                Ok(RawRecord {
                    name: key[prefix.len()..].to_owned(),
                    version: kv.mod_revision(),
                    data: utf8(kv.value())?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let next = if response.more() {
            items.last().map(|r| r.name.clone())
        } else {
            None
        };
        Ok(RawPage { items, next })
    }

    async fn create(&self, kind: Kind, name: &str, data: &str) -> Result<Revision, StoreError> {
        let mut client = self.client().await?;
        let key = self.key(kind, name);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, data, None)]);
        let response = client.txn(txn).await.map_err(from_etcd)?;
        if !response.succeeded() {
            return Err(StoreError::AlreadyExists {
                kind,
                name: name.to_owned(),
            });
        }
        header_revision(response.header())
    }

    async fn update(
        &self,
        kind: Kind,
        name: &str,
        data: &str,
        expected: Revision,
    ) -> Result<Revision, StoreError> {
        let mut client = self.client().await?;
        let key = self.key(kind, name);
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                expected,
            )])
            .and_then([TxnOp::put(key.clone(), data, None)])
            .or_else([TxnOp::get(key, None)]);
        let response = client.txn(txn).await.map_err(from_etcd)?;
        if !response.succeeded() {
            return Err(Self::missing(
                kind,
                name,
                response.op_responses().as_slice(),
                expected,
            ));
        }
        header_revision(response.header())
    }

    async fn delete(
        &self,
        kind: Kind,
        name: &str,
        expected: Option<Revision>,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let key = self.key(kind, name);
        let compare = match expected {
            Some(v) => Compare::mod_revision(key.clone(), CompareOp::Equal, v),
            None => Compare::create_revision(key.clone(), CompareOp::Greater, 0),
        };
        let txn = Txn::new()
            .when([compare])
            .and_then([TxnOp::delete(key.clone(), None)])
            .or_else([TxnOp::get(key, None)]);
        let response = client.txn(txn).await.map_err(from_etcd)?;
        if !response.succeeded() {
            let responses = response.op_responses();
            return Err(Self::missing(
                kind,
                name,
                &responses,
                expected.unwrap_or_default(),
            ));
        }
        Ok(())
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        let mut client = self.client().await?;
        let response = client
            .get(
                self.prefix.clone(),
                Some(GetOptions::new().with_count_only()),
            )
            .await
            .map_err(from_etcd)?;
        header_revision(response.header())
    }

    async fn watch(&self, after: Revision) -> Result<ChangeStream, StoreError> {
        let mut client = self.client().await?;
        let prefix = format!("{}/", self.prefix);
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(after + 1);
        // Dropping the stream cancels the watch, so the feed owns it.
        let mut stream = client
            .watch(prefix.clone(), Some(options))
            .await
            .map_err(from_etcd)?;
        // etcd answers a new watch first with `created` (no events): wait for it, so a watch
        // the server refuses fails here rather than as a feed that never moves.
        let first = stream.message().await.map_err(from_etcd)?.ok_or_else(|| {
            StoreError::Unavailable("etcd closed the watch before creating it".to_owned())
        })?;
        if let Some(e) = watch_ended(&first, after) {
            return Err(e);
        }
        // `created` carries no events; anything else is followed as any later response.
        let first = (!first.created()).then_some(Ok(first));
        let responses = futures::stream::iter(first).chain(stream);
        // A compacted or cancelled watch gets nothing more: the feed says why, then ends
        // (dropping the watch), as the SQL feed does.
        let changes = futures::stream::unfold(Some(responses), move |responses| {
            let prefix = prefix.clone();
            async move {
                let mut responses = responses?;
                let batch: Vec<Result<Change, StoreError>> = match responses.next().await? {
                    Err(e) => vec![Err(from_etcd(e))],
                    Ok(r) => match watch_ended(&r, after) {
                        Some(e) => return Some((futures::stream::iter(vec![Err(e)]), None)),
                        None => r
                            .events()
                            .iter()
                            .filter_map(|event| change(event, &prefix).map(Ok))
                            .collect(),
                    },
                };
                Some((futures::stream::iter(batch), Some(responses)))
            }
        })
        .flatten();
        Ok(changes.boxed())
    }
    async fn join(&self, member: &str, ttl: Duration) -> Result<MemberLease, StoreError> {
        let mut client = self.client().await?;
        // etcd counts whole seconds and raises a TTL below its minimum; the answer says.
        let seconds = i64::try_from(ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0))
            .unwrap_or(i64::MAX)
            .max(1);
        let granted = client.lease_grant(seconds, None).await.map_err(from_etcd)?;
        let id = granted.id();
        let key = self.member_key(member);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                id.to_string(),
                Some(PutOptions::new().with_lease(id)),
            )]);
        let joined = client.txn(txn).await.map_err(from_etcd);
        if !matches!(&joined, Ok(response) if response.succeeded()) {
            // Nothing holds the lease: give it back rather than wait for it to expire.
            let _ = client.lease_revoke(id).await;
            joined?;
            return Err(StoreError::MemberAlive(member.to_owned()));
        }
        Ok(MemberLease {
            member: member.to_owned(),
            id,
            ttl: Duration::from_secs(granted.ttl().unsigned_abs()),
        })
    }

    async fn renew(&self, lease: &MemberLease) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        // One keep-alive round trip: etcd-client sends the first request and reads its
        // answer before returning (a TTL of 0 there is "lease not found"); both ends are
        // dropped here, closing the stream.
        match client.lease_keep_alive(lease.id).await {
            Ok(_) => Ok(()),
            Err(e) if lease_gone(&e) => Err(StoreError::LeaseLost(lease.member.clone())),
            Err(e) => Err(from_etcd(e)),
        }
    }

    async fn leave(&self, lease: &MemberLease) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        match client.lease_revoke(lease.id).await {
            Ok(_) => Ok(()),
            Err(e) if lease_gone(&e) => Ok(()),
            Err(e) => Err(from_etcd(e)),
        }
    }

    async fn members(&self) -> Result<Vec<Member>, StoreError> {
        let members = self.under(MEMBERS).await?;
        Ok(members
            .into_iter()
            .map(|(name, kv)| Member {
                name,
                id: kv.lease(),
            })
            .collect())
    }

    async fn claims(&self) -> Result<Vec<Claim>, StoreError> {
        self.under(CLAIMS)
            .await?
            .into_iter()
            .map(|(cluster, kv)| {
                Ok(Claim {
                    cluster,
                    member: utf8(kv.value())?,
                    epoch: kv.create_revision(),
                })
            })
            .collect()
    }

    async fn claim(
        &self,
        lease: &MemberLease,
        cluster: &str,
    ) -> Result<Option<Revision>, StoreError> {
        let mut client = self.client().await?;
        let member = self.member_key(&lease.member);
        let key = self.claim_key(cluster);
        // Put only while our member key is on our lease (we are alive) and the claim key
        // is absent; otherwise read both, in the same revision, to say why not.
        let txn = Txn::new()
            .when([
                Compare::lease(member.clone(), CompareOp::Equal, lease.id),
                Compare::create_revision(key.clone(), CompareOp::Equal, 0),
            ])
            .and_then([TxnOp::put(
                key.clone(),
                lease.member.clone(),
                Some(PutOptions::new().with_lease(lease.id)),
            )])
            .or_else([TxnOp::get(member, None), TxnOp::get(key, None)]);
        let response = client.txn(txn).await.map_err(from_etcd)?;
        if response.succeeded() {
            return header_revision(response.header()).map(Some);
        }
        let responses = response.op_responses();
        let first = |i: usize| match responses.get(i) {
            Some(TxnOpResponse::Get(get)) => get.kvs().first().cloned(),
            _ => None,
        };
        if first(0).is_none_or(|kv| kv.lease() != lease.id) {
            return Err(StoreError::LeaseLost(lease.member.clone()));
        }
        Ok(first(1)
            .filter(|kv| kv.lease() == lease.id)
            .map(|kv| kv.create_revision()))
    }

    async fn release(&self, lease: &MemberLease, cluster: &str) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let key = self.claim_key(cluster);
        let txn = Txn::new()
            .when([Compare::lease(key.clone(), CompareOp::Equal, lease.id)])
            .and_then([TxnOp::delete(key, None)]);
        client.txn(txn).await.map_err(from_etcd)?;
        Ok(())
    }
}

/// etcd's answer for a lease it no longer has.
fn lease_gone(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == tonic::Code::NotFound || status.message().contains("lease not found")
        }
        etcd_client::Error::LeaseKeepAliveError(message) => message.contains("lease not found"),
        _ => false,
    }
}

/// A watch event as a change; `None` for a key that is not `{prefix}{kind}/{name}`.
fn change(event: &Event, prefix: &str) -> Option<Change> {
    let kv = event.kv()?;
    let key = String::from_utf8_lossy(kv.key());
    let (kind, name) = key.strip_prefix(prefix)?.split_once('/')?;
    let op = match event.event_type() {
        EventType::Put => ChangeOp::Put,
        EventType::Delete => ChangeOp::Delete,
    };
    Some(Change {
        revision: kv.mod_revision(),
        kind: Kind::parse(kind)?,
        name: name.to_owned(),
        op,
    })
}

/// The error a watch response ends the feed with: etcd sends no more events after a
/// compaction or a cancel, so either must reach the follower instead of a silent stall.
fn watch_ended(response: &WatchResponse, after: Revision) -> Option<StoreError> {
    if response.compact_revision() > 0 {
        return Some(StoreError::Compacted(after));
    }
    if !response.canceled() {
        return None;
    }
    let reason = response.cancel_reason();
    Some(if reason.contains("permission denied") {
        StoreError::Unauthorized(format!("etcd refused the watch: {reason}"))
    } else {
        StoreError::Unavailable(format!("etcd cancelled the watch: {reason}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_and_claim_keys_are_no_kind() {
        // Were they kinds, lists and the change feed would carry them.
        assert_eq!(Kind::parse(MEMBERS), None);
        assert_eq!(Kind::parse(CLAIMS), None);
    }
}
