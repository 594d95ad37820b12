//! `karpor whoami`: who the server takes this caller for (the token it sends, or none)
//! and what it may do there, from `/authn`.

use std::process::ExitCode;

use karpor_api::types::Identity;

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
            println!("user: {}{anonymous}", identity.user);
            println!("role: {}", identity.role);
            println!("may:  {}", identity.may.join(", "));
        }
    }
    Ok(())
}
