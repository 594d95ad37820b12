//! A query tree as a parameterised SQLite statement: every value is a bound parameter,
//! never spliced into the text.

use karpor_search::{Expr, Field, Op, Order, Value};

use crate::document::millis;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

#[derive(Debug, Default)]
pub(crate) struct Sql {
    pub text: String,
    pub params: Vec<Param>,
    /// The query has a conjunct that an index narrows well (see [`narrows`]): cluster and
    /// label predicates then only check the rows it finds.
    probe: bool,
    /// Inside a caller's scope: columns are written `+column`, which changes no value but
    /// keeps the planner from finding rows by them.
    scoped: bool,
}

impl Sql {
    fn bind(&mut self, param: Param) -> &'static str {
        self.params.push(param);
        "?"
    }
}

/// Where a predicate's value lives: a column (nullable or not), one key of a pairs table
/// (`resource_labels`, `resource_annotations`), or any row of a pairs table by one of its
/// columns (`resource_issues`: a finding's rule is its key, its severity the value).
enum Target {
    Column(&'static str, bool),
    Map(&'static str, String),
    Set(&'static str, &'static str),
}

fn target(field: &Field) -> Target {
    match field {
        Field::Cluster => Target::Column("r.cluster", false),
        Field::ApiVersion => Target::Column("r.api_version", false),
        Field::Kind => Target::Column("r.kind_lower", false),
        Field::Namespace => Target::Column("r.namespace", false),
        Field::Name => Target::Column("r.name", false),
        Field::Uid => Target::Column("r.uid", false),
        Field::ResourceVersion => Target::Column("r.resource_version", false),
        Field::CreationTimestamp => Target::Column("r.creation_ts", true),
        Field::DeletionTimestamp => Target::Column("r.deletion_ts", true),
        Field::SyncAt => Target::Column("r.sync_at", false),
        Field::Deleted => Target::Column("r.deleted", false),
        Field::Label(key) => Target::Map("resource_labels", key.clone()),
        Field::Annotation(key) => Target::Map("resource_annotations", key.clone()),
        Field::Issue => Target::Set("resource_issues", "p.key"),
        Field::Severity => Target::Set("resource_issues", "p.value"),
        Field::Score => Target::Column("r.score", false),
        Field::Ref => Target::Set("resource_refs", "p.key"),
    }
}

/// The column to sort or count by.
pub(crate) fn sort_column(field: &Field) -> &'static str {
    match field {
        Field::Kind => "r.kind",
        other => match target(other) {
            Target::Column(column, _) => column,
            Target::Map(..) | Target::Set(..) => unreachable!("maps and sets are not sort keys"),
        },
    }
}

fn param(field: &Field, value: &Value) -> Param {
    match value {
        Value::Text(s) if *field == Field::Kind => Param::Text(s.to_lowercase()),
        Value::Text(s) => Param::Text(s.clone()),
        Value::Time(t) => Param::Int(millis(*t)),
        Value::Bool(b) => Param::Int(i64::from(*b)),
        Value::Number(n) => Param::Int(*n),
    }
}

/// Writes `predicate` (given the value expression) on `field`. Absent values (a missing
/// label, a null time) never match, and NOT is plain two-valued logic, as in the
/// Elasticsearch translation. A NULL only needs turning into false under an odd number of
/// NOTs (`flipped`); elsewhere it already acts as false, and the bare comparison lets the
/// planner use an index for it.
fn on(
    field: &Field,
    sql: &mut Sql,
    flipped: bool,
    predicate: impl FnOnce(&str, &mut Sql) -> String,
) {
    match target(field) {
        Target::Column(column, nullable) => {
            let plus = format!("+{column}");
            let written = if sql.scoped { plus.as_str() } else { column };
            let body = predicate(written, sql);
            // Unary plus changes no value but keeps the planner off the cluster index:
            // clusters are few, so it narrows little when another index can.
            let body = if sql.probe && !sql.scoped && column == "r.cluster" {
                format!("+{body}")
            } else {
                body
            };
            if nullable && flipped {
                sql.text.push_str(&format!("COALESCE(({body}), 0)"));
            } else {
                sql.text.push_str(&format!("({body})"));
            }
        }
        Target::Set(table, column) => {
            let body = predicate(column, sql);
            sql.text.push_str(&format!(
                "r.rowid IN (SELECT p.doc FROM {table} p WHERE ({body}))"
            ));
        }
        Target::Map(table, key) => {
            let key = sql.bind(Param::Text(key));
            let body = predicate("p.value", sql);
            // The same set either way: an IN list the planner can start from, or, when
            // another index finds the rows, a probe of each (building a set of a common
            // label's documents would cost more than the rows it is checked against).
            if sql.probe {
                sql.text.push_str(&format!(
                    "EXISTS (SELECT 1 FROM {table} p \
                     WHERE p.doc = r.rowid AND p.key = {key} AND ({body}))"
                ));
            } else {
                sql.text.push_str(&format!(
                    "r.rowid IN (SELECT p.doc FROM {table} p WHERE p.key = {key} AND ({body}))"
                ));
            }
        }
    }
}

/// A conjunct an index answers with few rows as a rule: equality or a list on the
/// namespace, the name or the kind, or on an indexed reference key (each is held by the
/// few objects that own, name or select one thing). Without it the planner walks the
/// cluster index in id order, every document of the cluster, to find a handful.
fn narrows(expr: &Expr) -> bool {
    match expr {
        Expr::And(all) => all.iter().any(narrows),
        Expr::Compare {
            field: Field::Namespace | Field::Name | Field::Kind | Field::Ref,
            op: Op::Eq,
            ..
        }
        | Expr::In {
            field: Field::Namespace | Field::Name | Field::Kind | Field::Ref,
            negated: false,
            ..
        } => true,
        _ => false,
    }
}

pub(crate) fn filter(expr: &Expr, sql: &mut Sql) {
    sql.probe = narrows(expr);
    filter_in(expr, sql, false);
}

/// A negated predicate on a set field (`issue != 'x'`) as its positive form: it means "has
/// findings, none of which matches", as in the Elasticsearch translation, not "has a
/// finding that does not match".
fn set_negation(expr: &Expr) -> Option<(&'static str, Expr)> {
    let (field, positive) = match expr {
        Expr::Compare {
            field,
            op: Op::NotEq,
            value,
        } => (
            field,
            Expr::Compare {
                field: field.clone(),
                op: Op::Eq,
                value: value.clone(),
            },
        ),
        Expr::In {
            field,
            values,
            negated: true,
        } => (
            field,
            Expr::In {
                field: field.clone(),
                values: values.clone(),
                negated: false,
            },
        ),
        Expr::Between {
            field,
            low,
            high,
            negated: true,
        } => (
            field,
            Expr::Between {
                field: field.clone(),
                low: low.clone(),
                high: high.clone(),
                negated: false,
            },
        ),
        Expr::Like {
            field,
            pattern,
            negated: true,
        } => (
            field,
            Expr::Like {
                field: field.clone(),
                pattern: pattern.clone(),
                negated: false,
            },
        ),
        _ => return None,
    };
    match target(field) {
        Target::Set(table, _) => Some((table, positive)),
        _ => None,
    }
}

fn filter_in(expr: &Expr, sql: &mut Sql, flipped: bool) {
    if let Some((table, positive)) = set_negation(expr) {
        sql.text.push_str(&format!(
            "(r.rowid IN (SELECT p.doc FROM {table} p) AND NOT "
        ));
        filter_in(&positive, sql, !flipped);
        sql.text.push(')');
        return;
    }
    match expr {
        Expr::All => sql.text.push('1'),
        Expr::And(all) | Expr::Or(all) => {
            let joiner = if matches!(expr, Expr::And(_)) {
                " AND "
            } else {
                " OR "
            };
            sql.text.push('(');
            for (i, e) in all.iter().enumerate() {
                if i > 0 {
                    sql.text.push_str(joiner);
                }
                filter_in(e, sql, flipped);
            }
            sql.text.push(')');
        }
        Expr::Not(inner) => {
            sql.text.push_str("NOT ");
            filter_in(inner, sql, !flipped);
        }
        Expr::Scope(inner) => {
            let outer = std::mem::replace(&mut sql.scoped, true);
            filter_in(inner, sql, flipped);
            sql.scoped = outer;
        }
        Expr::Compare { field, op, value } => on(field, sql, flipped, |v, sql| {
            let op = match op {
                Op::Eq => "=",
                Op::NotEq => "!=",
                Op::Lt => "<",
                Op::LtEq => "<=",
                Op::Gt => ">",
                Op::GtEq => ">=",
            };
            let p = sql.bind(param(field, value));
            format!("{v} {op} {p}")
        }),
        Expr::In {
            field,
            values,
            negated,
        } => on(field, sql, flipped, |v, sql| {
            let list: Vec<&str> = values.iter().map(|x| sql.bind(param(field, x))).collect();
            let not = if *negated { "NOT " } else { "" };
            format!("{v} {not}IN ({})", list.join(", "))
        }),
        Expr::Between {
            field,
            low,
            high,
            negated,
        } => on(field, sql, flipped, |v, sql| {
            let (lo, hi) = (sql.bind(param(field, low)), sql.bind(param(field, high)));
            let not = if *negated { "NOT " } else { "" };
            format!("{v} {not}BETWEEN {lo} AND {hi}")
        }),
        Expr::Like {
            field,
            pattern,
            negated,
        } => on(field, sql, flipped, |v, sql| {
            let pattern = if *field == Field::Kind {
                pattern.to_lowercase()
            } else {
                pattern.clone()
            };
            let p = sql.bind(Param::Text(like_to_glob(&pattern)));
            let not = if *negated { "NOT " } else { "" };
            format!("{v} {not}GLOB {p}")
        }),
        Expr::Contains(words) => {
            let p = sql.bind(Param::Text(fts_all(words)));
            sql.text.push_str(&format!(
                "r.rowid IN (SELECT rowid FROM resources_fts WHERE resources_fts MATCH {p})"
            ));
        }
        Expr::Keyword(term) => {
            let mut parts = Vec::new();
            if term.contains(['\n', '\0']) {
                // `keywords` holds one item a line, so a term spanning lines could match
                // across two; such a term (or one with a NUL, where SQLite's text
                // functions may stop) is looked for in each item.
                let glob = format!("*{}*", glob_escape(term));
                parts.push(format!(
                    "r.name GLOB {}",
                    sql.bind(Param::Text(glob.clone()))
                ));
                parts.push(format!(
                    "r.namespace GLOB {}",
                    sql.bind(Param::Text(glob.clone()))
                ));
                parts.push(format!(
                    "r.rowid IN (SELECT p.doc FROM resource_labels p WHERE p.key || '=' || p.value GLOB {})",
                    sql.bind(Param::Text(glob))
                ));
            } else {
                // Parameters bind in text order: the trigrams' MATCH comes first.
                let trigrams = trigrams(term);
                let narrowed = if trigrams.is_empty() {
                    String::new()
                } else {
                    let p = sql.bind(Param::Text(trigrams));
                    format!(
                        "r.rowid IN (SELECT rowid FROM resources_keywords \
                         WHERE resources_keywords MATCH {p}) AND "
                    )
                };
                let found = sql.bind(Param::Text(term.clone()));
                parts.push(format!("({narrowed}instr(r.keywords, {found}) > 0)"));
            }
            let words = karpor_search::words(term);
            if !words.is_empty() {
                let p = sql.bind(Param::Text(fts_all(&words)));
                parts.push(format!(
                    "r.rowid IN (SELECT rowid FROM resources_fts WHERE resources_fts MATCH {p})"
                ));
            }
            sql.text.push_str(&format!("({})", parts.join(" OR ")));
        }
    }
}

/// What keyword search matches as a substring (see `Expr::Keyword` above): the name, the
/// namespace and each label as `key=value`, one a line.
pub(crate) fn keywords<'a>(
    name: &str,
    namespace: &str,
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> String {
    let mut text = format!("{name}\n{namespace}");
    for (key, value) in labels {
        text.push('\n');
        text.push_str(key);
        text.push('=');
        text.push_str(value);
    }
    text
}

/// `ORDER BY`: the query's keys (absent values last, as Elasticsearch puts them), then id.
pub(crate) fn order(order_by: &[Order]) -> String {
    let mut keys: Vec<String> = order_by
        .iter()
        .map(|o| {
            let column = sort_column(&o.field);
            let dir = if o.descending { "DESC" } else { "ASC" };
            let nullable = matches!(target(&o.field), Target::Column(_, true));
            let nulls = if nullable { " NULLS LAST" } else { "" };
            format!("{column} {dir}{nulls}")
        })
        .collect();
    // Ties by id in the direction of the last key, so `ORDER BY x DESC` can walk the
    // (x, id) index backwards instead of sorting.
    let tie = if order_by.last().is_some_and(|o| o.descending) {
        "DESC"
    } else {
        "ASC"
    };
    keys.push(format!("r.id {tie}"));
    keys.join(", ")
}

/// Every word, as FTS5 strings (implicitly ANDed). Words are letters and digits only.
fn fts_all(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every run of three characters of `term`, as FTS5 strings (implicitly ANDed): what a
/// text containing `term` has among its trigrams. Empty below three characters.
fn trigrams(term: &str) -> String {
    let chars: Vec<char> = term.chars().collect();
    let mut seen = std::collections::BTreeSet::new();
    chars
        .windows(3)
        .map(|w| w.iter().collect::<String>())
        .filter(|t| seen.insert(t.clone()))
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// SQL LIKE to GLOB (which is case-sensitive, as Elasticsearch's wildcard is).
fn like_to_glob(pattern: &str) -> String {
    pattern
        .chars()
        .map(|c| match c {
            '%' => "*".to_owned(),
            '_' => "?".to_owned(),
            c => glob_escape(&c.to_string()),
        })
        .collect()
}

fn glob_escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '*' | '?' | '[' => format!("[{c}]"),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_bound_never_spliced() {
        let query = karpor_search::parse(
            "select * from resources where name = ''' OR 1=1 --' and labels.`a.b/c` like '%x_' and kind in ('Pod')",
        )
        .unwrap();
        let mut sql = Sql::default();
        filter(&query.filter, &mut sql);
        assert!(!sql.text.contains("OR 1=1"), "{}", sql.text);
        assert!(!sql.text.contains("a.b/c"), "{}", sql.text);
        assert_eq!(
            sql.params,
            [
                Param::Text("' OR 1=1 --".into()),
                Param::Text("a.b/c".into()),
                Param::Text("*x?".into()),
                Param::Text("pod".into()),
                Param::Int(0),
            ]
        );
    }

    #[test]
    fn trigrams_are_quoted_and_once_each() {
        assert_eq!(trigrams("ab"), "");
        assert_eq!(trigrams("a\"bab\""), r#""a""b" """ba" "bab" "ab""""#);
        assert_eq!(trigrams("aaaa"), r#""aaa""#);
    }

    #[test]
    fn like_becomes_an_escaped_glob() {
        assert_eq!(like_to_glob("a%b_c*d?[e"), "a*b?c[*]d[?][[]e");
    }
}
