-- Fencing: the resourceVersion as a number (NULL when it is not one), so an upsert can skip
-- a version older than the stored one in its ON CONFLICT clause. Existing rows get it
-- from their text; a version of 19 or more digits stays NULL (written unconditionally once,
-- then set by that write).
ALTER TABLE resources ADD COLUMN version INTEGER;
UPDATE resources SET version = CAST(resource_version AS INTEGER)
WHERE resource_version != ''
  AND resource_version NOT GLOB '*[^0-9]*'
  AND length(resource_version) <= 18;
