-- One row a document. `doc` is the document as written; the other columns index it.
CREATE TABLE resources (
    id TEXT NOT NULL PRIMARY KEY,
    cluster TEXT NOT NULL,
    api_version TEXT NOT NULL,
    kind TEXT NOT NULL,
    kind_lower TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    uid TEXT NOT NULL,
    resource_version TEXT NOT NULL,
    creation_ts INTEGER,
    deletion_ts INTEGER,
    sync_at INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    labels TEXT NOT NULL,
    annotations TEXT NOT NULL,
    doc TEXT NOT NULL
);
-- The common filters, each ending in id so that `ORDER BY <column>, id` walks an index.
CREATE INDEX resources_kind ON resources (kind_lower, namespace, id);
CREATE INDEX resources_type ON resources (cluster, api_version, kind, sync_at);
CREATE INDEX resources_namespace ON resources (namespace, id);
CREATE INDEX resources_name ON resources (name, id);
CREATE INDEX resources_created ON resources (creation_ts, id);
CREATE INDEX resources_synced ON resources (sync_at, id);

-- Labels and annotations, a row a pair, so `labels.KEY = 'v'` is an index lookup rather
-- than parsing every document's JSON.
CREATE TABLE resource_labels (
    doc INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX resource_labels_pair ON resource_labels (key, value, doc);
CREATE INDEX resource_labels_doc ON resource_labels (doc);
CREATE TABLE resource_annotations (
    doc INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX resource_annotations_pair ON resource_annotations (key, value, doc);
CREATE INDEX resource_annotations_doc ON resource_annotations (doc);

-- Full text of each document's object, by the document's rowid. The text is already
-- split into lowercase words by karpor, so the tokenizer only has to split on spaces.
CREATE VIRTUAL TABLE resources_fts USING fts5(content, tokenize = "unicode61 remove_diacritics 0");
