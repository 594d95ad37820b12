//! Nothing blocks the runtime and every input is bounded: hostile YAML is refused while it
//! is parsed, `/livez` answers within 100 ms while slow plugins, pathological kubeconfigs,
//! oversized bodies and a slowloris swarm are in flight, and SIGTERM still stops the
//! process within drain + grace.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{cluster_body, kubeconfig_with_user, script};
use karpor_testkit::api::Client;
use karpor_testkit::process::Spawn;

const LIVEZ_BOUND: Duration = Duration::from_millis(100);
const TWO_MIB: usize = 2 * 1024 * 1024;

/// Kubeconfig-sized texts built to be expensive: deep flow and block nesting, an alias
/// bomb, and a very wide mapping.
fn hostile_yaml() -> Vec<(&'static str, String, &'static str)> {
    let half = TWO_MIB / 2 - 16;
    let flow = format!("clusters: {}{}", "[".repeat(half), "]".repeat(half));
    let mut block = String::from("clusters:\n");
    let mut depth = 0;
    while block.len() < TWO_MIB - 4096 {
        block.push_str(&" ".repeat(depth));
        block.push_str("- a:\n");
        depth = (depth + 2) % 4000;
    }
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        bomb.push_str(&format!(
            "{}: &{} [",
            (b'a' + i) as char,
            (b'a' + i) as char
        ));
        bomb.push_str(&vec![format!("*{}", (b'a' + i - 1) as char); 10].join(", "));
        bomb.push_str("]\n");
    }
    let mut wide = String::from("preferences: {}\nclusters: []\nextensions:\n");
    let mut i = 0;
    while wide.len() < TWO_MIB - 64 {
        wide.push_str(&format!(
            "- {{name: e{i}, extension: [1, 2, 3, 4, 5, 6, 7, 8]}}\n"
        ));
        i += 1;
    }
    vec![
        ("flow nesting", flow, "nested deeper than"),
        ("block nesting", block, "nested deeper than"),
        ("alias bomb", bomb, "anchors and aliases are not accepted"),
        ("wide", wide, "nodes"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_yaml_is_refused_while_it_is_parsed() {
    let karpor = Spawn::serve("server: {syncer: false}\nshutdown: {drain_delay: 1s}\n").start();
    let api = Client::with_token(&karpor, &karpor.local_token());
    for (name, text, expected) in hostile_yaml() {
        assert!(text.len() <= TWO_MIB, "{name}: {}", text.len());
        let started = Instant::now();
        let (code, answer) = api
            .call(
                "POST",
                "/rest-api/v1/cluster/config/validate",
                Some(json!({"kubeConfig": text})),
            )
            .await;
        assert_eq!(code, 400, "{name}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(expected), "{name}: {message}");
        eprintln!("{name}: refused in {:?}", started.elapsed());
    }
}

/// A connection that sends a request head one byte at a time, slowly.
fn slowloris(addr: SocketAddr) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .write_all(b"GET /rest-api/v1/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .ok()?;
    Some(stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn livez_answers_within_100ms_while_hostile_requests_run_and_sigterm_still_stops() {
    assert!(rlimit::increase_nofile_limit(u64::MAX).unwrap() > 5_000);
    let dir = tempfile::tempdir().unwrap();
    let slow = script(dir.path(), "slow", "sleep 60");
    let config = format!(
        "server: {{syncer: false, connections: {{header_read_timeout: 20s}}}}\n\
         shutdown: {{drain_delay: 1s, grace_period: 500ms}}\n\
         kubernetes: {{exec: {{allowed_commands: [{}], timeout: 20s}}}}\n",
        slow.display()
    );
    let mut karpor = Spawn::serve(&config).start();
    let addr = karpor.addr;
    let token = karpor.local_token();
    let stop = Arc::new(AtomicBool::new(false));
    let mut hostile = Vec::new();
    // Pathological kubeconfigs, over and over.
    for (_, text, _) in hostile_yaml() {
        for _ in 0..2 {
            let (stop, token, url) = (stop.clone(), token.clone(), karpor.url(""));
            let text = text.clone();
            hostile.push(tokio::spawn(async move {
                let http = reqwest::Client::new();
                while !stop.load(Ordering::Relaxed) {
                    let _ = http
                        .post(format!("{url}/rest-api/v1/cluster/config/validate"))
                        .bearer_auth(&token)
                        .json(&json!({"kubeConfig": text}))
                        .send()
                        .await;
                }
            }));
        }
    }
    // Plugins that never finish, a body far above the limit, a slowloris swarm.
    let mut plugin_user = kubeconfig_with_user(&format!(
        "    exec: {{apiVersion: client.authentication.k8s.io/v1, command: {}}}",
        slow.display()
    ));
    plugin_user.push('\n');
    for _ in 0..8 {
        let (token, url, body) = (token.clone(), karpor.url(""), cluster_body(&plugin_user));
        hostile.push(tokio::spawn(async move {
            let _ = reqwest::Client::new()
                .post(format!("{url}/rest-api/v1/cluster/config/validate"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await;
        }));
    }
    for _ in 0..4 {
        let (token, url) = (token.clone(), karpor.url(""));
        hostile.push(tokio::spawn(async move {
            let _ = reqwest::Client::new()
                .post(format!("{url}/rest-api/v1/cluster/huge"))
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body(vec![b' '; 16 * 1024 * 1024])
                .send()
                .await;
        }));
    }
    let swarm: Vec<TcpStream> = (0..500).filter_map(|_| slowloris(addr)).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let probes = tokio::task::spawn_blocking(move || {
        (0..40)
            .map(|_| {
                let took = crate::probe_livez(addr);
                std::thread::sleep(Duration::from_millis(50));
                took
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let slowest = probes.iter().max().unwrap();
    eprintln!(
        "/livez under hostile load: slowest {slowest:?} of {} probes",
        probes.len()
    );
    assert!(*slowest < LIVEZ_BOUND, "{probes:?}");

    // SIGTERM with all of it still in flight.
    let signalled = Instant::now();
    karpor.signal("TERM");
    let status = karpor
        .wait_exit(Duration::from_secs(4))
        .expect("exits within drain (1 s) + grace (0.5 s) + slack");
    assert!(status.success(), "{status:?}");
    eprintln!("exit {:?} after SIGTERM", signalled.elapsed());
    stop.store(true, Ordering::Relaxed);
    drop(swarm);
    for task in hostile {
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_swarm_is_cut_off_and_livez_keeps_answering() {
    assert!(rlimit::increase_nofile_limit(u64::MAX).unwrap() > 5_000);
    let karpor = Spawn::serve(
        "server: {syncer: false, connections: {header_read_timeout: 2s}}\nshutdown: {drain_delay: 1s}\n",
    )
    .start();
    let addr = karpor.addr;
    let swarm: Vec<TcpStream> = (0..2_000).filter_map(|_| slowloris(addr)).collect();
    assert!(swarm.len() > 1_900, "{} connections opened", swarm.len());
    let opened = Instant::now();
    // Each sends a byte of a header now and then; none finishes its head.
    let swarm = tokio::task::spawn_blocking(move || {
        let mut swarm = swarm;
        let mut slowest = Duration::ZERO;
        for round in 0..6 {
            for stream in &mut swarm {
                let _ = stream.write_all(b"X");
            }
            // Between two trickles, as a slowloris sends: its bytes are sparse.
            std::thread::sleep(Duration::from_millis(200));
            slowest = slowest.max(crate::probe_livez(addr));
            std::thread::sleep(Duration::from_millis(if round < 5 { 200 } else { 2_000 }));
        }
        (swarm, slowest)
    });
    let (swarm, slowest) = swarm.await.unwrap();
    eprintln!("/livez beside 2,000 slow connections: slowest {slowest:?}");
    assert!(slowest < LIVEZ_BOUND);
    // Past the header-read timeout, the server has closed them.
    let closed = swarm
        .iter()
        .filter(|stream| closed_by_server(stream))
        .count();
    eprintln!(
        "{closed} of 2,000 closed {:?} after opening",
        opened.elapsed()
    );
    assert!(
        closed >= 1_900,
        "{closed} of 2,000 slow connections were cut off"
    );
    let (code, _) = karpor_testkit::process::get(&karpor.url("/livez")).await;
    assert_eq!(code, 200);
}

/// Whether the peer closed `stream` (or answered and closed): a read does not block.
fn closed_by_server(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut buffer = [0u8; 512];
    let mut stream = stream;
    match stream.read(&mut buffer) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Ok(_) | Err(_) => true,
    }
}
