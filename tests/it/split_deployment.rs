//! The split deployment as the Helm chart runs it: `karpor serve` with
//! `server.syncer: false` and `karpor syncer` as two processes sharing one etcd (the
//! metadata store) and one Elasticsearch-API server (the resource storage). Both become
//! ready; a server whose readiness lists the syncer as an upstream follows it down and
//! back up; a server without that upstream stays ready throughout.

use std::net::SocketAddr;
use std::time::Duration;

use karpor_testkit::process::{get, wait_for, Karpor, Spawn};
use karpor_testkit::services::{free_port, Elastic, Etcd};

const SYNCER_READY: &str =
    "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\nhealth check passed\n";
/// A server without its own syncer has a `Syncer` check too (not critical): whether a
/// live syncer holds every registered cluster.
const SERVER_WITH_UPSTREAM_READY: &str =
    "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\n\
    [+] Syncer-remote ok\nhealth check passed\n";
const SERVER_READY: &str =
    "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\nhealth check passed\n";

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// What the chart renders for both roles (`server.yaml` and `syncer.yaml`), pointed at
/// the private services: the same etcd prefix and the same index, the syncer apart.
fn shared(etcd: &str, es: &str, prefix: &str, index: &str) -> String {
    format!(
        "server: {{syncer: false}}\n\
         metadata: {{backend: etcd, etcd: {{endpoints: ['{etcd}'], prefix: '{prefix}'}}}}\n\
         storage: {{backend: elasticsearch, url: '{es}', index: '{index}', refresh: 'true'}}\n\
         shutdown: {{drain_delay: 3s, grace_period: 500ms}}\n"
    )
}

/// The server's config with `readiness.includeSyncer: true`: the syncer's probe port.
fn with_syncer_upstream(shared: &str, probe: u16) -> String {
    format!(
        "{shared}readiness: {{upstreams: [{{name: Syncer-remote, \
         url: 'http://127.0.0.1:{probe}/readyz', must_ready: true}}]}}\n"
    )
}

/// Waits until `/readyz` of `karpor` answers `status` with `body`.
async fn until_readyz(karpor: &Karpor, status: u16, body: &str, limit: Duration, what: &str) {
    let url = karpor.url("/readyz");
    wait_for(limit, what, || async {
        let (s, b) = get(&url).await;
        s == status && b == body
    })
    .await;
}

#[tokio::test]
async fn server_and_syncer_as_two_processes_and_the_server_follows_the_syncer_only_as_an_upstream()
{
    let (Some(etcd), Some(es)) = (Etcd::start(), Elastic::start()) else {
        return;
    };
    let run = karpor_testkit::unique("split");
    let shared = shared(&etcd.url(), &es.url(), &format!("/{run}"), &run);
    let probe = free_port();

    let syncer_config = shared.clone();
    let mut syncer = Some(Spawn::syncer(&syncer_config).on(local(probe)).start());
    let server = Spawn::serve(&with_syncer_upstream(&shared, probe)).start();
    let alone = Spawn::serve(&shared).start();

    // All three become ready on the shared stores: the syncer with its own Syncer check,
    // the servers without one (theirs is the remote syncer, when listed).
    let ready = Duration::from_secs(15);
    until_readyz(
        syncer.as_ref().unwrap(),
        200,
        SYNCER_READY,
        ready,
        "syncer ready",
    )
    .await;
    until_readyz(
        &server,
        200,
        SERVER_WITH_UPSTREAM_READY,
        ready,
        "server ready",
    )
    .await;
    until_readyz(
        &alone,
        200,
        SERVER_READY,
        ready,
        "server without upstream ready",
    )
    .await;
    for karpor in [syncer.as_ref().unwrap(), &server, &alone] {
        assert_eq!(get(&karpor.url("/livez")).await, (200, "OK\n".to_owned()));
    }

    // The syncer dies (SIGKILL, as an OOM kill): only the server that lists it follows.
    drop(syncer.take());
    wait_for(Duration::from_secs(5), "server not ready", || async {
        get(&server.url("/readyz")).await.0 == 503
    })
    .await;
    let (_, body) = get(&server.url("/readyz")).await;
    assert_eq!(
        body,
        "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\n\
         [-] Syncer-remote failed: unreachable\nhealth check failed\n"
    );
    assert_eq!(
        get(&server.url("/livez")).await,
        (200, "OK\n".to_owned()),
        "liveness never follows another process"
    );
    for _ in 0..5 {
        assert_eq!(
            get(&alone.url("/readyz")).await,
            (200, SERVER_READY.to_owned()),
            "no upstream: still ready"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Restarted on the same probe port (the Service's target), the server is ready again.
    syncer = Some(Spawn::syncer(&syncer_config).on(local(probe)).start());
    until_readyz(
        &server,
        200,
        SERVER_WITH_UPSTREAM_READY,
        Duration::from_secs(10),
        "server ready again",
    )
    .await;

    // A graceful stop (SIGTERM, as the kubelet sends after preStop): while the syncer
    // drains, the server reports the syncer's own reason; once it is gone, unreachable.
    syncer.as_ref().unwrap().signal("TERM");
    wait_for(
        Duration::from_secs(3),
        "server sees the syncer draining",
        || async {
            let (status, body) = get(&server.url("/readyz")).await;
            status == 503 && body.contains("[-] Syncer-remote failed: shutting down\n")
        },
    )
    .await;
    wait_for(
        Duration::from_secs(10),
        "server sees the syncer gone",
        || async {
            let (status, body) = get(&server.url("/readyz")).await;
            status == 503 && body.contains("[-] Syncer-remote failed: unreachable\n")
        },
    )
    .await;
    assert_eq!(
        get(&alone.url("/readyz")).await,
        (200, SERVER_READY.to_owned())
    );
    drop(syncer);
}
