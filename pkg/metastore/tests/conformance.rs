//! One conformance suite, run against every backend: real SQLite, and the real etcd and
//! MariaDB that the test script starts (each test in its own etcd prefix or database).

#![allow(clippy::unwrap_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use karpor_core::model::{
    Cluster, ClusterSelector, Kubeconfig, ResourceGroupRule, ResourceSelector, SyncRule, Transform,
    MAX_KUBECONFIG_BYTES,
};
use karpor_core::SecretSource;
use karpor_metastore::{
    connect, ChangeOp, Claim, EtcdConfig, Imported, ListRequest, MemberLease, Metastore,
    MetastoreConfig, OnConflict, StoreError,
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
        mode: Default::default(),
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
        history: None,
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

/// A built-in record is made once: deleted, it is not made again; a user's record of
/// the same name is left as it is; the markers travel with an export.
async fn built_ins_are_made_once_and_stay_deleted(store: &Metastore) {
    let built_in = group_rule("namespace");
    assert!(store.seed(built_in.clone()).await.unwrap());
    assert!(!store.seed(built_in.clone()).await.unwrap());
    let stored = store.get::<ResourceGroupRule>("namespace").await.unwrap();
    assert_eq!(stored.map(|s| s.record), Some(built_in.clone()));
    store
        .delete::<ResourceGroupRule>("namespace", None)
        .await
        .unwrap();
    assert!(!store.seed(built_in.clone()).await.unwrap());
    assert!(store
        .get::<ResourceGroupRule>("namespace")
        .await
        .unwrap()
        .is_none());

    let mut users = group_rule("mine");
    users.description = "the user's own".to_owned();
    store.create(users.clone()).await.unwrap();
    assert!(!store.seed(group_rule("mine")).await.unwrap());
    let stored = store.get::<ResourceGroupRule>("mine").await.unwrap();
    assert_eq!(stored.map(|s| s.record), Some(users));

    let exported = store.export().await.unwrap();
    let seeds: Vec<&str> = exported
        .seeds
        .iter()
        .map(|s| s.record.name.as_str())
        .collect();
    assert_eq!(
        seeds,
        ["resourcegrouprules-mine", "resourcegrouprules-namespace"]
    );
    let elsewhere = Backend::sqlite().await.unwrap();
    elsewhere
        .store
        .import(exported, OnConflict::Fail)
        .await
        .unwrap();
    assert!(!elsewhere.store.seed(built_in).await.unwrap());
}

/// Long enough that a live lease never expires during a test.
const LONG_TTL: Duration = Duration::from_secs(60);
/// Short enough to wait out; etcd raises anything shorter than its minimum (2 s by default).
const SHORT_TTL: Duration = Duration::from_secs(2);

/// Polls `condition` until it holds; fails only after a generous deadline.
async fn eventually<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn member_names(store: &Metastore) -> Vec<String> {
    let members = store.members().await.unwrap();
    members.into_iter().map(|m| m.name).collect()
}

fn owned(cluster: &str, lease: &MemberLease, epoch: i64) -> Claim {
    Claim {
        cluster: cluster.to_owned(),
        member: lease.member.clone(),
        epoch,
    }
}

async fn members_join_renew_and_leave(store: &Metastore) {
    let b = store.join("member-b", LONG_TTL).await.unwrap();
    let a = store.join("member-a", LONG_TTL).await.unwrap();
    assert_ne!(a.id, b.id);
    assert!(a.ttl >= LONG_TTL, "{:?}", a.ttl);
    let members = store.members().await.unwrap();
    let listed: Vec<_> = members.iter().map(|m| (m.name.as_str(), m.id)).collect();
    assert_eq!(listed, [("member-a", a.id), ("member-b", b.id)]);
    let again = store.join("member-a", LONG_TTL).await;
    assert!(
        matches!(again, Err(StoreError::MemberAlive(_))),
        "{again:?}"
    );
    assert!(matches!(
        store.join("Not_A_Name", LONG_TTL).await,
        Err(StoreError::Invalid(_))
    ));
    store.renew(&a).await.unwrap();

    store.leave(&a).await.unwrap();
    assert_eq!(member_names(store).await, ["member-b"]);
    let renewed = store.renew(&a).await;
    assert!(
        matches!(renewed, Err(StoreError::LeaseLost(_))),
        "{renewed:?}"
    );
    let claimed = store.claim(&a, "c1").await;
    assert!(
        matches!(claimed, Err(StoreError::LeaseLost(_))),
        "{claimed:?}"
    );
    store.leave(&a).await.unwrap(); // leaving twice is no error
                                    // The name is free again, under another lease.
    let back = store.join("member-a", LONG_TTL).await.unwrap();
    assert_ne!(back.id, a.id);
    assert!(matches!(
        store.renew(&a).await,
        Err(StoreError::LeaseLost(_))
    ));
    store.renew(&back).await.unwrap();
}

async fn claims_are_exclusive_and_released_only_by_their_owner(store: &Metastore) {
    let a = store.join("member-a", LONG_TTL).await.unwrap();
    let b = store.join("member-b", LONG_TTL).await.unwrap();
    let e1 = store.claim(&a, "c1").await.unwrap().expect("c1 is free");
    assert_eq!(
        store.claim(&a, "c1").await.unwrap(),
        Some(e1),
        "already ours"
    );
    assert_eq!(store.claim(&b, "c1").await.unwrap(), None, "a holds it");
    store.release(&b, "c1").await.unwrap(); // not b's: nothing happens
    assert_eq!(store.claims().await.unwrap(), [owned("c1", &a, e1)]);

    let e2 = store.claim(&a, "c2").await.unwrap().unwrap();
    assert!(e2 > e1);
    store.release(&a, "c1").await.unwrap();
    let e3 = store.claim(&b, "c1").await.unwrap().expect("released");
    assert!(e3 > e2, "a later owner has a larger epoch: {e3} after {e2}");
    assert_eq!(
        store.claims().await.unwrap(),
        [owned("c1", &b, e3), owned("c2", &a, e2)]
    );

    // Leaving hands over at once, without waiting for the TTL.
    store.leave(&a).await.unwrap();
    assert_eq!(store.claims().await.unwrap(), [owned("c1", &b, e3)]);
    let e4 = store.claim(&b, "c2").await.unwrap().expect("a left");
    assert!(e4 > e3);
    assert!(matches!(
        store.claim(&b, "Bad_Name").await,
        Err(StoreError::Invalid(_))
    ));
}

async fn racing_claims_have_one_winner(store: &Metastore) {
    let mut leases = Vec::new();
    for i in 0..8 {
        leases.push(store.join(&format!("racer-{i}"), LONG_TTL).await.unwrap());
    }
    for round in 0..3 {
        let cluster = format!("contested-{round}");
        let attempts: Vec<_> = leases
            .iter()
            .map(|lease| {
                let (store, lease, cluster) = (store.clone(), lease.clone(), cluster.clone());
                tokio::spawn(async move {
                    let epoch = store.claim(&lease, &cluster).await.unwrap();
                    epoch.map(|epoch| owned(&cluster, &lease, epoch))
                })
            })
            .collect();
        let mut winners = Vec::new();
        for attempt in attempts {
            winners.extend(attempt.await.unwrap());
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one claim wins");
        let claims = store.claims().await.unwrap();
        assert_eq!(claims.iter().filter(|c| c.cluster == cluster).count(), 1);
        assert!(claims.contains(&winners[0]), "{claims:?}");
    }
}

async fn an_expired_lease_hands_its_claims_over(store: &Metastore) {
    let old = store.join("member-a", SHORT_TTL).await.unwrap();
    let b = store.join("member-b", LONG_TTL).await.unwrap();
    let e1 = store.claim(&old, "c1").await.unwrap().unwrap();
    assert_eq!(store.claim(&b, "c1").await.unwrap(), None);

    eventually("member-a's lease expires", || async {
        member_names(store).await == ["member-b"]
    })
    .await;
    assert_eq!(
        store.claims().await.unwrap(),
        [],
        "claims end with the lease"
    );
    let e2 = store
        .claim(&b, "c1")
        .await
        .unwrap()
        .expect("the owner expired");
    assert!(e2 > e1, "{e2} after {e1}");
    assert!(matches!(
        store.renew(&old).await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(matches!(
        store.claim(&old, "c1").await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(matches!(
        store.claim(&old, "c2").await,
        Err(StoreError::LeaseLost(_))
    ));
    // The expired name can join again; the old lease stays lost.
    let new = store.join("member-a", LONG_TTL).await.unwrap();
    assert_ne!(new.id, old.id);
    assert!(matches!(
        store.renew(&old).await,
        Err(StoreError::LeaseLost(_))
    ));
    assert_eq!(store.claim(&new, "c1").await.unwrap(), None, "b holds it");
    assert_eq!(store.claims().await.unwrap(), [owned("c1", &b, e2)]);
}

async fn records_are_unaffected_by_members_and_claims(store: &Metastore) {
    let start = store.revision().await.unwrap();
    let mut feed = store.watch(start).await.unwrap();
    let a = store.join("member-a", LONG_TTL).await.unwrap();
    // More than a page of the SQL feed's reads, so a follower must skip whole pages.
    for i in 0..260 {
        store.claim(&a, &format!("c{i}")).await.unwrap().unwrap();
    }
    store.release(&a, "c0").await.unwrap();
    let created = store.create(cluster("x")).await.unwrap();
    let change = tokio::time::timeout(Duration::from_secs(10), feed.next())
        .await
        .expect("a change within 10 s")
        .expect("the feed goes on")
        .unwrap();
    assert_eq!(
        (change.kind.as_str(), change.name.as_str(), change.op),
        ("clusters", "x", ChangeOp::Put)
    );
    assert_eq!(change.revision, created.version);
    assert_eq!(store.list_all::<Cluster>().await.unwrap().len(), 1);
    assert!(store.revision().await.unwrap() >= created.version);
    // A follower from before the claims starts at the record, too.
    let mut later = store.watch(start).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), later.next())
        .await
        .expect("a change within 10 s")
        .expect("the feed goes on")
        .unwrap();
    assert_eq!(first.revision, created.version);
    store.leave(&a).await.unwrap();
    assert_eq!(store.claims().await.unwrap(), []);
    assert_eq!(store.list_all::<Cluster>().await.unwrap().len(), 1);
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
    members_join_renew_and_leave,
    claims_are_exclusive_and_released_only_by_their_owner,
    racing_claims_have_one_winner,
    an_expired_lease_hands_its_claims_over,
    records_are_unaffected_by_members_and_claims,
    built_ins_are_made_once_and_stay_deleted,
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
