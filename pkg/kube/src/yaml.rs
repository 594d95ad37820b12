//! YAML read within limits. A kubeconfig is small and shallow, so anything deep, wide or
//! aliased is refused while it is parsed, in time linear in its size (serde-saphyr's
//! budget), and no error quotes the text: a kubeconfig holds credentials.

use serde::de::DeserializeOwned;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{DeserializeError, DuplicateKeyPolicy};

/// Deepest nesting of mappings and sequences accepted; a kubeconfig needs about six.
pub(crate) const MAX_DEPTH: usize = 32;
/// Most nodes (scalars, mappings, sequences) accepted: about 3,000 contexts fit, and the
/// worst text within the limits parses in tens of milliseconds (docs/benchmarks.md).
pub(crate) const MAX_NODES: usize = 50_000;

/// Why a text was refused, safe to show: a position and a kind, never the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlProblem {
    pub what: String,
    /// Line and column, from 1.
    pub at: Option<(u64, u64)>,
}

impl YamlProblem {
    /// ` at line L, column C`, or nothing.
    pub fn position(&self) -> String {
        self.at
            .map(|(line, column)| format!(" at line {line}, column {column}"))
            .unwrap_or_default()
    }
}

/// One YAML document as `T`, within the limits above; no anchors or aliases.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlProblem> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            flow_nesting_limit: MAX_DEPTH,
            max_nodes: MAX_NODES,
            max_documents: 1,
            max_anchors: 0,
            max_aliases: 0,
        },
        duplicate_keys: DuplicateKeyPolicy::Error,
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| describe(&e))
}

fn describe(error: &DeserializeError) -> YamlProblem {
    let at = error
        .location()
        .map(|l| (l.line(), l.column()))
        .filter(|(line, _)| *line > 0);
    let what = match error {
        DeserializeError::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { .. } => format!("nested deeper than {MAX_DEPTH} levels"),
            BudgetBreach::Nodes { .. } => format!("more than {MAX_NODES} nodes"),
            BudgetBreach::Documents { .. } => "more than one YAML document".to_owned(),
            BudgetBreach::Aliases { .. } | BudgetBreach::Anchors { .. } => {
                "anchors and aliases are not accepted".to_owned()
            }
            _ => "above the parsing limits".to_owned(),
        },
        DeserializeError::MultipleDocuments { .. } => "more than one YAML document".to_owned(),
        // The scanner's own guard on flow collections ([[[...), below the budget's.
        _ if error.to_string().starts_with("recursion limit exceeded") => {
            format!("nested deeper than {MAX_DEPTH} levels")
        }
        // Anything else is a syntax or shape error; its message may quote the input.
        _ => "not valid YAML of the expected shape".to_owned(),
    };
    YamlProblem { what, at }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn deep_nesting_is_refused_with_its_kind_and_never_the_text() {
        let deep = format!("{}hunter2{}", "[".repeat(100), "]".repeat(100));
        let err = from_str::<Value>(&deep).unwrap_err();
        assert!(err.what.contains("deeper"), "{err:?}");
        let mut block = String::new();
        for depth in 0..100 {
            block.push_str(&" ".repeat(depth));
            block.push_str("a:\n");
        }
        let err = from_str::<Value>(&block).unwrap_err();
        assert!(err.what.contains("deeper"), "{err:?}");
    }

    #[test]
    fn aliases_and_several_documents_are_refused() {
        let err = from_str::<Value>("a: &x [1]\nb: *x\n").unwrap_err();
        assert!(err.what.contains("anchors"), "{err:?}");
        let err = from_str::<Value>("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(err.what.contains("more than one"), "{err:?}");
    }

    #[test]
    fn syntax_errors_give_a_line_and_no_text() {
        let err = from_str::<Value>("a: 1\nb: [hunter2\n").unwrap_err();
        assert!(err.at.is_some(), "{err:?}");
        assert!(!format!("{err:?}").contains("hunter2"));
    }

    #[test]
    fn an_ordinary_document_parses() {
        let value: Value = from_str("a: {b: [1, 2, {c: d}]}\n").unwrap();
        assert_eq!(value["a"]["b"][2]["c"], "d");
    }
}
