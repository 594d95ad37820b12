//! Karpor's other search patterns: the DSL (`pattern=dsl`: `key=value` terms, every one an
//! exact match) and the keyword that narrows an SQL search to names and namespaces.

use crate::parse::SearchError;
use crate::tree::{Expr, Field, Op, Query, Value};

/// Longest DSL text accepted: typed by people, like SQL.
const MAX_LEN: usize = 16 * 1024;

/// `cluster=prod,kind=Deployment,labels.app=web`: terms split on `,` (a backslash escapes
/// the next character), each split at its first `=` into a field and a value, all of
/// them required. As in Karpor, no `deleted = false` is implied and an empty text
/// matches everything.
pub fn dsl(text: &str) -> Result<Query, SearchError> {
    if text.len() > MAX_LEN {
        return Err(SearchError(format!(
            "the query is longer than {MAX_LEN} bytes"
        )));
    }
    let mut all = Vec::new();
    for term in terms(text) {
        let Some((key, value)) = term.split_once('=') else {
            return Err(SearchError(format!(
                "invalid query string: can't understand {term:?} (terms are key=value, split by commas)"
            )));
        };
        let field = field(key).ok_or_else(|| {
            SearchError(format!(
                "unknown field {key:?} (cluster, apiVersion, kind, namespace, name, uid, resourceVersion, deleted, labels.KEY, annotations.KEY, issue, severity)"
            ))
        })?;
        let value = match field {
            Field::Deleted => match value {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                other => return Err(SearchError(format!("deleted={other:?}: true or false"))),
            },
            // Stored as `High`, `Medium`, `Low`.
            Field::Severity => {
                let mut chars = value.chars();
                Value::Text(match chars.next() {
                    Some(first) => first
                        .to_uppercase()
                        .chain(chars.flat_map(char::to_lowercase))
                        .collect(),
                    None => String::new(),
                })
            }
            _ => Value::Text(value.to_owned()),
        };
        all.push(Expr::Compare {
            field,
            op: Op::Eq,
            value,
        });
    }
    Ok(Query {
        filter: if all.is_empty() {
            Expr::All
        } else {
            Expr::And(all)
        },
        order_by: Vec::new(),
        limit: None,
        offset: None,
    })
}

fn terms(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            ',' => terms.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    terms.push(current);
    terms.into_iter().filter(|t| !t.is_empty()).collect()
}

fn field(key: &str) -> Option<Field> {
    if let Some(label) = key.strip_prefix("labels.") {
        return Some(Field::Label(label.to_owned()));
    }
    if let Some(annotation) = key.strip_prefix("annotations.") {
        return Some(Field::Annotation(annotation.to_owned()));
    }
    let key = key.to_ascii_lowercase();
    Field::COLUMNS
        .iter()
        .find(|(name, field)| {
            *name == key
                && !matches!(
                    field,
                    Field::CreationTimestamp
                        | Field::DeletionTimestamp
                        | Field::SyncAt
                        | Field::Score
                )
        })
        .map(|(_, field)| field.clone())
}

/// Karpor's `keyword` beside an SQL query: the matches whose name or namespace holds the
/// keyword (spaces removed; `%` and `_` act as in `LIKE`), as one more condition.
pub fn narrow(mut query: Query, keyword: &str) -> Query {
    let keyword: String = keyword.chars().filter(|c| !c.is_whitespace()).collect();
    if keyword.is_empty() {
        return query;
    }
    let pattern = format!("%{keyword}%");
    let like = |field| Expr::Like {
        field,
        pattern: pattern.clone(),
        negated: false,
    };
    let narrowed = Expr::Or(vec![like(Field::Name), like(Field::Namespace)]);
    query.filter = match query.filter {
        Expr::And(mut all) => {
            all.push(narrowed);
            Expr::And(all)
        }
        Expr::All => narrowed,
        other => Expr::And(vec![other, narrowed]),
    };
    query
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_exact_matches_with_escapes_and_maps() {
        let query = dsl(r"cluster=prod,kind=Deployment,labels.app=web\,api").unwrap();
        assert_eq!(
            query.filter,
            Expr::And(vec![
                Expr::Compare {
                    field: Field::Cluster,
                    op: Op::Eq,
                    value: Value::Text("prod".into())
                },
                Expr::Compare {
                    field: Field::Kind,
                    op: Op::Eq,
                    value: Value::Text("Deployment".into())
                },
                Expr::Compare {
                    field: Field::Label("app".into()),
                    op: Op::Eq,
                    value: Value::Text("web,api".into())
                },
            ])
        );
        assert_eq!(dsl("").unwrap().filter, Expr::All);
        assert!(dsl("kind").unwrap_err().0.contains("key=value"));
        assert!(dsl("colour=red").unwrap_err().0.contains("unknown field"));
        assert!(dsl("deleted=maybe").is_err());
    }

    #[test]
    fn a_keyword_narrows_to_names_and_namespaces() {
        let query = narrow(
            crate::parse("select * from resources where kind='Pod'").unwrap(),
            " ng inx ",
        );
        let Expr::And(all) = &query.filter else {
            panic!("{query:?}")
        };
        assert!(
            matches!(all.last(), Some(Expr::Or(either)) if matches!(&either[0], Expr::Like { pattern, .. } if pattern == "%nginx%"))
        );
        let untouched = crate::parse("select * from resources").unwrap();
        assert_eq!(narrow(untouched.clone(), "  "), untouched);
    }
}
