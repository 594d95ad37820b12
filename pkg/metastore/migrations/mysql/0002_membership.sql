-- Syncer replicas and the clusters each owns (docs/metadata.md, "Membership and claims").
-- Times are milliseconds since the epoch by this server's clock, never a client's. A
-- member's id is the revision it joined at; a claim's epoch the revision it was made at.
CREATE TABLE karpor_members (
    name VARCHAR(63) CHARACTER SET ascii NOT NULL PRIMARY KEY,
    id BIGINT NOT NULL,
    ttl_ms BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
) ENGINE = InnoDB;

-- A claim counts only while its member row with the same lease id is unexpired.
CREATE TABLE karpor_claims (
    cluster VARCHAR(63) CHARACTER SET ascii NOT NULL PRIMARY KEY,
    member VARCHAR(63) CHARACTER SET ascii NOT NULL,
    lease BIGINT NOT NULL,
    epoch BIGINT NOT NULL,
    KEY karpor_claims_lease (lease)
) ENGINE = InnoDB;
