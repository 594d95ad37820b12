//! Transitive readiness between real karpor processes, and `karpor health`.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use karpor_testkit::process::{get, wait_for, Spawn};
use karpor_testkit::services::free_port;

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn upstream(name: &str, port: u16) -> String {
    format!(
        "readiness: {{upstreams: [{{name: {name}, url: 'http://127.0.0.1:{port}/readyz'}}]}}\n\
         shutdown: {{drain_delay: 100ms}}\n"
    )
}

#[tokio::test]
async fn two_processes_that_list_each_other_do_not_loop() {
    let (a, b) = (free_port(), free_port());
    let first = Spawn::serve(&upstream("Peer", b)).on(local(a)).start();
    let second = Spawn::serve(&upstream("Peer", a)).on(local(b)).start();
    // Each ready on its own first (its syncer's first look at the clusters takes a
    // moment after it listens), asked without the Peer check so none runs yet.
    for karpor in [&first, &second] {
        let url = karpor.url("/readyz?exclude=Peer");
        wait_for(Duration::from_secs(30), "ready on its own", || {
            let url = url.clone();
            async move { get(&url).await.0 == 200 }
        })
        .await;
    }
    for karpor in [&first, &second] {
        let started = Instant::now();
        let (status, body) = get(&karpor.url("/readyz")).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("[+] Peer ok\n"), "{body}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    // The peer answered from its local checks only: it ran no upstream check of its own
    // for the hop request, so each Peer check ran only for the direct probes above.
    let (_, metrics) = get(&second.url("/metrics")).await;
    assert!(
        metrics.contains("karpor_health_check_runs_total{check=\"Peer\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_server_follows_the_syncer_only_when_it_is_an_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let probe = free_port();
    let mut syncer = Some(
        Spawn::syncer("shutdown: {drain_delay: 100ms}\n")
            .in_dir(dir.path())
            .on(local(probe))
            .start(),
    );
    let with = format!(
        "server: {{syncer: false}}\n{}",
        upstream("Syncer-remote", probe)
    );
    let server = Spawn::serve(&with).in_dir(dir.path()).start();
    let without = Spawn::serve("server: {syncer: false}\nshutdown: {drain_delay: 100ms}\n")
        .in_dir(dir.path())
        .start();
    assert_eq!(
        get(&server.url("/readyz")).await,
        (
            200,
            // Its own `Syncer` line says whether a live syncer holds every cluster.
            "[+] Ping ok\n[+] Server ok\n[+] Syncer ok\n[+] Storage ok\n[+] Syncer-remote ok\n\
             health check passed\n"
                .to_owned()
        )
    );

    drop(syncer.take());
    wait_for(Duration::from_secs(3), "server not ready", || async {
        get(&server.url("/readyz")).await.0 == 503
    })
    .await;
    let (_, body) = get(&server.url("/readyz")).await;
    assert!(
        body.contains("[-] Syncer-remote failed: unreachable\n"),
        "{body}"
    );
    assert_eq!(
        get(&without.url("/readyz")).await.0,
        200,
        "no upstream, still ready"
    );

    syncer = Some(
        Spawn::syncer("")
            .in_dir(dir.path())
            .on(local(probe))
            .start(),
    );
    wait_for(Duration::from_secs(5), "server ready again", || async {
        get(&server.url("/readyz")).await.0 == 200
    })
    .await;
    drop(syncer);
}

/// `karpor health ARGS`: (exit code, stdout).
fn health(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_karpor"))
        .arg("health")
        .args(args)
        .env_remove("KARPOR_URL")
        .env_remove("KARPOR_ADMIN_TOKEN")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[tokio::test]
async fn karpor_health_exits_0_ready_1_not_ready_2_unreachable() {
    let ready = Spawn::serve("shutdown: {drain_delay: 100ms}\n").start();
    let base = ready.url("");
    let (code, out) = health(&["--url", &base]);
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("health check passed\n"), "{out}");
    assert_eq!(health(&["--url", &base, "--livez"]).0, 0);
    let (code, out) = health(&["--url", &base, "--json"]);
    assert_eq!(code, 0);
    assert!(out.starts_with('{'), "{out}");
    assert_eq!(
        health(&["--url", &base, "--check", "storage"]),
        (0, "[+] Storage ok\nhealth check passed\n".to_owned())
    );

    // Not ready: an upstream on a closed port.
    let not_ready = Spawn::serve(&upstream("Gone", free_port())).start();
    let (code, out) = health(&["--url", &not_ready.url("")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[-] Gone failed: unreachable"), "{out}");

    let closed = format!("http://127.0.0.1:{}", free_port());
    assert_eq!(health(&["--url", &closed]).0, 2);
}
