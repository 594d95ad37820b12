-- The keys each document is indexed under for the topology (its owners' uids and what it
-- names): "who refers to this object" is one index range.
CREATE TABLE resource_refs (
    doc INTEGER NOT NULL,
    key TEXT NOT NULL
);
CREATE INDEX resource_refs_key ON resource_refs (key, doc);
CREATE INDEX resource_refs_doc ON resource_refs (doc);
