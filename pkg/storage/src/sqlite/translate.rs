//! A query tree as a parameterised SQLite statement: every value is a bound parameter,
//! never spliced into the text.

use std::collections::{BTreeMap, BTreeSet};

use karpor_search::{Expr, Field, Op, Order, Value};

use super::places;
use crate::document::millis;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
    /// SQL NULL, for a value a statement may go without.
    Null,
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
    scope_use: ScopeUse,
    /// The namespaces the query's own terms allow, when they name them: what the scope
    /// says of namespaces is then decided here, not on each row.
    known: Option<BTreeSet<String>>,
    /// The statement reads every match (an exact count, a sum, groups): a negated set is
    /// then built once, where a page or a capped count, which stop early, probe each row.
    whole: bool,
    /// The trigrams a keyword term is narrowed by, when chosen from the index
    /// (`trigrams.rs`); otherwise all of them.
    pub chosen_trigrams: BTreeMap<String, Vec<String>>,
    /// A count: a label within the namespaces its conjunction names is then looked up
    /// within them ([`Place`]); a page keeps probing the rows its order walks, as it
    /// stops after a few.
    counting: bool,
    /// Where the conjunction being written pins its rows.
    place: Place,
    /// Every document's full text holds its places (places.rs): full text is then
    /// narrowed by the place its conjunction pins.
    pub text_placed: bool,
}

/// The namespaces and cluster a conjunction's own terms pin its rows to. A label row holds
/// its document's namespace and cluster (migration 0010), so a label inside the
/// conjunction is one index range of exactly its matches there: the same rows, as the
/// conjunction checks the namespace and cluster on each anyway.
#[derive(Debug, Default, Clone)]
struct Place {
    namespaces: Option<Vec<String>>,
    cluster: Option<String>,
}

impl Place {
    /// This place narrowed by a conjunction's own terms.
    fn within(&self, all: &[Expr]) -> Place {
        let mut place = self.clone();
        for e in all {
            match e {
                Expr::Compare {
                    field: Field::Cluster,
                    op: Op::Eq,
                    value: Value::Text(cluster),
                } => place.cluster = Some(cluster.clone()),
                Expr::Compare {
                    field: Field::Namespace,
                    ..
                }
                | Expr::In {
                    field: Field::Namespace,
                    ..
                } => {
                    let Some(named) = namespaces(e) else { continue };
                    if place
                        .namespaces
                        .as_ref()
                        .is_none_or(|n| named.len() < n.len())
                    {
                        place.namespaces = Some(named.into_iter().map(str::to_owned).collect());
                    }
                }
                _ => {}
            }
        }
        place
    }
}

/// What a caller's scope ([`Expr::Scope`]) does in a statement.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScopeUse {
    /// Only checked on the rows the query's own terms or order find: a page walking its
    /// order's index stops after a few rows, where starting from the scope would read and
    /// sort every row in it.
    #[default]
    Check,
    /// Also finds rows by its namespaces, when it has them: a count or a sum reads every
    /// match anyway, and reading the scope's namespaces reads fewer rows than checking the
    /// scope on every row of the query's range.
    Find,
}

impl Sql {
    /// For a statement that reads every match.
    pub(crate) fn whole() -> Sql {
        Sql {
            whole: true,
            counting: true,
            ..Sql::default()
        }
    }

    /// For a count that stops at a cap.
    pub(crate) fn capped_count() -> Sql {
        Sql {
            counting: true,
            ..Sql::default()
        }
    }

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
            // Under NOT, probed as maps are (below).
            if flipped && !sql.whole {
                sql.text.push_str(&format!(
                    "EXISTS (SELECT 1 FROM {table} p WHERE p.doc = r.rowid AND ({body}))"
                ));
            } else {
                sql.text.push_str(&format!(
                    "r.rowid IN (SELECT p.doc FROM {table} p WHERE ({body}))"
                ));
            }
        }
        Target::Map(table, key) => {
            let key = sql.bind(Param::Text(key));
            let body = predicate("p.value", sql);
            // The same set either way: an IN list the planner can start from, or, when
            // another index finds the rows, a probe of each (building a set of a common
            // label's documents would cost more than the rows it is checked against).
            // Under NOT the set only ever excludes: a probe of each row the rest finds
            // beats building the set for a page or a capped count, which stop early (0.1
            // ms against 41 ms for a page of `not labels.tier = 'db'` at 1,000,000
            // documents, where a third have the label); reading every match, the set is
            // built once (168 ms against 539 ms for an exact count).
            // A count within named namespaces reads exactly its label's rows there.
            let placed = table == "resource_labels" && (sql.whole || !flipped);
            let within = match (&sql.place.namespaces, placed) {
                (Some(namespaces), true) if sql.counting => {
                    let (namespaces, cluster) = (namespaces.clone(), sql.place.cluster.clone());
                    let list: Vec<&str> = namespaces
                        .into_iter()
                        .map(|ns| sql.bind(Param::Text(ns)))
                        .collect();
                    let mut within = format!(" AND p.namespace IN ({})", list.join(", "));
                    if let Some(cluster) = cluster {
                        within.push_str(&format!(
                            " AND p.cluster = {}",
                            sql.bind(Param::Text(cluster))
                        ));
                    }
                    Some(within)
                }
                _ => None,
            };
            if let Some(within) = within {
                sql.text.push_str(&format!(
                    "r.rowid IN (SELECT p.doc FROM {table} p \
                     WHERE p.key = {key} AND ({body}){within})"
                ));
            } else if sql.probe || (flipped && !sql.whole) {
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
pub(crate) fn narrows(expr: &Expr) -> bool {
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

pub(crate) fn filter(expr: &Expr, sql: &mut Sql, scope: ScopeUse) {
    // Rows the query's own terms find are fewer than a scope's namespaces hold, as a rule:
    // the scope then only checks them.
    sql.scope_use = if finds_rows(expr) {
        ScopeUse::Check
    } else {
        scope
    };
    // Rows found by the scope's namespaces are probed for the rest, as under `narrows`.
    sql.probe = narrows(expr) || (sql.scope_use == ScopeUse::Find && finds_by_scope(expr));
    sql.known = own_namespaces(expr);
    filter_in(expr, sql, false);
}

/// The namespaces the terms outside the caller's scope allow, when they name them.
fn own_namespaces(expr: &Expr) -> Option<BTreeSet<String>> {
    let outside = match expr {
        Expr::And(all) => Expr::And(
            all.iter()
                .filter(|e| !matches!(e, Expr::Scope(_)))
                .cloned()
                .collect(),
        ),
        Expr::Scope(_) => return None,
        other => other.clone(),
    };
    namespaces(&outside).map(|set| set.into_iter().map(str::to_owned).collect())
}

/// `expr` with what it says of namespaces decided for rows whose namespace is one of
/// `known`: a term true (or false) for all of them becomes `Expr::All` (or its negation),
/// and `AND`/`OR` fold around them.
fn decided(expr: &Expr, known: &BTreeSet<String>) -> Expr {
    let truth = |holds: bool| {
        if holds {
            Expr::All
        } else {
            Expr::Not(Box::new(Expr::All))
        }
    };
    let is_false = |e: &Expr| matches!(e, Expr::Not(inner) if **inner == Expr::All);
    let held = |values: &[&str]| {
        if known.iter().all(|ns| values.contains(&ns.as_str())) {
            Some(true)
        } else if known.iter().all(|ns| !values.contains(&ns.as_str())) {
            Some(false)
        } else {
            None
        }
    };
    match expr {
        Expr::Compare {
            field: Field::Namespace,
            op: Op::Eq,
            value: Value::Text(namespace),
        } => held(&[namespace.as_str()]).map_or_else(|| expr.clone(), truth),
        Expr::In {
            field: Field::Namespace,
            values,
            negated: false,
        } => {
            let texts: Option<Vec<&str>> = values
                .iter()
                .map(|v| match v {
                    Value::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            texts
                .and_then(|texts| held(&texts))
                .map_or_else(|| expr.clone(), truth)
        }
        Expr::And(all) => {
            let all: Vec<Expr> = all.iter().map(|e| decided(e, known)).collect();
            if all.iter().any(is_false) {
                return truth(false);
            }
            let rest: Vec<Expr> = all.into_iter().filter(|e| *e != Expr::All).collect();
            match rest.len() {
                0 => Expr::All,
                1 => rest.into_iter().next().unwrap_or(Expr::All),
                _ => Expr::And(rest),
            }
        }
        Expr::Or(any) => {
            let any: Vec<Expr> = any.iter().map(|e| decided(e, known)).collect();
            if any.contains(&Expr::All) {
                return Expr::All;
            }
            let rest: Vec<Expr> = any.into_iter().filter(|e| !is_false(e)).collect();
            match rest.len() {
                0 => truth(false),
                1 => rest.into_iter().next().unwrap_or(Expr::All),
                _ => Expr::Or(rest),
            }
        }
        other => other.clone(),
    }
}

/// Whether a conjunct is a caller's scope that names its namespaces.
pub(crate) fn finds_by_scope(expr: &Expr) -> bool {
    match expr {
        Expr::And(all) => all.iter().any(finds_by_scope),
        Expr::Scope(inner) => namespaces(inner).is_some(),
        _ => false,
    }
}

/// How a page's statement uses a caller's scope: the page of a full-text query sorts
/// every match whatever its order (the planner starts from the words' matches), so the
/// scope may as well find the rows ([`ScopeUse::Find`]); any other page walks its order's
/// index and stops early, so the scope only checks what it meets.
pub(crate) fn page_scope(expr: &Expr) -> ScopeUse {
    match expr {
        Expr::Contains(_) => ScopeUse::Find,
        Expr::And(all) if all.iter().any(|e| matches!(e, Expr::Contains(_))) => ScopeUse::Find,
        _ => ScopeUse::Check,
    }
}

/// Whether a keyword term is a conjunct: its page is then sorted from the set of all its
/// matches (the planner starts from the trigram and full-text lookups), whatever else.
pub(crate) fn has_keyword_conjunct(expr: &Expr) -> bool {
    match expr {
        Expr::Keyword(_) => true,
        Expr::And(all) => all.iter().any(has_keyword_conjunct),
        _ => false,
    }
}

/// Whether a conjunct outside the caller's scope finds few rows through an index or a
/// lookup table (keywords, a label, a finding, a reference, or equality on a namespace,
/// name, kind or uid), rather than leaving a range or a scan to the planner. Full text is
/// not such a conjunct: its words are often common (`contains(content, 'postgres 16')`
/// held a quarter of the bench's documents), and reading the scope's namespaces, each
/// row's full-text match looked up, took half the time of checking the scope on every
/// match (docs/benchmarks.md).
fn finds_rows(expr: &Expr) -> bool {
    match expr {
        Expr::And(all) => all.iter().any(finds_rows),
        Expr::Or(any) => !any.is_empty() && any.iter().all(finds_rows),
        Expr::Keyword(_) => true,
        Expr::Compare {
            field, op: Op::Eq, ..
        }
        | Expr::In {
            field,
            negated: false,
            ..
        }
        | Expr::Like {
            field,
            negated: false,
            ..
        } => matches!(
            field,
            Field::Namespace
                | Field::Name
                | Field::Kind
                | Field::Uid
                | Field::Label(_)
                | Field::Annotation(_)
                | Field::Issue
                | Field::Severity
                | Field::Ref
        ),
        _ => false,
    }
}

/// The namespaces outside which `expr` matches nothing, when it names them: a superset,
/// so `namespace IN (these) AND expr` is `expr`.
fn namespaces(expr: &Expr) -> Option<BTreeSet<&str>> {
    match expr {
        Expr::Compare {
            field: Field::Namespace,
            op: Op::Eq,
            value: Value::Text(namespace),
        } => Some(BTreeSet::from([namespace.as_str()])),
        Expr::In {
            field: Field::Namespace,
            values,
            negated: false,
        } => values
            .iter()
            .map(|v| match v {
                Value::Text(namespace) => Some(namespace.as_str()),
                _ => None,
            })
            .collect(),
        Expr::And(all) => all.iter().filter_map(namespaces).min_by_key(BTreeSet::len),
        Expr::Or(any) => any.iter().try_fold(BTreeSet::new(), |mut union, e| {
            union.extend(namespaces(e)?);
            Some(union)
        }),
        Expr::Scope(inner) => namespaces(inner),
        _ => None,
    }
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
            let (joiner, place) = if matches!(expr, Expr::And(_)) {
                (" AND ", sql.place.within(all))
            } else {
                (" OR ", sql.place.clone())
            };
            let outer = std::mem::replace(&mut sql.place, place);
            sql.text.push('(');
            for (i, e) in all.iter().enumerate() {
                if i > 0 {
                    sql.text.push_str(joiner);
                }
                filter_in(e, sql, flipped);
            }
            sql.text.push(')');
            sql.place = outer;
        }
        Expr::Not(inner) => {
            sql.text.push_str("NOT ");
            filter_in(inner, sql, !flipped);
        }
        Expr::Scope(inner) => {
            // Known namespaces decide the scope's namespace terms once, not per row.
            let decided = match &sql.known {
                Some(known) => decided(inner, known),
                None => (**inner).clone(),
            };
            let inner = &decided;
            let finding = match sql.scope_use {
                ScopeUse::Find => namespaces(inner),
                ScopeUse::Check => None,
            };
            if let Some(finding) = &finding {
                let list: Vec<&str> = finding
                    .iter()
                    .map(|ns| sql.bind(Param::Text((*ns).to_owned())))
                    .collect();
                sql.text
                    .push_str(&format!("(r.namespace IN ({}) AND ", list.join(", ")));
            }
            let outer = std::mem::replace(&mut sql.scoped, true);
            filter_in(inner, sql, flipped);
            sql.scoped = outer;
            if finding.is_some() {
                sql.text.push(')');
            }
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
            let mut matching = fts_all(words);
            if sql.text_placed {
                let place = &sql.place;
                if let Some(within) =
                    places::within(place.namespaces.as_deref(), place.cluster.as_deref())
                {
                    matching = format!("({matching}) AND {within}");
                }
            }
            let p = sql.bind(Param::Text(matching));
            sql.text.push_str(&format!(
                "r.rowid IN (SELECT rowid FROM resources_fts WHERE resources_fts MATCH {p})"
            ));
        }
        Expr::Keyword(term) => {
            // The words' matches first: a count up to a cap is then often reached within
            // them, read in the full-text index's order, before the trigram candidates
            // are each read and checked.
            let mut parts = Vec::new();
            let words = karpor_search::words(term);
            if !words.is_empty() {
                let p = sql.bind(Param::Text(fts_all(&words)));
                parts.push(format!(
                    "r.rowid IN (SELECT rowid FROM resources_fts WHERE resources_fts MATCH {p})"
                ));
            }
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
                let trigrams = match sql.chosen_trigrams.get(term) {
                    Some(chosen) => fts_all(chosen),
                    None => fts_all(&trigram_list(term)),
                };
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

/// Every word (or trigram), as FTS5 strings, implicitly ANDed.
pub(crate) fn fts_all(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every run of three characters of `term`, once each: what a text containing `term` has
/// among its trigrams. Empty below three characters.
pub(crate) fn trigram_list(term: &str) -> Vec<String> {
    let chars: Vec<char> = term.chars().collect();
    let mut seen = std::collections::BTreeSet::new();
    chars
        .windows(3)
        .map(|w| w.iter().collect::<String>())
        .filter(|t| seen.insert(t.clone()))
        .collect()
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
        filter(&query.filter, &mut sql, ScopeUse::Check);
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
    fn a_scope_finds_rows_by_the_namespaces_it_names_only_when_asked() {
        let text = |s: &str| Value::Text(s.to_owned());
        let within = |namespaces: &[&str]| Expr::In {
            field: Field::Namespace,
            values: namespaces.iter().map(|ns| text(ns)).collect(),
            negated: false,
        };
        let namespace_objects = Expr::And(vec![
            Expr::Compare {
                field: Field::Namespace,
                op: Op::Eq,
                value: text(""),
            },
            Expr::Compare {
                field: Field::Kind,
                op: Op::Eq,
                value: text("Namespace"),
            },
        ]);
        let scope = Expr::Scope(Box::new(Expr::Or(vec![
            Expr::And(vec![within(&["b", "a", "c"]), within(&["a"])]),
            namespace_objects.clone(),
        ])));
        assert_eq!(namespaces(&scope), Some(BTreeSet::from(["", "a"])));
        let mut found = Sql::default();
        filter(&scope, &mut found, ScopeUse::Find);
        assert!(
            found.text.starts_with("(r.namespace IN (?, ?) AND "),
            "{}",
            found.text
        );
        assert_eq!(
            found.params[..2],
            [Param::Text("".into()), Param::Text("a".into())]
        );
        let mut checked = Sql::default();
        filter(&scope, &mut checked, ScopeUse::Check);
        assert!(
            !checked.text.contains("(r.namespace IN"),
            "{}",
            checked.text
        );
        assert_eq!(checked.params, found.params[2..]);
        // Rows the scope finds are probed for the query's own terms: its cluster too.
        let in_cluster = Expr::And(vec![
            Expr::Compare {
                field: Field::Cluster,
                op: Op::Eq,
                value: text("one"),
            },
            scope.clone(),
        ]);
        let mut sql = Sql::default();
        filter(&in_cluster, &mut sql, ScopeUse::Find);
        assert!(sql.text.starts_with("((+r.cluster = ?)"), "{}", sql.text);
        // Rows the query's own terms find are only checked against the scope.
        let keyword = Expr::And(vec![Expr::Keyword("app".into()), scope.clone()]);
        let mut sql = Sql::default();
        filter(&keyword, &mut sql, ScopeUse::Find);
        assert!(!sql.text.contains("(r.namespace IN"), "{}", sql.text);
        // A branch without namespaces (a cluster-wide grant) leaves nothing to find by.
        let cluster_wide = Expr::Scope(Box::new(Expr::Or(vec![
            within(&["a"]),
            Expr::Compare {
                field: Field::Cluster,
                op: Op::Eq,
                value: text("one"),
            },
        ])));
        assert_eq!(namespaces(&cluster_wide), None);
        assert_eq!(namespaces(&namespace_objects), Some(BTreeSet::from([""])));
    }

    #[test]
    fn a_query_in_known_namespaces_decides_the_scopes_namespace_terms() {
        let text = |s: &str| Value::Text(s.to_owned());
        let scope = Expr::Scope(Box::new(Expr::And(vec![
            Expr::Or(vec![
                Expr::In {
                    field: Field::Namespace,
                    values: vec![text("a"), text("b")],
                    negated: false,
                },
                Expr::And(vec![
                    Expr::Compare {
                        field: Field::Namespace,
                        op: Op::Eq,
                        value: text(""),
                    },
                    Expr::Compare {
                        field: Field::Kind,
                        op: Op::Eq,
                        value: text("Namespace"),
                    },
                ]),
            ]),
            Expr::Not(Box::new(Expr::Compare {
                field: Field::Kind,
                op: Op::Eq,
                value: text("Secret"),
            })),
        ])));
        let within = |namespace: &str| {
            let mut sql = Sql::default();
            let query = Expr::And(vec![
                Expr::Compare {
                    field: Field::Namespace,
                    op: Op::Eq,
                    value: text(namespace),
                },
                scope.clone(),
            ]);
            filter(&query, &mut sql, ScopeUse::Find);
            sql.text
        };
        // Inside: only the kind is left to check; outside: nothing can match.
        assert_eq!(
            within("a"),
            "((r.namespace = ?) AND NOT (+r.kind_lower = ?))"
        );
        assert_eq!(within("z"), "((r.namespace = ?) AND NOT 1)");
    }

    #[test]
    fn trigrams_are_quoted_and_once_each() {
        let trigrams = |term| fts_all(&trigram_list(term));
        assert_eq!(trigrams("ab"), "");
        assert_eq!(trigrams("a\"bab\""), r#""a""b" """ba" "bab" "ab""""#);
        assert_eq!(trigrams("aaaa"), r#""aaa""#);
    }

    #[test]
    fn like_becomes_an_escaped_glob() {
        assert_eq!(like_to_glob("a%b_c*d?[e"), "a*b?c[*]d[?][[]e");
    }
}
