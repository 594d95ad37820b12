//! `select * from changes where ...`: history's changes in the dialect. A change has the
//! columns of the object it happened to (`cluster`, `apiVersion`, `kind`, `namespace`,
//! `name`, `uid`) and its own `change` (`created`, `updated`, `deleted`) and `time` (when
//! karpor saw it). `time` and `change` are and-ed at the top level, where they become
//! the window and the change types; the rest is a filter like a search's. Changes come
//! newest first, so ORDER BY, LIMIT and OFFSET are left to the route's paging.

use sqlparser::ast::{BinaryOperator, Expr as SqlExpr, InTarget, Spanned, Value as SqlValue};
use time::OffsetDateTime;

use crate::parse::{and, at, canonical, convert, fail, select, statement, time_value, Table};
use crate::{Expr, Field, SearchError};

type Result<T> = std::result::Result<T, SearchError>;

const SHAPE: &str = "the form is: select * from changes [where ...]";
/// The change types, as `change` compares them.
pub const CHANGE_TYPES: [&str; 3] = ["created", "updated", "deleted"];
const TIME: &str = "time";
const CHANGE: &str = "change";

/// A parsed search of changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeSearch {
    /// Over cluster, apiVersion, kind, namespace, name and uid.
    pub filter: Expr,
    /// Seen at or after.
    pub since: Option<OffsetDateTime>,
    /// Seen before.
    pub until: Option<OffsetDateTime>,
    /// Of these types ([`CHANGE_TYPES`]); every type when empty.
    pub changes: Vec<String>,
}

/// Parses `select * from changes where ...`; `now()` is the time of parsing.
pub fn parse_changes(sql: &str) -> Result<ChangeSearch> {
    let query = statement(sql)?;
    let (select, table) = select(&query)?;
    if table != Table::Changes {
        return fail(format!("this search reads `changes`; {SHAPE}"));
    }
    if query.order_by.is_some() || query.limit_clause.is_some() {
        return fail(
            "changes come newest first and are paged by the route (page, pageSize): ORDER BY, LIMIT and OFFSET are not supported",
        );
    }
    canonical(&query, select, SHAPE)?;
    let mut search = ChangeSearch {
        filter: Expr::All,
        since: None,
        until: None,
        changes: CHANGE_TYPES.iter().map(|c| (*c).to_owned()).collect(),
    };
    let mut terms = Vec::new();
    if let Some(selection) = &select.selection {
        conjuncts(selection, &mut terms);
    }
    for term in terms {
        if search.take(term)? {
            continue;
        }
        let filter = convert(term).map_err(|e| top_level_only(e, term))?;
        columns_of_changes(&filter)?;
        search.filter = and(std::mem::replace(&mut search.filter, Expr::All), filter);
    }
    if search.changes.is_empty() {
        return fail("the conditions on change leave no change type");
    }
    if search.changes.len() == CHANGE_TYPES.len() {
        search.changes.clear();
    }
    if let (Some(since), Some(until)) = (search.since, search.until) {
        if until <= since {
            return fail("the conditions on time leave no time");
        }
    }
    Ok(search)
}

/// The terms of `e`'s top-level ANDs.
fn conjuncts<'a>(e: &'a SqlExpr, terms: &mut Vec<&'a SqlExpr>) {
    match e {
        SqlExpr::Nested(inner) => conjuncts(inner, terms),
        SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(left, terms);
            conjuncts(right, terms);
        }
        other => terms.push(other),
    }
}

/// Whether `e` is the column `name`.
fn is(e: &SqlExpr, name: &str) -> bool {
    match e {
        SqlExpr::Identifier(id) => {
            id.value.eq_ignore_ascii_case(name)
                || (name == TIME && id.value.eq_ignore_ascii_case("seenAt"))
        }
        SqlExpr::Nested(inner) => is(inner, name),
        _ => false,
    }
}

/// One nanosecond: `time > t` starts just after `t`, `time <= t` ends just after it.
const TICK: time::Duration = time::Duration::nanoseconds(1);

/// `t` and a [`TICK`] (the last time there is stays itself).
fn just_after(t: OffsetDateTime) -> OffsetDateTime {
    t.checked_add(TICK).unwrap_or(t)
}

impl ChangeSearch {
    /// Takes `term` into the window or the change types when it compares `time` or
    /// `change`; `false` for any other term.
    fn take(&mut self, term: &SqlExpr) -> Result<bool> {
        match term {
            SqlExpr::BinaryOp { left, op, right } if is(left, TIME) => {
                let t = time_value(right, TIME)?;
                match op {
                    BinaryOperator::Gt => self.from(just_after(t)),
                    BinaryOperator::GtEq => self.from(t),
                    BinaryOperator::Lt => self.to(t),
                    BinaryOperator::LtEq => self.to(just_after(t)),
                    BinaryOperator::Eq => {
                        self.from(t);
                        self.to(just_after(t));
                    }
                    other => {
                        return fail(format!(
                            "time is compared with <, <=, >, >=, = or BETWEEN, not {other}{}",
                            at(term.span())
                        ))
                    }
                }
            }
            SqlExpr::Between {
                expr,
                negated: false,
                low,
                high,
            } if is(expr, TIME) => {
                self.from(time_value(low, TIME)?);
                self.to(just_after(time_value(high, TIME)?));
            }
            SqlExpr::BinaryOp { left, op, right } if is(left, CHANGE) => {
                let named = change_type(right)?;
                match op {
                    BinaryOperator::Eq => self.keep(|c| c == named),
                    BinaryOperator::NotEq => self.keep(|c| c != named),
                    other => {
                        return fail(format!(
                            "change is compared with =, != or IN, not {other}{}",
                            at(term.span())
                        ))
                    }
                }
            }
            SqlExpr::In {
                expr,
                target: InTarget::List(list),
                negated,
                global: false,
            } if is(expr, CHANGE) => {
                let named = list.iter().map(change_type).collect::<Result<Vec<_>>>()?;
                self.keep(|c| named.contains(&c) != *negated);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn from(&mut self, t: OffsetDateTime) {
        self.since = Some(self.since.map_or(t, |since| since.max(t)));
    }

    fn to(&mut self, t: OffsetDateTime) {
        self.until = Some(self.until.map_or(t, |until| until.min(t)));
    }

    fn keep(&mut self, wanted: impl Fn(&str) -> bool) {
        self.changes.retain(|c| wanted(c));
    }
}

/// A change type literal, checked.
fn change_type(e: &SqlExpr) -> Result<&'static str> {
    let text = match e {
        SqlExpr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => s.as_str(),
            _ => "",
        },
        _ => "",
    };
    CHANGE_TYPES
        .into_iter()
        .find(|c| c.eq_ignore_ascii_case(text))
        .ok_or_else(|| {
            SearchError(format!(
                "change is 'created', 'updated' or 'deleted', not `{e}`{}",
                at(e.span())
            ))
        })
}

/// A term that names `time` or `change` below the top level fails as an unknown column:
/// say where they go instead.
fn top_level_only(e: SearchError, term: &SqlExpr) -> SearchError {
    let misplaced = [TIME, "seenAt", CHANGE]
        .iter()
        .any(|c| e.0.contains(&format!("unknown column `{c}`")));
    if !misplaced {
        return e;
    }
    SearchError(format!(
        "time and change are compared at the top level, and-ed with the rest (`... and time > now() - interval 1 hour`), not inside `{term}`{}",
        at(term.span())
    ))
}

/// Refuses what a change does not hold: labels, annotations, content, findings, times
/// other than its own.
fn columns_of_changes(e: &Expr) -> Result<()> {
    match e {
        Expr::All => Ok(()),
        Expr::And(all) | Expr::Or(all) => all.iter().try_for_each(columns_of_changes),
        Expr::Not(inner) | Expr::Scope(inner) => columns_of_changes(inner),
        Expr::Compare { field, .. }
        | Expr::In { field, .. }
        | Expr::Between { field, .. }
        | Expr::Like { field, .. } => match field {
            Field::Cluster
            | Field::ApiVersion
            | Field::Kind
            | Field::Namespace
            | Field::Name
            | Field::Uid => Ok(()),
            other => fail(format!(
                "changes have no column {}; theirs are cluster, apiVersion, kind, namespace, name, uid, change and time",
                other.column()
            )),
        },
        Expr::Contains(_) | Expr::Keyword(_) => {
            fail("changes hold no content to search: name the cluster, apiVersion, kind, namespace, name or uid")
        }
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::{Op, Value};

    #[test]
    fn time_and_change_become_the_window_and_the_types() {
        let search = parse_changes(
            "select * from changes where namespace = 'shop' and kind = 'Deployment' \
             and time >= '2026-12-01T10:00:00Z' and time < '2026-12-01T11:00:00Z' \
             and change in ('updated', 'deleted')",
        )
        .unwrap();
        assert_eq!(search.since, Some(datetime!(2026-12-01 10:00 UTC)));
        assert_eq!(search.until, Some(datetime!(2026-12-01 11:00 UTC)));
        assert_eq!(search.changes, ["updated", "deleted"]);
        let text = |field, value: &str| Expr::Compare {
            field,
            op: Op::Eq,
            value: Value::Text(value.to_owned()),
        };
        assert_eq!(
            search.filter,
            Expr::And(vec![
                text(Field::Namespace, "shop"),
                text(Field::Kind, "Deployment")
            ])
        );
        let all = parse_changes("select * from changes").unwrap();
        assert_eq!((all.filter, all.since, all.until), (Expr::All, None, None));
        assert!(all.changes.is_empty(), "every type");
        let not_created = parse_changes("select * from changes where change != 'created'").unwrap();
        assert_eq!(not_created.changes, ["updated", "deleted"]);
    }

    #[test]
    fn now_and_intervals_are_times_at_parsing() {
        let before = OffsetDateTime::now_utc();
        for sql in [
            "select * from changes where time > now() - interval 1 hour",
            "select * from changes where time > now() - interval '1' hour",
            "select * from changes where time > now() - interval 60 minute",
            "select * from changes where seenAt > (now() - interval 3600 second)",
        ] {
            let since = parse_changes(sql).unwrap().since.unwrap();
            let after = OffsetDateTime::now_utc();
            let hour = time::Duration::hours(1);
            assert!(
                since >= before - hour && since <= after - hour + TICK,
                "{sql}: {since}"
            );
        }
        let between = parse_changes(
            "select * from changes where time between '2026-12-01T10:00:00Z' and '2026-12-01T11:00:00Z'",
        )
        .unwrap();
        assert_eq!(between.until, Some(datetime!(2026-12-01 11:00 UTC) + TICK));
        // The resources' times take them too.
        let week = crate::parse(
            "select * from resources where creationTimestamp > now() - interval 7 day",
        );
        assert!(week.is_ok(), "{week:?}");
    }

    #[test]
    fn what_changes_do_not_hold_is_refused_saying_so() {
        for (sql, says) in [
            ("select * from changes where labels.app = 'web'", "no column labels"),
            ("select * from changes where contains(content, 'x')", "no content"),
            ("select * from changes where issue = 'x'", "no column issue"),
            ("select * from changes where kind = 'Pod' or time > now()", "top level"),
            ("select * from changes where change = 'renamed'", "'created', 'updated' or 'deleted'"),
            ("select * from changes where change = 'created' and change = 'deleted'", "no change type"),
            ("select * from changes where time > '2026-12-01T11:00:00Z' and time < '2026-12-01T10:00:00Z'", "no time"),
            ("select * from changes where time > now() - interval 1 month", "interval is a whole count"),
            ("select * from changes where time > now() - interval '1h'", "not valid SQL"),
            ("select * from changes where time > 'yesterday'", "RFC 3339"),
            ("select * from changes order by name", "paged by the route"),
            ("select * from changes limit 5", "paged by the route"),
            ("select * from resources", "reads `changes`"),
            ("select * from history", "tables are `resources` and `changes`"),
        ] {
            let refused = parse_changes(sql).unwrap_err().0;
            assert!(refused.contains(says), "{sql}: {refused}");
        }
        let refused = crate::parse("select * from changes").unwrap_err().0;
        assert!(refused.contains("/insight/changes"), "{refused}");
    }
}
