//! The table the suite writes to `target/reliability.md` (published in `docs/reliability.md`
//! on purpose) after a run in which every
//! assertion held.

use std::fmt::Write;
use std::time::Duration;

/// What one fault did to one configuration.
#[derive(Debug, Default)]
pub(crate) struct Row {
    pub config: &'static str,
    pub fault: String,
    /// From the fault to the probe that reported it.
    pub detect: Option<Duration>,
    /// From the dependency answering again to `/readyz` 200.
    pub recover: Option<Duration>,
    /// From the dependency answering again to storage equal to both clusters.
    pub converge: Option<Duration>,
    /// REST API requests of the steady traffic that did not succeed, of all sent,
    /// from the fault until recovery.
    pub failed: (usize, usize),
    pub lost: usize,
    pub storm: String,
    pub note: String,
}

fn secs(d: Option<Duration>) -> String {
    match d {
        None => "–".to_owned(),
        Some(d) if d < Duration::from_millis(100) => format!("{} ms", d.as_millis()),
        Some(d) => format!("{:.2} s", d.as_secs_f64()),
    }
}

pub(crate) fn write(rows: &[Row], settings: &str, took: Duration) {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Reliability\n\n\
         Written by the reliability suite (`tests/reliability/`) at the end of a run in which\n\
         every assertion held; rerun with\n\n\
         ```\nbash scripts/services.sh start && source target/test-services/env.sh\n\
         cargo nextest run --test reliability --no-capture\n```\n\n\
         The suite runs `karpor serve` (in-process syncer) against each metadata store with\n\
         an Elasticsearch-API server (noida-db) for storage and two private kube-apiservers,\n\
         under churn (ConfigMaps created, updated and deleted every 100 ms in both clusters;\n\
         a search every 100 ms and a resource group rule written every 500 ms through the\n\
         REST API), and breaks one thing at a time. Settings: {settings}. The lease TTL\n\
         outlasts every pause: a metadata store outage longer than the syncer's lease\n\
         fences its syncs off, and they list their clusters again once it has a lease\n\
         (readiness then waits for those lists, as at start; [scale.md](scale.md) on fencing).\n\n\
         - **detect**: from the fault to the first `/readyz` answer that shows it (probed every 500 ms; for SIGTERM, probed back to back from the signal, and asserted within one period).\n\
         - **recover**: from the dependency answering again (for SIGTERM: from the exit) to `/readyz` 200 with every check passing.\n\
         - **converge**: from the same moment to storage holding exactly the clusters' objects (every uid and resourceVersion of the churned namespace).\n\
         - **requests failed**: steady REST API requests from the fault to recovery that did not succeed, of all sent (each a 503: any other answer, a hang or a refused connection fails the suite).\n\
         - **lost**: live objects missing or stale in storage, plus acknowledged writes missing from the metadata store, at the end of the fault (must be 0).\n\
         - **storm**: 10,000 concurrent `/readyz` while the fault lasted.\n\n\
         Whole run: {:.0} s on {} cores.\n",
        took.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        text,
        "| config | fault | detect | recover | converge | requests failed | lost | storm | notes |\n\
         |---|---|---|---|---|---|---|---|---|"
    );
    for row in rows {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |",
            row.config,
            row.fault,
            secs(row.detect),
            secs(row.recover),
            secs(row.converge),
            row.failed.0,
            row.failed.1,
            row.lost,
            row.storm,
            row.note
        );
    }
    let _ = writeln!(
        text,
        "\n## What the suite asserts\n\n\
         - detect ≤ failure_threshold × period + deadline, recover ≤ success_threshold × period + deadline, and every `/readyz` answer while a dependency hangs ≤ deadline, each with 0.5 s for the probe's own round trip on a loaded machine;\n\
         - `/livez` 200 at every probe of every fault (and while draining);\n\
         - a killed or paused critical dependency gives 503 with `[-] Server failed: unreachable|timeout` or `[-] Storage failed: ...`; a member cluster's only `[-] Cluster/NAME failed: ... (non-critical)` with status 200, and the other cluster keeps syncing;\n\
         - a write through the REST API while the metadata store is down answers 503; no request of the steady traffic ever gets another error status, hangs past 10 s or is refused;\n\
         - a storm gets only 200 and 503, and while all is healthy each check runs at most once per cache TTL (`karpor_health_check_runs_total` before and after);\n\
         - SIGTERM: `/readyz` is 503 `[-] Shutdown failed: shutting down` within one probe period (the signal is handled asynchronously; it takes milliseconds), the requests sent with the signal all succeed, the process exits 0 within drain + 1 s, and after a restart nothing acknowledged is missing;\n\
         - after every fault, storage equals both clusters and every acknowledged write is in the metadata store.\n\n\
         ## What it does not show\n\n\
         - noida-db, the Elasticsearch-API test server, keeps nothing it had not saved at a clean stop: after a SIGKILL it comes back empty, harsher than a real Elasticsearch (whose translog keeps acknowledged writes). Storage still ends equal to the clusters because the syncer relists every cluster after a storage outage (docs/syncer.md). A real Elasticsearch is not run here.\n\
         - No storm is sent during the SIGTERM drain: the listener closes after it, so a storm would end in refused connections by design.\n\
         - Times are measured by the test process on the same machine; they bound what a kubelet would see, not a network's delays."
    );
    // A test run never changes tracked files: the run's table goes under target/, and
    // docs/reliability.md is updated from it on purpose (docs/testing.md).
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/target/reliability.md");
    std::fs::write(path, text).expect("write target/reliability.md");
    eprintln!("reliability table: {path} (copy it to docs/reliability.md to publish it)");
    eprintln!("wrote {path}");
}

/// Agent mode's table: `target/reliability-agents.md` (published in docs/agent.md).
pub(crate) fn write_agents(rows: &[Row], took: Duration) {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Written by `agents_lose_nothing_when_their_links_are_cut_or_their_hub_killed`\n\
         (`tests/reliability/agents.rs`) after a run in which every assertion held. Whole\n\
         run {:.0} s on {} cores. **converge**: from the link given back (the hub started\n\
         again) to storage holding exactly both clusters' churned objects.\n\n\
         | fault | converge | lost | notes |\n|---|---|---|---|",
        took.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for row in rows {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} |",
            row.fault,
            secs(row.converge),
            row.lost,
            row.note
        );
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/target/reliability-agents.md");
    std::fs::write(path, text).expect("write target/reliability-agents.md");
    eprintln!("wrote {path}");
}
