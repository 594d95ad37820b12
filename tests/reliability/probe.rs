//! The prober: `/readyz` and `/livez` on a period as a kubelet would, with how long
//! each answer took; a storm of concurrent `/readyz`; the checks' run counters.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Barrier;
use tokio::task::JoinSet;

/// The suite's probe period (a kubelet's, scaled down).
pub(crate) const PERIOD: Duration = Duration::from_millis(500);

#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: String,
    pub took: Duration,
}

pub(crate) struct Prober {
    client: reqwest::Client,
    base: String,
}

impl Prober {
    pub(crate) fn new(base: &str) -> Prober {
        Prober {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            base: base.to_owned(),
        }
    }

    pub(crate) async fn get(&self, path: &str) -> Answer {
        let started = Instant::now();
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: no answer: {e}"));
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        Answer {
            status,
            body,
            took: started.elapsed(),
        }
    }

    /// Probes `/readyz` (and `/livez`, which must answer 200 each time) every period
    /// until `done` holds for a `/readyz` answer; how long from `since` that took, and the
    /// slowest `/readyz` answer on the way.
    pub(crate) async fn until(
        &self,
        since: Instant,
        limit: Duration,
        what: &str,
        done: impl Fn(&Answer) -> bool,
    ) -> (Duration, Duration) {
        let mut slowest = Duration::ZERO;
        loop {
            let tick = Instant::now();
            let livez = self.get("/livez").await;
            assert_eq!(livez.status, 200, "/livez while {what}: {}", livez.body);
            let readyz = self.get("/readyz").await;
            slowest = slowest.max(readyz.took);
            if done(&readyz) {
                return (since.elapsed(), slowest);
            }
            assert!(
                since.elapsed() < limit,
                "{what}: not within {limit:?}; last /readyz {}:\n{}",
                readyz.status,
                readyz.body
            );
            tokio::time::sleep(PERIOD.saturating_sub(tick.elapsed())).await;
        }
    }

    /// `karpor_health_check_runs_total` by check.
    pub(crate) async fn check_runs(&self) -> BTreeMap<String, u64> {
        let metrics = self.get("/metrics").await.body;
        let mut runs = BTreeMap::new();
        for line in metrics.lines() {
            let Some(rest) = line.strip_prefix("karpor_health_check_runs_total{check=\"") else {
                continue;
            };
            let Some((check, value)) = rest.split_once("\"} ") else {
                continue;
            };
            runs.insert(check.to_owned(), value.trim().parse().unwrap_or(0));
        }
        runs
    }
}

/// What a storm got back.
#[derive(Debug, Default)]
pub(crate) struct Storm {
    pub statuses: BTreeMap<u16, usize>,
    pub errors: Vec<String>,
    pub elapsed: Duration,
    /// The failing lines of one 503 answer.
    pub failing: Option<String>,
}

impl Storm {
    pub(crate) fn summary(&self) -> String {
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(status, n)| format!("{n} × {status}"))
            .collect();
        let mut summary = format!(
            "{} in {:.1} s",
            statuses.join(", "),
            self.elapsed.as_secs_f64()
        );
        // A mixed answer says why some probes failed.
        if let (true, Some(failing)) = (self.statuses.contains_key(&200), &self.failing) {
            summary.push_str(&format!(" (a 503 said `{failing}`)"));
        }
        summary
    }

    /// No error, and no status but 200 and 503.
    pub(crate) fn assert_clean(&self, during: &str) {
        let first: Vec<&String> = self.errors.iter().take(5).collect();
        assert!(
            self.errors.is_empty(),
            "storm during {during}: {} errors, first {first:?}",
            self.errors.len()
        );
        assert!(
            self.statuses.keys().all(|s| *s == 200 || *s == 503),
            "storm during {during}: {:?}",
            self.statuses
        );
    }

    pub(crate) fn describe(&self) -> String {
        format!("{} (a 503 said: {:?})", self.summary(), self.failing)
    }
}

/// `n` connections opened first, then `/readyz` sent on all of them at once.
pub(crate) async fn storm(addr: SocketAddr, n: usize) -> Storm {
    let barrier = Arc::new(Barrier::new(n));
    let mut tasks = JoinSet::new();
    let started = Instant::now();
    for _ in 0..n {
        let barrier = barrier.clone();
        tasks.spawn(async move {
            let connected =
                tokio::time::timeout(Duration::from_secs(30), TcpStream::connect(addr)).await;
            // Everyone waits, connected or not, or the barrier would never open.
            barrier.wait().await;
            let mut stream = match connected {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return Err(format!("connect: {e}")),
                Err(_) => return Err("connect: no answer within 30 s".to_owned()),
            };
            let exchange = async {
                stream
                    .write_all(b"GET /readyz HTTP/1.1\r\nHost: karpor\r\nConnection: close\r\n\r\n")
                    .await?;
                let mut received = Vec::new();
                stream.read_to_end(&mut received).await?;
                Ok::<_, std::io::Error>(received)
            };
            let received = match tokio::time::timeout(Duration::from_secs(30), exchange).await {
                Ok(Ok(received)) => received,
                Ok(Err(e)) => return Err(format!("exchange: {e}")),
                Err(_) => return Err("no answer within 30 s".to_owned()),
            };
            let text = String::from_utf8_lossy(&received).into_owned();
            let status = text
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse::<u16>().ok())
                .ok_or_else(|| format!("not an HTTP answer: {:?}", &text[..text.len().min(40)]))?;
            let failing: Vec<&str> = text.lines().filter(|l| l.starts_with("[-]")).collect();
            Ok((status, failing.join("; ")))
        });
    }
    let mut storm = Storm::default();
    while let Some(joined) = tasks.join_next().await {
        match joined.expect("a storm task panicked") {
            Ok((status, failing)) => {
                *storm.statuses.entry(status).or_default() += 1;
                if status == 503 && storm.failing.is_none() {
                    storm.failing = Some(failing);
                }
            }
            Err(e) => storm.errors.push(e),
        }
    }
    storm.elapsed = started.elapsed();
    storm
}
