//! The agents connected to this hub: each agent's control stream is its session, the way
//! live reads reach its cluster. A read is a [`LiveRequest`] sent down the stream and a
//! reply the agent posts back; a reply is taken only for a read sent to the agent whose
//! certificate posts it. Reads are bounded per cluster (at once) and by their deadline,
//! so a stalled agent answers its own callers with a timeout and nobody else's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::http::StatusCode;
use karpor_agent::wire::{self, Control, LiveRead, LiveRequest};
use karpor_core::names::ClusterName;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use super::peers::Peers;
use super::reply::Reply;
use crate::envelope::ApiError;

/// Reads one cluster's agent serves at once; more wait for none and are refused.
const READS_PER_CLUSTER: usize = wire::MAX_READS_AT_ONCE;
/// Control lines waiting to be sent to one agent.
const CONTROL_QUEUE: usize = 64;

/// The agents connected to this hub, by cluster.
#[derive(Default)]
pub struct AgentSessions {
    inner: Mutex<Inner>,
    ids: AtomicU64,
    /// The other hub replicas, when this one forwards among them (`agents.peer_url`).
    peers: Option<Arc<Peers>>,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<ClusterName, Session>,
    pending: HashMap<u64, Pending>,
    /// When each cluster's last session here ended.
    left: HashMap<ClusterName, OffsetDateTime>,
}

struct Session {
    serial: u64,
    control: mpsc::Sender<Control>,
    reads: Arc<Semaphore>,
}

struct Pending {
    cluster: ClusterName,
    within: Duration,
    reply: oneshot::Sender<Reply>,
}

/// An open session: the control lines to send, and its place in the registry (given up
/// when dropped).
pub(crate) struct Opened {
    pub control: mpsc::Receiver<Control>,
    pub guard: SessionGuard,
}

pub(crate) struct SessionGuard {
    sessions: Arc<AgentSessions>,
    cluster: ClusterName,
    serial: u64,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let mut inner = self.sessions.lock();
        if inner
            .sessions
            .get(&self.cluster)
            .is_some_and(|s| s.serial == self.serial)
        {
            inner.sessions.remove(&self.cluster);
            inner
                .left
                .insert(self.cluster.clone(), OffsetDateTime::now_utc());
            drop(inner);
            self.sessions.unrecord(&self.cluster);
        }
    }
}

/// A read under way: its reply once it comes, and its place among the cluster's reads
/// until the answer has been read (dropped: the agent is told to stop).
pub(crate) struct Asked {
    reply: oneshot::Receiver<Reply>,
    pub(crate) in_flight: InFlight,
}

pub(crate) struct InFlight {
    sessions: Arc<AgentSessions>,
    id: u64,
    /// Weak: a read under way does not keep a closed session's stream open.
    control: mpsc::WeakSender<Control>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let was_waiting = self.sessions.lock().pending.remove(&self.id).is_some();
        // A read answered in full needs no cancel; one left early does.
        if let Some(control) = self.control.upgrade().filter(|_| was_waiting) {
            let _ = control.try_send(Control::Cancel(self.id));
        }
    }
}

impl AgentSessions {
    /// Sessions that other replicas forward live reads to, and this one forwards from.
    pub fn with_peers(peers: Peers) -> AgentSessions {
        AgentSessions {
            peers: Some(Arc::new(peers)),
            ..AgentSessions::default()
        }
    }

    pub(crate) fn peers(&self) -> Option<&Arc<Peers>> {
        self.peers.as_ref()
    }

    /// The record saying this replica holds `cluster`'s session goes (in the background:
    /// a session ends in a drop).
    fn unrecord(&self, cluster: &ClusterName) {
        if let (Some(peers), Ok(runtime)) = (&self.peers, tokio::runtime::Handle::try_current()) {
            let (peers, cluster) = (peers.clone(), cluster.clone());
            runtime.spawn(async move { peers.closed(&cluster).await });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `cluster`'s agent's new session; one it had before is closed (its stream ends).
    pub(crate) fn open(self: &Arc<Self>, cluster: &ClusterName) -> Opened {
        let (control, receiver) = mpsc::channel(CONTROL_QUEUE);
        let serial = self.ids.fetch_add(1, Ordering::Relaxed);
        let session = Session {
            serial,
            control,
            reads: Arc::new(Semaphore::new(READS_PER_CLUSTER)),
        };
        self.lock().sessions.insert(cluster.clone(), session);
        Opened {
            control: receiver,
            guard: SessionGuard {
                sessions: self.clone(),
                cluster: cluster.clone(),
                serial,
            },
        }
    }

    /// Ends `cluster`'s session here at once (its certificate was revoked).
    pub fn close(&self, cluster: &ClusterName) {
        let mut inner = self.lock();
        if inner.sessions.remove(cluster).is_some() {
            inner
                .left
                .insert(cluster.clone(), OffsetDateTime::now_utc());
            drop(inner);
            self.unrecord(cluster);
        }
    }

    /// Ends `cluster`'s session wherever it is: here, or at the replica holding it.
    pub async fn close_everywhere(&self, cluster: &ClusterName) {
        self.close(cluster);
        if let Some(peers) = &self.peers {
            peers.close_elsewhere(cluster).await;
        }
    }

    /// Whether `cluster`'s agent holds a control stream to this hub: `Ok`, or when its
    /// last one here ended (`None`: none has since this hub started).
    pub fn connected(&self, cluster: &ClusterName) -> Result<(), Option<OffsetDateTime>> {
        let inner = self.lock();
        match inner.sessions.contains_key(cluster) {
            true => Ok(()),
            false => Err(inner.left.get(cluster).copied()),
        }
    }

    /// Asks every agent connected here to list every type again (storage came back after
    /// an outage, and may have lost what it had acknowledged); how many were asked.
    pub fn resync_all(&self) -> usize {
        let inner = self.lock();
        let mut asked = 0;
        for (cluster, session) in &inner.sessions {
            match session.control.try_send(Control::Resync) {
                Ok(()) => asked += 1,
                Err(_) => tracing::warn!(%cluster,
                    "cannot ask the agent to list again: its control stream is full"),
            }
        }
        asked
    }

    /// Whether `cluster`'s agent holds a control stream to this replica or, as the
    /// metadata store says, to another one.
    pub async fn connected_anywhere(&self, cluster: &ClusterName) -> bool {
        if self.connected(cluster).is_ok() {
            return true;
        }
        match &self.peers {
            Some(peers) => matches!(peers.holder(cluster).await, Ok(Some(_))),
            None => false,
        }
    }

    /// Sends `read` to `cluster`'s agent, to be answered within `within`.
    pub(crate) fn ask(
        self: &Arc<Self>,
        cluster: &ClusterName,
        read: LiveRead,
        within: Duration,
    ) -> Result<Asked, ApiError> {
        let mut inner = self.lock();
        let Some(session) = inner.sessions.get(cluster) else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cluster {cluster:?}'s agent is not connected to this hub"),
            ));
        };
        let permit = session.reads.clone().try_acquire_owned().map_err(|_| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "cluster {cluster:?}'s agent serves {READS_PER_CLUSTER} live reads at once"
                ),
            )
        })?;
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let request = LiveRequest {
            id,
            within_ms: u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
            read,
        };
        let control = session.control.downgrade();
        session
            .control
            .try_send(Control::Read(request))
            .map_err(|_| {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("cluster {cluster:?}'s agent is not taking requests now"),
                )
            })?;
        let (reply, receiver) = oneshot::channel();
        inner.pending.insert(
            id,
            Pending {
                cluster: cluster.clone(),
                within,
                reply,
            },
        );
        drop(inner);
        Ok(Asked {
            reply: receiver,
            in_flight: InFlight {
                sessions: self.clone(),
                id,
                control,
                _permit: permit,
            },
        })
    }

    /// Hands `reply` to the read `id` waits on, when `cluster`'s agent was asked it: how
    /// long the reader may take with it. `None` for a read this agent was not asked, or
    /// one nobody waits for now.
    pub(crate) fn deliver(&self, cluster: &ClusterName, id: u64, reply: Reply) -> Option<Duration> {
        let mut inner = self.lock();
        if inner.pending.get(&id)?.cluster != *cluster {
            return None;
        }
        let pending = inner.pending.remove(&id)?;
        drop(inner);
        pending.reply.send(reply).ok().map(|()| pending.within)
    }
}

impl Asked {
    /// The reply's head and body, once the agent posts it within `within`.
    pub(crate) async fn reply(
        self,
        cluster: &ClusterName,
        within: Duration,
    ) -> Result<(Reply, InFlight), ApiError> {
        let late = || {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cluster {cluster:?}'s agent did not answer within {within:?}"),
            )
        };
        match tokio::time::timeout(within, self.reply).await {
            Ok(Ok(reply)) => Ok((reply, self.in_flight)),
            Ok(Err(_)) => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cluster {cluster:?}'s agent went away before it answered"),
            )),
            Err(_) => Err(late()),
        }
    }
}

/// Each time storage is back after an outage (`recoveries` counts them), every agent
/// connected here lists again, as the hub's own syncer does; until `stop`.
pub async fn resync_after_storage_outages(
    sessions: Arc<AgentSessions>,
    mut recoveries: tokio::sync::watch::Receiver<u64>,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = recoveries.changed() => if changed.is_err() { return },
        }
        let asked = sessions.resync_all();
        tracing::info!(
            agents = asked,
            "storage is back: the agents connected here list again"
        );
    }
}
