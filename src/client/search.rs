//! `karpor search 'SQL'`, `karpor search WORD` (a query not starting with `select` is a
//! keyword), and `--keyword WORD` (alone, or narrowing the SQL to names and namespaces
//! holding it, as Karpor's keyword does).

use std::process::ExitCode;

use serde_json::Value;

use super::output::{print_json, print_list, print_yaml, Column};
use super::{encode, finish, text, Api, Failed};
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
    let path = format!(
        "/search?{what}&page={}&pageSize={}",
        args.page, args.page_size
    );
    let data = api.call(reqwest::Method::GET, &path, None).await?;
    let format = args.output.format();
    match format {
        // The page as the API answers it: items, total, page.
        Output::Json => print_json(&data),
        Output::Yaml => print_yaml(&data)?,
        _ => {
            let items = data["items"].as_array().cloned().unwrap_or_default();
            print_list(format, &items, &COLUMNS, resource_name)?;
            if format != Output::Name {
                eprintln!(
                    "{} of {} (page {})",
                    items.len(),
                    text(&data["total"]),
                    text(&data["currentPage"])
                );
            }
        }
    }
    Ok(())
}

const COLUMNS: [Column; 7] = [
    Column {
        header: "CLUSTER",
        cell: |i| text(&i["cluster"]),
        wide: false,
    },
    Column {
        header: "APIVERSION",
        cell: |i| text(&i["object"]["apiVersion"]),
        wide: false,
    },
    Column {
        header: "KIND",
        cell: |i| text(&i["object"]["kind"]),
        wide: false,
    },
    Column {
        header: "NAMESPACE",
        cell: |i| text(&i["object"]["metadata"]["namespace"]),
        wide: false,
    },
    Column {
        header: "NAME",
        cell: |i| text(&i["object"]["metadata"]["name"]),
        wide: false,
    },
    Column {
        header: "CREATED",
        cell: |i| text(&i["object"]["metadata"]["creationTimestamp"]),
        wide: true,
    },
    Column {
        header: "SYNCED",
        cell: |i| text(&i["syncAt"]),
        wide: true,
    },
];

/// `CLUSTER/KIND/NAMESPACE/NAME` (no namespace part for cluster-scoped objects).
fn resource_name(item: &Value) -> String {
    let object = &item["object"];
    let mut parts = vec![text(&item["cluster"]), text(&object["kind"]).to_lowercase()];
    let namespace = text(&object["metadata"]["namespace"]);
    if !namespace.is_empty() {
        parts.push(namespace);
    }
    parts.push(text(&object["metadata"]["name"]));
    parts.join("/")
}
