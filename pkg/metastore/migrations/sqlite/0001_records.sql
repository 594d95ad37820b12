-- One counter for the whole store: every write takes the next value as its revision,
-- which is both the record's version and the position in the change feed.
CREATE TABLE karpor_revision (
    id INTEGER NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO karpor_revision (id, value) VALUES (1, 0);

CREATE TABLE karpor_records (
    kind VARCHAR(32) NOT NULL,
    name VARCHAR(63) NOT NULL,
    version BIGINT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);

CREATE TABLE karpor_changes (
    revision BIGINT NOT NULL PRIMARY KEY,
    kind VARCHAR(32) NOT NULL,
    name VARCHAR(63) NOT NULL,
    op VARCHAR(8) NOT NULL
);
