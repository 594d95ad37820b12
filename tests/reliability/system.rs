//! One configuration of the whole system: a metadata store, the Elasticsearch-API
//! storage, `karpor serve` on them with both member clusters registered through the
//! REST API; and how storage is compared with the clusters.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::clusters::{Member, Objects, NAMESPACE};
use karpor_testkit::process::{Karpor, Spawn};
use karpor_testkit::services::{Elastic, Etcd, Managed, Mariadb};

/// Bound on anything that should happen "soon" (a start, a convergence).
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

pub(crate) const HEALTH: &str =
    "{check_timeout: 1s, deadline: 2s, cache_ttl: 1s, failure_threshold: 2, success_threshold: 2}";
pub(crate) const DEADLINE: Duration = Duration::from_secs(2);
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(1);
pub(crate) const FAILURE_THRESHOLD: u32 = 2;
pub(crate) const SUCCESS_THRESHOLD: u32 = 2;
pub(crate) const DRAIN: Duration = Duration::from_secs(2);
const SHUTDOWN: &str = "{drain_delay: 2s, grace_period: 500ms}";
const REQUEST_TIMEOUT: &str = "5s";
/// Longer than any pause here (about 11 s with its storm): a metadata store outage past
/// the lease fences the syncer off, and its syncs then restart and list their clusters
/// again, which is the scale suite's subject, not this one's.
pub(crate) const LEASE_TTL: &str = "60s";

pub(crate) enum Metastore {
    Etcd(Etcd),
    Mariadb(Mariadb),
}

impl Metastore {
    pub(crate) fn start(name: &str) -> Metastore {
        let missing = "test services: run scripts/services.sh start";
        match name {
            "etcd" => Metastore::Etcd(Etcd::start().expect(missing)),
            _ => Metastore::Mariadb(Mariadb::start().expect(missing)),
        }
    }

    pub(crate) fn process(&mut self) -> &mut Managed {
        match self {
            Metastore::Etcd(e) => &mut e.process,
            Metastore::Mariadb(m) => &mut m.process,
        }
    }

    fn config(&self) -> String {
        match self {
            Metastore::Etcd(e) => {
                format!("{{backend: etcd, etcd: {{endpoints: ['{}']}}}}", e.url())
            }
            Metastore::Mariadb(m) => format!("{{backend: mysql, url: '{}'}}", m.url()),
        }
    }
}

pub(crate) struct System {
    pub metastore: Metastore,
    pub storage: Elastic,
    pub karpor: Karpor,
    config: String,
    pub base: String,
    /// Sends the local admin token: registration and the traffic's writes need it.
    pub client: reqwest::Client,
}

impl System {
    pub(crate) async fn start(metastore: &str, members: &[Member]) -> System {
        let metastore = Metastore::start(metastore);
        let storage = Elastic::start().expect("test services: run scripts/services.sh start");
        let config = format!(
            "shutdown: {SHUTDOWN}\nhealth: {HEALTH}\n\
             server: {{limits: {{request_timeout: {REQUEST_TIMEOUT}}}}}\n\
             syncer: {{lease_ttl: {LEASE_TTL}}}\n\
             metadata: {}\nstorage: {{backend: elasticsearch, url: '{}'}}\n",
            metastore.config(),
            storage.url()
        );
        let karpor = Spawn::serve(&config).start();
        let base = karpor.url("");
        let token = karpor.local_token();
        let system = System {
            metastore,
            storage,
            karpor,
            config,
            base,
            client: crate::traffic::admin_client(&token),
        };
        for member in members {
            system.register(member).await;
        }
        // Readiness can pass for a moment before the syncer has seen the registrations
        // (and each Cluster check passes once its API server answers, before the first
        // list): the faults start from clusters that finished their first list.
        for member in members {
            system.synced(member).await;
        }
        system
    }

    /// A REST API answer, as the admin.
    async fn get_json(&self, path: &str) -> Value {
        let url = format!("{}{path}", self.base);
        let response = self.client.get(url).send().await.unwrap();
        response.json().await.unwrap()
    }

    async fn synced(&self, member: &Member) {
        let path = format!("/rest-api/v1/cluster/{}", member.name);
        let started = Instant::now();
        loop {
            let view = self.get_json(&path).await;
            if view["data"]["syncStatus"]["state"] == "synced" {
                return;
            }
            assert!(
                started.elapsed() < LIMIT,
                "{} not synced after {LIMIT:?}: {view}",
                member.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.karpor.addr
    }

    async fn register(&self, member: &Member) {
        let url = format!("{}/rest-api/v1/cluster/{}", self.base, member.name);
        let response = self
            .client
            .post(url)
            .json(&json!({"kubeConfig": member.kubeconfig}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert!(
            status.is_success(),
            "register {}: {status} {}",
            member.name,
            response.text().await.unwrap_or_default()
        );
    }

    /// Starts `karpor serve` again, on the same address and directory.
    pub(crate) fn restart_karpor(&mut self) {
        self.karpor.serve_again(&self.config);
    }

    pub(crate) async fn stored(&self, cluster: &str) -> Option<Objects> {
        stored(&self.client, &self.base, cluster).await
    }

    /// Holds each cluster still in turn until storage equals it ([`converge`]).
    pub(crate) async fn converge(&self, members: &[Member], since: Instant) -> (Duration, usize) {
        converge(&self.client, &self.base, members, since).await
    }

    /// Acknowledged writes the metadata store does not have.
    pub(crate) async fn missing_writes(&self, acknowledged: &[String]) -> Vec<String> {
        let body = self.get_json("/rest-api/v1/resource-group-rules").await;
        let stored: BTreeSet<&str> = body["data"]
            .as_array()
            .unwrap_or_else(|| panic!("rules list: {body}"))
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        acknowledged
            .iter()
            .filter(|n| !stored.contains(n.as_str()))
            .cloned()
            .collect()
    }
}

/// The churned namespace's ConfigMaps of `cluster` as the karpor at `base` stores them:
/// uid to resourceVersion.
pub(crate) async fn stored(client: &reqwest::Client, base: &str, cluster: &str) -> Option<Objects> {
    let query = format!(
        "select * from resources where cluster = '{cluster}' and namespace = '{NAMESPACE}' and kind = 'ConfigMap'"
    );
    let response = client
        .get(format!("{base}/rest-api/v1/search"))
        .query(&[("query", query.as_str()), ("pageSize", "1000")])
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let body: Value = response.json().await.ok()?;
    let items = body["data"]["items"].as_array()?;
    Some(
        items
            .iter()
            .map(|item| {
                let meta = &item["object"]["metadata"];
                (
                    meta["uid"].as_str().unwrap_or_default().to_owned(),
                    meta["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect(),
    )
}

/// Holds each cluster still in turn until storage equals it; how long from `since`,
/// and how many objects were missing, stale or extra at the last comparison (fails
/// the test when that is not 0 within the limit).
pub(crate) async fn converge(
    client: &reqwest::Client,
    base: &str,
    members: &[Member],
    since: Instant,
) -> (Duration, usize) {
    let mut lost = 0;
    for member in members {
        let _still = member.hold_still().await;
        loop {
            let live = member.live().await;
            let stored = stored(client, base, member.name).await;
            if let (Ok(live), Some(stored)) = (&live, &stored) {
                let differing = differing(live, stored);
                if differing == 0 || since.elapsed() > LIMIT {
                    assert_eq!(
                        differing, 0,
                        "{}: storage not equal to the cluster {LIMIT:?} after the fault: objects missing, stale or extra\n live: {live:?}\n stored: {stored:?}",
                        member.name
                    );
                    lost += differing;
                    break;
                }
            }
            assert!(
                since.elapsed() < LIMIT,
                "{}: cannot compare: live {:?}, stored {}",
                member.name,
                live.err(),
                stored.is_some()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    (since.elapsed(), lost)
}

/// Objects in one map and not the other, or at another version.
pub(crate) fn differing(live: &Objects, stored: &Objects) -> usize {
    let missing_or_stale = live
        .iter()
        .filter(|(uid, version)| stored.get(*uid) != Some(version))
        .count();
    let extra = stored.keys().filter(|uid| !live.contains_key(*uid)).count();
    missing_or_stale + extra
}
