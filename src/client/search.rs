//! `karpor search 'SQL'`, `karpor search WORD` (a query not starting with `select` is a
//! keyword), `--keyword WORD` (alone, or narrowing the SQL to names and namespaces
//! holding it, as Karpor's keyword does), and `--nl QUESTION` (the server's model writes
//! the query; the query that ran is printed on stderr).

use std::process::ExitCode;

use karpor_api::types::{SearchItem, SearchPage, SearchRows, TotalRelation};
use serde_json::Value;

use super::output::{print_json, print_list, print_yaml, Column};
use super::{encode, finish, text, time_text, Api, Failed};
use crate::args::{Output, SearchArgs};

pub(crate) async fn run(args: &SearchArgs) -> ExitCode {
    finish(search(args).await)
}

async fn search(args: &SearchArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let is_sql = |q: &str| {
        q.trim_start()
            .get(..7)
            .is_some_and(|head| head.eq_ignore_ascii_case("select "))
    };
    let what = match (&args.query, &args.keyword) {
        _ if args.nl.is_some() => {
            format!(
                "pattern=nl&query={}",
                encode(args.nl.as_deref().unwrap_or_default())
            )
        }
        (Some(sql), Some(word)) if is_sql(sql) => {
            format!("pattern=sql&query={}&keyword={}", encode(sql), encode(word))
        }
        (Some(sql), None) if is_sql(sql) => format!("pattern=sql&query={}", encode(sql)),
        (Some(word), None) | (None, Some(word)) => {
            format!("pattern=keyword&keyword={}", encode(word))
        }
        (Some(_), Some(_)) => {
            return Err(super::refused(
                "--keyword narrows an SQL query; give the query as `select ...`",
            ))
        }
        // clap requires one of them.
        (None, None) => String::new(),
    };
    if let Some(sql) = args
        .query
        .as_deref()
        .filter(|q| args.keyword.is_none() && is_sql(q))
    {
        // Columns, groups and counts are answered as rows (`select *` as documents).
        if args.nl.is_none() && karpor_search::parse_table(sql).is_ok() {
            return rows(&api, args, sql).await;
        }
    }
    let path = format!(
        "/search?{what}&page={}&pageSize={}",
        args.page, args.page_size
    );
    let page: SearchPage = api.get(reqwest::Method::GET, &path, None).await?;
    if args.nl.is_some() {
        eprintln!("sql: {}", page.sql_query);
    }
    let format = args.output.format();
    match format {
        // The page as the API answers it: items, total, page.
        Output::Json => print_json(&page),
        Output::Yaml => print_yaml(&page)?,
        _ => {
            print_list(format, &page.items, &COLUMNS, resource_name)?;
            if format != Output::Name {
                // A total counted only up to the server's cap is at least that many.
                let more = if page.total_relation == TotalRelation::Gte {
                    "+"
                } else {
                    ""
                };
                eprintln!(
                    "{} of {}{more} (page {})",
                    page.items.len(),
                    page.total,
                    page.current_page
                );
            }
        }
    }
    Ok(())
}

/// A rows-and-columns search, printed as a table with its columns as written.
async fn rows(api: &Api, args: &SearchArgs, sql: &str) -> Result<(), Failed> {
    let path = format!(
        "/search/rows?query={}&page={}&pageSize={}",
        encode(sql),
        args.page,
        args.page_size
    );
    let answer: SearchRows = api.get(reqwest::Method::GET, &path, None).await?;
    match args.output.format() {
        Output::Json => print_json(&answer),
        Output::Yaml => print_yaml(&answer)?,
        _ => {
            let header: Vec<&str> = answer.columns.iter().map(String::as_str).collect();
            let rows = answer
                .rows
                .iter()
                .map(|row| row.iter().map(text).collect())
                .collect();
            super::output::emit(&super::output::table(&header, rows));
            let more = if answer.total_relation == TotalRelation::Gte {
                "+"
            } else {
                ""
            };
            eprintln!("{} of {}{more}", answer.rows.len(), answer.total);
        }
    }
    Ok(())
}

/// A field of the item's object (any kind's: it is the object as stored), by its path.
fn field(item: &SearchItem, path: &[&str]) -> String {
    let value = path
        .iter()
        .try_fold(&item.object, |at, key| at.get(key))
        .unwrap_or(&Value::Null);
    text(value)
}

const COLUMNS: [Column<SearchItem>; 7] = [
    Column {
        header: "CLUSTER",
        cell: |i| i.cluster.clone(),
        wide: false,
    },
    Column {
        header: "APIVERSION",
        cell: |i| field(i, &["apiVersion"]),
        wide: false,
    },
    Column {
        header: "KIND",
        cell: |i| field(i, &["kind"]),
        wide: false,
    },
    Column {
        header: "NAMESPACE",
        cell: |i| field(i, &["metadata", "namespace"]),
        wide: false,
    },
    Column {
        header: "NAME",
        cell: |i| field(i, &["metadata", "name"]),
        wide: false,
    },
    Column {
        header: "CREATED",
        cell: |i| field(i, &["metadata", "creationTimestamp"]),
        wide: true,
    },
    Column {
        header: "SYNCED",
        cell: |i| time_text(&i.sync_at),
        wide: true,
    },
];

/// `CLUSTER/KIND/NAMESPACE/NAME` (no namespace part for cluster-scoped objects).
fn resource_name(item: &SearchItem) -> String {
    let mut parts = vec![item.cluster.clone(), field(item, &["kind"]).to_lowercase()];
    let namespace = field(item, &["metadata", "namespace"]);
    if !namespace.is_empty() {
        parts.push(namespace);
    }
    parts.push(field(item, &["metadata", "name"]));
    parts.join("/")
}
