//! `karpor relation list|get|apply -f FILE|rm`: the relation rules behind the topology, as
//! YAML files a user keeps beside their custom resources (apply creates or replaces).

use std::io::Read;
use std::process::ExitCode;

use reqwest::Method;
use serde_json::Value;

use super::output::{print_json, print_list, print_yaml, Column};
use super::{encode, finish, refused, text, Api, Failed};
use crate::args::{Output, RelationCommand, ServerArgs};

/// Largest rules file read.
const MAX_FILE: u64 = 1024 * 1024;

pub(crate) async fn run(server: &ServerArgs, command: &RelationCommand) -> ExitCode {
    finish(dispatch(server, command).await)
}

async fn dispatch(server: &ServerArgs, command: &RelationCommand) -> Result<(), Failed> {
    let api = Api::new(server)?;
    match command {
        RelationCommand::List { output } => {
            let rules = api.call(Method::GET, "/relation-rules", None).await?;
            let items = rules.as_array().cloned().unwrap_or_default();
            print_list(output.format(), &items, &COLUMNS, |r| {
                format!("relation/{}", text(&r["name"]))
            })?;
        }
        RelationCommand::Get { name, output } => {
            let rule = api
                .call(
                    Method::GET,
                    &format!("/relation-rule/{}", encode(name)),
                    None,
                )
                .await?;
            match output.format() {
                Output::Json => print_json(&rule),
                Output::Yaml => print_yaml(&rule)?,
                format => print_list(format, &[rule], &COLUMNS, |r| {
                    format!("relation/{}", text(&r["name"]))
                })?,
            }
        }
        RelationCommand::Apply { file } => {
            for rule in read_rules(file)? {
                let name = text(&rule["name"]);
                if name.is_empty() {
                    return Err(refused(format!(
                        "{}: a rule without a name",
                        file.display()
                    )));
                }
                api.call(
                    Method::PUT,
                    &format!("/relation-rule/{}", encode(&name)),
                    Some(rule),
                )
                .await?;
                println!("relation/{name} applied");
            }
        }
        RelationCommand::Rm { name } => {
            api.call(
                Method::DELETE,
                &format!("/relation-rule/{}", encode(name)),
                None,
            )
            .await?;
            println!("relation/{name} removed");
        }
    }
    Ok(())
}

/// The rules of a YAML file: one mapping, or a list of them.
fn read_rules(path: &std::path::Path) -> Result<Vec<Value>, Failed> {
    let fail = |m: String| refused(format!("{}: {m}", path.display()));
    let mut text = String::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().take(MAX_FILE).read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_FILE).read_to_string(&mut text))
    };
    read.map_err(|e| fail(format!("cannot read: {e}")))?;
    let value: Value = serde_saphyr::from_str(&text).map_err(|e| fail(format!("not YAML: {e}")))?;
    match value {
        Value::Array(rules) => Ok(rules),
        rule @ Value::Object(_) => Ok(vec![rule]),
        _ => Err(fail("expected a rule or a list of rules".to_owned())),
    }
}

fn kind(k: &Value) -> String {
    let group = text(&k["group"]);
    if group.is_empty() {
        text(&k["kind"])
    } else {
        format!("{}.{group}", text(&k["kind"]))
    }
}

const COLUMNS: [Column; 6] = [
    Column {
        header: "NAME",
        cell: |r| text(&r["name"]),
        wide: false,
    },
    Column {
        header: "PARENT",
        cell: |r| kind(&r["parent"]),
        wide: false,
    },
    Column {
        header: "CHILD",
        cell: |r| kind(&r["child"]),
        wide: false,
    },
    Column {
        header: "TYPE",
        cell: |r| text(&r["relation"]["type"]),
        wide: false,
    },
    Column {
        header: "ORIGIN",
        cell: |r| {
            match (r["builtIn"] == true, r["stored"] == true) {
                (true, true) => "built-in, replaced",
                (true, false) => "built-in",
                _ => "yours",
            }
            .to_owned()
        },
        wide: false,
    },
    Column {
        header: "ENABLED",
        cell: |r| text(&r["enabled"]),
        wide: true,
    },
];
