-- A caller's scope (cluster, namespace, kind, and a Namespace object's name) checked
-- from the index alone when rows are walked in name or creation order, or by cluster: a
-- scoped page or count then reads no row it skips.
DROP INDEX resources_name;
CREATE INDEX resources_name ON resources (name, id, deleted, namespace, kind_lower, cluster);
DROP INDEX resources_created;
CREATE INDEX resources_created ON resources (creation_ts, id, deleted, namespace, kind_lower, cluster, name);
DROP INDEX resources_cluster;
CREATE INDEX resources_cluster ON resources (cluster, deleted, id, namespace, kind_lower, name);
