//! Creates, reads and list pages per second for each metadata backend, in one run
//! (`cargo bench -p karpor-metastore --bench metastore_ops`, with the test services'
//! addresses in the environment: `source target/test-services/env.sh`). A backend whose
//! address is not set is reported as skipped.

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use karpor_core::model::{Cluster, Kubeconfig};
use karpor_core::SecretSource;
use karpor_metastore::{connect, EtcdConfig, ListRequest, Metastore, MetastoreConfig};
use karpor_testkit::{mysql_database, unique};

const RECORDS: usize = 500;
const READS: usize = 2_000;
const PAGE: usize = 100;
const LIST_PASSES: usize = 20;

fn cluster(i: usize) -> Cluster {
    Cluster {
        name: format!("cluster-{i:05}"),
        display_name: format!("Cluster {i}"),
        description: "benchmark".to_owned(),
        labels: BTreeMap::from([("env".to_owned(), "bench".to_owned())]),
        // A realistic kubeconfig is a few KiB.
        kubeconfig: Kubeconfig(format!("apiVersion: v1\n# {}\n", "k".repeat(4096))),
        mode: Default::default(),
    }
}

fn per_second(count: usize, took: Duration) -> f64 {
    count as f64 / took.as_secs_f64()
}

async fn measure(store: &Metastore) -> (f64, f64, f64) {
    let started = Instant::now();
    for i in 0..RECORDS {
        store.create(cluster(i)).await.unwrap();
    }
    let creates = per_second(RECORDS, started.elapsed());

    let started = Instant::now();
    for i in 0..READS {
        let name = format!("cluster-{:05}", (i * 7919) % RECORDS);
        store.get::<Cluster>(&name).await.unwrap().unwrap();
    }
    let reads = per_second(READS, started.elapsed());

    let started = Instant::now();
    let mut pages = 0;
    for _ in 0..LIST_PASSES {
        let mut request = ListRequest {
            after: None,
            limit: PAGE,
        };
        loop {
            let page = store.list::<Cluster>(&request).await.unwrap();
            pages += 1;
            match page.next {
                Some(next) => request.after = Some(next),
                None => break,
            }
        }
    }
    let lists = per_second(pages, started.elapsed());
    (creates, reads, lists)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut backends = vec![(
        "sqlite",
        Some(MetastoreConfig::Sqlite {
            path: dir.path().join("metadata.db"),
            encryption_key_file: None,
        }),
    )];
    let etcd = std::env::var("KARPOR_TEST_ETCD")
        .ok()
        .map(|endpoint| MetastoreConfig::Etcd {
            etcd: EtcdConfig {
                endpoints: vec![endpoint],
                prefix: format!("/{}", unique("bench")),
                username: None,
                password: None,
                tls: None,
            },
            encryption_key_file: None,
        });
    backends.push(("etcd", etcd));
    let mysql = match std::env::var("KARPOR_TEST_MYSQL_URL") {
        Ok(url) => Some(MetastoreConfig::Mysql {
            url: SecretSource::Inline(mysql_database(&url, "bench").await),
            encryption_key_file: None,
        }),
        Err(_) => None,
    };
    backends.push(("mysql (MariaDB)", mysql));

    println!(
        "{RECORDS} clusters (4 KiB kubeconfig each), {READS} reads, pages of {PAGE}; one client, sequential"
    );
    println!();
    println!("| backend | creates/s | reads/s | list pages/s |");
    println!("|---|---|---|---|");
    for (name, config) in backends {
        let Some(config) = config else {
            println!("| {name} | skipped: address not set | | |");
            continue;
        };
        let store = connect(&config).await.unwrap();
        let (creates, reads, lists) = measure(&store).await;
        println!("| {name} | {creates:.0} | {reads:.0} | {lists:.0} |");
    }
}
