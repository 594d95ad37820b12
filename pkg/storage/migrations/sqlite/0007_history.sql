-- Every change of an object (history.rs): a narrow row a revision, its patch back to the
-- one before or, for a deletion, its last state. One revision per object version and
-- change (a deletion seen at a relist has the last version it had): two writers of the
-- same change write it once.
CREATE TABLE revisions (
    cluster TEXT NOT NULL,
    uid TEXT NOT NULL,
    resource_version TEXT NOT NULL,
    -- resourceVersion as a number (NULL when it is not one): orders revisions seen at once.
    version INTEGER,
    api_version TEXT NOT NULL,
    kind TEXT NOT NULL,
    kind_lower TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    change TEXT NOT NULL,
    seen_at INTEGER NOT NULL,
    late INTEGER NOT NULL,
    managers TEXT NOT NULL,
    back TEXT,
    state TEXT,
    bytes INTEGER NOT NULL,
    keep_until INTEGER NOT NULL,
    UNIQUE (cluster, uid, resource_version, change)
);
-- An object's history by name, newest first; what changed in a namespace or a cluster in
-- a window; the whole fleet's newest; expiry by time and each cluster's oldest.
CREATE INDEX revisions_object ON revisions (cluster, namespace, name, kind_lower, seen_at);
CREATE INDEX revisions_namespace ON revisions (namespace, seen_at);
CREATE INDEX revisions_cluster ON revisions (cluster, seen_at);
CREATE INDEX revisions_seen ON revisions (seen_at);
CREATE INDEX revisions_expiry ON revisions (keep_until);
