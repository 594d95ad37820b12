//! What each tool takes, as JSON schemas say it to the assistant, and the names in it
//! parsed by Kubernetes' rules before they reach a query: a name that is not one is an
//! invalid-params error naming the field.

use std::str::FromStr;

use karpor_core::names::{ApiVersion, ClusterName, KindName, Namespace, ObjectName};
use rmcp::ErrorData;
use schemars::JsonSchema;
use serde::Deserialize;

/// The longest query text a tool takes (the dialect's own limit).
const MAX_QUERY_CHARS: usize = 8 * 1024;
/// A page of a tool's answer holds at most this many items: what an assistant reads.
pub(crate) const MAX_PAGE: u32 = 100;
/// Revisions a history answers at most.
pub(crate) const MAX_REVISIONS: u32 = 50;
/// Issue groups an audit answers at most.
pub(crate) const MAX_GROUPS: u32 = 50;

/// How `search` reads its query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Pattern {
    /// SQL in karpor's dialect.
    #[default]
    Sql,
    /// A word matched against names, namespaces, labels and content.
    Keyword,
    /// A question in plain language, turned into SQL by the server's model service.
    Nl,
}

impl Pattern {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Pattern::Sql => "sql",
            Pattern::Keyword => "keyword",
            Pattern::Nl => "nl",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SearchArgs {
    /// SQL such as `select * from resources where kind = 'Deployment' and namespace = 'shop'`
    /// (columns: cluster, apiVersion, kind, namespace, name, labels.KEY, annotations.KEY
    /// (a key with dots in backticks: labels.`app.kubernetes.io/name`), creationTimestamp,
    /// issue, severity; operators =, !=, <, >, like, in, between, and, or, not;
    /// contains(content, 'words') for text anywhere in the object; order by, limit), a
    /// keyword, or a question, as `pattern` says.
    pub query: String,
    /// `sql` (the default), `keyword`, or `nl` (a question; only when the server has a
    /// model service).
    #[serde(default)]
    pub pattern: Pattern,
    /// The page, from 1 (default 1).
    pub page: Option<u32>,
    /// Results a page, 1 to 100 (default 20).
    pub page_size: Option<u32>,
}

/// One object, by its names. `apiVersion` may be left out when the kind is unambiguous.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ObjectArgs {
    /// A registered cluster's name (the `clusters` tool lists them).
    pub cluster: String,
    /// `Deployment`, `Pod`, `Service`, ...
    pub kind: String,
    /// The object's namespace; leave it out for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
    /// `apps/v1`, `v1`, ...; found from the stored object when left out.
    pub api_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct HistoryArgs {
    pub cluster: String,
    pub kind: String,
    /// Leave it out for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
    /// Newest revisions answered, 1 to 50 (default 10).
    pub limit: Option<u32>,
}

/// A resource's graph (cluster, kind, name and, when namespaced, namespace), a namespace's
/// graph of kinds (cluster and namespace), or a cluster's (cluster alone).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct TopologyArgs {
    pub cluster: String,
    pub namespace: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub api_version: Option<String>,
    /// A resource's graph: hops out from it, 1 to 5 (default 2).
    pub hops: Option<u32>,
}

/// Every field optional: no field audits everything the caller sees.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AuditArgs {
    pub cluster: Option<String>,
    pub namespace: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub api_version: Option<String>,
    /// Issue groups answered, most severe first, 1 to 50 (default 20).
    pub limit: Option<u32>,
}

/// What changed: by names (each optional) over the last `since`, or a whole `query`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ChangesArgs {
    /// SQL over the changes table instead of the names:
    /// `select * from changes where namespace = 'shop' and kind = 'Deployment' and time > now() - interval 1 hour`
    /// (columns cluster, apiVersion, kind, namespace, name, uid, change, time).
    pub query: Option<String>,
    pub cluster: Option<String>,
    pub namespace: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    /// How far back: `30m`, `2h`, `7d`, or an RFC 3339 time (default 1h).
    pub since: Option<String>,
    /// Only `created`, `updated` or `deleted` (comma-separated).
    pub change: Option<String>,
    /// The page, from 1 (default 1).
    pub page: Option<u32>,
    /// Changes a page, 1 to 100 (default 20).
    pub page_size: Option<u32>,
}

/// `value` parsed as `T`, or an invalid-params error naming `field`.
fn parsed<T: FromStr>(field: &str, value: &str) -> Result<T, ErrorData>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e| invalid(format!("{field}: {e}")))
}

fn parsed_opt<T: FromStr>(field: &str, value: Option<&str>) -> Result<Option<T>, ErrorData>
where
    T::Err: std::fmt::Display,
{
    value
        .filter(|v| !v.is_empty())
        .map(|v| parsed(field, v))
        .transpose()
}

pub(crate) fn invalid(message: String) -> ErrorData {
    ErrorData::invalid_params(message, None)
}

/// `value` or `default`, refused outside `1..=max`.
pub(crate) fn within(
    field: &str,
    value: Option<u32>,
    default: u32,
    max: u32,
) -> Result<u32, ErrorData> {
    match value.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(invalid(format!("{field}: {n} is not within 1 to {max}"))),
    }
}

/// A query's text, refused when empty or longer than the dialect takes.
pub(crate) fn query_text(field: &str, text: &str) -> Result<String, ErrorData> {
    let text = text.trim();
    if text.is_empty() {
        return Err(invalid(format!("{field} is empty")));
    }
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(invalid(format!(
            "{field} is longer than {MAX_QUERY_CHARS} characters"
        )));
    }
    Ok(text.to_owned())
}

/// Names checked by Kubernetes' rules, as a REST locator's query parameters.
#[derive(Debug, Clone, Default)]
pub(crate) struct Names {
    pub cluster: Option<ClusterName>,
    pub api_version: Option<ApiVersion>,
    pub kind: Option<KindName>,
    pub namespace: Option<Namespace>,
    pub name: Option<ObjectName>,
}

impl Names {
    pub(crate) fn parse(
        cluster: Option<&str>,
        api_version: Option<&str>,
        kind: Option<&str>,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Names, ErrorData> {
        Ok(Names {
            cluster: parsed_opt("cluster", cluster)?,
            api_version: parsed_opt("apiVersion", api_version)?,
            kind: parsed_opt("kind", kind)?,
            namespace: parsed_opt("namespace", namespace)?,
            name: parsed_opt("name", name)?,
        })
    }

    /// As the REST locator's parameters.
    pub(crate) fn query(&self) -> Vec<(&'static str, String)> {
        [
            (
                "cluster",
                self.cluster.as_ref().map(|n| n.as_str().to_owned()),
            ),
            (
                "apiVersion",
                self.api_version.as_ref().map(|n| n.as_str().to_owned()),
            ),
            ("kind", self.kind.as_ref().map(|n| n.as_str().to_owned())),
            (
                "namespace",
                self.namespace.as_ref().map(|n| n.as_str().to_owned()),
            ),
            ("name", self.name.as_ref().map(|n| n.as_str().to_owned())),
        ]
        .into_iter()
        .filter_map(|(key, value)| value.map(|v| (key, v)))
        .collect()
    }
}

impl ObjectArgs {
    pub(crate) fn names(&self) -> Result<Names, ErrorData> {
        Names::parse(
            Some(&self.cluster),
            self.api_version.as_deref(),
            Some(&self.kind),
            self.namespace.as_deref(),
            Some(&self.name),
        )
    }
}

impl HistoryArgs {
    pub(crate) fn names(&self) -> Result<Names, ErrorData> {
        Names::parse(
            Some(&self.cluster),
            None,
            Some(&self.kind),
            self.namespace.as_deref(),
            Some(&self.name),
        )
    }
}

impl TopologyArgs {
    pub(crate) fn names(&self) -> Result<Names, ErrorData> {
        if self.name.is_some() != self.kind.is_some() {
            return Err(invalid(
                "a resource's graph needs both kind and name; a namespace's or a cluster's neither"
                    .into(),
            ));
        }
        Names::parse(
            Some(&self.cluster),
            self.api_version.as_deref(),
            self.kind.as_deref(),
            self.namespace.as_deref(),
            self.name.as_deref(),
        )
    }
}

impl AuditArgs {
    pub(crate) fn names(&self) -> Result<Names, ErrorData> {
        Names::parse(
            self.cluster.as_deref(),
            self.api_version.as_deref(),
            self.kind.as_deref(),
            self.namespace.as_deref(),
            self.name.as_deref(),
        )
    }
}

impl ChangesArgs {
    pub(crate) fn names(&self) -> Result<Names, ErrorData> {
        Names::parse(
            self.cluster.as_deref(),
            None,
            self.kind.as_deref(),
            self.namespace.as_deref(),
            self.name.as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_parsed_before_they_reach_a_query() {
        let bad = Names::parse(Some("a b"), None, None, None, None).unwrap_err();
        assert!(bad.message.contains("cluster"), "{}", bad.message);
        let bad = Names::parse(Some("c"), None, None, Some("../x"), None).unwrap_err();
        assert!(bad.message.contains("namespace"), "{}", bad.message);
        let names = Names::parse(
            Some("c"),
            Some("apps/v1"),
            Some("Deployment"),
            Some("shop"),
            Some("web"),
        )
        .unwrap();
        assert_eq!(names.query().len(), 5);
        assert!(within("pageSize", Some(101), 20, MAX_PAGE).is_err());
        assert!(within("pageSize", Some(0), 20, MAX_PAGE).is_err());
        assert_eq!(within("pageSize", None, 20, MAX_PAGE).unwrap(), 20);
        assert!(query_text("query", "  ").is_err());
    }
}
