-- Audit totals kept at write time (counters.rs): a row per rule, cluster, namespace and
-- deleted flag, with how many documents there are, the sum of their scores and their
-- findings by severity. Rule '' counts every document; a rule's row counts the documents
-- with that finding. A scope's totals are then a sum over a few rows, not over its
-- documents. Triggers keep them in the writing transaction, whatever the statement.
--
-- Scores are summed in billionths of a point (as whole numbers, so adding a document and
-- taking it away again leaves no rounding behind); a recount sums them the same way.
CREATE TABLE audit_counters (
    rule TEXT NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT NOT NULL,
    deleted INTEGER NOT NULL,
    resources INTEGER NOT NULL,
    score_nanos INTEGER NOT NULL,
    low INTEGER NOT NULL,
    medium INTEGER NOT NULL,
    high INTEGER NOT NULL,
    PRIMARY KEY (rule, cluster, namespace, deleted)
) WITHOUT ROWID;

INSERT INTO audit_counters
SELECT '', cluster, namespace, deleted, count(*), sum(CAST(round(score * 1e9) AS INTEGER)),
       sum(issues_low), sum(issues_medium), sum(issues_high)
FROM resources GROUP BY cluster, namespace, deleted;

INSERT INTO audit_counters
SELECT p.key, r.cluster, r.namespace, r.deleted, count(*),
       sum(CAST(round(r.score * 1e9) AS INTEGER)),
       sum(r.issues_low), sum(r.issues_medium), sum(r.issues_high)
FROM resource_issues p JOIN resources r ON r.rowid = p.doc
GROUP BY p.key, r.cluster, r.namespace, r.deleted;

-- A document's own row ('') follows its `resources` row.
CREATE TRIGGER audit_counted_insert AFTER INSERT ON resources BEGIN
    INSERT INTO audit_counters VALUES ('', new.cluster, new.namespace, new.deleted, 1,
        CAST(round(new.score * 1e9) AS INTEGER), new.issues_low, new.issues_medium,
        new.issues_high)
    ON CONFLICT DO UPDATE SET resources = resources + 1,
        score_nanos = score_nanos + excluded.score_nanos, low = low + excluded.low,
        medium = medium + excluded.medium, high = high + excluded.high;
END;

CREATE TRIGGER audit_counted_delete AFTER DELETE ON resources BEGIN
    UPDATE audit_counters SET resources = resources - 1,
        score_nanos = score_nanos - CAST(round(old.score * 1e9) AS INTEGER),
        low = low - old.issues_low, medium = medium - old.issues_medium,
        high = high - old.issues_high
    WHERE rule = '' AND cluster = old.cluster AND namespace = old.namespace
        AND deleted = old.deleted;
    DELETE FROM audit_counters WHERE rule = '' AND cluster = old.cluster
        AND namespace = old.namespace AND deleted = old.deleted AND resources = 0;
END;

-- A changed document moves its own row and the rows of the rules it has now (its findings
-- are replaced after this, and those triggers then take away and add what it is now). An
-- unchanged rewrite, most of a resync, fires nothing.
CREATE TRIGGER audit_counted_update AFTER UPDATE ON resources
WHEN old.cluster IS NOT new.cluster OR old.namespace IS NOT new.namespace
    OR old.deleted IS NOT new.deleted OR old.score IS NOT new.score
    OR old.issues_low IS NOT new.issues_low OR old.issues_medium IS NOT new.issues_medium
    OR old.issues_high IS NOT new.issues_high
BEGIN
    UPDATE audit_counters SET resources = resources - 1,
        score_nanos = score_nanos - CAST(round(old.score * 1e9) AS INTEGER),
        low = low - old.issues_low, medium = medium - old.issues_medium,
        high = high - old.issues_high
    WHERE cluster = old.cluster AND namespace = old.namespace AND deleted = old.deleted
        AND (rule = '' OR rule IN (SELECT key FROM resource_issues WHERE doc = old.rowid));
    DELETE FROM audit_counters WHERE cluster = old.cluster AND namespace = old.namespace
        AND deleted = old.deleted AND resources = 0;
    INSERT INTO audit_counters
    SELECT rule, new.cluster, new.namespace, new.deleted, 1,
        CAST(round(new.score * 1e9) AS INTEGER), new.issues_low, new.issues_medium,
        new.issues_high
    FROM (SELECT '' AS rule UNION ALL SELECT key FROM resource_issues WHERE doc = new.rowid)
    WHERE true
    ON CONFLICT DO UPDATE SET resources = resources + 1,
        score_nanos = score_nanos + excluded.score_nanos, low = low + excluded.low,
        medium = medium + excluded.medium, high = high + excluded.high;
END;

-- A finding's rule row follows its `resource_issues` row, with its document's values as
-- they are when the finding is written or removed.
CREATE TRIGGER audit_rule_insert AFTER INSERT ON resource_issues BEGIN
    INSERT INTO audit_counters
    SELECT new.key, r.cluster, r.namespace, r.deleted, 1,
        CAST(round(r.score * 1e9) AS INTEGER), r.issues_low, r.issues_medium, r.issues_high
    FROM resources r WHERE r.rowid = new.doc
    ON CONFLICT DO UPDATE SET resources = resources + 1,
        score_nanos = score_nanos + excluded.score_nanos, low = low + excluded.low,
        medium = medium + excluded.medium, high = high + excluded.high;
END;

CREATE TRIGGER audit_rule_delete AFTER DELETE ON resource_issues BEGIN
    UPDATE audit_counters SET resources = resources - 1,
        score_nanos = score_nanos - CAST(round(r.score * 1e9) AS INTEGER),
        low = low - r.issues_low, medium = medium - r.issues_medium,
        high = high - r.issues_high
    FROM resources r
    WHERE r.rowid = old.doc AND audit_counters.rule = old.key
        AND audit_counters.cluster = r.cluster AND audit_counters.namespace = r.namespace
        AND audit_counters.deleted = r.deleted;
    DELETE FROM audit_counters WHERE rule = old.key AND resources = 0
        AND (cluster, namespace) = (SELECT cluster, namespace FROM resources
            WHERE rowid = old.doc);
END;
