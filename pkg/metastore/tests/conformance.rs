//! One conformance suite, run against every backend: real SQLite, and the real etcd and
//! MariaDB that the test script starts (each test in its own etcd prefix or database).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use karpor_core::model::{
    Cluster, ClusterSelector, Kubeconfig, ResourceGroupRule, ResourceSelector, SyncRule, Transform,
    MAX_KUBECONFIG_BYTES,
};
use karpor_core::SecretSource;
use karpor_metastore::{
    connect, ChangeOp, EtcdConfig, Imported, ListRequest, Metastore, MetastoreConfig, OnConflict,
    StoreError,
};
use karpor_testkit::{mysql_database, service, unique};

/// A backend for one test, removed with it.
struct Backend {
    store: Metastore,
    _dir: tempfile::TempDir,
}

impl Backend {
    async fn open(config: MetastoreConfig, dir: tempfile::TempDir) -> Backend {
        Backend {
            store: connect(&config).await.unwrap(),
            _dir: dir,
        }
    }

    async fn sqlite() -> Option<Backend> {
        let dir = tempfile::tempdir().unwrap();
        let config = MetastoreConfig::Sqlite {
            path: dir.path().join("metadata.db"),
            encryption_key_file: None,
        };
        Some(Backend::open(config, dir).await)
    }

    async fn etcd() -> Option<Backend> {
        let endpoint = service("KARPOR_TEST_ETCD")?;
        let config = MetastoreConfig::Etcd {
            etcd: EtcdConfig {
                endpoints: vec![endpoint],
                prefix: format!("/{}", unique("conformance")),
                username: None,
                password: None,
                tls: None,
            },
            encryption_key_file: None,
        };
        Some(Backend::open(config, tempfile::tempdir().unwrap()).await)
    }

    async fn mysql() -> Option<Backend> {
        let url = service("KARPOR_TEST_MYSQL_URL")?;
        let config = MetastoreConfig::Mysql {
            url: SecretSource::Inline(mysql_database(&url, "conformance").await),
            encryption_key_file: None,
        };
        Some(Backend::open(config, tempfile::tempdir().unwrap()).await)
    }
}

fn cluster(name: &str) -> Cluster {
    Cluster {
        name: name.to_owned(),
        display_name: format!("Cluster {name}"),
        description: String::new(),
        labels: BTreeMap::from([("env".to_owned(), "test".to_owned())]),
        kubeconfig: Kubeconfig(format!("apiVersion: v1\nkind: Config\n# {name}\n")),
    }
}

fn sync_rule(name: &str) -> SyncRule {
    SyncRule {
        name: name.to_owned(),
        description: "every ConfigMap".to_owned(),
        clusters: ClusterSelector::All,
        resources: vec![ResourceSelector {
            group: String::new(),
            version: "v1".to_owned(),
            resource: "configmaps".to_owned(),
        }],
        namespaces: vec!["default".to_owned()],
        label_selector: Some("app=web".to_owned()),
        field_selector: None,
        transform: Transform::default(),
        keep_after_delete: false,
    }
}

fn group_rule(name: &str) -> ResourceGroupRule {
    ResourceGroupRule {
        name: name.to_owned(),
        description: "by namespace".to_owned(),
        fields: vec!["cluster".to_owned(), "namespace".to_owned()],
    }
}

async fn crud_round_trip(store: &Metastore) {
    let created = store.create(cluster("alpha")).await.unwrap();
    assert!(created.version > 0);
    let read = store.get::<Cluster>("alpha").await.unwrap().unwrap();
    assert_eq!(read, created);
    assert!(matches!(
        store.create(cluster("alpha")).await,
        Err(StoreError::AlreadyExists { .. })
    ));

    let mut changed = cluster("alpha");
    changed.description = "changed".to_owned();
    let updated = store
        .update(changed.clone(), created.version)
        .await
        .unwrap();
    assert!(updated.version > created.version);
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at >= created.updated_at);
    assert_eq!(
        store.get::<Cluster>("alpha").await.unwrap().unwrap(),
        updated
    );

    assert!(matches!(
        store.update(changed, created.version).await,
        Err(StoreError::Conflict { .. })
    ));
    assert!(matches!(
        store
            .delete::<Cluster>("alpha", Some(created.version))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    store
        .delete::<Cluster>("alpha", Some(updated.version))
        .await
        .unwrap();
    assert_eq!(store.get::<Cluster>("alpha").await.unwrap(), None);
    assert!(matches!(
        store.delete::<Cluster>("alpha", None).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.update(cluster("alpha"), updated.version).await,
        Err(StoreError::NotFound { .. })
    ));
}

async fn list_is_sorted_and_paged(store: &Metastore) {
    let mut names: Vec<String> = (0..25).map(|i| format!("c{:02}", (i * 7) % 25)).collect();
    for name in &names {
        store.create(cluster(name)).await.unwrap();
    }
    store.create(sync_rule("c00")).await.unwrap(); // another kind, same name
    names.sort();
    let mut seen = Vec::new();
    let mut request = ListRequest {
        after: None,
        limit: 10,
    };
    let mut sizes = Vec::new();
    loop {
        let page = store.list::<Cluster>(&request).await.unwrap();
        sizes.push(page.items.len());
        seen.extend(page.items.into_iter().map(|s| s.record.name));
        match page.next {
            Some(next) => request.after = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, [10, 10, 5]);
    assert_eq!(seen, names);
    assert_eq!(store.list_all::<SyncRule>().await.unwrap().len(), 1);
}

async fn concurrent_updates_have_one_winner_per_version(store: &Metastore) {
    let store = Arc::new(store.clone());
    let mut version = store.create(cluster("contended")).await.unwrap().version;
    for round in 0..3 {
        let attempts: Vec<_> = (0..12)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut c = cluster("contended");
                    c.description = format!("round {round} writer {i}");
                    store.update(c, version).await
                })
            })
            .collect();
        let mut winners = Vec::new();
        for attempt in attempts {
            match attempt.await.unwrap() {
                Ok(stored) => winners.push(stored),
                Err(StoreError::Conflict { .. }) => {}
                Err(e) => panic!("unexpected error: {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one writer wins");
        let stored = store.get::<Cluster>("contended").await.unwrap().unwrap();
        assert_eq!(stored, winners[0]);
        version = stored.version;
    }
}

async fn change_feed_delivers_every_change_in_order(store: &Metastore) {
    let start = store.revision().await.unwrap();
    let mut feed = store.watch(start).await.unwrap();
    let a = store.create(cluster("a")).await.unwrap();
    let a2 = store.update(cluster("a"), a.version).await.unwrap();
    let b = store.create(group_rule("b")).await.unwrap();
    store.delete::<Cluster>("a", None).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 4 {
        let change = tokio::time::timeout(std::time::Duration::from_secs(10), feed.next())
            .await
            .expect("a change within 10 s")
            .expect("the feed goes on")
            .unwrap();
        got.push(change);
    }
    let summary: Vec<_> = got
        .iter()
        .map(|c| (c.kind.as_str(), c.name.as_str(), c.op))
        .collect();
    assert_eq!(
        summary,
        [
            ("clusters", "a", ChangeOp::Put),
            ("clusters", "a", ChangeOp::Put),
            ("resourcegrouprules", "b", ChangeOp::Put),
            ("clusters", "a", ChangeOp::Delete),
        ]
    );
    assert_eq!(got[0].revision, a.version);
    assert_eq!(got[1].revision, a2.version);
    assert_eq!(got[2].revision, b.version);
    assert!(got.windows(2).all(|w| w[0].revision < w[1].revision));
}

async fn unicode_and_maximum_size_values(store: &Metastore) {
    let mut big = cluster("big");
    big.description = "集群 🚀 ñandú — \"quoted\" \\ back\nslash".to_owned();
    big.labels.insert("team".to_owned(), "données".to_owned());
    let header = "apiVersion: v1\n# ";
    big.kubeconfig = Kubeconfig(format!(
        "{header}{}",
        "x".repeat(MAX_KUBECONFIG_BYTES - header.len())
    ));
    let stored = store.create(big.clone()).await.unwrap();
    assert_eq!(stored.record, big);
    assert_eq!(
        store.get::<Cluster>("big").await.unwrap().unwrap().record,
        big
    );

    let mut too_big = cluster("too-big");
    too_big.kubeconfig = Kubeconfig("y".repeat(MAX_KUBECONFIG_BYTES + 1));
    assert!(matches!(
        store.create(too_big).await,
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(store.get::<Cluster>("too-big").await.unwrap(), None);
}

async fn invalid_records_are_refused_and_nothing_is_written(store: &Metastore) {
    for name in ["Bad", "a_b", "", "-x", &"n".repeat(64)] {
        assert!(
            matches!(
                store.create(cluster(name)).await,
                Err(StoreError::Invalid(_))
            ),
            "{name:?}"
        );
    }
    let mut rule = sync_rule("no-resources");
    rule.resources.clear();
    assert!(matches!(
        store.create(rule).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(store.list_all::<Cluster>().await.unwrap().is_empty());
    assert!(store.list_all::<SyncRule>().await.unwrap().is_empty());
}

async fn export_then_import_gives_identical_records(store: &Metastore) {
    let source = Backend::sqlite().await.unwrap();
    source.store.create(cluster("one")).await.unwrap();
    source.store.create(cluster("two")).await.unwrap();
    source
        .store
        .create(sync_rule("all-configmaps"))
        .await
        .unwrap();
    source
        .store
        .create(group_rule("by-namespace"))
        .await
        .unwrap();
    let exported = source.store.export().await.unwrap();
    let written = |n| Imported {
        written: n,
        skipped: 0,
    };
    assert_eq!(
        store
            .import(exported.clone(), OnConflict::Fail)
            .await
            .unwrap(),
        written(4)
    );
    assert_eq!(store.export().await.unwrap(), exported);
    // Importing again collides rather than overwriting, unless told otherwise.
    assert!(matches!(
        store.import(exported.clone(), OnConflict::Fail).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    let mut changed = exported.clone();
    changed.clusters[0].record.description = "imported again".into();
    assert_eq!(
        store
            .import(changed.clone(), OnConflict::Skip)
            .await
            .unwrap(),
        Imported {
            written: 0,
            skipped: 4
        }
    );
    assert_eq!(
        store.export().await.unwrap(),
        exported,
        "skip keeps what exists"
    );
    assert_eq!(
        store
            .import(changed.clone(), OnConflict::Overwrite)
            .await
            .unwrap(),
        written(4)
    );
    assert_eq!(
        store.export().await.unwrap(),
        changed,
        "overwrite takes the import"
    );
}

macro_rules! conformance {
    ($backend:ident: $($case:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(backend) = super::Backend::$backend().await else {
                        return;
                    };
                    super::$case(&backend.store).await;
                }
            )*
        }
    };
}

macro_rules! every_backend {
    ($($case:ident),* $(,)?) => {
        conformance!(sqlite: $($case),*);
        conformance!(etcd: $($case),*);
        conformance!(mysql: $($case),*);
    };
}

every_backend!(
    crud_round_trip,
    list_is_sorted_and_paged,
    concurrent_updates_have_one_winner_per_version,
    change_feed_delivers_every_change_in_order,
    unicode_and_maximum_size_values,
    invalid_records_are_refused_and_nothing_is_written,
    export_then_import_gives_identical_records,
);

#[tokio::test]
async fn credentials_are_sealed_at_rest_with_a_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, [42u8; 32]).unwrap();
    let path = dir.path().join("metadata.db");
    let sealed = |key: Option<std::path::PathBuf>| MetastoreConfig::Sqlite {
        path: path.clone(),
        encryption_key_file: key,
    };
    let store = connect(&sealed(Some(key.clone()))).await.unwrap();
    let mut secret = cluster("secret");
    secret.kubeconfig = Kubeconfig("users: [{user: {token: hunter2}}]".to_owned());
    store.create(secret.clone()).await.unwrap();

    let raw = store
        .backend()
        .get(karpor_core::model::Kind::Cluster, "secret")
        .await
        .unwrap()
        .unwrap();
    assert!(!raw.data.contains("hunter2"), "{}", raw.data);
    assert!(raw.data.contains("karpor:aes256gcm:v1:"));
    assert_eq!(
        store
            .get::<Cluster>("secret")
            .await
            .unwrap()
            .unwrap()
            .record,
        secret
    );
    assert_eq!(store.export().await.unwrap().clusters[0].record, secret);

    let keyless = connect(&sealed(None)).await.unwrap();
    assert!(matches!(
        keyless.get::<Cluster>("secret").await,
        Err(StoreError::Misconfigured(_))
    ));
    let other = dir.path().join("other");
    std::fs::write(&other, [7u8; 32]).unwrap();
    let wrong = connect(&sealed(Some(other))).await.unwrap();
    assert!(matches!(
        wrong.get::<Cluster>("secret").await,
        Err(StoreError::Misconfigured(_))
    ));
}

#[tokio::test]
async fn a_dead_backend_is_unavailable_not_a_panic() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let configs = [
        MetastoreConfig::Etcd {
            etcd: EtcdConfig {
                endpoints: vec![format!("http://127.0.0.1:{closed}")],
                prefix: "/karpor".to_owned(),
                username: None,
                password: None,
                tls: None,
            },
            encryption_key_file: None,
        },
        MetastoreConfig::Mysql {
            url: SecretSource::Inline(format!("mysql://root@127.0.0.1:{closed}/karpor")),
            encryption_key_file: None,
        },
    ];
    for config in configs {
        let store = connect(&config)
            .await
            .expect("remote backends connect lazily");
        let result = store.create(cluster("x")).await;
        assert!(
            matches!(
                result,
                Err(StoreError::Unavailable(_) | StoreError::Timeout)
            ),
            "{result:?}"
        );
        let ping = store.backend().ping().await;
        assert!(matches!(ping, Err(StoreError::Unavailable(_))), "{ping:?}");
    }
}

#[tokio::test]
async fn another_process_writes_reach_the_feed_by_polling() {
    // Two stores on one SQLite file stand in for a server and a syncer process: the
    // in-process wake-up does not cross them, the poll does.
    let dir = tempfile::tempdir().unwrap();
    let config = MetastoreConfig::Sqlite {
        path: dir.path().join("metadata.db"),
        encryption_key_file: None,
    };
    let reader = connect(&config).await.unwrap();
    let writer = connect(&config).await.unwrap();
    let mut feed = reader
        .watch(reader.revision().await.unwrap())
        .await
        .unwrap();
    writer.create(cluster("remote")).await.unwrap();
    let change = tokio::time::timeout(std::time::Duration::from_secs(5), feed.next())
        .await
        .expect("polled within 5 s")
        .unwrap()
        .unwrap();
    assert_eq!((change.name.as_str(), change.op), ("remote", ChangeOp::Put));
}
