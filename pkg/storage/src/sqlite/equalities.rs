//! The shape every counter answers (`counters.rs`, `facets.rs`): a conjunction of
//! equalities, each field at most once, a text field to text and `deleted` to a flag.
//! Which fields a counter holds is its own to check.

use std::collections::HashMap;

use karpor_search::{Expr, Field, Op, Value};

pub(super) struct Equalities(HashMap<Field, Value>);

/// The equalities `expr` is, or `None` when it is anything else.
pub(super) fn equalities(expr: &Expr) -> Option<Equalities> {
    fn add(expr: &Expr, found: &mut HashMap<Field, Value>) -> bool {
        match expr {
            Expr::All => true,
            Expr::And(all) => all.iter().all(|e| add(e, found)),
            Expr::Compare {
                field,
                op: Op::Eq,
                value,
            } => {
                let typed = match value {
                    Value::Bool(_) => *field == Field::Deleted,
                    Value::Text(_) => *field != Field::Deleted,
                    _ => false,
                };
                typed && found.insert(field.clone(), value.clone()).is_none()
            }
            _ => false,
        }
    }
    let mut found = HashMap::new();
    add(expr, &mut found).then_some(Equalities(found))
}

impl Equalities {
    /// Whether every field is one of `held`.
    pub(super) fn within(&self, held: &[Field]) -> bool {
        self.0.keys().all(|field| held.contains(field))
    }

    pub(super) fn text(&self, field: &Field) -> Option<String> {
        match self.0.get(field) {
            Some(Value::Text(text)) => Some(text.clone()),
            _ => None,
        }
    }

    pub(super) fn deleted(&self) -> Option<bool> {
        match self.0.get(&Field::Deleted) {
            Some(Value::Bool(deleted)) => Some(*deleted),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare(field: Field, value: Value) -> Expr {
        Expr::Compare {
            field,
            op: Op::Eq,
            value,
        }
    }

    #[test]
    fn only_conjunctions_of_typed_equalities_each_field_once() {
        let cluster = compare(Field::Cluster, Value::Text("a".into()));
        let live = compare(Field::Deleted, Value::Bool(false));
        let terms = equalities(&Expr::And(vec![cluster.clone(), live.clone()])).unwrap();
        assert_eq!(terms.text(&Field::Cluster).as_deref(), Some("a"));
        assert_eq!(terms.deleted(), Some(false));
        assert!(terms.within(&[Field::Cluster, Field::Deleted]));
        assert!(!terms.within(&[Field::Cluster]));
        assert!(equalities(&Expr::All).unwrap().within(&[]));
        for other in [
            Expr::And(vec![cluster.clone(), cluster.clone()]),
            Expr::Or(vec![cluster.clone(), live.clone()]),
            Expr::Not(Box::new(cluster)),
            compare(Field::Deleted, Value::Text("false".into())),
            compare(Field::Cluster, Value::Bool(true)),
            compare(Field::Cluster, Value::Number(1)),
        ] {
            assert!(equalities(&other).is_none(), "{other:?}");
        }
    }
}
