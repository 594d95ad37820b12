//! What a watcher remembers while its writer is behind (the hub unreachable, storage
//! paused, the queue full): which objects changed, by uid, not the objects themselves.
//! Once the writer takes operations again each is read afresh from the cluster and sent;
//! past `bound` changes the memory is dropped and the type relists instead. A list's
//! purge waits behind the changes before it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::owed_lists::Lists;
use crate::cluster::writer::Op;
use crate::rules::resolve::TargetKey;

/// A watcher's first list, owed to the cluster's lists once storage holds it.
pub(crate) type FirstList = Option<(Arc<Lists>, TargetKey)>;

/// The last change of one object.
#[derive(Debug)]
enum Change {
    /// It exists: read it again, by name, when there is room.
    Present {
        namespace: Option<String>,
        name: String,
    },
    /// It went: the delete is kept as it is (a few strings), boxed so a present
    /// object's entry stays small.
    Gone(Box<Op>),
}

/// What to do once the writer has room.
#[derive(Debug)]
pub(crate) enum Due {
    /// More changed than the bound: list the type again.
    Relist,
    /// Read this object again and send what it is now.
    Read {
        uid: String,
        namespace: Option<String>,
        name: String,
    },
    Send(Box<Op>),
}

#[derive(Debug)]
pub(crate) struct Behind {
    bound: usize,
    changes: BTreeMap<String, Change>,
    purge: Option<Op>,
    relist: bool,
    /// The first list's, kept when the purge that carried it is dropped for a relist.
    first_list: FirstList,
}

impl Behind {
    pub(crate) fn new(bound: usize) -> Self {
        Behind {
            bound: bound.max(1),
            changes: BTreeMap::new(),
            purge: None,
            relist: false,
            first_list: None,
        }
    }

    /// Nothing remembered: operations go to the writer's queue as they come.
    pub(crate) fn is_idle(&self) -> bool {
        self.changes.is_empty() && self.purge.is_none() && !self.relist
    }

    /// Changes remembered now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.changes.len()
    }

    /// `op` could not be queued, or came after one that could not: remembered instead.
    pub(crate) fn record(&mut self, op: Op) {
        if self.relist {
            // The relist covers it; only a first list's debt is kept.
            self.keep_first_list(op);
            return;
        }
        match op {
            Op::Upsert(document) => {
                let namespace = (!document.namespace.is_empty()).then_some(document.namespace);
                let change = Change::Present {
                    namespace,
                    name: document.name,
                };
                self.changes.insert(document.uid, change);
            }
            Op::Delete { ref uid, .. } | Op::SoftDelete { ref uid, .. } => {
                self.changes.insert(uid.clone(), Change::Gone(Box::new(op)));
            }
            Op::Purge { .. } => {
                if let Some(older) = self.purge.take() {
                    self.keep_first_list(older);
                }
                self.purge = Some(op);
            }
            Op::Sweep { .. } => self.relist_later(),
        }
        if self.changes.len() > self.bound {
            self.relist_later();
        }
    }

    /// Forget every change: the type relists when there is room.
    pub(crate) fn relist_later(&mut self) {
        self.changes.clear();
        if let Some(purge) = self.purge.take() {
            self.keep_first_list(purge);
        }
        self.relist = true;
    }

    /// A list began: it sees every object as it is now, and its purge removes what went,
    /// so nothing remembered is owed any more.
    pub(crate) fn list_began(&mut self) {
        self.relist_later();
        self.relist = false;
    }

    /// The next thing owed, oldest debt first: a relist, then the changes, then the purge.
    pub(crate) fn next(&mut self) -> Option<Due> {
        if std::mem::take(&mut self.relist) {
            return Some(Due::Relist);
        }
        if let Some((uid, change)) = self.changes.pop_first() {
            return Some(match change {
                Change::Present { namespace, name } => Due::Read {
                    uid,
                    namespace,
                    name,
                },
                Change::Gone(op) => Due::Send(op),
            });
        }
        self.purge.take().map(|op| Due::Send(Box::new(op)))
    }

    /// The first list's debt, once its purge was dropped.
    pub(crate) fn take_first_list(&mut self) -> FirstList {
        self.first_list.take()
    }

    fn keep_first_list(&mut self, op: Op) {
        if let Op::Purge {
            first_list: Some(first),
            ..
        } = op
        {
            self.first_list = Some(first);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpor_storage::ResourceDocument;
    use time::OffsetDateTime;

    fn upsert(uid: &str, name: &str) -> Op {
        let object = serde_json::json!({});
        Op::Upsert(ResourceDocument {
            cluster: "c".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "n".into(),
            name: name.into(),
            uid: uid.into(),
            labels: Default::default(),
            annotations: Default::default(),
            owner_references: Vec::new(),
            creation_timestamp: None,
            deletion_timestamp: None,
            resource_version: "1".into(),
            sync_at: OffsetDateTime::UNIX_EPOCH,
            deleted: false,
            object,
            issues: Vec::new(),
            refs: Vec::new(),
            history: None,
        })
    }

    fn delete(uid: &str) -> Op {
        Op::Delete {
            uid: uid.into(),
            resource_version: Some("9".into()),
            history: None,
        }
    }

    fn purge() -> Op {
        Op::Purge {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: None,
            before: OffsetDateTime::UNIX_EPOCH,
            first_list: None,
            history: None,
        }
    }

    #[test]
    fn each_object_is_remembered_once_by_its_last_change_and_the_purge_comes_last() {
        let mut behind = Behind::new(10);
        assert!(behind.is_idle());
        behind.record(upsert("u1", "a"));
        behind.record(purge());
        behind.record(upsert("u2", "b"));
        behind.record(upsert("u1", "a"));
        behind.record(delete("u2"));
        assert_eq!(behind.len(), 2);
        assert!(
            matches!(behind.next(), Some(Due::Read { uid, namespace: Some(n), name }) if uid == "u1" && n == "n" && name == "a")
        );
        assert!(
            matches!(behind.next(), Some(Due::Send(op)) if matches!(*op, Op::Delete { ref uid, .. } if uid == "u2"))
        );
        assert!(matches!(behind.next(), Some(Due::Send(op)) if matches!(*op, Op::Purge { .. })));
        assert!(behind.next().is_none());
        assert!(behind.is_idle());
    }

    #[test]
    fn past_the_bound_the_type_relists_and_what_came_meanwhile_is_covered_by_it() {
        let mut behind = Behind::new(2);
        behind.record(upsert("u1", "a"));
        behind.record(upsert("u2", "b"));
        assert!(!behind.relist);
        behind.record(upsert("u3", "c"));
        assert_eq!(behind.len(), 0, "the memory is dropped, not grown");
        behind.record(upsert("u4", "d"));
        behind.record(delete("u1"));
        assert_eq!(behind.len(), 0);
        assert!(matches!(behind.next(), Some(Due::Relist)));
        assert!(behind.next().is_none());
    }

    #[test]
    fn a_list_beginning_owes_nothing_remembered() {
        let mut behind = Behind::new(5);
        behind.record(upsert("u1", "a"));
        behind.record(purge());
        behind.list_began();
        assert!(behind.is_idle());
        assert!(behind.next().is_none());
    }
}
