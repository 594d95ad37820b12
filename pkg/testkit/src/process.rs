//! The real `karpor` binary as tests run it: on port 0 in a scratch directory, its
//! address read from `--address-file`, its log kept for assertions.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `karpor` binary under test: nextest names it; else it sits beside the test
/// binary's `deps/` directory, where cargo builds it for the root package's tests.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NEXTEST_BIN_EXE_karpor") {
        return PathBuf::from(path);
    }
    let test = std::env::current_exe().expect("the test binary's path");
    let profile = test
        .parent()
        .and_then(Path::parent)
        .expect("target/PROFILE/deps/TEST");
    profile.join("karpor")
}

/// A running `karpor` process.
pub struct Karpor {
    child: Child,
    pub addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
    dir: PathBuf,
    /// The directory was made for this process (not given): removed with it.
    scratch: bool,
}

pub struct Spawn<'a> {
    pub command: &'a str,
    pub config: &'a str,
    pub env: Vec<(&'a str, String)>,
    /// Working directory (its `./data` holds the embedded stores); a fresh one if `None`.
    pub dir: Option<&'a Path>,
    /// Listen address; port 0 (any free port) if `None`.
    pub listen: Option<SocketAddr>,
}

impl<'a> Spawn<'a> {
    pub fn serve(config: &'a str) -> Self {
        Spawn {
            command: "serve",
            config,
            env: Vec::new(),
            dir: None,
            listen: None,
        }
    }

    pub fn syncer(config: &'a str) -> Self {
        Spawn {
            command: "syncer",
            ..Spawn::serve(config)
        }
    }

    pub fn in_dir(mut self, dir: &'a Path) -> Self {
        self.dir = Some(dir);
        self
    }

    pub fn with_env(mut self, name: &'a str, value: &str) -> Self {
        self.env.push((name, value.to_owned()));
        self
    }

    pub fn on(mut self, listen: SocketAddr) -> Self {
        self.listen = Some(listen);
        self
    }

    pub fn start(self) -> Karpor {
        Karpor::start(self)
    }
}

impl Karpor {
    fn start(spawn: Spawn<'_>) -> Karpor {
        let scratch = spawn.dir.is_none();
        let dir = match spawn.dir {
            Some(d) => d.to_path_buf(),
            None => tempfile::tempdir().unwrap().keep(),
        };
        let config = dir.join(format!("karpor-{}.yaml", spawn.command));
        std::fs::write(&config, spawn.config).unwrap();
        let address_file = dir.join(format!("karpor-{}.address", spawn.command));
        let _ = std::fs::remove_file(&address_file);
        let mut command = Command::new(binary());
        command
            .arg(spawn.command)
            .arg("--config")
            .arg(&config)
            .arg("--address-file")
            .arg(&address_file)
            .arg("--listen")
            .arg(
                spawn
                    .listen
                    .map_or("127.0.0.1:0".to_owned(), |a| a.to_string()),
            )
            .current_dir(&dir)
            .env_remove("RUST_LOG")
            .env_remove("KARPOR_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in &spawn.env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("karpor starts");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = loop {
            let written = std::fs::read_to_string(&address_file).unwrap_or_default();
            if let Ok(addr) = written.trim().parse::<SocketAddr>() {
                break addr;
            }
            let exited = child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "karpor did not start listening ({exited:?}):\n{}",
                    logs.lock().unwrap().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Karpor {
            child,
            addr,
            logs,
            dir,
            scratch,
        }
    }

    /// Starts `karpor serve` again with `config`, on the same address and in the same
    /// directory (after this one exited).
    pub fn serve_again(&mut self, config: &str) {
        let dir = self.dir.clone();
        let next = Spawn::serve(config).in_dir(&dir).on(self.addr).start();
        let mut previous = std::mem::replace(self, next);
        self.scratch = std::mem::take(&mut previous.scratch);
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The admin token a local install made at first start (`data/admin-token`).
    pub fn local_token(&self) -> String {
        let path = self.dir.join("data/admin-token");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .trim()
            .to_owned()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Karpor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Kept for a failed test to be looked into, and only then.
        if self.scratch && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// GET with a short timeout; `(status, body)`.
pub async fn get(url: &str) -> (u16, String) {
    get_with(url, &[]).await
}

pub async fn get_with(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut request = client.get(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// `/readyz` once start-up has settled: the first 200 within 30 s, else the last answer.
/// A syncer fails `initial sync in progress` until it has listed the registered clusters,
/// so the very first answer after a start may be a 503.
pub async fn ready(karpor: &Karpor) -> (u16, String) {
    let started = Instant::now();
    loop {
        let answer = get(&karpor.url("/readyz")).await;
        if answer.0 == 200 || started.elapsed() > Duration::from_secs(30) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `probe` until it returns true or `limit` passes; returns how long it took.
pub async fn wait_for<F, Fut>(limit: Duration, what: &str, mut probe: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if probe().await {
            return started.elapsed();
        }
        if started.elapsed() > limit {
            panic!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A kubeconfig file's text made self-contained (the files it names inlined), as `karpor
/// cluster add` sends it and as the server stores it.
pub fn flat_kubeconfig(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let config = karpor_kube::kubeconfig::parse(&text).unwrap();
    let mut selected = karpor_kube::kubeconfig::select(&config, None).unwrap();
    karpor_kube::kubeconfig::inline_files(&mut selected, Path::new(path).parent()).unwrap();
    karpor_kube::kubeconfig::to_yaml(&selected)
}

/// Registers clusters (name, kubeconfig text) as an operator restores them: `karpor
/// metadata import` run in `dir` with `config`.
pub fn import_clusters(dir: &Path, config: &str, clusters: &[(&str, &str)]) {
    import(dir, config, clusters, serde_json::json!([]));
}

/// `karpor metadata import` of `clusters` (name, kubeconfig) and `sync_rules` (records as
/// JSON) into the store `config` names, run in `dir`.
pub fn import(dir: &Path, config: &str, clusters: &[(&str, &str)], sync_rules: serde_json::Value) {
    let times = |record: serde_json::Value| {
        serde_json::json!({"record": record,
            "createdAt": "2026-11-29T00:00:00Z", "updatedAt": "2026-11-29T00:00:00Z"})
    };
    let clusters: Vec<serde_json::Value> = clusters
        .iter()
        .map(|(name, kubeconfig)| {
            times(serde_json::json!({"name": name, "kubeconfig": kubeconfig}))
        })
        .collect();
    let rules: Vec<serde_json::Value> = sync_rules
        .as_array()
        .into_iter()
        .flatten()
        .cloned()
        .map(times)
        .collect();
    let export = serde_json::json!({
        "format": "karpor-metadata/v1",
        "clusters": clusters, "syncRules": rules, "resourceGroupRules": []
    });
    std::fs::write(dir.join("import.json"), export.to_string()).unwrap();
    std::fs::write(dir.join("karpor-import.yaml"), config).unwrap();
    let status = Command::new(binary())
        .args(["metadata", "import", "--config", "karpor-import.yaml"])
        .args(["--input", "import.json"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "karpor metadata import failed");
}

/// The embedded default config, with a short drain so tests stop quickly.
pub const EMBEDDED: &str = "shutdown: {drain_delay: 1s}\n";

/// Runs `work` to its end on a thread with a runtime of its own: for a `Drop` (which
/// cannot await, and may run outside any runtime). `false` when it panicked.
pub fn finish_apart(work: impl std::future::Future<Output = ()> + Send + 'static) -> bool {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the clean-up")
            .block_on(work);
    })
    .join()
    .is_ok()
}
