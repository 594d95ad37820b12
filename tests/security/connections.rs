//! Connections cannot be hoarded: an HTTP/2 connection with no request in flight is closed
//! after `idle_timeout` whatever pings it answers or sends, and when the connection limit
//! is reached the connection idle longest makes room, so `/livez` answers within 100 ms
//! while 10,000 idle connections, half HTTP/1.1 and half HTTP/2, are held.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::probe_livez;
use karpor_testkit::process::{wait_for, Spawn};

const LIVEZ_BOUND: Duration = Duration::from_millis(100);
/// The server's grace for an HTTP/1.1 connection that has just answered (its client may be
/// sending the next request): it is not closed to make room until this has passed.
const HTTP1_REUSE_GRACE: Duration = Duration::from_secs(1);

/// How the idle HTTP/2 connections of a test ended.
#[derive(Default)]
struct Ended {
    /// The server closed them with a GOAWAY.
    graceful: AtomicUsize,
    /// Reset, or closed without one.
    abrupt: AtomicUsize,
}

impl Ended {
    fn count(&self) -> usize {
        self.graceful.load(Ordering::Relaxed) + self.abrupt.load(Ordering::Relaxed)
    }
}

/// An HTTP/2 connection (prior knowledge, h2c) that completes its handshake, answers the
/// server's pings, sends its own every `ping_every` if given, and never sends a request.
/// It lives in a task until the server ends it; `ended` counts that.
async fn idle_h2(addr: SocketAddr, ping_every: Option<Duration>, ended: Arc<Ended>) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, mut connection) = h2::client::handshake(stream).await.unwrap();
    // The handshake returns before the server's SETTINGS arrive; the first ping's answer
    // says the server has accepted and is serving this connection.
    let mut pings = connection.ping_pong().expect("the first ping_pong");
    let served = tokio::select! {
        pong = pings.ping(h2::Ping::opaque()) => pong.is_ok(),
        _ = &mut connection => false,
    };
    assert!(served, "the server served no HTTP/2 connection");
    tokio::spawn(async move {
        // Dropping the last SendRequest would close the connection from our side.
        let _send: h2::client::SendRequest<Bytes> = send;
        let pinging = async {
            let Some(every) = ping_every else {
                return std::future::pending().await;
            };
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                if pings.ping(h2::Ping::opaque()).await.is_err() {
                    return;
                }
            }
        };
        let graceful = tokio::select! {
            closed = &mut connection => closed.is_ok(),
            _ = pinging => false,
        };
        let counter = if graceful {
            &ended.graceful
        } else {
            &ended.abrupt
        };
        counter.fetch_add(1, Ordering::Relaxed);
    });
}

/// `n` idle HTTP/2 connections, at most 500 opening at once (the listen backlog is 4,096).
async fn idle_h2_swarm(addr: SocketAddr, n: usize, ping_every: Option<Duration>) -> Arc<Ended> {
    let ended = Arc::new(Ended::default());
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let opening: Vec<_> = chunk
            .iter()
            .map(|_| tokio::spawn(idle_h2(addr, ping_every, ended.clone())))
            .collect();
        for opened in opening {
            opened.await.unwrap();
        }
    }
    ended
}

/// An HTTP/1.1 connection that got one answer and is now idle in keep-alive.
async fn kept_alive(addr: SocketAddr) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    while !complete(&answer) {
        let n = stream.read(&mut buffer).await.unwrap();
        assert!(n > 0, "closed before answering");
        answer.extend_from_slice(&buffer[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    stream
}

/// Whether `answer` holds a whole response: its head and `Content-Length` bytes of body.
fn complete(answer: &[u8]) -> bool {
    let text = String::from_utf8_lossy(answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}

/// `n` HTTP/1.1 connections kept alive after one request each, 500 at a time.
async fn kept_alive_swarm(addr: SocketAddr, n: usize) -> Vec<tokio::net::TcpStream> {
    let mut streams = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let opening: Vec<_> = chunk
            .iter()
            .map(|_| tokio::spawn(kept_alive(addr)))
            .collect();
        for opened in opening {
            streams.push(opened.await.unwrap());
        }
    }
    streams
}

/// `rounds` probes of `/livez`, each after one more connection that sends nothing, so the
/// limit stays full and every probe needs a connection closed to make room.
async fn probes_at_the_limit(addr: SocketAddr, rounds: usize) -> Vec<Duration> {
    tokio::task::spawn_blocking(move || {
        let mut fillers = Vec::new();
        let mut took = Vec::new();
        for _ in 0..rounds {
            fillers.push(TcpStream::connect(addr).unwrap());
            took.push(probe_livez(addr));
        }
        took
    })
    .await
    .unwrap()
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livez_answers_within_100ms_while_10_000_idle_connections_are_held() {
    assert!(rlimit::increase_nofile_limit(u64::MAX).unwrap() >= 10_500);
    // The default limit (10,000 connections). Opening them all takes seconds here: a long
    // header-read timeout keeps the HTTP/1.1 ones (which it bounds) open meanwhile.
    let karpor = Spawn::serve(
        "server: {syncer: false, connections: {header_read_timeout: 60s}}\n\
         shutdown: {drain_delay: 1s}\n",
    )
    .start();
    let addr = karpor.addr;
    let opening = Instant::now();
    // HTTP/1.1 that never sends a request, HTTP/1.1 kept alive after one, then HTTP/2:
    // the server accepts in order, so the last HTTP/2 handshake answered says it serves
    // all 10,000 (and the first probe waits behind none).
    let silent: Vec<TcpStream> = (0..2_500)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let h1 = kept_alive_swarm(addr, 2_500).await;
    let h1_answered = Instant::now();
    let h2 = idle_h2_swarm(addr, 5_000, None).await;
    eprintln!("10,000 idle connections opened in {:?}", opening.elapsed());
    assert_eq!(h2.count(), 0, "an HTTP/2 connection was closed early");
    // On a fast machine all of them open within the server's reuse grace, and then only
    // HTTP/2 connections may be closed: the HTTP/1.1 ones must first be idle past it.
    tokio::time::sleep_until((h1_answered + HTTP1_REUSE_GRACE * 2).into()).await;

    let probes = probes_at_the_limit(addr, 40).await;
    let slowest = *probes.iter().max().unwrap();
    eprintln!(
        "/livez beside 10,000 idle connections: median {:?}, slowest {slowest:?} of {} probes",
        median(&probes),
        probes.len()
    );
    assert!(slowest < LIVEZ_BOUND, "{probes:?}");
    // Room was made from the connections idle longest, the HTTP/1.1 ones opened first.
    assert_eq!(h2.count(), 0, "{} HTTP/2 connections closed", h2.count());
    drop((h1, silent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_make_room_and_are_closed_after_the_idle_timeout() {
    assert!(rlimit::increase_nofile_limit(u64::MAX).unwrap() >= 1_000);
    let idle_timeout = Duration::from_secs(3);
    let karpor = Spawn::serve(
        "server: {syncer: false, limits: {request_timeout: 2s},\n  \
         connections: {max: 200, idle_timeout: 3s, header_read_timeout: 2s}}\n\
         shutdown: {drain_delay: 1s}\n",
    )
    .start();
    let addr = karpor.addr;
    let opening = Instant::now();
    // Each pings every 500 ms: bytes move both ways, yet no request is ever in flight.
    let h2 = idle_h2_swarm(addr, 200, Some(Duration::from_millis(500))).await;
    let opened = opening.elapsed();
    assert!(opened < idle_timeout, "opening took {opened:?}");

    let probes = probes_at_the_limit(addr, 20).await;
    let slowest = *probes.iter().max().unwrap();
    eprintln!(
        "/livez, the limit (200) full of idle HTTP/2: median {:?}, slowest {slowest:?}",
        median(&probes)
    );
    assert!(slowest < LIVEZ_BOUND, "{probes:?}");

    let all_closed = wait_for(
        idle_timeout + Duration::from_secs(5),
        "idle HTTP/2 closed",
        || {
            let closed = h2.count();
            async move { closed == 200 }
        },
    )
    .await;
    let after = opening.elapsed();
    eprintln!(
        "all 200 idle HTTP/2 connections closed {after:?} after opening began ({} with a GOAWAY)",
        h2.graceful.load(Ordering::Relaxed)
    );
    assert!(
        after >= idle_timeout,
        "closed before the idle timeout ({all_closed:?})"
    );
    let (code, _) = karpor_testkit::process::get(&karpor.url("/livez")).await;
    assert_eq!(code, 200);
}
