-- One narrow row a document: only what filters and sorts read, so scans and lookups stay
-- in a few MiB of cache. The document itself is in `resource_docs`, read for a page only.
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
    -- What keyword search looks for as a substring: the name, the namespace and each label
    -- as `key=value`, one a line.
    keywords TEXT NOT NULL
);
-- The common filters. `deleted` (in every query) is in each, so counts need no table row;
-- orders end in id, so `ORDER BY <column>, id` walks an index.
CREATE INDEX resources_kind ON resources (kind_lower, namespace, deleted, id);
CREATE INDEX resources_type ON resources (cluster, api_version, kind, sync_at);
CREATE INDEX resources_cluster ON resources (cluster, deleted, id);
CREATE INDEX resources_namespace ON resources (namespace, deleted, id);
CREATE INDEX resources_name ON resources (name, id, deleted);
CREATE INDEX resources_created ON resources (creation_ts, id, deleted);
CREATE INDEX resources_synced ON resources (sync_at, id, deleted);

-- The document as written (and its labels and annotations as JSON), by the rowid of its
-- `resources` row.
CREATE TABLE resource_docs (
    doc INTEGER PRIMARY KEY,
    labels TEXT NOT NULL,
    annotations TEXT NOT NULL,
    body TEXT NOT NULL
);

-- Labels and annotations, a row a pair, so `labels.KEY = 'v'` is an index lookup rather
-- than parsing every document's JSON: by pair for the documents that have it, by document
-- to check one that another index found.
CREATE TABLE resource_labels (
    doc INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX resource_labels_pair ON resource_labels (key, value, doc);
CREATE INDEX resource_labels_doc ON resource_labels (doc, key, value);
CREATE TABLE resource_annotations (
    doc INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX resource_annotations_pair ON resource_annotations (key, value, doc);
CREATE INDEX resource_annotations_doc ON resource_annotations (doc, key, value);

-- Full text of each document's object, by the document's rowid. karpor has already split
-- the text into lowercase words of letters and digits, space-separated; the `ascii`
-- tokenizer keeps each such word whole (it splits on ASCII punctuation and spaces only),
-- so a word is one token and `detail=none` (no positions) answers "all these words".
-- Contentless: the text is never read back, only matched.
CREATE VIRTUAL TABLE resources_fts USING fts5(
    content,
    content = '',
    contentless_delete = 1,
    detail = none,
    tokenize = 'ascii'
);

-- Each document's `keywords` as trigrams: narrows keyword search (a substring of at least
-- three characters contains all of its trigrams) to few rows before `instr` checks them.
CREATE VIRTUAL TABLE resources_keywords USING fts5(
    keywords,
    content = '',
    contentless_delete = 1,
    detail = none,
    tokenize = 'trigram case_sensitive 1'
);
