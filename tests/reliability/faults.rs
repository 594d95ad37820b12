//! The faults, one at a time, each checked against the health contract and ending with
//! storage equal to the clusters and every acknowledged write still there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Barrier};
use tokio::task::JoinSet;

use crate::clusters::Member;
use crate::probe::{storm, Answer, Prober, PERIOD};
use crate::report::Row;
use crate::system::{
    System, CACHE_TTL, DEADLINE, DRAIN, FAILURE_THRESHOLD, LIMIT, SUCCESS_THRESHOLD,
};
use crate::traffic::{self, Traffic};
use karpor_testkit::services::Apiserver;

pub(crate) const STORM: usize = 10_000;
/// Room for the probe's own round trip on a loaded machine, on top of the contract's
/// bounds.
const SLACK: Duration = Duration::from_millis(500);

fn detect_bound() -> Duration {
    PERIOD * FAILURE_THRESHOLD + DEADLINE + SLACK
}

/// A probe in flight when the dependency returns may take up to the deadline.
fn recover_bound() -> Duration {
    PERIOD * SUCCESS_THRESHOLD + DEADLINE + SLACK
}

/// Everything one configuration's faults work on.
pub(crate) struct Run<'a> {
    pub config: &'static str,
    pub system: System,
    pub members: &'a [Member],
    pub apiservers: &'a mut [Apiserver],
    pub traffic: Traffic,
    pub prober: Prober,
}

/// Every check passes, both member clusters' included.
fn ready(a: &Answer) -> bool {
    a.status == 200
        && !a.body.contains("[-]")
        && a.body.contains("[+] Cluster/a ok")
        && a.body.contains("[+] Cluster/b ok")
}

impl Run<'_> {
    fn row(&self, fault: &str) -> Row {
        Row {
            config: self.config,
            fault: fault.to_owned(),
            ..Row::default()
        }
    }

    /// Probes until `shown` holds; asserts it took no longer than the contract allows.
    async fn detected(
        &self,
        started: Instant,
        what: &str,
        shown: impl Fn(&Answer) -> bool,
    ) -> Duration {
        let (detect, _) = self.prober.until(started, LIMIT, what, shown).await;
        assert!(detect <= detect_bound(), "{what}: shown after {detect:?}");
        detect
    }

    /// Probes until all is ready; asserts it took no longer than the contract allows.
    async fn recovered(&self, since: Instant) -> Duration {
        let (recover, _) = self.prober.until(since, LIMIT, "recovery", ready).await;
        assert!(
            recover <= recover_bound(),
            "ready again after {recover:?}; karpor's last log lines:\n{}",
            self.log_tail()
        );
        recover
    }

    /// What karpor logged last: why a bound was missed, in CI's output.
    fn log_tail(&self) -> String {
        const LINES: usize = 60;
        let logs = self.system.karpor.logs();
        let lines: Vec<&str> = logs.lines().collect();
        lines[lines.len().saturating_sub(LINES)..].join("\n")
    }

    async fn storm(&self, during: &str) -> String {
        let result = storm(self.system.addr(), STORM).await;
        result.assert_clean(during);
        result.summary()
    }

    /// Converges and checks the acknowledged writes; fills `converge` and `lost`.
    async fn settle(&self, row: &mut Row, since: Instant) {
        let (took, lost) = self.system.converge(self.members, since).await;
        let missing = self
            .system
            .missing_writes(&self.traffic.acknowledged())
            .await;
        assert!(
            missing.is_empty(),
            "{}: acknowledged writes lost: {missing:?}",
            row.fault
        );
        row.converge = Some(took);
        row.lost = lost + missing.len();
    }

    /// Many concurrent probes while all is well: each check runs at most once per cache
    /// TTL (the success cache and single flight).
    pub(crate) async fn healthy_storm(&mut self) -> Row {
        let mut row = self.row("probe storm, all healthy");
        self.prober
            .until(Instant::now(), LIMIT, "ready before the storm", ready)
            .await;
        let before = self.prober.check_runs().await;
        let result = storm(self.system.addr(), STORM).await;
        let after = self.prober.check_runs().await;
        result.assert_clean("a healthy system");
        assert_eq!(
            result.statuses.get(&200),
            Some(&STORM),
            "every probe of a healthy system passes: {}; karpor's last log lines:\n{}",
            result.describe(),
            self.log_tail()
        );
        // The counters were read just before and after: a TTL more on each side.
        let allowed = (result.elapsed.as_secs_f64() / CACHE_TTL.as_secs_f64()).ceil() as u64 + 2;
        let mut most = 0;
        for (check, runs) in &after {
            let ran = runs - before.get(check).copied().unwrap_or(0);
            assert!(
                ran <= allowed,
                "{check} ran {ran} times for {STORM} probes in {:?} (cache TTL {CACHE_TTL:?})",
                result.elapsed
            );
            most = most.max(ran);
        }
        row.storm = result.summary();
        row.note = format!("each check ran at most {most} times (allowed {allowed})");
        row
    }

    /// SIGKILL of the metadata store: `Server` fails, writes answer 503, `/livez` stays.
    pub(crate) async fn metastore_killed(&mut self) -> Row {
        let mut row = self.row("metadata store SIGKILL");
        let started = Instant::now();
        self.system.metastore.process().kill();
        let detect = self
            .detected(started, "the metadata store is down", |a| {
                a.status == 503 && a.body.contains("[-] Server failed: unreachable")
            })
            .await;
        let client = self.system.client.clone();
        let asked = Instant::now();
        let write = traffic::write(&client, &self.system.base, "refused-while-down").await;
        assert_eq!(write, Ok(503), "a write while the metadata store is down");
        let write_took = asked.elapsed();
        row.storm = self.storm("a dead metadata store").await;
        let restarted = self.restart_metastore();
        let recover = self.recovered(restarted).await;
        row.detect = Some(detect);
        row.recover = Some(recover);
        row.failed = self.traffic.failed_since(started);
        row.note = format!("a write answered 503 in {:.2} s", write_took.as_secs_f64());
        self.settle(&mut row, restarted).await;
        row
    }

    fn restart_metastore(&mut self) -> Instant {
        tokio::task::block_in_place(|| self.system.metastore.process().restart());
        Instant::now()
    }

    /// SIGKILL of storage (the test server keeps nothing it had not saved: storage comes
    /// back empty, and the syncer relists).
    pub(crate) async fn storage_killed(&mut self) -> Row {
        let mut row = self.row("storage SIGKILL (restarts empty)");
        let started = Instant::now();
        self.system.storage.process.kill();
        let detect = self
            .detected(started, "storage is down", |a| {
                a.status == 503 && a.body.contains("[-] Storage failed: unreachable")
            })
            .await;
        row.storm = self.storm("a dead storage").await;
        tokio::task::block_in_place(|| self.system.storage.process.restart());
        let restarted = Instant::now();
        let recover = self.recovered(restarted).await;
        row.detect = Some(detect);
        row.recover = Some(recover);
        row.failed = self.traffic.failed_since(started);
        self.settle(&mut row, restarted).await;
        row
    }

    /// SIGKILL of member cluster `a`'s API server: only `Cluster/a` fails, and `b` keeps
    /// syncing.
    pub(crate) async fn apiserver_killed(&mut self) -> Row {
        let mut row = self.row("apiserver a SIGKILL");
        let started = Instant::now();
        tokio::task::block_in_place(|| self.apiservers[0].process.kill());
        let detect = self
            .detected(started, "cluster a is down", |a| {
                a.body
                    .contains("[-] Cluster/a failed: unreachable (non-critical)")
            })
            .await;
        let answer = self.prober.get("/readyz").await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(
            answer.body.matches("[-]").count(),
            1,
            "only Cluster/a fails:\n{}",
            answer.body
        );
        // The other cluster keeps syncing.
        let b = &self.members[1];
        let created = Instant::now();
        let uid = b
            .create(&format!("while-a-is-down-{}", self.config))
            .await
            .expect("cluster b answers");
        loop {
            if let Some(stored) = self.system.stored("b").await {
                if stored.contains_key(&uid) {
                    break;
                }
            }
            assert!(
                created.elapsed() < LIMIT,
                "b stopped syncing while a was down"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let b_synced = created.elapsed();
        row.storm = self.storm("a dead member cluster").await;
        tokio::task::block_in_place(|| self.apiservers[0].process.restart());
        self.members[0].wait_answering().await;
        let restarted = Instant::now();
        let recover = self.recovered(restarted).await;
        row.detect = Some(detect);
        row.recover = Some(recover);
        row.failed = self.traffic.failed_since(started);
        row.note = format!(
            "/readyz stayed 200; a new object in b was searchable in {:.2} s",
            b_synced.as_secs_f64()
        );
        self.settle(&mut row, restarted).await;
        row
    }

    /// SIGSTOP: the dependency accepts connections and never answers. Every probe still
    /// answers within the deadline, and the check fails with `timeout`.
    pub(crate) async fn paused(&mut self, which: Paused) -> Row {
        let (fault, line) = match which {
            Paused::Metastore => ("metadata store SIGSTOP", "[-] Server failed: timeout"),
            Paused::Storage => ("storage SIGSTOP", "[-] Storage failed: timeout"),
            Paused::Apiserver => (
                "apiserver b SIGSTOP",
                "[-] Cluster/b failed: timeout (non-critical)",
            ),
        };
        let mut row = self.row(fault);
        let started = Instant::now();
        self.pause(which, true);
        let (detect, slowest) = self
            .prober
            .until(started, LIMIT, fault, |a| a.body.contains(line))
            .await;
        assert!(detect <= detect_bound(), "{line:?} after {detect:?}");
        // A few more probes while it hangs: each within the deadline.
        let mut slowest = slowest;
        for _ in 0..3 {
            let answer = self.prober.get("/readyz").await;
            assert!(answer.body.contains(line), "{}", answer.body);
            slowest = slowest.max(answer.took);
            tokio::time::sleep(PERIOD).await;
        }
        assert!(
            slowest <= DEADLINE + SLACK,
            "a probe took {slowest:?} while a dependency hung"
        );
        row.storm = self.storm(fault).await;
        self.pause(which, false);
        let resumed = Instant::now();
        let recover = self.recovered(resumed).await;
        row.detect = Some(detect);
        row.recover = Some(recover);
        row.failed = self.traffic.failed_since(started);
        row.note = format!(
            "slowest /readyz {:.2} s (deadline {:.0} s)",
            slowest.as_secs_f64(),
            DEADLINE.as_secs_f64()
        );
        self.settle(&mut row, resumed).await;
        row
    }

    fn pause(&mut self, which: Paused, pause: bool) {
        let process = match which {
            Paused::Metastore => self.system.metastore.process(),
            Paused::Storage => &mut self.system.storage.process,
            Paused::Apiserver => &mut self.apiservers[1].process,
        };
        if pause {
            process.pause();
        } else {
            process.resume();
        }
    }

    /// SIGTERM while the clusters churn and requests are in flight.
    pub(crate) async fn terminated(&mut self) -> Row {
        let mut row = self.row("karpor SIGTERM during churn");
        let hold = self.traffic.hold().await;
        // Writes half sent before the signal and finished after it.
        const SPLIT: usize = 8;
        let sent_half = Arc::new(Barrier::new(SPLIT + 1));
        let (go, gone) = watch::channel(false);
        let mut in_flight = JoinSet::new();
        let token = self.system.karpor.local_token();
        for i in 0..SPLIT {
            let name = format!("{}-term-{i}", self.config);
            let (addr, sent_half, gone) = (self.system.addr(), sent_half.clone(), gone.clone());
            let token = token.clone();
            in_flight.spawn(async move {
                let result = traffic::split_write(addr, &token, &name, sent_half, gone).await;
                (Some(name), result)
            });
        }
        sent_half.wait().await;
        self.system.karpor.signal("TERM");
        let signalled = Instant::now();
        // A signal is handled asynchronously: probe back to back until it shows, which
        // must be well within one probe period.
        let detect = loop {
            let answer = self.prober.get("/readyz").await;
            if answer.status == 503 && answer.body.contains("[-] Shutdown failed: shutting down") {
                break signalled.elapsed();
            }
            assert!(
                signalled.elapsed() < PERIOD,
                "/readyz {PERIOD:?} after SIGTERM: {}\n{}",
                answer.status,
                answer.body
            );
        };
        let livez = self.prober.get("/livez").await;
        assert_eq!(livez.status, 200, "/livez while draining: {}", livez.body);
        go.send_replace(true);
        // Requests that arrive during the drain are served too.
        for _ in 0..16 {
            let base = self.system.base.clone();
            in_flight
                .spawn(async move { (None, traffic::search(&traffic::client(), &base).await) });
        }
        let mut completed = 0;
        while let Some(done) = in_flight.join_next().await {
            let (name, result) = done.unwrap();
            assert!(
                matches!(result, Ok(200..=299)),
                "{}: {result:?}",
                if name.is_some() {
                    "a write in flight at SIGTERM"
                } else {
                    "a search during the drain"
                }
            );
            if let Some(name) = name {
                self.traffic.acknowledge(name);
            }
            completed += 1;
        }
        let status = tokio::task::block_in_place(|| {
            self.system
                .karpor
                .wait_exit(DRAIN + Duration::from_secs(1) + SLACK)
        });
        let exited_after = signalled.elapsed();
        let status = status.unwrap_or_else(|| panic!("no exit {exited_after:?} after SIGTERM"));
        assert!(status.success(), "exit after SIGTERM: {status}");
        assert!(
            exited_after <= DRAIN + Duration::from_secs(1),
            "exit {exited_after:?} after SIGTERM (drain {DRAIN:?})"
        );
        let exited = Instant::now();
        tokio::task::block_in_place(|| self.system.restart_karpor());
        let (recover, _) = self
            .prober
            .until(exited, LIMIT, "the restarted karpor is ready", ready)
            .await;
        drop(hold);
        row.detect = Some(detect);
        row.recover = Some(recover);
        row.failed = (0, completed);
        row.note = format!(
            "{SPLIT} writes half sent at the signal and {} searches sent during the drain all succeeded; exit 0 after {:.2} s (drain {:.0} s)",
            completed - SPLIT,
            exited_after.as_secs_f64(),
            DRAIN.as_secs_f64()
        );
        self.settle(&mut row, exited).await;
        row
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Paused {
    Metastore,
    Storage,
    Apiserver,
}
