-- Counts kept at write time for answers beyond lists (facets.rs): `count(*)` and
-- `group by` over a cluster, namespace, apiVersion, kind, deleted flag and severity are a
-- sum over a few rows instead of over every document they match (`group by kind` read all
-- 1,000,000 documents in the bench, 393 ms at p99).
--
-- kind_counters: documents by cluster, namespace, apiVersion, kind and deleted flag, and
-- how many of them have a finding of each severity.
CREATE TABLE kind_counters (
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    api_version TEXT NOT NULL,
    kind TEXT NOT NULL,
    deleted INTEGER NOT NULL,
    resources INTEGER NOT NULL,
    with_low INTEGER NOT NULL,
    with_medium INTEGER NOT NULL,
    with_high INTEGER NOT NULL,
    PRIMARY KEY (cluster, namespace, api_version, kind, deleted)
) WITHOUT ROWID;

INSERT INTO kind_counters
SELECT cluster, namespace, api_version, kind, deleted, count(*), sum(issues_low > 0),
       sum(issues_medium > 0), sum(issues_high > 0)
FROM resources GROUP BY cluster, namespace, api_version, kind, deleted;

CREATE TRIGGER kind_counted_insert AFTER INSERT ON resources BEGIN
    INSERT INTO kind_counters VALUES (new.cluster, new.namespace, new.api_version, new.kind,
        new.deleted, 1, new.issues_low > 0, new.issues_medium > 0, new.issues_high > 0)
    ON CONFLICT DO UPDATE SET resources = resources + 1,
        with_low = with_low + excluded.with_low,
        with_medium = with_medium + excluded.with_medium,
        with_high = with_high + excluded.with_high;
END;

CREATE TRIGGER kind_counted_delete AFTER DELETE ON resources BEGIN
    UPDATE kind_counters SET resources = resources - 1,
        with_low = with_low - (old.issues_low > 0),
        with_medium = with_medium - (old.issues_medium > 0),
        with_high = with_high - (old.issues_high > 0)
    WHERE cluster = old.cluster AND namespace = old.namespace
        AND api_version = old.api_version AND kind = old.kind AND deleted = old.deleted;
    DELETE FROM kind_counters WHERE cluster = old.cluster AND namespace = old.namespace
        AND api_version = old.api_version AND kind = old.kind AND deleted = old.deleted
        AND resources = 0;
END;

-- An unchanged rewrite, most of a resync, fires nothing.
CREATE TRIGGER kind_counted_update AFTER UPDATE ON resources
WHEN old.cluster IS NOT new.cluster OR old.namespace IS NOT new.namespace
    OR old.api_version IS NOT new.api_version OR old.kind IS NOT new.kind
    OR old.deleted IS NOT new.deleted
    OR (old.issues_low > 0) IS NOT (new.issues_low > 0)
    OR (old.issues_medium > 0) IS NOT (new.issues_medium > 0)
    OR (old.issues_high > 0) IS NOT (new.issues_high > 0)
BEGIN
    UPDATE kind_counters SET resources = resources - 1,
        with_low = with_low - (old.issues_low > 0),
        with_medium = with_medium - (old.issues_medium > 0),
        with_high = with_high - (old.issues_high > 0)
    WHERE cluster = old.cluster AND namespace = old.namespace
        AND api_version = old.api_version AND kind = old.kind AND deleted = old.deleted;
    DELETE FROM kind_counters WHERE cluster = old.cluster AND namespace = old.namespace
        AND api_version = old.api_version AND kind = old.kind AND deleted = old.deleted
        AND resources = 0;
    INSERT INTO kind_counters VALUES (new.cluster, new.namespace, new.api_version, new.kind,
        new.deleted, 1, new.issues_low > 0, new.issues_medium > 0, new.issues_high > 0)
    ON CONFLICT DO UPDATE SET resources = resources + 1,
        with_low = with_low + excluded.with_low,
        with_medium = with_medium + excluded.with_medium,
        with_high = with_high + excluded.with_high;
END;

-- label_counters: label values by key, cluster and namespace, of every document, the
-- deleted ones too (a label row does not know its document's flag, and the flag changes
-- without the rows): a count of live documents takes away those of the deleted ones,
-- which the partial index below finds.
CREATE TABLE label_counters (
    key TEXT NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    value TEXT NOT NULL,
    resources INTEGER NOT NULL,
    PRIMARY KEY (key, cluster, namespace, value)
) WITHOUT ROWID;

INSERT INTO label_counters
SELECT key, cluster, namespace, value, count(*) FROM resource_labels
GROUP BY key, cluster, namespace, value;

CREATE TRIGGER label_counted_insert AFTER INSERT ON resource_labels BEGIN
    INSERT INTO label_counters VALUES (new.key, new.cluster, new.namespace, new.value, 1)
    ON CONFLICT DO UPDATE SET resources = resources + 1;
END;

CREATE TRIGGER label_counted_delete AFTER DELETE ON resource_labels BEGIN
    UPDATE label_counters SET resources = resources - 1
    WHERE key = old.key AND cluster = old.cluster AND namespace = old.namespace
        AND value = old.value;
    DELETE FROM label_counters WHERE key = old.key AND cluster = old.cluster
        AND namespace = old.namespace AND value = old.value AND resources = 0;
END;

CREATE INDEX resources_deleted ON resources (cluster, namespace) WHERE deleted = 1;
