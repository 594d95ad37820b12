//! A private three-member etcd cluster on loopback, for tests that kill its leader, a
//! follower or its quorum. Each member has its own ports and directory; all are stopped
//! and removed on drop.

use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};

use super::{free_port, scratch, Managed, Ready};
use crate::service;

const MEMBERS: usize = 3;

pub struct EtcdCluster {
    pub members: Vec<Managed>,
    ports: Vec<u16>,
}

impl EtcdCluster {
    /// Starts three members and waits until every one reports a leader.
    pub fn start() -> Option<EtcdCluster> {
        let bin = service("KARPOR_TEST_ETCD_BIN")?;
        let ports: Vec<(u16, u16)> = (0..MEMBERS).map(|_| (free_port(), free_port())).collect();
        let initial = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let token = crate::unique("etcd_cluster");
        let mut members: Vec<Managed> = ports
            .iter()
            .enumerate()
            .map(|(i, &(client, peer))| {
                let dir = scratch();
                let client = format!("http://127.0.0.1:{client}");
                let peer = format!("http://127.0.0.1:{peer}");
                let args = [
                    ("--name", format!("m{i}")),
                    ("--data-dir", dir.join("etcd").display().to_string()),
                    ("--listen-client-urls", client.clone()),
                    ("--advertise-client-urls", client),
                    ("--listen-peer-urls", peer.clone()),
                    ("--initial-advertise-peer-urls", peer),
                    ("--initial-cluster", initial.clone()),
                    ("--initial-cluster-token", token.clone()),
                    ("--initial-cluster-state", "new".to_owned()),
                    ("--max-request-bytes", "8388608".to_owned()),
                ];
                Managed {
                    name: "etcd",
                    program: bin.clone(),
                    args: args
                        .into_iter()
                        .flat_map(|(k, v)| [k.to_owned(), v])
                        .collect(),
                    // A member alone has no leader and answers /health with false: ready
                    // here is listening; the cluster's health is waited for below.
                    ready: Ready::Tcp(ports[i].0),
                    child: None,
                    dir,
                }
            })
            .collect();
        for member in &mut members {
            member.launch();
        }
        let cluster = EtcdCluster {
            members,
            ports: ports.iter().map(|(client, _)| *client).collect(),
        };
        cluster.wait_healthy();
        Some(cluster)
    }

    /// Every member's client URL, in member order.
    pub fn urls(&self) -> Vec<String> {
        (0..MEMBERS).map(|i| self.url(i)).collect()
    }

    pub fn url(&self, member: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[member])
    }

    /// Waits until every running member reports a leader (`/health` true).
    pub fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let running: Vec<usize> = (0..MEMBERS)
            .filter(|&i| self.members[i].running())
            .collect();
        while !running
            .iter()
            .all(|&i| Ready::Http(self.ports[i], "/health", "\"true\"").check())
        {
            assert!(
                Instant::now() < deadline,
                "etcd cluster not healthy in 60 s; logs in {:?}",
                self.members.iter().map(|m| &m.dir).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The member that is leader, as the running members' maintenance status says; waits
    /// (up to 60 s) for one to be elected.
    pub async fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            for i in (0..MEMBERS).filter(|&i| self.members[i].running()) {
                if self.is_leader(i).await {
                    return i;
                }
            }
            assert!(Instant::now() < deadline, "no etcd leader in 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether this member says it is the leader (its own id is the leader's).
    async fn is_leader(&self, member: usize) -> bool {
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(2));
        let Ok(mut client) = Client::connect([self.url(member)], Some(options)).await else {
            return false;
        };
        match client.status().await {
            Ok(status) => status
                .header()
                .is_some_and(|h| status.leader() != 0 && h.member_id() == status.leader()),
            Err(_) => false,
        }
    }

    /// A member other than `leader` that is running.
    pub fn follower(&self, leader: usize) -> usize {
        (0..MEMBERS)
            .find(|&i| i != leader && self.members[i].running())
            .expect("a running follower")
    }

    /// SIGKILL one member.
    pub fn kill(&mut self, member: usize) {
        self.members[member].kill();
    }

    /// Starts a killed member again on its own data; it rejoins the cluster.
    pub fn restart(&mut self, member: usize) {
        self.members[member].restart();
    }
}
