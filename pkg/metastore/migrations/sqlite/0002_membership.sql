-- Syncer replicas and the clusters each owns (docs/metadata.md, "Membership and claims").
-- Times are milliseconds since the epoch by SQLite's clock, never a caller's. A member's
-- id is the revision it joined at; a claim's epoch the revision it was made at.
CREATE TABLE karpor_members (
    name VARCHAR(63) NOT NULL PRIMARY KEY,
    id BIGINT NOT NULL,
    ttl_ms BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- A claim counts only while its member row with the same lease id is unexpired.
CREATE TABLE karpor_claims (
    cluster VARCHAR(63) NOT NULL PRIMARY KEY,
    member VARCHAR(63) NOT NULL,
    lease BIGINT NOT NULL,
    epoch BIGINT NOT NULL
);
CREATE INDEX karpor_claims_lease ON karpor_claims (lease);
