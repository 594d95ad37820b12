//! `karpor relation list|get|apply -f FILE|rm`: the relation rules behind the topology, as
//! YAML files a user keeps beside their custom resources (apply creates or replaces).

use std::io::Read;
use std::process::ExitCode;

use karpor_api::types::RelationRuleView;
use karpor_core::model::{KindRef, Relation};
use reqwest::Method;
use serde_json::Value;

use super::output::{print_json, print_list, print_yaml, Column};
use super::{encode, finish, refused, Api, Failed};
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
            let rules: Vec<RelationRuleView> =
                api.get(Method::GET, "/relation-rules", None).await?;
            print_list(output.format(), &rules, &COLUMNS, rule_name)?;
        }
        RelationCommand::Get { name, output } => {
            let rule: RelationRuleView = api
                .get(
                    Method::GET,
                    &format!("/relation-rule/{}", encode(name)),
                    None,
                )
                .await?;
            match output.format() {
                Output::Json => print_json(&rule),
                Output::Yaml => print_yaml(&rule)?,
                format => print_list(format, &[rule], &COLUMNS, rule_name)?,
            }
        }
        RelationCommand::Apply { file } => {
            for rule in read_rules(file)? {
                // The file's own: the server reads the rest and says what is wrong.
                let name = rule
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
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

fn rule_name(r: &RelationRuleView) -> String {
    format!("relation/{}", r.rule.name)
}

fn kind(k: &KindRef) -> String {
    if k.group.is_empty() {
        k.kind.clone()
    } else {
        format!("{}.{}", k.kind, k.group)
    }
}

/// The relation's `type`, as the rule spells it.
fn relation_type(relation: &Relation) -> String {
    match relation {
        Relation::OwnerReference => "ownerReference",
        Relation::Selector { .. } => "selector",
        Relation::Reference { .. } => "reference",
    }
    .to_owned()
}

const COLUMNS: [Column<RelationRuleView>; 6] = [
    Column {
        header: "NAME",
        cell: |r| r.rule.name.clone(),
        wide: false,
    },
    Column {
        header: "PARENT",
        cell: |r| kind(&r.rule.parent),
        wide: false,
    },
    Column {
        header: "CHILD",
        cell: |r| kind(&r.rule.child),
        wide: false,
    },
    Column {
        header: "TYPE",
        cell: |r| relation_type(&r.rule.relation),
        wide: false,
    },
    Column {
        header: "ORIGIN",
        cell: |r| {
            match (r.built_in, r.stored) {
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
        cell: |r| r.rule.enabled.to_string(),
        wide: true,
    },
];
