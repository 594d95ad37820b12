-- A count within a caller's scope starts from the scope's namespaces (`ScopeUse::Find`
-- in translate.rs): the namespace index holds what the scope checks (kind, name, cluster),
-- and a second one the creation time a range reads, so a scoped count reads an index
-- alone. Ordered by id within a namespace as before.
DROP INDEX resources_namespace;
CREATE INDEX resources_namespace ON resources (namespace, deleted, id, kind_lower, name, cluster);
CREATE INDEX resources_namespace_created ON resources (namespace, creation_ts, id, deleted, kind_lower, name, cluster);
