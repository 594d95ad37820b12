//! One watcher: a resource type of one cluster (in one namespace or all), listed then
//! watched through kube-rs, with the rule's selectors sent to the API server. Reconnects
//! with backoff; on 410 Gone kube-rs relists, and each completed list ends with a purge
//! of what it did not see. A list waits for the writer; a watch does not: what changes
//! while the writer is behind is remembered by uid ([`Behind`]), bounded, and sent once
//! there is room. After a restart a first list may be compared with the sink's digest
//! instead of sent.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use karpor_storage::VersionDigest;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use time::OffsetDateTime;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use crate::cluster::behind::{Behind, Due};
use crate::cluster::owed_lists::Lists;
use crate::cluster::sink::{Sink, TypeScope};
use crate::cluster::writer::Op;
use crate::rules::resolve::{Target, TargetKey};
use crate::status::clusters::ClusterProgress;
use crate::status::watched_types::TypeProgress;

pub(crate) struct Watcher {
    pub client: Client,
    pub target: Target,
    pub key: TargetKey,
    pub writer: mpsc::Sender<Op>,
    pub progress: Arc<ClusterProgress>,
    /// Its type's own progress.
    pub type_progress: Arc<TypeProgress>,
    pub lists: Arc<Lists>,
    /// For a watcher of CustomResourceDefinitions: told of each change, so the cluster
    /// discovers the new (or gone) type at once.
    pub crds_changed: Option<Arc<Notify>>,
    /// When the cluster was registered: what was created before is imported, not kept
    /// as created.
    pub watching_since: OffsetDateTime,
    /// The sink, asked what it holds of the type before a first list that may compare.
    pub sink: Arc<dyn Sink>,
    /// The first list is compared with the sink's digest rather than sent: the sink held
    /// this target's list, under these same options, before the restart.
    pub compare: bool,
    /// Changes remembered while the writer is behind, before the type relists instead.
    pub behind: usize,
}

/// How long one read of a changed object, or of storage's digest, may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What a watcher's first list does once it is listed.
enum FirstPass {
    /// Sends every object, then the purge.
    Send,
    /// Compares the list with what the sink holds, sending nothing: equal, the type is
    /// synced; different, it lists again and sends.
    Compare {
        held: VersionDigest,
        listed: VersionDigest,
    },
}

/// What woke the watcher.
#[expect(
    clippy::large_enum_variant,
    reason = "one lives on the stack at a time; boxing would allocate per event"
)]
enum Step<'a> {
    Event(Option<Result<watcher::Event<DynamicObject>, watcher::Error>>),
    Room(mpsc::Permit<'a, Op>),
}

impl Watcher {
    /// Runs until `stop` is cancelled or the writer is gone.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let api: Api<DynamicObject> = match &self.target.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.target.resource),
            None => Api::all_with(self.client.clone(), &self.target.resource),
        };
        let options = &self.target.options;
        let mut config = watcher::Config::default();
        if let Some(labels) = &options.label_selector {
            config = config.labels(labels);
        }
        if let Some(fields) = &options.field_selector {
            config = config.fields(fields);
        }
        let start = || {
            watcher(api.clone(), config.clone())
                .default_backoff()
                .boxed()
        };
        let mut events = start();
        let mut list_began: Option<OffsetDateTime> = None;
        let mut first_list = Some((self.lists.clone(), self.key.clone()));
        let mut pass = FirstPass::Send;
        let mut compare = self.compare;
        let mut behind = Behind::new(self.behind);
        // Operations sent from memory since the writer fell behind.
        let mut from_memory = 0usize;
        let mut failing = false;
        loop {
            let step = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => Step::Event(event),
                room = self.writer.reserve(), if !behind.is_idle() => match room {
                    Ok(permit) => Step::Room(permit),
                    Err(_) => return,
                },
            };
            let event = match step {
                Step::Room(permit) => {
                    match behind.next() {
                        Some(Due::Relist) => {
                            tracing::info!(kind = self.target.resource.kind,
                                bound = self.behind,
                                "relisting: more objects changed than syncer.changes_behind while writes were behind");
                            if first_list.is_none() {
                                first_list = behind.take_first_list();
                            }
                            (events, list_began, from_memory) = (start(), None, 0);
                            continue;
                        }
                        Some(Due::Read {
                            uid,
                            namespace,
                            name,
                        }) => match tokio::select! {
                            // A read of a hanging API server does not hold up a stop.
                            _ = stop.cancelled() => return,
                            read = self.read_again(namespace, &name) => read,
                        } {
                            Ok(Some(object)) => {
                                if let Some(op) = self.upsert(object, true) {
                                    permit.send(op);
                                }
                            }
                            Ok(None) => permit.send(self.delete(uid, None)),
                            Err(e) => {
                                tracing::debug!(error = %e, "cannot read a changed object again; relisting its type");
                                behind.relist_later();
                            }
                        },
                        Some(Due::Send(op)) => permit.send(*op),
                        None => {}
                    }
                    from_memory += 1;
                    if behind.is_idle() {
                        tracing::info!(
                            kind = self.target.resource.kind,
                            changes = from_memory,
                            "caught up with what changed while writes were behind"
                        );
                        from_memory = 0;
                    }
                    continue;
                }
                Step::Event(event) => event,
            };
            let event = match event {
                Some(Ok(event)) => event,
                Some(Err(e)) => {
                    if let Some(error) = crate::status::reason::of_type(&e) {
                        if !failing {
                            let detail = crate::status::reason::describe_watch(&e);
                            tracing::warn!(
                                kind = self.target.resource.kind,
                                api_version = self.target.resource.api_version,
                                reason = error.as_str(),
                                error = detail,
                                "cannot list or watch this type; retrying with backoff"
                            );
                        }
                        failing = true;
                        self.lists.failing(&self.key, error);
                    }
                    continue;
                }
                None => return,
            };
            let now = OffsetDateTime::now_utc();
            self.progress.event_seen();
            self.type_progress.event_seen(now);
            if failing {
                failing = false;
                tracing::info!(kind = self.target.resource.kind, "watch resumed");
                self.lists.resumed(&self.key);
            }
            if let Some(notify) = &self.crds_changed {
                if matches!(event, watcher::Event::Apply(_) | watcher::Event::Delete(_)) {
                    notify.notify_one();
                }
            }
            let (op, listing) = match event {
                watcher::Event::Init => {
                    list_began = Some(now_millis());
                    behind.list_began();
                    if first_list.is_none() {
                        first_list = behind.take_first_list();
                    }
                    if std::mem::take(&mut compare) && first_list.is_some() {
                        pass = self.first_pass().await;
                    }
                    if let FirstPass::Compare { listed, .. } = &mut pass {
                        *listed = VersionDigest::default();
                    }
                    continue;
                }
                watcher::Event::InitApply(object) => {
                    if let FirstPass::Compare { listed, .. } = &mut pass {
                        // Counted as the document it would be: what the transform drops,
                        // storage never held either.
                        if let Some(Op::Upsert(document)) = self.upsert(object, true) {
                            listed.add(&document.uid, &document.resource_version);
                        }
                        continue;
                    }
                    (self.upsert(object, true), true)
                }
                watcher::Event::Apply(object) => (self.upsert(object, list_began.is_some()), false),
                watcher::Event::Delete(object) => {
                    let Some(uid) = object.metadata.uid else {
                        continue;
                    };
                    // The deletion's revision: the apiserver sets it on the deleted object.
                    (
                        Some(self.delete(uid, object.metadata.resource_version)),
                        false,
                    )
                }
                watcher::Event::InitDone => {
                    let began = list_began.take().unwrap_or_else(now_millis);
                    if let FirstPass::Compare { held, listed } =
                        std::mem::replace(&mut pass, FirstPass::Send)
                    {
                        if held == listed {
                            tracing::debug!(
                                kind = self.target.resource.kind,
                                objects = listed.count,
                                "unchanged since before the restart; not sent again"
                            );
                            if let Some((lists, key)) = first_list.take() {
                                lists.listed(&key);
                            }
                        } else {
                            tracing::info!(
                                kind = self.target.resource.kind,
                                listed = listed.count,
                                held = held.count,
                                "relisting: the cluster differs from what the hub holds"
                            );
                            events = start();
                        }
                        continue;
                    }
                    let purge = Op::Purge {
                        api_version: self.target.resource.api_version.clone(),
                        kind: self.target.resource.kind.clone(),
                        namespace: self.target.namespace.clone(),
                        before: began,
                        first_list: first_list.take(),
                        // What the list did not see went while karpor was not watching.
                        history: crate::history::note(options.history, now_millis(), true, None),
                    };
                    (Some(purge), true)
                }
            };
            let Some(op) = op else { continue };
            if listing || list_began.is_some() {
                // A list waits while the writer is behind: its pages are read as they are
                // written, never remembered (a large type would pass any bound).
                let sent = tokio::select! {
                    _ = stop.cancelled() => return,
                    sent = self.writer.send(op) => sent,
                };
                if sent.is_err() {
                    return;
                }
                continue;
            }
            if !behind.is_idle() {
                behind.record(op);
                continue;
            }
            match self.writer.try_send(op) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(op)) => {
                    tracing::debug!(
                        kind = self.target.resource.kind,
                        "writes are behind; remembering which objects change"
                    );
                    behind.record(op);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
    }

    /// How the first list goes: compared with the sink's digest when the sink keeps one,
    /// else sent.
    async fn first_pass(&self) -> FirstPass {
        let scope = TypeScope {
            api_version: self.target.resource.api_version.clone(),
            kind: self.target.resource.kind.clone(),
            namespace: self.target.namespace.clone(),
        };
        let cluster = self.progress.name();
        match tokio::time::timeout(READ_TIMEOUT, self.sink.versions(cluster, &scope)).await {
            Ok(Ok(Some(held))) => FirstPass::Compare {
                held,
                listed: VersionDigest::default(),
            },
            Ok(Ok(None)) => FirstPass::Send,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "cannot read what the hub holds of this type; sending the list");
                FirstPass::Send
            }
            Err(_) => FirstPass::Send,
        }
    }

    /// The object `name` as the watch would see it now (its selectors apply); `None` when
    /// it is gone or no longer selected.
    async fn read_again(
        &self,
        namespace: Option<String>,
        name: &str,
    ) -> Result<Option<DynamicObject>, String> {
        let resource = &self.target.resource;
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        };
        let options = &self.target.options;
        let mut fields = format!("metadata.name={name}");
        if let Some(more) = &options.field_selector {
            fields.push(',');
            fields.push_str(more);
        }
        let mut params = ListParams::default().fields(&fields);
        if let Some(labels) = &options.label_selector {
            params = params.labels(labels);
        }
        match tokio::time::timeout(READ_TIMEOUT, api.list(&params)).await {
            Ok(Ok(list)) => Ok(list.items.into_iter().next()),
            Ok(Err(e)) => Err(karpor_kube::describe(&e)),
            Err(_) => Err(format!("no answer within {READ_TIMEOUT:?}")),
        }
    }

    /// The object's document; `late`: seen at a list (or read again after the writer was
    /// behind), so it may have changed while nobody watched.
    fn upsert(&self, object: DynamicObject, late: bool) -> Option<Op> {
        let options = &self.target.options;
        let value = serde_json::to_value(object).ok()?;
        let seen = now_millis();
        // Who changed it, read before the rule trims managedFields.
        let mut history = crate::history::note(options.history, seen, late, Some(&value));
        let mut document = options.trimmer.document(
            self.progress.name(),
            &self.target.object_type(),
            value,
            seen,
            &options.ingest,
        )?;
        if let Some(note) = &mut history {
            note.preexisting =
                crate::history::preexisting(late, document.creation_timestamp, self.watching_since);
        }
        document.history = history;
        Some(Op::Upsert(document))
    }

    fn delete(&self, uid: String, resource_version: Option<String>) -> Op {
        let options = &self.target.options;
        let at = now_millis();
        let history = crate::history::note(options.history, at, false, None);
        if options.keep_after_delete {
            Op::SoftDelete {
                uid,
                at,
                resource_version,
                history,
            }
        } else {
            Op::Delete {
                uid,
                resource_version,
                history,
            }
        }
    }
}

/// Now, to the millisecond both backends keep, so a list's start and its documents'
/// sync times compare exactly.
pub(crate) fn now_millis() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
        .unwrap_or(now)
}
