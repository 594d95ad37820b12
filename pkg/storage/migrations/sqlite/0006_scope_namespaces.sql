-- A count within a caller's scope starts from the scope's namespaces (`ScopeUse::Find`
-- in translate.rs): by namespace, then in the two orders a range or a page reads, each
-- covering what the scope checks, so a scoped count reads the index alone.
CREATE INDEX resources_namespace_created ON resources (namespace, creation_ts, id, deleted, kind_lower, name, cluster);
CREATE INDEX resources_namespace_name ON resources (namespace, name, id, deleted, kind_lower, cluster);
