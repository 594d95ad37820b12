//! Natural-language search: the model writes a query, karpor's own parser checks it
//! (nothing outside the dialect is ever run), and a query that does not parse or run is
//! sent back with its error for one repair round; after that the caller is shown the
//! query and why it failed.

use std::future::Future;

use karpor_search::Query;

use crate::client::ModelError;
use crate::prompt::{self, Catalog};
use crate::{Ai, Task};

/// Why running a parsed query failed: the query's fault (worth a repair), or the
/// server's (passed on as it is).
#[derive(Debug)]
pub enum RunError<E> {
    Query(String),
    Failed(E),
}

#[derive(Debug, thiserror::Error)]
pub enum NlError<E> {
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model's last query, and why it was not run or failed.
    #[error("the generated query {sql:?} failed: {reason}")]
    Invalid { sql: String, reason: String },
    #[error("running the generated query failed")]
    Failed(E),
}

/// The query in a model's answer: from its first `select` to the first `;` (or the end,
/// or a closing code fence), on one line.
pub fn extract(answer: &str) -> Option<String> {
    let lower = answer.to_ascii_lowercase();
    let start = lower.find("select")?;
    let rest = &answer[start..];
    let end = [rest.find(';'), rest.find("```")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
    let sql = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
    (!sql.is_empty()).then_some(sql)
}

/// What a natural-language search found, and the query that found it.
#[derive(Debug)]
pub struct Found<T> {
    pub result: T,
    pub sql: String,
}

impl Ai {
    /// Answers `question` with a query the model writes, run by `run` (the caller's own
    /// scoped search). The caller holds a [`crate::Permit`] for the whole search.
    pub async fn search<T, E, F, Fut>(
        &self,
        question: &str,
        catalog: &Catalog,
        mut run: F,
    ) -> Result<Found<T>, NlError<E>>
    where
        F: FnMut(Query) -> Fut,
        Fut: Future<Output = Result<T, RunError<E>>>,
    {
        let mut messages = prompt::search(question, catalog);
        let mut repaired = false;
        loop {
            let answer = self.complete(Task::Search, &messages).await?;
            let (sql, reason) = match extract(&answer) {
                None => (
                    String::new(),
                    "the answer holds no select statement".to_owned(),
                ),
                Some(sql) => match karpor_search::parse(&sql) {
                    Err(e) => (sql, e.to_string()),
                    Ok(query) => match run(query).await {
                        Ok(result) => return Ok(Found { result, sql }),
                        Err(RunError::Failed(e)) => return Err(NlError::Failed(e)),
                        Err(RunError::Query(reason)) => (sql, reason),
                    },
                },
            };
            if repaired {
                self.count_invalid();
                return Err(NlError::Invalid { sql, reason });
            }
            repaired = true;
            messages = prompt::repair(messages, &answer, &reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::extract;

    #[test]
    fn the_query_is_taken_out_of_what_surrounds_it() {
        assert_eq!(
            extract("Sure!\n```sql\nSELECT * FROM resources\n  WHERE kind = 'Pod';\n```")
                .as_deref(),
            Some("SELECT * FROM resources WHERE kind = 'Pod'")
        );
        assert_eq!(
            extract("select * from resources where name = 'a'```").as_deref(),
            Some("select * from resources where name = 'a'")
        );
        assert_eq!(extract("I cannot answer that"), None);
    }
}
