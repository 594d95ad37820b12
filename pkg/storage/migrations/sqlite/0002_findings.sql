-- Audit findings. Each document's score and its findings counted by severity are columns,
-- so a scope's mean score and totals are one aggregate over the rows its filter selects.
ALTER TABLE resources ADD COLUMN score REAL NOT NULL DEFAULT 100;
ALTER TABLE resources ADD COLUMN issues_low INTEGER NOT NULL DEFAULT 0;
ALTER TABLE resources ADD COLUMN issues_medium INTEGER NOT NULL DEFAULT 0;
ALTER TABLE resources ADD COLUMN issues_high INTEGER NOT NULL DEFAULT 0;

-- A row a finding's rule (key) with its severity (value), as labels are kept: `issue = 'x'`
-- and `severity = 'High'` are index lookups.
CREATE TABLE resource_issues (
    doc INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX resource_issues_rule ON resource_issues (key, doc);
CREATE INDEX resource_issues_severity ON resource_issues (value, doc);
CREATE INDEX resource_issues_doc ON resource_issues (doc, key, value);
