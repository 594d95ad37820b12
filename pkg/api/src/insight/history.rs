//! History: `GET /insight/history` (an object's revisions, each with what changed) and
//! `GET /insight/changes` (what changed in a scope over a window). Objects are redacted as
//! details are, and each diff is taken between the redacted objects, so a diff never
//! shows what the object does not.

use std::time::Duration;

use axum::extract::Query as QueryParams;
use karpor_search::Expr;
use karpor_storage::{Change, ChangeQuery, ObjectName, Revision};
use serde::Deserialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use utoipa::IntoParams;

use crate::envelope::{ApiError, ApiResult, Reply};
use crate::locator::Locator;
use crate::openapi::Errors;
use crate::scope::Visible;
use crate::types::{ChangeView, ChangesAnswer, Count, Envelope, HistoryAnswer, RevisionView};
use karpor_kube::redact;

/// Revisions answered at most, and by default.
const MAX_REVISIONS: usize = 1_000;
const DEFAULT_REVISIONS: usize = 50;
/// Changes a page holds at most, and by default.
const MAX_CHANGES_PAGE: u64 = 1_000;
const DEFAULT_CHANGES_PAGE: u64 = 50;
/// The window `changes` looks back over when `since` is not given.
const DEFAULT_WINDOW: Duration = Duration::from_secs(3600);

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct HistoryParams {
    /// Newest revisions answered: 1 to 1000 (default 50).
    pub limit: Option<String>,
    /// `true`: each revision with the object as it was.
    #[serde(default, deserialize_with = "crate::params::lenient_bool")]
    #[param(value_type = Option<String>)]
    pub objects: bool,
}

#[utoipa::path(get, path = "/insight/history", operation_id = "insightHistory", tag = "insight",
    params(Locator, HistoryParams),
    responses((status = 200, body = inline(Envelope<HistoryAnswer>),
        description = "the object's revisions (every uid its name had), newest first; 404 when karpor kept none the caller may see"),
        Errors))]
pub(crate) async fn history(
    visible: Visible,
    QueryParams(at): QueryParams<Locator>,
    QueryParams(params): QueryParams<HistoryParams>,
) -> ApiResult<HistoryAnswer> {
    let name = object_name(&at)?;
    let limit = bounded(
        params.limit.as_deref(),
        DEFAULT_REVISIONS as u64,
        MAX_REVISIONS as u64,
    )
    .map_err(|e| ApiError::bad_request(format!("limit: {e}")))? as usize;
    // One more than answered: the oldest answered revision's diff needs the one before.
    let rebuilt = visible.history(&name, limit + 1).await?;
    if rebuilt.is_empty() {
        return Err(ApiError::not_found("no history of such a resource"));
    }
    // Redacted first; each diff then taken from the redacted object before it (the next
    // older revision of the same uid).
    let objects: Vec<Option<Value>> = rebuilt
        .iter()
        .map(|r| r.object.clone().map(redact::object))
        .collect();
    let mut revisions: Vec<RevisionView> = rebuilt
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let before = rebuilt
                .get(i + 1)
                .filter(|older| older.revision.uid == r.revision.uid)
                .and_then(|_| objects[i + 1].as_ref());
            let diff = match (r.revision.change, before, &objects[i]) {
                (Change::Updated, Some(before), Some(now)) => {
                    serde_json::to_value(json_patch::diff(before, now)).ok()
                }
                _ => None,
            };
            RevisionView {
                change: r.revision.change.as_str().to_owned(),
                uid: r.revision.uid.clone(),
                resource_version: r.revision.resource_version.clone(),
                seen_at: r.revision.seen_at,
                late: r.revision.late,
                managers: r.revision.managers.clone(),
                diff,
                object: objects[i].clone().filter(|_| params.objects),
            }
        })
        .collect();
    revisions.truncate(limit);
    Ok(Reply::ok(HistoryAnswer {
        cluster: name.cluster,
        kind: rebuilt[0].revision.kind.clone(),
        namespace: name.namespace,
        name: name.name,
        revisions,
    }))
}

/// The object a locator names by cluster, kind, namespace and name.
pub(super) fn object_name(at: &Locator) -> Result<ObjectName, ApiError> {
    let (Some(cluster), Some(kind), Some(name)) = (at.cluster(), at.kind(), at.name()) else {
        return Err(ApiError::bad_request(
            "history needs cluster, kind and name (and namespace for a namespaced object)",
        ));
    };
    Ok(ObjectName {
        cluster: cluster.to_owned(),
        kind: kind.to_owned(),
        namespace: at.namespace().unwrap_or_default().to_owned(),
        name: name.to_owned(),
    })
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct ChangesParams {
    /// The whole search in the dialect, instead of the other parameters:
    /// `select * from changes where namespace = 'shop' and time > now() - interval 1 hour`
    /// (columns cluster, apiVersion, kind, namespace, name, uid, change, time; without a
    /// condition on time, every change kept).
    pub query: Option<String>,
    /// The window's start: a time (RFC 3339) or how long ago (`30m`, `2h`, `7d`); default
    /// an hour ago.
    pub since: Option<String>,
    /// The window's end, excluded: a time or how long ago; default now.
    pub until: Option<String>,
    /// Only these change types: `created`, `updated`, `deleted`, comma-separated.
    pub change: Option<String>,
    /// From 1 (default 1).
    pub page: Option<String>,
    /// 1 to 1000 (default 50).
    pub page_size: Option<String>,
}

#[utoipa::path(get, path = "/insight/changes", operation_id = "insightChanges", tag = "insight",
    params(Locator, ChangesParams),
    responses((status = 200, body = inline(Envelope<ChangesAnswer>),
        description = "what changed where the locator says (cluster, apiVersion, kind, namespace, name; each optional), or what `query` selects, within the caller's scope, newest first, with counts by kind and change type"),
        Errors))]
pub(crate) async fn changes(
    visible: Visible,
    QueryParams(at): QueryParams<Locator>,
    QueryParams(params): QueryParams<ChangesParams>,
) -> ApiResult<ChangesAnswer> {
    let now = OffsetDateTime::now_utc();
    let query = match params.query.as_deref().filter(|q| !q.trim().is_empty()) {
        Some(sql) => searched(sql, &at, &params)?,
        None => located(&at, &params, now)?,
    };
    let page = bounded(params.page.as_deref(), 1, u64::MAX)
        .map_err(|e| ApiError::bad_request(format!("page: {e}")))?;
    let page_size = bounded(
        params.page_size.as_deref(),
        DEFAULT_CHANGES_PAGE,
        MAX_CHANGES_PAGE,
    )
    .map_err(|e| ApiError::bad_request(format!("pageSize: {e}")))?;
    let from = (page - 1).saturating_mul(page_size);
    let found = visible.changes(&query, from, page_size).await?;
    let counts = visible.change_counts(&query).await?;
    let count = |buckets: Vec<karpor_storage::Bucket>| {
        buckets
            .into_iter()
            .map(|b| Count {
                key: b.key,
                count: b.count,
            })
            .collect()
    };
    Ok(Reply::ok(ChangesAnswer {
        items: found.items.into_iter().map(view).collect(),
        total: found.total,
        current_page: page,
        page_size,
        since: query.since,
        until: query.until.unwrap_or(now),
        by_kind: count(counts.by_kind),
        by_change: count(counts.by_change),
    }))
}

/// The query of `query=`, which must come alone.
fn searched(sql: &str, at: &Locator, params: &ChangesParams) -> Result<ChangeQuery, ApiError> {
    let located = [
        at.cluster(),
        at.api_version(),
        at.kind(),
        at.namespace(),
        at.name(),
    ]
    .iter()
    .any(Option::is_some)
        || !at.labels().is_empty()
        || !at.annotations().is_empty();
    let windowed = [&params.since, &params.until, &params.change]
        .iter()
        .any(|p| p.as_deref().is_some_and(|p| !p.is_empty()));
    if located || windowed {
        return Err(ApiError::bad_request(
            "query is the whole search: say the cluster, kind, namespace, name, time and change in it, not beside it",
        ));
    }
    let search = karpor_search::parse_changes(sql)
        .map_err(|e| ApiError::bad_request(format!("query: {e}")))?;
    let changes = search
        .changes
        .iter()
        .filter_map(|c| Change::parse(c))
        .collect();
    let query = ChangeQuery {
        filter: search.filter,
        since: search.since,
        until: search.until,
        changes,
    };
    Ok(query)
}

/// The query of the locator and `since`, `until`, `change`: an hour by default.
fn located(
    at: &Locator,
    params: &ChangesParams,
    now: OffsetDateTime,
) -> Result<ChangeQuery, ApiError> {
    if !at.labels().is_empty() || !at.annotations().is_empty() {
        return Err(ApiError::bad_request(
            "changes are not selected by labels or annotations: name the cluster, apiVersion, kind, namespace or name",
        ));
    }
    let since = match params.since.as_deref() {
        Some(text) => when(text, now).map_err(|e| ApiError::bad_request(format!("since: {e}")))?,
        None => now - DEFAULT_WINDOW,
    };
    let until = match params.until.as_deref() {
        Some(text) => when(text, now).map_err(|e| ApiError::bad_request(format!("until: {e}")))?,
        None => now,
    };
    if until < since {
        return Err(ApiError::bad_request("until is before since"));
    }
    let mut changes: Vec<Change> = match params.change.as_deref() {
        None | Some("") => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|c| {
                Change::parse(c.trim()).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "change: {c:?} is not created, updated or deleted"
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    // Each type once: a list repeating one is no longer a query.
    changes.sort_by_key(|c| c.as_str());
    changes.dedup();
    let query = ChangeQuery {
        filter: match at.query(true).filter {
            Expr::And(terms) if terms.is_empty() => Expr::All,
            filter => filter,
        },
        since: Some(since),
        until: Some(until),
        changes,
    };
    Ok(query)
}

fn view(r: Revision) -> ChangeView {
    ChangeView {
        change: r.change.as_str().to_owned(),
        cluster: r.cluster,
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
        uid: r.uid,
        resource_version: r.resource_version,
        seen_at: r.seen_at,
        late: r.late,
        managers: r.managers,
    }
}

/// A number from 1 to `max`; `default` when absent.
fn bounded(text: Option<&str>, default: u64, max: u64) -> Result<u64, String> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(default);
    };
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{text:?} is not a number from 1 to {max}")),
    }
}

/// A time: RFC 3339, or a duration before `now` (`30m`, `2h`, `7d`).
pub(super) fn when(text: &str, now: OffsetDateTime) -> Result<OffsetDateTime, String> {
    if let Ok(time) = OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(time);
    }
    let ago = humantime_serde::re::humantime::parse_duration(text).map_err(|_| {
        format!("{text:?} is neither a time (2026-12-01T10:00:00Z) nor how long ago (30m, 2h)")
    })?;
    time::Duration::try_from(ago)
        .ok()
        .and_then(|ago| now.checked_sub(ago))
        .ok_or_else(|| format!("{text:?} is too long ago"))
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn times_are_given_or_how_long_ago() {
        let now = datetime!(2026-12-01 12:00 UTC);
        assert_eq!(when("30m", now), Ok(datetime!(2026-12-01 11:30 UTC)));
        assert_eq!(
            when("2026-12-01T10:00:00Z", now),
            Ok(datetime!(2026-12-01 10:00 UTC))
        );
        assert!(when("yesterday", now).unwrap_err().contains("neither"));
        assert!(when("100000000000d", now).is_err());
        assert_eq!(bounded(None, 50, 1000), Ok(50));
        assert!(bounded(Some("0"), 50, 1000).is_err());
        assert!(bounded(Some("1001"), 50, 1000).is_err());
    }
}
