-- An object is created once and deleted once: a writer paused past its lease could land
-- a write after the next owner's relist had removed the object, and the relist after it
-- recorded a second deletion. Of duplicates already kept, the first creation and the
-- newest deletion stay.
DELETE FROM revisions WHERE change = 'created' AND rowid NOT IN (
    SELECT min(rowid) FROM revisions WHERE change = 'created' GROUP BY cluster, uid
);
DELETE FROM revisions WHERE change = 'deleted' AND rowid NOT IN (
    SELECT rowid FROM (
        SELECT rowid, row_number() OVER (
            PARTITION BY cluster, uid ORDER BY version DESC, rowid DESC
        ) AS n
        FROM revisions WHERE change = 'deleted'
    ) WHERE n = 1
);
CREATE UNIQUE INDEX revisions_once ON revisions (cluster, uid, change)
    WHERE change IN ('created', 'deleted');
