//! Agent mode under faults: a hub (`karpor serve` on the embedded stores, with an agent
//! listener) and one `karpor agent` per member cluster, each with a read-only
//! ServiceAccount token (the agent chart's ClusterRole) and each reaching the hub through
//! a TCP proxy that can cut the link. Both agents queue 8 changes, so a cut soon fills
//! the queue; what changes after is remembered by uid up to `syncer.changes_behind`:
//! agent `a` keeps the default (4,096, far above 30 s of churn) and sends what it
//! remembered once the link is back; `b` keeps 16, so it relists instead. The link cut for 30 s, then the hub killed for 60 s: after
//! each, storage is equal to both clusters again, and the member credentials are nowhere
//! in the hub's metadata, storage or log.

use std::time::{Duration, Instant};

use karpor_testkit::cluster::Kube;
use karpor_testkit::process::{Karpor, Spawn};
use karpor_testkit::proxy::FaultProxy;
use karpor_testkit::services::free_port;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::clusters::{Member, NAMESPACE};
use crate::report::Row;
use crate::system::{converge, differing, stored, LIMIT};

pub(crate) const CONFIG: &str = "agents";
const CUT_FOR: Duration = Duration::from_secs(30);
const HUB_DOWN_FOR: Duration = Duration::from_secs(60);
/// Both agents' queues: far below what 30 s of churn changes.
const SMALL_QUEUE: usize = 8;
/// Agent `b`'s memory of changes: far below what 30 s of churn changes.
const SMALL_MEMORY: usize = 16;
/// What an agent logs when it sent what it remembered, and when it relisted instead.
const CAUGHT_UP: &str = "caught up with what changed while writes were behind";
const RELISTED: &str = "relisting: more objects changed than syncer.changes_behind";

struct Agent {
    proxy: FaultProxy,
    process: Karpor,
    _dir: TempDir,
}

/// The hub and its agents, as the faults work on them.
pub(crate) struct AgentSystem {
    hub: Karpor,
    config: String,
    client: reqwest::Client,
    base: String,
    agents: Vec<Agent>,
    /// The member clusters' tokens: none may reach the hub.
    credentials: Vec<String>,
    _dir: TempDir,
}

/// The read-only rules of the agent's chart.
fn chart_rules() -> Value {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/charts/karpor-agent/values.yaml"
    );
    let values: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    serde_json::to_value(&values["rbac"]["rules"]).unwrap()
}

fn token_of(kubeconfig: &str) -> String {
    let config: serde_yaml::Value = serde_yaml::from_str(kubeconfig).unwrap();
    config["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

impl AgentSystem {
    pub(crate) async fn start(members: &[Member]) -> AgentSystem {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = format!(
            "shutdown: {{drain_delay: 1s}}\nagents: {{listen: '127.0.0.1:{port}', names: ['127.0.0.1']}}\n"
        );
        let hub = Spawn::serve(&config).in_dir(dir.path()).start();
        let client = crate::traffic::admin_client(&hub.local_token());
        let base = hub.url("");
        let mut system = AgentSystem {
            hub,
            config,
            client,
            base,
            agents: Vec::new(),
            credentials: Vec::new(),
            _dir: dir,
        };
        let target = format!("127.0.0.1:{port}").parse().unwrap();
        for member in members {
            let syncer = match member.name {
                "b" => {
                    format!("syncer: {{queue: {SMALL_QUEUE}, changes_behind: {SMALL_MEMORY}}}\n")
                }
                _ => format!("syncer: {{queue: {SMALL_QUEUE}}}\n"),
            };
            let agent = system.enroll(member, target, &syncer).await;
            system.agents.push(agent);
        }
        system
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}/rest-api/v1{path}", self.base);
        let response = self
            .client
            .request(method, url)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    /// `member` registered in agent mode, and its agent joined through a proxy of its
    /// own (`syncer`: the agent's `syncer:` section).
    async fn enroll(
        &mut self,
        member: &Member,
        target: std::net::SocketAddr,
        syncer: &str,
    ) -> Agent {
        let cluster = member.name;
        self.call(
            reqwest::Method::POST,
            &format!("/cluster/{cluster}"),
            json!({"mode": "agent"}),
        )
        .await;
        let issued = self
            .call(
                reqwest::Method::POST,
                &format!("/cluster/{cluster}/agent-token"),
                json!({}),
            )
            .await;
        let issued = &issued["data"];
        let kube = Kube::from_text(member.kubeconfig.clone()).await;
        let read_only =
            karpor_testkit::kubelet::read_only(&kube, NAMESPACE, "karpor-agent", chart_rules())
                .await;
        self.credentials.push(token_of(&read_only));
        self.credentials.push(token_of(&member.kubeconfig));
        let proxy = FaultProxy::start(target).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("member.kubeconfig");
        std::fs::write(&kubeconfig, &read_only).unwrap();
        let config = format!(
            "shutdown: {{drain_delay: 1s}}\n{syncer}\
             agent: {{hub: 'https://127.0.0.1:{}', pin: '{}', token: '{}', kubeconfig: '{}', \
             state_file: '{}', plan_interval: 2s, request_timeout: 10s}}\n",
            proxy.addr.port(),
            issued["pin"].as_str().unwrap(),
            issued["token"].as_str().unwrap(),
            kubeconfig.display(),
            dir.path().join("agent-state.json").display()
        );
        let process = Spawn {
            command: "agent",
            ..Spawn::serve(&config)
        }
        .in_dir(dir.path())
        .start();
        Agent {
            proxy,
            process,
            _dir: dir,
        }
    }

    fn row(&self, fault: &str) -> Row {
        Row {
            config: CONFIG,
            fault: fault.to_owned(),
            ..Row::default()
        }
    }

    /// Storage equal to both clusters, from `since`.
    async fn converged(&self, members: &[Member], since: Instant) -> (Duration, usize) {
        converge(&self.client, &self.base, members, since).await
    }

    /// Every agent's link cut for [`CUT_FOR`] under churn, then given back.
    pub(crate) async fn link_cut(&mut self, members: &[Member]) -> Row {
        let mut row = self.row(&format!(
            "agent links cut {}s (queues of {SMALL_QUEUE}; a remembers 4096 changes, b {SMALL_MEMORY})",
            CUT_FOR.as_secs()
        ));
        let logged = |agent: &Agent, line: &str| agent.process.logs().matches(line).count();
        let before: Vec<(usize, usize)> = self
            .agents
            .iter()
            .map(|a| (logged(a, CAUGHT_UP), logged(a, RELISTED)))
            .collect();
        for agent in &self.agents {
            agent.proxy.cut();
        }
        // The fault's own length (the 30 s), not a wait for a condition.
        tokio::time::sleep(CUT_FOR).await;
        // The cut took: what the churn changed meanwhile has not reached the hub.
        let mut behind = 0;
        for member in members {
            let (live, stored) = (
                member.live().await,
                stored(&self.client, &self.base, member.name).await,
            );
            if let (Ok(live), Some(stored)) = (live, stored) {
                behind += differing(&live, &stored);
            }
        }
        assert!(
            behind > 0,
            "storage kept up with the clusters through a cut link"
        );
        row.note = format!("{behind} objects behind at the end of the cut");
        for agent in &self.agents {
            agent.proxy.restore();
        }
        let back = Instant::now();
        let (took, lost) = self.converged(members, back).await;
        row.converge = Some(took);
        row.lost = lost;
        // Below its bound, `a` sent what it remembered and relisted nothing; above it, `b`
        // relisted.
        let (a, b) = (&self.agents[0], &self.agents[1]);
        let after_a = (logged(a, CAUGHT_UP), logged(a, RELISTED));
        let after_b = logged(b, RELISTED);
        assert!(
            after_a.0 > before[0].0 && after_a.1 == before[0].1,
            "agent a: {}",
            a.process.logs()
        );
        assert!(after_b > before[1].1, "agent b: {}", b.process.logs());
        row.note = format!("{}; a sent what it remembered, b relisted", row.note);
        row
    }

    /// The hub killed for [`HUB_DOWN_FOR`] under churn, then started again on its data.
    pub(crate) async fn hub_killed(&mut self, members: &[Member]) -> Row {
        let mut row = self.row(&format!("hub killed {}s", HUB_DOWN_FOR.as_secs()));
        self.hub.signal("KILL");
        assert!(self.hub.wait_exit(Duration::from_secs(10)).is_some());
        // The outage's own length (the 60 s), not a wait for a condition.
        tokio::time::sleep(HUB_DOWN_FOR).await;
        self.hub.serve_again(&self.config);
        let back = Instant::now();
        let (took, lost) = self.converged(members, back).await;
        row.converge = Some(took);
        row.lost = lost;
        row
    }

    /// No member credential in what the hub keeps or logs.
    pub(crate) fn assert_no_credential(&self) {
        let logs = self.hub.logs();
        let data = self.hub.dir().join("data");
        let mut kept = Vec::new();
        for entry in std::fs::read_dir(&data).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                kept.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
        for credential in self.credentials.iter().filter(|c| !c.is_empty()) {
            assert!(
                !logs.contains(credential.as_str()),
                "a member token in the hub's log"
            );
            for (path, bytes) in &kept {
                let found = bytes
                    .windows(credential.len())
                    .any(|w| w == credential.as_bytes());
                assert!(!found, "a member token in {}", path.display());
            }
        }
    }
}

/// The faults of agent mode, one after the other, with both clusters churning.
pub(crate) async fn run(members: &[Member]) -> Vec<Row> {
    let started = Instant::now();
    let mut system = AgentSystem::start(members).await;
    // Both agents synced before the first fault.
    system.converged(members, Instant::now()).await;
    assert!(
        started.elapsed() < LIMIT * 2,
        "the agents took too long to sync"
    );
    let rows = vec![
        system.link_cut(members).await,
        system.hub_killed(members).await,
    ];
    system.assert_no_credential();
    rows
}
