//! The etcd backend on a three-member cluster, configured with all three endpoints: under
//! a steady write load, writes resume after the leader is killed and continue while a
//! follower is down; no acknowledged write is lost; the `Server` check fails without a
//! quorum and passes again once it is back. Gaps are measured and printed; the bounds are
//! generous, since they only tell failover from none.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karpor_core::model::{Cluster, Kubeconfig};
use karpor_health::{CheckOutcome, HealthReporter};
use karpor_metastore::{connect, EtcdConfig, Metastore, MetastoreCheck, MetastoreConfig};
use karpor_testkit::services::EtcdCluster;
use karpor_testkit::unique;

/// A failover slower than this is no failover (etcd elects in about a second).
const FAILOVER_BOUND: Duration = Duration::from_secs(15);
/// How long a condition is waited for before the test gives up.
const DEADLINE: Duration = Duration::from_secs(60);

fn cluster(name: &str) -> Cluster {
    Cluster {
        name: name.to_owned(),
        display_name: String::new(),
        description: String::new(),
        labels: Default::default(),
        kubeconfig: Kubeconfig("apiVersion: v1\nkind: Config\n".to_owned()),
        mode: Default::default(),
    }
}

/// A record created about every 100 ms; the acknowledged ones with their times.
struct Load {
    acked: Arc<Mutex<Vec<(String, Instant)>>>,
    failed: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(store: Metastore) -> Load {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (acked, failed, stop) = (acked.clone(), failed.clone(), stop.clone());
            async move {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let next = tokio::time::Instant::now() + Duration::from_millis(100);
                    n += 1;
                    let name = format!("load-{n}");
                    match store.create(cluster(&name)).await {
                        Ok(_) => acked.lock().unwrap().push((name, Instant::now())),
                        // Unacknowledged: it may or may not be there; never counted.
                        Err(e) => failed.lock().unwrap().push(e.to_string()),
                    }
                    tokio::time::sleep_until(next).await;
                }
            }
        });
        Load {
            acked,
            failed,
            stop,
            task,
        }
    }

    fn acked_since(&self, since: Instant) -> Vec<Instant> {
        let acked = self.acked.lock().unwrap();
        acked
            .iter()
            .map(|(_, t)| *t)
            .filter(|t| *t > since)
            .collect()
    }

    /// The time from `since` to the first write acknowledged after it.
    async fn first_ack_after(&self, since: Instant) -> Duration {
        loop {
            if let Some(t) = self.acked_since(since).first() {
                return *t - since;
            }
            assert!(
                since.elapsed() < DEADLINE,
                "no write acknowledged in {DEADLINE:?}; errors: {:?}",
                self.failed
                    .lock()
                    .unwrap()
                    .iter()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_for_acks(&self, since: Instant, count: usize) {
        while self.acked_since(since).len() < count {
            assert!(
                since.elapsed() < DEADLINE,
                "{count} writes not acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(self) -> (Vec<String>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        let acked = self
            .acked
            .lock()
            .unwrap()
            .drain(..)
            .map(|(n, _)| n)
            .collect();
        let failed = self.failed.lock().unwrap().drain(..).collect();
        (acked, failed)
    }
}

/// Waits until the check passes (`true`) or fails ten times in a row; how long until the
/// first of them.
async fn check_becomes(check: &MetastoreCheck, pass: bool) -> Duration {
    let start = Instant::now();
    let mut run: Option<Duration> = None;
    let mut count = 0;
    loop {
        let outcome = check.check().await;
        if matches!(outcome, CheckOutcome::Pass) == pass {
            if let (CheckOutcome::Fail(failure), None) = (&outcome, run) {
                println!("check failing: {failure:?}");
            }
            run.get_or_insert(start.elapsed());
            count += 1;
            if count == 10 {
                return run.unwrap();
            }
        } else {
            (run, count) = (None, 0);
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the Server check is not steadily {} after {DEADLINE:?}",
            if pass { "passing" } else { "failing" }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The check fails every time, `times` in a row.
async fn check_keeps_failing(check: &MetastoreCheck, times: usize) {
    for i in 0..times {
        let outcome = check.check().await;
        assert!(
            matches!(outcome, CheckOutcome::Fail(_)),
            "the Server check passed without a quorum (check {i} after it failed)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// Multi-threaded: starting a member blocks one worker while the load runs on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_survive_a_leader_and_a_follower_kill_and_the_check_follows_quorum() {
    let Some(mut etcd) = tokio::task::block_in_place(EtcdCluster::start) else {
        return;
    };
    let config = MetastoreConfig::Etcd {
        etcd: EtcdConfig {
            endpoints: etcd.urls(),
            prefix: format!("/{}", unique("etcd_cluster")),
            username: None,
            password: None,
            tls: None,
        },
        encryption_key_file: None,
    };
    let store = connect(&config).await.unwrap();
    let check = MetastoreCheck::new(store.backend().clone());
    check_becomes(&check, true).await;
    let started = Instant::now();
    let load = Load::start(store.clone());
    load.wait_for_acks(started, 10).await;

    // The leader: a new one is elected and the client finds it.
    let leader = etcd.leader().await;
    let killed = Instant::now();
    etcd.kill(leader);
    let leader_gap = load.first_ack_after(killed).await;
    println!("leader m{leader} killed: first write acknowledged after {leader_gap:?}");
    load.wait_for_acks(killed, 10).await;
    tokio::task::block_in_place(|| {
        etcd.restart(leader);
        etcd.wait_healthy();
    });

    // A follower: the others still have a quorum.
    let follower = etcd.follower(etcd.leader().await);
    let killed = Instant::now();
    etcd.kill(follower);
    let follower_gap = load.first_ack_after(killed).await;
    println!("follower m{follower} killed: first write acknowledged after {follower_gap:?}");
    load.wait_for_acks(killed, 10).await;
    let steady = check_becomes(&check, true).await;
    println!("follower m{follower} down: check steadily passing after {steady:?}");
    tokio::task::block_in_place(|| {
        etcd.restart(follower);
        etcd.wait_healthy();
    });
    let (acked, failed) = load.stop().await;
    println!(
        "{} writes acknowledged, {} failed; last errors: {:?}",
        acked.len(),
        failed.len(),
        failed.iter().rev().take(3).collect::<Vec<_>>()
    );
    assert!(
        leader_gap < FAILOVER_BOUND,
        "leader failover took {leader_gap:?}"
    );
    assert!(
        follower_gap < FAILOVER_BOUND,
        "a follower's death stopped writes for {follower_gap:?}"
    );

    // No quorum: two of three down.
    let leader = etcd.leader().await;
    let follower = etcd.follower(leader);
    etcd.kill(leader);
    etcd.kill(follower);
    let failing = check_becomes(&check, false).await;
    println!("quorum lost: check failing after {failing:?}");
    check_keeps_failing(&check, 20).await;
    let restarted = Instant::now();
    tokio::task::block_in_place(|| {
        etcd.restart(leader);
        etcd.restart(follower);
    });
    check_becomes(&check, true).await;
    println!(
        "quorum back: check passing {:?} after the restarts began",
        restarted.elapsed()
    );

    // Every acknowledged write, readable after all of it.
    let mut missing = Vec::new();
    for name in &acked {
        if store.get::<Cluster>(name).await.unwrap().is_none() {
            missing.push(name.clone());
        }
    }
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
}
