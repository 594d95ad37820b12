-- One counter for the whole store: every write takes the next value as its revision,
-- which is both the record's version and the position in the change feed. Writers lock
-- its row first, so revisions commit in order and the feed has no gaps.
CREATE TABLE karpor_revision (
    id INT NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
) ENGINE = InnoDB;
INSERT INTO karpor_revision (id, value) VALUES (1, 0);

CREATE TABLE karpor_records (
    kind VARCHAR(32) CHARACTER SET ascii NOT NULL,
    name VARCHAR(63) CHARACTER SET ascii NOT NULL,
    version BIGINT NOT NULL,
    data LONGTEXT CHARACTER SET utf8mb4 NOT NULL,
    PRIMARY KEY (kind, name)
) ENGINE = InnoDB;

CREATE TABLE karpor_changes (
    revision BIGINT NOT NULL PRIMARY KEY,
    kind VARCHAR(32) CHARACTER SET ascii NOT NULL,
    name VARCHAR(63) CHARACTER SET ascii NOT NULL,
    op VARCHAR(8) CHARACTER SET ascii NOT NULL
) ENGINE = InnoDB;
