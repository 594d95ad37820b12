//! What the model is told for each task. Everything from a caller or a cluster is
//! scrubbed ([`crate::scrub`]) and cut to size before it is put in a prompt.

use karpor_search::Field;

use crate::client::Message;
use crate::scrub;

/// The languages Karpor's dashboard asks for (`language`), by code or by name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Language {
    #[default]
    English,
    Chinese,
    German,
    Portuguese,
    Korean,
}

impl Language {
    /// `en`, `zh`, `de`, `pt`, `ko` (a region after `-` or `_` is ignored), or the
    /// language's English name; nothing is English.
    pub fn parse(text: Option<&str>) -> Result<Language, String> {
        let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Language::English);
        };
        let code = text
            .split(['-', '_'])
            .next()
            .unwrap_or(text)
            .to_ascii_lowercase();
        Ok(match code.as_str() {
            "en" | "english" => Language::English,
            "zh" | "chinese" => Language::Chinese,
            "de" | "german" => Language::German,
            "pt" | "portuguese" => Language::Portuguese,
            "ko" | "korean" => Language::Korean,
            _ => return Err(format!("language {text:?}: use en, zh, de, pt or ko")),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Language::English => "English",
            Language::Chinese => "Chinese (简体中文)",
            Language::German => "German",
            Language::Portuguese => "Portuguese",
            Language::Korean => "Korean",
        }
    }
}

/// The most bytes of a question put in a prompt.
pub const MAX_QUESTION_BYTES: usize = 2048;
/// The most values of each kind (clusters, kinds, namespaces) named in a search prompt.
pub const MAX_CATALOG_VALUES: usize = 100;

/// What exists, as the caller may see it, for the model to name in its SQL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    pub clusters: Vec<String>,
    pub kinds: Vec<String>,
    pub namespaces: Vec<String>,
}

fn listed(values: &[String]) -> String {
    // The empty namespace (cluster-scoped objects) is explained apart, not listed.
    let values: Vec<&str> = values
        .iter()
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .collect();
    let shown: Vec<&str> = values.iter().take(MAX_CATALOG_VALUES).copied().collect();
    let more = values.len().saturating_sub(shown.len());
    let mut text = shown.join(", ");
    if more > 0 {
        text.push_str(&format!(" (and {more} more)"));
    }
    if text.is_empty() {
        text.push_str("(none)");
    }
    text
}

fn columns() -> String {
    Field::COLUMNS
        .iter()
        .map(|(column, _)| match *column {
            "apiversion" => "apiVersion",
            "resourceversion" => "resourceVersion",
            "creationtimestamp" => "creationTimestamp",
            "deletiontimestamp" => "deletionTimestamp",
            "syncat" => "syncAt",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The messages asking for one query answering `question`.
pub fn search(question: &str, catalog: &Catalog) -> Vec<Message> {
    let system = format!(
        "You translate questions about Kubernetes resources into one SQL query for karpor.\n\
         Answer with the query only, on one line, no explanation, no code fence.\n\
         The only table is `resources`; the query always starts with `select * from resources`.\n\
         Columns: {columns}, labels.KEY, annotations.KEY (backquote keys with dots or slashes: \
         labels.`app.kubernetes.io/name`).\n\
         `kind` is compared case-insensitively; `namespace` is '' for cluster-scoped objects; \
         times are RFC 3339 strings such as '2026-01-01T00:00:00Z'.\n\
         `issue` is an audit finding's rule id, `severity` one of 'High', 'Medium', 'Low', \
         `score` a whole number 0 to 100 (lower is worse).\n\
         Allowed: =, !=, <, <=, >, >=, IN, NOT IN, BETWEEN, LIKE ('%' any run), AND, OR, NOT, \
         contains(content, 'words') for words anywhere in the object, ORDER BY, LIMIT.\n\
         Not allowed: other tables, column lists, joins, sub-queries, GROUP BY, NULL.\n\
         Clusters: {clusters}.\nKinds: {kinds}.\nNamespaces: {namespaces}.\n\
         Examples:\n\
         Q: deployments in namespace shop\n\
         A: select * from resources where kind = 'Deployment' and namespace = 'shop'\n\
         Q: pods with high severity findings in cluster prod\n\
         A: select * from resources where kind = 'Pod' and severity = 'High' and cluster = 'prod'\n\
         Q: services labelled app=web, newest first\n\
         A: select * from resources where kind = 'Service' and labels.app = 'web' order by creationTimestamp desc\n\
         Q: anything mentioning nginx\n\
         A: select * from resources where contains(content, 'nginx')",
        columns = columns(),
        clusters = listed(&catalog.clusters),
        kinds = listed(&catalog.kinds),
        namespaces = listed(&catalog.namespaces),
    );
    vec![
        Message::system(system),
        Message::user(scrub::cut(&scrub::text(question), MAX_QUESTION_BYTES)),
    ]
}

/// `messages` with the model's answer and why it failed, asking for a corrected query.
pub fn repair(mut messages: Vec<Message>, answer: &str, error: &str) -> Vec<Message> {
    messages.push(Message::assistant(scrub::cut(answer, MAX_QUESTION_BYTES)));
    messages.push(Message::user(format!(
        "That query failed: {error}\nAnswer with a corrected query only, starting with `select * from resources`."
    )));
    messages
}

fn explained(task: &str, language: Language, content: String) -> Vec<Message> {
    vec![
        Message::system(format!(
            "You are a Kubernetes expert helping an operator. {task} \
             Be concrete and brief; use Markdown headings and lists. Answer in {}.",
            language.name()
        )),
        Message::user(content),
    ]
}

/// Explains one object, given as YAML already scrubbed and cut.
pub fn interpret_yaml(yaml: &str, language: Language) -> Vec<Message> {
    explained(
        "Explain what this Kubernetes resource is and does, its notable settings, and any \
         risks or misconfigurations you see.",
        language,
        format!("```yaml\n{yaml}\n```"),
    )
}

/// Explains audit findings, given as a summary already scrubbed and cut.
pub fn interpret_issues(summary: &str, language: Language) -> Vec<Message> {
    explained(
        "Explain these audit findings: what each means, why it matters, and how to fix the \
         most important ones first.",
        language,
        summary.to_owned(),
    )
}

/// Diagnoses a resource's events, given as lines already scrubbed and cut.
pub fn diagnose_events(events: &str, language: Language) -> Vec<Message> {
    explained(
        "Diagnose these Kubernetes events: the likely root cause, its impact, and the steps \
         to confirm and fix it.",
        language,
        events.to_owned(),
    )
}

/// Diagnoses a pod's log lines, already scrubbed and cut.
pub fn diagnose_logs(lines: &str, language: Language) -> Vec<Message> {
    explained(
        "Diagnose this pod log: errors and warnings, their likely root cause, and the steps \
         to fix them.",
        language,
        format!("```\n{lines}\n```"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_by_code_region_or_name() {
        assert_eq!(Language::parse(None).unwrap(), Language::English);
        assert_eq!(Language::parse(Some("zh-CN")).unwrap(), Language::Chinese);
        assert_eq!(Language::parse(Some("German")).unwrap(), Language::German);
        assert_eq!(Language::parse(Some("ko")).unwrap(), Language::Korean);
        assert!(Language::parse(Some("klingon")).is_err());
    }

    #[test]
    fn the_search_prompt_names_the_dialect_and_what_exists() {
        let catalog = Catalog {
            clusters: vec!["prod".into()],
            kinds: (0..150).map(|i| format!("Kind{i}")).collect(),
            namespaces: Vec::new(),
        };
        let messages = search("pods with password=hunter2", &catalog);
        let system = &messages[0].content;
        assert!(system.contains("creationTimestamp") && system.contains("severity"));
        assert!(system.contains("Clusters: prod.") && system.contains("(and 50 more)"));
        assert!(system.contains("Namespaces: (none)."));
        assert!(!messages[1].content.contains("hunter2"));
        let catalog = Catalog {
            namespaces: vec![String::new(), "shop".into(), "kube-system".into()],
            ..catalog
        };
        let system = &search("shop pods", &catalog)[0].content;
        assert!(
            system.contains("Namespaces: shop, kube-system."),
            "{system}"
        );
    }
}
