//! Load benchmark of the health endpoints on loopback (`cargo bench --bench health_http`).
//!
//! One run, one process: the real router (request ids, tracing, health routes, metrics)
//! with the real checks of the embedded default, plus a bare handler returning `OK`
//! behind the same layers. A load generator on its own runtime drives each path over 64
//! keep-alive connections and reports requests per second and latency percentiles, so the
//! health endpoints are compared with the bare handler as ratios within the same run.
//! Then `/readyz` uncached, with one check that sleeps 50 ms and three fast ones.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use karpor_health::{
    CheckOutcome, HealthChecker, HealthMetrics, HealthReporter, Heartbeat, Membership, Ping,
    Settings,
};
use karpor_server::{AllowedHosts, ConnectionLimits, HttpMetrics, RouterParts};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

const CONNECTIONS: usize = 64;
const WARMUP: Duration = Duration::from_secs(1);
/// Each path runs this long per round; rounds interleave the paths so that drift in the
/// machine's speed hits them all alike.
const MEASURE: Duration = Duration::from_secs(3);
const ROUNDS: usize = 3;

struct Load {
    latencies: Vec<Duration>,
    elapsed: Duration,
    errors: usize,
}

/// Drives `GET path` over `CONNECTIONS` keep-alive connections for `duration`.
async fn load(addr: SocketAddr, path: &'static str, duration: Duration) -> Load {
    let started = Instant::now();
    let until = started + duration;
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .unwrap();
                tokio::spawn(conn);
                let (mut latencies, mut errors) = (Vec::new(), 0);
                while Instant::now() < until {
                    let request = hyper::Request::get(path)
                        .header("host", "127.0.0.1")
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    let sent = Instant::now();
                    match sender.send_request(request).await {
                        Ok(response) => {
                            let ok = response.status() == 200;
                            let _ = response.into_body().collect().await;
                            latencies.push(sent.elapsed());
                            errors += usize::from(!ok);
                        }
                        Err(_) => errors += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let (mut all, mut errors) = (Vec::new(), 0);
    for worker in workers {
        let (latencies, e) = worker.await.unwrap();
        all.extend(latencies);
        errors += e;
    }
    Load {
        latencies: all,
        elapsed: started.elapsed(),
        errors,
    }
}

struct Sleepy(&'static str, Duration);

#[async_trait]
impl HealthReporter for Sleepy {
    fn name(&self) -> &str {
        self.0
    }

    async fn check(&self) -> CheckOutcome {
        tokio::time::sleep(self.1).await;
        CheckOutcome::Pass
    }
}

/// The server side, on its own runtime, as `karpor serve` builds it.
fn start_server(stop: CancellationToken) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let dir = tempfile::tempdir().unwrap();
            let mut registry = Registry::default();
            let health = HealthChecker::new(Settings::default(), HealthMetrics::new(&mut registry));
            let metastore = karpor_metastore::connect(&karpor_metastore::MetastoreConfig::Sqlite {
                path: dir.path().join("m.db"),
                encryption_key_file: None,
            })
            .await
            .unwrap();
            let storage = karpor_storage::connect(&karpor_storage::StorageConfig::Sqlite {
                path: dir.path().join("r.db"),
            })
            .await
            .unwrap();
            let mut syncer = karpor_syncer::Syncer::new(karpor_syncer::SyncerParts {
                audit: Default::default(),
                member: "bench-health".to_owned(),
                clients: karpor_syncer::client_cache(Default::default()),
                metastore: metastore.clone(),
                storage: storage.clone(),
                health: health.clone(),
                metrics: karpor_syncer::metrics(&mut registry),
                settings: Default::default(),
            });
            syncer.start(stop.clone());
            health.register(Arc::new(Ping), Membership::BOTH, None);
            let beat = Heartbeat::start(
                Duration::from_millis(200),
                Duration::from_secs(3),
                stop.clone(),
            );
            health.register(Arc::new(beat), Membership::LIVEZ, None);
            health.register(
                Arc::new(karpor_metastore::MetastoreCheck::new(
                    metastore.backend().clone(),
                )),
                Membership::READYZ,
                None,
            );
            health.register(Arc::new(syncer.check()), Membership::READYZ, None);
            health.register(
                Arc::new(karpor_storage::StorageCheck::new(storage)),
                Membership::READYZ,
                None,
            );

            // A second checker for the uncached run: one 50 ms check, three fast ones.
            let mut unused = Registry::default();
            let slow = HealthChecker::new(
                Settings {
                    cache_ttl: Duration::ZERO,
                    ..Settings::default()
                },
                HealthMetrics::new(&mut unused),
            );
            slow.register(
                Arc::new(Sleepy("Slow", Duration::from_millis(50))),
                Membership::READYZ,
                None,
            );
            for name in ["FastA", "FastB", "FastC"] {
                slow.register(
                    Arc::new(Sleepy(name, Duration::ZERO)),
                    Membership::READYZ,
                    None,
                );
            }
            let routes = Router::new()
                .route("/bare", get(|| async { "OK" }))
                .nest("/slow", karpor_health::routes(slow, None, None));
            let http = HttpMetrics::new(&mut registry);
            let router = karpor_server::router(RouterParts {
                health,
                admin_token: None,
                check_lines: None,
                http,
                metrics: Arc::new(registry),
                with_ui: true,
                dashboard: None,
                routes,
                endpoints: Vec::new(),
                hosts: AllowedHosts::new(addr, &[]),
                request_timeout: Duration::from_secs(30),
            });
            let limits = ConnectionLimits::default();
            karpor_server::serve(
                listener,
                router,
                None,
                limits,
                stop,
                Duration::from_millis(200),
            )
            .await
            .unwrap();
        });
    });
    addr
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters nothing here.
    let stop = CancellationToken::new();
    let addr = start_server(stop.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let paths = ["/bare", "/livez", "/readyz"];
        for path in paths {
            load(addr, path, WARMUP).await;
        }
        let mut totals: Vec<Load> = paths
            .iter()
            .map(|_| Load {
                latencies: Vec::new(),
                elapsed: Duration::ZERO,
                errors: 0,
            })
            .collect();
        for _ in 0..ROUNDS {
            for (path, total) in paths.iter().zip(&mut totals) {
                let run = load(addr, path, MEASURE).await;
                total.latencies.extend(run.latencies);
                total.elapsed += run.elapsed;
                total.errors += run.errors;
            }
        }
        let rps = |l: &Load| l.latencies.len() as f64 / l.elapsed.as_secs_f64();
        let bare = rps(&totals[0]);
        println!("{CONNECTIONS} connections, {ROUNDS} interleaved rounds of {MEASURE:?} per path");
        println!();
        println!("| path | requests | req/s | vs bare | p50 | p99 | errors |");
        println!("|---|---|---|---|---|---|---|");
        for (path, total) in paths.iter().zip(&mut totals) {
            total.latencies.sort_unstable();
            let n = total.latencies.len();
            let at = |q: f64| total.latencies[((n as f64 * q) as usize).min(n - 1)];
            println!(
                "| `{path}` | {n} | {:.0} | {:.2} | {:.2} ms | {:.2} ms | {} |",
                rps(total),
                rps(total) / bare,
                at(0.50).as_secs_f64() * 1e3,
                at(0.99).as_secs_f64() * 1e3,
                total.errors
            );
        }

        // Uncached /readyz with one 50 ms check: sequential probes on one connection.
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Empty<Bytes>>();
        let uri: hyper::Uri = format!("http://{addr}/slow/readyz").parse().unwrap();
        let mut latencies = Vec::new();
        for _ in 0..100 {
            let sent = Instant::now();
            let response = client.get(uri.clone()).await.unwrap();
            assert_eq!(response.status(), 200);
            let _ = response.into_body().collect().await;
            latencies.push(sent.elapsed());
        }
        latencies.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!();
        println!(
            "uncached /readyz, checks of 50 ms + 3 × 0 ms, 100 sequential probes: \
             p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (p50 vs 50 ms: {:+.1}%)",
            ms(latencies[50]),
            ms(latencies[98]),
            ms(latencies[99]),
            (ms(latencies[50]) / 50.0 - 1.0) * 100.0
        );
    });
    stop.cancel();
}
