//! The reliability suite: the whole system — `karpor serve` on etcd, then on MariaDB,
//! each with an Elasticsearch-API server for storage, and two real kube-apiservers —
//! under continuous churn, while its dependencies are killed, paused and restarted,
//! probes storm it and it is stopped with SIGTERM; then agent mode, its links cut and its
//! hub killed ([`agents`]). It checks the health contract
//! (docs/health.md), that nothing is lost, and writes what it measured to
//! target/reliability.md (published in docs/reliability.md). Everything runs on
//! loopback; one run takes a few minutes.

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod agents;
mod clusters;
mod faults;
mod probe;
mod report;
mod system;
mod traffic;

use std::time::Instant;

use clusters::Member;
use faults::{Paused, Run};
use karpor_testkit::services::Apiserver;
use tokio_util::sync::CancellationToken;

const CONFIGS: [&str; 2] = ["etcd", "mariadb"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn faults_leave_the_probes_truthful_and_lose_nothing() {
    let began = Instant::now();
    // A storm holds 10,000 sockets at once, here and in karpor (which raises its own limit).
    let files = rlimit::increase_nofile_limit(u64::MAX).unwrap();
    assert!(
        files > faults::STORM as u64 + 1_000,
        "the open files limit is {files}: a storm of {} needs more (ulimit -Hn)",
        faults::STORM
    );
    let (a, b) = tokio::join!(
        tokio::task::spawn_blocking(Apiserver::start),
        tokio::task::spawn_blocking(Apiserver::start)
    );
    let missing = "KARPOR_TEST_APISERVER_BIN is not set: run scripts/services.sh start";
    let mut apiservers = vec![a.unwrap().expect(missing), b.unwrap().expect(missing)];
    let members = vec![
        Member::connect("a", apiservers[0].kubeconfig()).await,
        Member::connect("b", apiservers[1].kubeconfig()).await,
    ];
    let mut rows = Vec::new();
    for config in CONFIGS {
        let churning = CancellationToken::new();
        let churn: Vec<_> = members
            .iter()
            .map(|m| m.churn(config, churning.clone()))
            .collect();
        let system = system::System::start(config, &members).await;
        let mut run = Run {
            config,
            traffic: traffic::Traffic::start(system.base.clone(), system.client.clone(), config),
            prober: probe::Prober::new(&system.base),
            system,
            members: &members,
            apiservers: &mut apiservers,
        };
        rows.push(run.healthy_storm().await);
        rows.push(run.metastore_killed().await);
        rows.push(run.storage_killed().await);
        rows.push(run.apiserver_killed().await);
        for which in [Paused::Metastore, Paused::Storage, Paused::Apiserver] {
            rows.push(run.paused(which).await);
        }
        rows.push(run.terminated().await);
        let unexpected = run.traffic.unexpected();
        assert!(
            unexpected.is_empty(),
            "{config}: answers other than success and 503: {unexpected:?}"
        );
        run.traffic.stop().await;
        churning.cancel();
        for task in churn {
            task.await.unwrap();
        }
    }
    let settings = format!(
        "health {}, probe period {:?}, drain 2 s, syncer lease TTL {}",
        system::HEALTH,
        probe::PERIOD,
        system::LEASE_TTL
    );
    report::write(&rows, &settings, began.elapsed());
}

/// Agent mode: two clusters, each pushed by its agent through a link that fails, and a
/// hub that is killed; its table goes to `target/reliability-agents.md`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_lose_nothing_when_their_links_are_cut_or_their_hub_killed() {
    let began = Instant::now();
    let (a, b) = tokio::join!(
        tokio::task::spawn_blocking(Apiserver::start),
        tokio::task::spawn_blocking(Apiserver::start)
    );
    let missing = "KARPOR_TEST_APISERVER_BIN is not set: run scripts/services.sh start";
    let apiservers = [a.unwrap().expect(missing), b.unwrap().expect(missing)];
    let members = vec![
        Member::connect("a", apiservers[0].kubeconfig()).await,
        Member::connect("b", apiservers[1].kubeconfig()).await,
    ];
    let churning = CancellationToken::new();
    let churn: Vec<_> = members
        .iter()
        .map(|m| m.churn(agents::CONFIG, churning.clone()))
        .collect();
    let rows = agents::run(&members).await;
    churning.cancel();
    for task in churn {
        task.await.unwrap();
    }
    report::write_agents(&rows, began.elapsed());
}
