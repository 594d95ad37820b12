//! `karpor health`: probe a running instance through the same client the upstream checks
//! use, print the answer, and exit 0 ready, 1 not ready, 2 unreachable.

use std::process::ExitCode;

use karpor_health::{HealthClient, ProbeError, ProbeOptions};

use crate::args::HealthArgs;

pub(crate) async fn run(args: &HealthArgs) -> ExitCode {
    let endpoint = if args.livez { "livez" } else { "readyz" };
    let mut url = format!("{}/{endpoint}", crate::client::base_url(&args.server));
    if let Some(check) = &args.check {
        url.push('/');
        url.push_str(&crate::client::encode(check));
    }
    if args.livez && args.check.is_none() {
        url.push_str("?verbose");
    }
    let client = HealthClient::new(args.timeout);
    let options = ProbeOptions {
        json: args.json,
        token: args.token.as_deref(),
        // A person asking wants the whole picture, upstreams included.
        hop: false,
    };
    match client.probe(&url, &options).await {
        Ok(response) => {
            if response.body.trim().is_empty() {
                // Never silent: an empty answer still says what it was.
                println!("{url}: {} with an empty body", response.status);
            } else {
                print!("{}", response.body);
                if args.json || !response.body.ends_with('\n') {
                    println!();
                }
            }
            if response.status == 200 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(ProbeError::Timeout) => {
            eprintln!("karpor health: {url}: no answer within {:?}", args.timeout);
            ExitCode::from(2)
        }
        Err(ProbeError::Unreachable(e)) => {
            eprintln!("karpor health: {url}: unreachable: {e}");
            ExitCode::from(2)
        }
    }
}
