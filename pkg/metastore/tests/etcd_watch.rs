//! How the etcd change feed ends: a compacted start revision and a watch the server refuses
//! must be errors, never a feed that silently stops. Each test starts its own etcd, since
//! compacting or enabling auth on the shared one would disturb every other test.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{Client, Permission};
use futures::StreamExt;
use karpor_core::model::{Cluster, Kubeconfig};
use karpor_core::SecretSource;
use karpor_metastore::{connect, EtcdConfig, Metastore, MetastoreConfig, StoreError};
use karpor_testkit::service;

/// An etcd of this test only, killed with it.
struct PrivateEtcd {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl PrivateEtcd {
    async fn start() -> Option<PrivateEtcd> {
        let bin = service("KARPOR_TEST_ETCD_BIN")?;
        let dir = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{client}");
        let peer = format!("http://127.0.0.1:{peer}");
        let child = Command::new(bin)
            .args(["--name", "t", "--data-dir"])
            .arg(dir.path().join("etcd"))
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("t={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd starts");
        let etcd = PrivateEtcd {
            child,
            url,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = Client::connect([&etcd.url], None).await {
                if c.status().await.is_ok() {
                    return Some(etcd);
                }
            }
            assert!(Instant::now() < deadline, "etcd not ready within 20 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn client(&self) -> Client {
        Client::connect([&self.url], None).await.unwrap()
    }

    async fn store(&self, username: Option<&str>, password: Option<&str>) -> Metastore {
        let config = MetastoreConfig::Etcd {
            etcd: EtcdConfig {
                endpoints: vec![self.url.clone()],
                prefix: "/karpor".to_owned(),
                username: username.map(str::to_owned),
                password: password.map(|p| SecretSource::Inline(p.to_owned())),
                tls: None,
            },
            encryption_key_file: None,
        };
        connect(&config).await.unwrap()
    }
}

impl Drop for PrivateEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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

#[tokio::test]
async fn a_compacted_start_revision_ends_the_feed_with_compacted() {
    let Some(etcd) = PrivateEtcd::start().await else {
        return;
    };
    let store = etcd.store(None, None).await;
    let before = store.revision().await.unwrap();
    store.create(cluster("a")).await.unwrap();
    store.create(cluster("b")).await.unwrap();
    let now = store.revision().await.unwrap();
    etcd.client().await.compact(now, None).await.unwrap();

    let mut feed = store.watch(before).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), feed.next())
        .await
        .expect("an answer within 10 s")
        .expect("the feed says why it ends");
    assert!(
        matches!(first, Err(StoreError::Compacted(r)) if r == before),
        "{first:?}"
    );
    let after = tokio::time::timeout(Duration::from_secs(10), feed.next())
        .await
        .expect("the feed ends rather than hangs");
    assert!(after.is_none(), "the feed ends after Compacted: {after:?}");
}

#[tokio::test]
async fn a_watch_the_server_refuses_is_an_error() {
    let Some(etcd) = PrivateEtcd::start().await else {
        return;
    };
    // A user that may read elsewhere but not karpor's prefix.
    let mut admin = etcd.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("elsewhere").await.unwrap();
    admin
        .role_grant_permission("elsewhere", Permission::read("/elsewhere/").with_prefix())
        .await
        .unwrap();
    admin.user_add("reader", "reader-pw", None).await.unwrap();
    admin.user_grant_role("reader", "elsewhere").await.unwrap();
    admin.auth_enable().await.unwrap();

    let store = etcd.store(Some("reader"), Some("reader-pw")).await;
    let refused = tokio::time::timeout(Duration::from_secs(10), store.watch(0))
        .await
        .expect("an answer within 10 s");
    assert!(
        matches!(refused, Err(StoreError::Unauthorized(_))),
        "{:?}",
        refused.map(drop)
    );
}
