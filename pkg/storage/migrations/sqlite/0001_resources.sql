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
CREATE INDEX resources_kind ON resources (kind_lower, deleted);
CREATE INDEX resources_type ON resources (cluster, api_version, kind, sync_at);
CREATE INDEX resources_namespace ON resources (namespace, deleted);
CREATE INDEX resources_name ON resources (name);

-- Full text of each document's object, by the document's rowid. The text is already
-- split into lowercase words by karpor, so the tokenizer only has to split on spaces.
CREATE VIRTUAL TABLE resources_fts USING fts5(content, tokenize = "unicode61 remove_diacritics 0");
