//! A query tree as an Elasticsearch bool query, in the DSL both the Elasticsearch and the
//! OpenSearch test servers accept: term, terms, range, wildcard, match, exists, bool.
//!
//! Labels and annotations are indexed as `key=value` keywords (`labelPairs`) and keys
//! (`labelKeys`): `flattened` is Elasticsearch-only, and dotted keys would split an object
//! mapping. Absent values never match a predicate, negated or not, and NOT is plain
//! two-valued logic, as in the SQLite translation.

use karpor_search::{Expr, Field, Op, Order, Value};
use serde_json::{json, Value as Json};

enum Target {
    Column(&'static str),
    Map {
        pairs: &'static str,
        keys: &'static str,
        key: String,
    },
}

fn target(field: &Field) -> Target {
    match field {
        Field::Label(key) => Target::Map {
            pairs: "labelPairs",
            keys: "labelKeys",
            key: key.clone(),
        },
        Field::Annotation(key) => Target::Map {
            pairs: "annotationPairs",
            keys: "annotationKeys",
            key: key.clone(),
        },
        Field::Kind => Target::Column("kind.lower"),
        Field::Ref => Target::Column("refs"),
        other => Target::Column(sort_field(other)),
    }
}

/// The field to sort or aggregate by.
pub(crate) fn sort_field(field: &Field) -> &'static str {
    match field {
        Field::Cluster => "cluster",
        Field::ApiVersion => "apiVersion",
        Field::Kind => "kind",
        Field::Namespace => "namespace",
        Field::Name => "name",
        Field::Uid => "uid",
        Field::ResourceVersion => "resourceVersion",
        Field::CreationTimestamp => "creationTimestamp",
        Field::DeletionTimestamp => "deletionTimestamp",
        Field::SyncAt => "syncAt",
        Field::Deleted => "deleted",
        Field::Score => "score",
        // Arrays of each finding's rule and severity: aggregated, never sorted by.
        Field::Issue => "issueRules",
        Field::Severity => "issueSeverities",
        // What terms of `ref` count: the owner kinds, a field of their own.
        Field::Ref => "ownerKinds",
        Field::Label(_) | Field::Annotation(_) => unreachable!("maps are not sort keys"),
    }
}

fn scalar(field: &Field, value: &Value) -> Json {
    match value {
        Value::Text(s) if *field == Field::Kind => Json::String(s.to_lowercase()),
        Value::Text(s) => Json::String(s.clone()),
        Value::Time(t) => Json::String(super::rfc3339_text(*t)),
        Value::Bool(b) => Json::Bool(*b),
        // As a double, the score's type: a whole number would not match it everywhere.
        Value::Number(n) => json!(*n as f64),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Text(s) => s.clone(),
        Value::Time(t) => super::rfc3339_text(*t),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
    }
}

/// `positive` where the field has a value, negated.
fn present_and_not(presence: Json, positive: Json) -> Json {
    json!({"bool": {"filter": [presence], "must_not": [positive]}})
}

fn presence(field: &Field) -> Json {
    match target(field) {
        // On the field itself: not every server answers `exists` on a sub-field.
        Target::Column(_) => json!({"exists": {"field": sort_field(field)}}),
        Target::Map { keys, key, .. } => json!({"term": {keys: key}}),
    }
}

fn negate_if(negated: bool, field: &Field, positive: Json) -> Json {
    if negated {
        present_and_not(presence(field), positive)
    } else {
        positive
    }
}

pub(crate) fn filter(expr: &Expr) -> Json {
    match expr {
        Expr::All => json!({"match_all": {}}),
        Expr::And(all) => json!({"bool": {"filter": all.iter().map(filter).collect::<Vec<_>>()}}),
        Expr::Or(all) => json!({"bool": {
            "should": all.iter().map(filter).collect::<Vec<_>>(),
            "minimum_should_match": 1
        }}),
        Expr::Not(inner) => json!({"bool": {"must_not": [filter(inner)]}}),
        Expr::Scope(inner) => filter(inner),
        Expr::Compare { field, op, value } => compare(field, *op, value),
        Expr::In {
            field,
            values,
            negated,
        } => {
            let positive = match target(field) {
                Target::Column(column) => {
                    let values: Vec<Json> = values.iter().map(|v| scalar(field, v)).collect();
                    json!({"terms": {column: values}})
                }
                Target::Map { pairs, key, .. } => {
                    let values: Vec<String> = values
                        .iter()
                        .map(|v| format!("{key}={}", text(v)))
                        .collect();
                    json!({"terms": {pairs: values}})
                }
            };
            negate_if(*negated, field, positive)
        }
        Expr::Between {
            field,
            low,
            high,
            negated,
        } => {
            let positive = match target(field) {
                Target::Column(column) => json!({"range": {column: {
                    "gte": scalar(field, low), "lte": scalar(field, high)
                }}}),
                Target::Map { pairs, key, .. } => json!({"range": {pairs: {
                    "gte": format!("{key}={}", text(low)), "lte": format!("{key}={}", text(high))
                }}}),
            };
            negate_if(*negated, field, positive)
        }
        Expr::Like {
            field,
            pattern,
            negated,
        } => {
            let pattern = if *field == Field::Kind {
                pattern.to_lowercase()
            } else {
                pattern.clone()
            };
            let positive = match target(field) {
                Target::Column(column) => {
                    json!({"wildcard": {column: {"value": like_to_wildcard(&pattern)}}})
                }
                Target::Map { pairs, key, .. } => json!({"wildcard": {pairs: {
                    "value": format!("{}={}", wildcard_escape(&key), like_to_wildcard(&pattern))
                }}}),
            };
            negate_if(*negated, field, positive)
        }
        Expr::Contains(words) => match_words(words),
        Expr::Keyword(term) => {
            let value = format!("*{}*", wildcard_escape(term));
            let mut should = vec![
                json!({"wildcard": {"name": {"value": value}}}),
                json!({"wildcard": {"namespace": {"value": value}}}),
                json!({"wildcard": {"labelPairs": {"value": value}}}),
            ];
            let words = karpor_search::words(term);
            if !words.is_empty() {
                should.push(match_words(&words));
            }
            json!({"bool": {"should": should, "minimum_should_match": 1}})
        }
    }
}

fn match_words(words: &[String]) -> Json {
    json!({"match": {"content": {"query": words.join(" "), "operator": "and"}}})
}

fn compare(field: &Field, op: Op, value: &Value) -> Json {
    match target(field) {
        Target::Column(column) => {
            let v = scalar(field, value);
            match op {
                Op::Eq => json!({"term": {column: v}}),
                Op::NotEq => present_and_not(presence(field), json!({"term": {column: v}})),
                Op::Lt => json!({"range": {column: {"lt": v}}}),
                Op::LtEq => json!({"range": {column: {"lte": v}}}),
                Op::Gt => json!({"range": {column: {"gt": v}}}),
                Op::GtEq => json!({"range": {column: {"gte": v}}}),
            }
        }
        Target::Map { pairs, key, .. } => {
            // `key=` + value sorts like the value among one key's pairs; `key>` ('>' follows
            // '=') bounds them above, and keys cannot contain '='.
            let pair = format!("{key}={}", text(value));
            let (floor, ceiling) = (format!("{key}="), format!("{key}>"));
            match op {
                Op::Eq => json!({"term": {pairs: pair}}),
                Op::NotEq => present_and_not(presence(field), json!({"term": {pairs: pair}})),
                Op::Lt => json!({"range": {pairs: {"gte": floor, "lt": pair}}}),
                Op::LtEq => json!({"range": {pairs: {"gte": floor, "lte": pair}}}),
                Op::Gt => json!({"range": {pairs: {"gt": pair, "lt": ceiling}}}),
                Op::GtEq => json!({"range": {pairs: {"gte": pair, "lt": ceiling}}}),
            }
        }
    }
}

/// The sort: the query's keys (absent values last), then id, so pages never overlap.
pub(crate) fn sort(order_by: &[Order]) -> Json {
    let mut keys: Vec<Json> = order_by
        .iter()
        .map(|o| {
            let order = if o.descending { "desc" } else { "asc" };
            json!({sort_field(&o.field): {"order": order, "missing": "_last"}})
        })
        .collect();
    // Ties by id in the direction of the last key, as the SQLite backend does.
    let tie = if order_by.last().is_some_and(|o| o.descending) {
        "desc"
    } else {
        "asc"
    };
    keys.push(json!({"id": {"order": tie}}));
    Json::Array(keys)
}

fn like_to_wildcard(pattern: &str) -> String {
    pattern
        .chars()
        .map(|c| match c {
            '%' => "*".to_owned(),
            '_' => "?".to_owned(),
            c => wildcard_escape(&c.to_string()),
        })
        .collect()
}

fn wildcard_escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '*' | '?' | '\\' => format!("\\{c}"),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_becomes_an_escaped_wildcard() {
        assert_eq!(like_to_wildcard("a%b_c*d?\\"), "a*b?c\\*d\\?\\\\");
    }

    #[test]
    fn a_label_comparison_is_bounded_to_its_key() {
        let q = karpor_search::parse("select * from resources where labels.tier > 'b'").unwrap();
        let body = filter(&q.filter).to_string();
        assert!(
            body.contains(r#""gt":"tier=b""#) && body.contains(r#""lt":"tier>""#),
            "{body}"
        );
    }
}
