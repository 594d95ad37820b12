//! This syncer's lease in the metadata store: joined at start, renewed every third of its
//! TTL, revoked by the supervisor at a graceful stop once its clusters are stopped (so
//! they are taken over at once, not after the TTL). Each renewal moves the fence
//! ([`crate::cluster::fence`]): a renewal sent at `t` keeps the lease until at least
//! `t + TTL` on the store's clock, so until then no other member can hold this member's
//! clusters.

use std::sync::Arc;
use std::time::Duration;

use karpor_metastore::{MemberLease, Metastore, StoreError};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::fence::Fence;

/// The lease as the supervisor sees it: `None` while not held.
pub(crate) type LeaseSeen = watch::Receiver<Option<MemberLease>>;

/// Joins as `member` and keeps the lease until `stop`; the lease (or `None`) is published
/// on the returned channel. Never leaves: the supervisor does, after stopping its syncs.
pub(crate) fn keep(
    metastore: Metastore,
    member: String,
    ttl: Duration,
    fence: Arc<Fence>,
    stop: CancellationToken,
) -> LeaseSeen {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            let Some(lease) = join(&metastore, &member, ttl, &fence, &stop).await else {
                return;
            };
            tracing::info!(member, ttl = ?lease.ttl, "joined the syncer members");
            tx.send_replace(Some(lease.clone()));
            renew(&metastore, &lease, &fence, &tx, &stop).await;
        }
    });
    rx
}

async fn join(
    metastore: &Metastore,
    member: &str,
    ttl: Duration,
    fence: &Fence,
    stop: &CancellationToken,
) -> Option<MemberLease> {
    let mut retry = Duration::from_millis(500);
    loop {
        let sent = Instant::now();
        match tokio::time::timeout(ttl / 3, metastore.join(member, ttl)).await {
            Ok(Ok(lease)) => {
                fence.extend(lease.id, sent, lease.ttl);
                return Some(lease);
            }
            Ok(Err(StoreError::MemberAlive(_))) => {
                tracing::warn!(
                    member,
                    "another live syncer has this member name; waiting for its lease to end"
                );
            }
            Ok(Err(e)) => {
                tracing::warn!(member, error = %e, "cannot join the syncer members; retrying")
            }
            Err(_) => tracing::warn!(member, "joining the syncer members timed out; retrying"),
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(ttl / 3);
    }
}

/// The first retry after a failed renewal; then twice as long each time, up to the
/// renewal period.
const RENEW_RETRY: Duration = Duration::from_millis(500);

/// Renews until the lease is lost (then returns, to join again) or `stop`.
async fn renew(
    metastore: &Metastore,
    lease: &MemberLease,
    fence: &Fence,
    tx: &watch::Sender<Option<MemberLease>>,
    stop: &CancellationToken,
) {
    let period = lease.ttl / 3;
    let mut wait = period;
    let mut retry = RENEW_RETRY;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        let sent = Instant::now();
        match tokio::time::timeout(period, metastore.renew(lease)).await {
            Ok(Ok(())) => {
                (wait, retry) = (period, RENEW_RETRY);
                fence.extend(lease.id, sent, lease.ttl);
                // Back after an outage that outlasted the fence: the lease survived.
                tx.send_if_modified(|seen| {
                    let lost = seen.is_none();
                    if lost {
                        *seen = Some(lease.clone());
                    }
                    lost
                });
            }
            Ok(Err(StoreError::LeaseLost(_))) => {
                tracing::warn!(
                    member = lease.member,
                    "the syncer lease was lost; stopping its clusters and joining again"
                );
                fence.drop_hold();
                tx.send_replace(None);
                return;
            }
            outcome => {
                let error = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_owned(),
                };
                tracing::warn!(
                    member = lease.member,
                    error,
                    "cannot renew the syncer lease; retrying"
                );
                // Sooner than a period: a request lost to a short outage must not cost
                // a whole one, or the fence could end though the lease lives on.
                (wait, retry) = (retry, (retry * 2).min(period));
                if !fence.holds(lease.id) {
                    tx.send_if_modified(|seen| seen.take().is_some());
                }
            }
        }
    }
}

/// This process's member name: the configured one, else `HOSTNAME-PID` (unique on a
/// host; in Kubernetes the chart sets the pod's name).
pub fn default_member() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_else(|| "syncer".to_owned());
    let mut name: String = host
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    name.truncate(50);
    let name = name.trim_matches('-');
    let name = if name.is_empty() { "syncer" } else { name };
    format!("{name}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_member_name_is_a_dns_label() {
        let name = default_member();
        assert!(karpor_core::model::validate_name(&name).is_ok(), "{name}");
    }
}
