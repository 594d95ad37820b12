//! `karpor logs CLUSTER/NAMESPACE/POD [-c C] [-f] [--tail N]`: a pod's log through the
//! server (which reads it from the cluster; it never passes through storage). Without
//! `-f` the log so far (the server's download); with `-f` its stream, line by line, until
//! interrupted or the server ends it; with `--diagnose` the model service's diagnosis of
//! its newest lines, printed as it is written.

use std::process::ExitCode;
use std::time::Duration;

use karpor_api::types::{DiagnosePodLogBody, LogLine};

use super::frames::{print_generation, Frames, MODEL_READ_TIMEOUT};
use super::{encode, finish, refused, streamed, Failed, EXIT_UNREACHABLE};
use crate::args::LogsArgs;

/// A followed log sends a keep-alive at least this often; silence longer than this is a
/// dead connection.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) async fn run(args: &LogsArgs) -> ExitCode {
    finish(logs(args).await)
}

/// `(cluster, namespace, pod)` of `CLUSTER/NAMESPACE/POD`.
fn target(text: &str) -> Result<(&str, &str, &str), Failed> {
    match text.split('/').collect::<Vec<_>>().as_slice() {
        [cluster, namespace, pod] if ![cluster, namespace, pod].iter().any(|p| p.is_empty()) => {
            Ok((cluster, namespace, pod))
        }
        _ => Err(refused(format!("{text:?}: give CLUSTER/NAMESPACE/POD"))),
    }
}

/// The request's path and query: the log's, or with `--diagnose` its diagnosis's.
fn path(args: &LogsArgs) -> Result<String, Failed> {
    let (cluster, namespace, pod) = target(&args.target)?;
    let mut query = Vec::new();
    if !args.diagnose {
        query.push(format!("download={}", !args.follow));
    }
    if let Some(container) = &args.container {
        query.push(format!("container={}", encode(container)));
    }
    if let Some(tail) = args.tail {
        query.push(format!("tailLines={tail}"));
    }
    if let Some(since) = &args.since {
        query.push(format!("since={}", encode(since)));
    }
    if args.timestamps {
        query.push("timestamps=true".to_owned());
    }
    let diagnosis = if args.diagnose {
        "/diagnosis/stream"
    } else {
        ""
    };
    Ok(format!(
        "{}/insight/aggregator/log/pod/{}/{}/{}{diagnosis}?{}",
        karpor_api::PREFIX,
        encode(cluster),
        encode(namespace),
        encode(pod),
        query.join("&")
    ))
}

/// The model's diagnosis of the newest lines, as it is written.
async fn diagnose(args: &LogsArgs) -> Result<(), Failed> {
    let body = DiagnosePodLogBody {
        language: args.language.clone(),
    };
    let response = streamed(
        &args.server,
        reqwest::Method::POST,
        &path(args)?,
        serde_json::to_value(&body).ok(),
        MODEL_READ_TIMEOUT,
    )
    .await?;
    print_generation(response, "diagnosis").await
}

async fn logs(args: &LogsArgs) -> Result<(), Failed> {
    if args.diagnose {
        return diagnose(args).await;
    }
    let mut response = streamed(
        &args.server,
        reqwest::Method::GET,
        &path(args)?,
        None,
        READ_TIMEOUT,
    )
    .await?;
    let mut frames = Frames::<LogLine>::default();
    let mut out = std::io::stdout().lock();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| Failed(EXIT_UNREACHABLE, format!("the log stream broke: {e}")))?;
        let Some(chunk) = chunk else {
            return Ok(());
        };
        if !args.follow {
            if !write(&mut out, &chunk)? {
                return Ok(());
            }
            continue;
        }
        for line in frames.push(&chunk) {
            if let Some(error) = line.error {
                return Err(refused(error));
            }
            let text = match line.timestamp {
                Some(at) => format!("{at} {}\n", line.content),
                None => format!("{}\n", line.content),
            };
            if !write(&mut out, text.as_bytes())? {
                return Ok(());
            }
        }
    }
}

/// `false` when the reader has gone: a closed pipe (`| head`) ends the command quietly.
fn write(out: &mut impl std::io::Write, bytes: &[u8]) -> Result<bool, Failed> {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(refused(format!("cannot write the log: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_cluster_namespace_and_pod() {
        assert_eq!(
            target("prod/shop/web-1").ok(),
            Some(("prod", "shop", "web-1"))
        );
        for bad in ["prod/web-1", "prod//web-1", "a/b/c/d"] {
            assert!(target(bad).is_err(), "{bad}");
        }
    }
}
