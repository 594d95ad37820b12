//! `karpor whoami`: who the server takes this caller for (the token it sends, or none)
//! and what it may do there, from `/authn`.

use std::process::ExitCode;

use karpor_api::types::{GrantView, Identity};

use super::output::{print_json, print_yaml};
use super::{finish, Api, Failed};
use crate::args::{Output, WhoamiArgs};

pub(crate) async fn run(args: &WhoamiArgs) -> ExitCode {
    finish(whoami(args).await)
}

async fn whoami(args: &WhoamiArgs) -> Result<(), Failed> {
    let api = Api::new(&args.server)?;
    let identity: Identity = api.get(reqwest::Method::GET, "/authn", None).await?;
    match args.output.format() {
        Output::Json => print_json(&identity),
        Output::Yaml => print_yaml(&identity)?,
        _ => {
            let anonymous = if identity.anonymous {
                " (no token)"
            } else {
                ""
            };
            println!("user:   {}{anonymous}", identity.user);
            if !identity.groups.is_empty() {
                println!("groups: {}", identity.groups.join(", "));
            }
            println!("role:   {}", identity.role);
            println!("may:    {}", identity.may.join(", "));
            if !identity.policies.is_empty() {
                println!("policies: {}", identity.policies.join(", "));
            }
            for grant in &identity.scope {
                println!("scope:  {}", grant_line(grant));
            }
        }
    }
    Ok(())
}

/// `viewer: clusters a,b; namespaces web; kinds all; no Secrets`.
fn grant_line(grant: &GrantView) -> String {
    let list = |items: &Option<Vec<String>>| match items {
        Some(items) => items.join(","),
        None => "all".to_owned(),
    };
    let clusters = match (&grant.clusters, &grant.cluster_labels) {
        (Some(names), Some(labels)) => format!("{} or labelled {labels}", names.join(",")),
        (None, Some(labels)) => format!("labelled {labels}"),
        (names, None) => list(names),
    };
    let secrets = if grant.secrets { "" } else { "; no Secrets" };
    format!(
        "{}: clusters {clusters}; namespaces {}; kinds {}{secrets}",
        grant.role,
        list(&grant.namespaces),
        list(&grant.kinds)
    )
}
