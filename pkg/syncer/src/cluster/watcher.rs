//! One watcher: a resource type of one cluster (in one namespace or all), listed then
//! watched through kube-rs, with the rule's selectors sent to the API server. Reconnects
//! with backoff; on 410 Gone kube-rs relists, and each completed list ends with a purge
//! of what it did not see.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use time::OffsetDateTime;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use crate::cluster::owed_lists::Lists;
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
}

impl Watcher {
    /// Runs until `stop` is cancelled or the writer is gone.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let Watcher {
            client,
            target,
            key,
            writer,
            progress,
            type_progress,
            lists,
            crds_changed,
            watching_since,
        } = self;
        let api: Api<DynamicObject> = match &target.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &target.resource),
            None => Api::all_with(client, &target.resource),
        };
        let options = &target.options;
        let mut config = watcher::Config::default();
        if let Some(labels) = &options.label_selector {
            config = config.labels(labels);
        }
        if let Some(fields) = &options.field_selector {
            config = config.fields(fields);
        }
        let object_type = target.object_type();
        let cluster = progress.name().to_owned();
        let mut events = watcher(api, config).default_backoff().boxed();
        let mut list_began: Option<OffsetDateTime> = None;
        let mut first_list = Some((lists.clone(), key.clone()));
        let mut failing = false;
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => event,
            };
            let event = match event {
                Some(Ok(event)) => event,
                Some(Err(e)) => {
                    if let Some(error) = crate::status::reason::of_type(&e) {
                        if !failing {
                            let detail = crate::status::reason::describe_watch(&e);
                            tracing::warn!(
                                kind = object_type.kind,
                                api_version = object_type.api_version,
                                reason = error.as_str(),
                                error = detail,
                                "cannot list or watch this type; retrying with backoff"
                            );
                        }
                        failing = true;
                        lists.failing(&key, error);
                    }
                    continue;
                }
                None => return,
            };
            let now = OffsetDateTime::now_utc();
            progress.event_seen();
            type_progress.event_seen(now);
            if failing {
                failing = false;
                tracing::info!(kind = object_type.kind, "watch resumed");
                lists.resumed(&key);
            }
            if let Some(notify) = &crds_changed {
                if matches!(event, watcher::Event::Apply(_) | watcher::Event::Delete(_)) {
                    notify.notify_one();
                }
            }
            let op = match event {
                watcher::Event::Init => {
                    list_began = Some(now_millis());
                    continue;
                }
                watcher::Event::InitApply(object) | watcher::Event::Apply(object) => {
                    // Seen at a list: it may have changed while karpor was away.
                    let late = list_began.is_some();
                    let Ok(value) = serde_json::to_value(object) else {
                        continue;
                    };
                    let seen = now_millis();
                    // Who changed it, read before the rule trims managedFields.
                    let mut history =
                        crate::history::note(options.history, seen, late, Some(&value));
                    let Some(mut document) = options.trimmer.document(
                        &cluster,
                        &object_type,
                        value,
                        seen,
                        &options.ingest,
                    ) else {
                        continue;
                    };
                    if let Some(note) = &mut history {
                        note.preexisting = crate::history::preexisting(
                            late,
                            document.creation_timestamp,
                            watching_since,
                        );
                    }
                    document.history = history;
                    Op::Upsert(document)
                }
                watcher::Event::Delete(object) => {
                    let Some(uid) = object.metadata.uid else {
                        continue;
                    };
                    // The deletion's revision: the apiserver sets it on the deleted object.
                    let resource_version = object.metadata.resource_version;
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
                watcher::Event::InitDone => Op::Purge {
                    api_version: object_type.api_version.clone(),
                    kind: object_type.kind.clone(),
                    namespace: target.namespace.clone(),
                    before: list_began.take().unwrap_or_else(now_millis),
                    first_list: first_list.take(),
                    // What the list did not see went while karpor was not watching.
                    history: crate::history::note(options.history, now_millis(), true, None),
                },
            };
            // Waits while the writer is behind: this is the backpressure.
            let sent = tokio::select! {
                _ = stop.cancelled() => return,
                sent = writer.send(op) => sent,
            };
            if sent.is_err() {
                return;
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
