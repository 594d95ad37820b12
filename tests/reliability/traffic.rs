//! REST API traffic through every fault: a search every 100 ms and a write (a resource
//! group rule) every 500 ms, each answer kept, and every acknowledged write remembered
//! so the suite can check none is lost.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::RwLock;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const STEP: Duration = Duration::from_millis(100);
const WRITE_EVERY: usize = 5;

/// One request's answer: the status, or what went wrong without one.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub at: Instant,
    pub what: &'static str,
    pub result: Result<u16, String>,
}

impl Outcome {
    pub(crate) fn ok(&self) -> bool {
        matches!(self.result, Ok(200..=299))
    }

    /// What the contract allows: success, or 503 while a dependency is down.
    pub(crate) fn allowed(&self) -> bool {
        self.ok() || matches!(self.result, Ok(503))
    }
}

#[derive(Default)]
struct Ledger {
    outcomes: Mutex<Vec<Outcome>>,
    acknowledged: Mutex<Vec<String>>,
}

pub(crate) struct Traffic {
    ledger: Arc<Ledger>,
    /// Each request holds it for reading; `hold` takes it to pause the traffic.
    gate: Arc<RwLock<()>>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

/// An anonymous client: reads only (anonymous is a guest on loopback).
pub(crate) fn client() -> reqwest::Client {
    builder().build().unwrap()
}

/// A client that sends the local admin token, for writes.
pub(crate) fn admin_client(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {token}").parse().unwrap();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    builder().default_headers(headers).build().unwrap()
}

fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().timeout(Duration::from_secs(10))
}

/// A write: create resource group rule `name`.
pub(crate) async fn write(client: &reqwest::Client, base: &str, name: &str) -> Result<u16, String> {
    let url = format!("{base}/rest-api/v1/resource-group-rule/{name}");
    let body = json!({"description": "reliability suite", "fields": ["namespace"]});
    match client.post(url).json(&body).send().await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) if e.is_timeout() => Err("no answer within 10 s".into()),
        Err(e) => Err(format!("transport: {e}")),
    }
}

pub(crate) async fn search(client: &reqwest::Client, base: &str) -> Result<u16, String> {
    let url = format!("{base}/rest-api/v1/search");
    let query = [
        ("query", "select * from resources where kind = 'ConfigMap'"),
        ("pageSize", "20"),
    ];
    match client.get(url).query(&query).send().await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) if e.is_timeout() => Err("no answer within 10 s".into()),
        Err(e) => Err(format!("transport: {e}")),
    }
}

impl Traffic {
    pub(crate) fn start(base: String, client: reqwest::Client, tag: &str) -> Traffic {
        let ledger = Arc::new(Ledger::default());
        let gate = Arc::new(RwLock::new(()));
        let stop = CancellationToken::new();
        let task = {
            let (ledger, gate, stop, tag) =
                (ledger.clone(), gate.clone(), stop.clone(), tag.to_owned());
            tokio::spawn(async move {
                for step in 0usize.. {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(STEP) => {}
                    }
                    let _open = gate.read().await;
                    let at = Instant::now();
                    let outcome = if step % WRITE_EVERY == 0 {
                        let name = format!("{tag}-{step}");
                        let result = write(&client, &base, &name).await;
                        if matches!(result, Ok(200..=299)) {
                            ledger.acknowledged.lock().unwrap().push(name);
                        }
                        Outcome {
                            at,
                            what: "write",
                            result,
                        }
                    } else {
                        let result = search(&client, &base).await;
                        Outcome {
                            at,
                            what: "search",
                            result,
                        }
                    };
                    ledger.outcomes.lock().unwrap().push(outcome);
                }
            })
        };
        Traffic {
            ledger,
            gate,
            stop,
            task: Some(task),
        }
    }

    /// Pauses the traffic (after the request in flight) until the guard is dropped.
    pub(crate) async fn hold(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.gate.clone().write_owned().await
    }

    /// Writes acknowledged elsewhere (the shutdown test's own requests) count too.
    pub(crate) fn acknowledge(&self, name: String) {
        self.ledger.acknowledged.lock().unwrap().push(name);
    }

    pub(crate) fn acknowledged(&self) -> Vec<String> {
        self.ledger.acknowledged.lock().unwrap().clone()
    }

    /// Requests sent from `from` on: (not successful, all).
    pub(crate) fn failed_since(&self, from: Instant) -> (usize, usize) {
        let outcomes = self.ledger.outcomes.lock().unwrap();
        let window: Vec<&Outcome> = outcomes.iter().filter(|o| o.at >= from).collect();
        (window.iter().filter(|o| !o.ok()).count(), window.len())
    }

    /// Every answer the contract does not allow (a 500, a hang, a refused connection).
    pub(crate) fn unexpected(&self) -> Vec<String> {
        let outcomes = self.ledger.outcomes.lock().unwrap();
        outcomes
            .iter()
            .filter(|o| !o.allowed())
            .map(|o| format!("{}: {:?}", o.what, o.result))
            .collect()
    }

    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// A write whose request is half sent when `sent_half` is reached and finished once
/// `go` turns true: a request certainly in flight across whatever happens in between.
pub(crate) async fn split_write(
    addr: std::net::SocketAddr,
    token: &str,
    name: &str,
    sent_half: Arc<tokio::sync::Barrier>,
    mut go: tokio::sync::watch::Receiver<bool>,
) -> Result<u16, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = json!({"description": "sent across a SIGTERM", "fields": ["namespace"]}).to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let head = format!(
        "POST /rest-api/v1/resource-group-rule/{name} HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(first.as_bytes()).await?;
        stream.flush().await?;
        sent_half.wait().await;
        let _ = go.wait_for(|go| *go).await;
        stream.write_all(rest.as_bytes()).await?;
        let mut received = Vec::new();
        stream.read_to_end(&mut received).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&received).into_owned())
    };
    let answer = match tokio::time::timeout(Duration::from_secs(10), exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return Err(format!("transport: {e}")),
        Err(_) => return Err("no answer within 10 s".into()),
    };
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {answer:?}"))
}
