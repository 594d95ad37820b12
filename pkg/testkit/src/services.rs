//! Private instances of the real test services, for tests that kill, pause and restart
//! them. The binaries come from the test script (`KARPOR_TEST_*_BIN`). An etcd cluster of
//! three members is in [`EtcdCluster`].

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::service;

mod etcd_cluster;

pub use etcd_cluster::EtcdCluster;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How to tell that a started service answers.
#[derive(Clone)]
enum Ready {
    Tcp(u16),
    /// A GET whose response contains the text.
    Http(u16, &'static str, &'static str),
}

impl Ready {
    fn check(&self) -> bool {
        match self {
            Ready::Tcp(port) => TcpStream::connect(("127.0.0.1", *port)).is_ok(),
            Ready::Http(port, path, expect) => http_get(*port, path)
                .map(|body| body.contains(expect))
                .unwrap_or(false),
        }
    }
}

/// What a GET returned before the server closed or went quiet; some servers keep the
/// connection open whatever the request says, so silence ends the read too.
fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(String::from_utf8_lossy(&received).into_owned())
}

/// A service process this test owns: stopped on drop.
pub struct Managed {
    name: &'static str,
    program: String,
    args: Vec<String>,
    ready: Ready,
    child: Option<Child>,
    pub dir: PathBuf,
}

impl Managed {
    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{}.log", self.name)))
            .unwrap();
        let child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", self.name));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.ready.check() {
            assert!(
                Instant::now() < deadline,
                "{} not ready in 60 s; its log is in {}",
                self.name,
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The running process's id (for a test that hands the kill to another program).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Whether it was started and not since killed or stopped.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL: the abrupt death a crash or OOM kill gives.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, and wait for the exit: a clean shutdown, which lets the server save.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }

    /// Starts it again (after `kill` or `stop`; a running one is killed first).
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGSTOP: a hang, not a refusal (connections are accepted and never answered).
    pub fn pause(&self) {
        self.signal("STOP");
    }

    pub fn resume(&self) {
        self.signal("CONT");
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A paused process must be resumed to die cleanly.
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(child.id().to_string())
                .status();
        }
        self.kill();
        // Data and log are kept for a failed test to be looked into, and only then.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn scratch() -> PathBuf {
    tempfile::tempdir().unwrap().keep()
}

/// A private etcd; `url()` is its client URL.
pub struct Etcd {
    pub process: Managed,
    port: u16,
}

impl Etcd {
    pub fn start() -> Option<Etcd> {
        let bin = service("KARPOR_TEST_ETCD_BIN")?;
        let (port, peer, dir) = (free_port(), free_port(), scratch());
        let client = format!("http://127.0.0.1:{port}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let args = vec![
            "--name".into(),
            "t".into(),
            "--data-dir".into(),
            dir.join("etcd").display().to_string(),
            "--listen-client-urls".into(),
            client.clone(),
            "--advertise-client-urls".into(),
            client,
            "--listen-peer-urls".into(),
            peer_url.clone(),
            "--initial-advertise-peer-urls".into(),
            peer_url.clone(),
            "--initial-cluster".into(),
            format!("t={peer_url}"),
            "--max-request-bytes".into(),
            "8388608".into(),
        ];
        let mut process = Managed {
            name: "etcd",
            program: bin,
            args,
            ready: Ready::Http(port, "/health", "true"),
            child: None,
            dir,
        };
        process.launch();
        Some(Etcd { process, port })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A private MariaDB; `url()` is a mysql:// URL.
pub struct Mariadb {
    pub process: Managed,
    port: u16,
}

impl Mariadb {
    pub fn start() -> Option<Mariadb> {
        let bin = service("KARPOR_TEST_MARIADBD_BIN")?;
        let install = service("KARPOR_TEST_MARIADB_INSTALL_DB_BIN")?;
        let (port, dir) = (free_port(), scratch());
        let data = dir.join("mysql");
        let status = Command::new(install)
            .arg("--user=root")
            .arg(format!("--datadir={}", data.display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "mariadb-install-db");
        let args = vec![
            "--no-defaults".into(),
            "--user=root".into(),
            format!("--datadir={}", data.display()),
            format!("--socket={}", dir.join("mysql.sock").display()),
            format!("--pid-file={}", dir.join("mysql.pid").display()),
            "--bind-address=127.0.0.1".into(),
            format!("--port={port}"),
            "--skip-name-resolve".into(),
        ];
        let mut process = Managed {
            name: "mariadb",
            program: bin,
            args,
            ready: Ready::Tcp(port),
            child: None,
            dir,
        };
        process.launch();
        Some(Mariadb { process, port })
    }

    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/mysql", self.port)
    }
}

/// A private Elasticsearch-API server (noida-db).
pub struct Elastic {
    pub process: Managed,
    port: u16,
}

impl Elastic {
    pub fn start() -> Option<Elastic> {
        let bin = service("KARPOR_TEST_NOIDA_BIN")?;
        let (port, dir) = (free_port(), scratch());
        let args = vec![
            "start".into(),
            "--data-dir".into(),
            dir.join("es").display().to_string(),
            "--host".into(),
            "127.0.0.1".into(),
            "--only".into(),
            "elasticsearch".into(),
            "--elasticsearch-port".into(),
            port.to_string(),
        ];
        let mut process = Managed {
            name: "elasticsearch",
            program: bin,
            args,
            ready: Ready::Http(port, "/_cluster/health", "status"),
            child: None,
            dir,
        };
        process.launch();
        Some(Elastic { process, port })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A private kube-apiserver on its own etcd, with a static admin token; `kubeconfig()`
/// is a kubeconfig for it. Its certificate (generated on first start) and data survive
/// `kill` and `restart`. It is also an OIDC issuer, `url()`: its service-account tokens
/// are ID tokens, signed with the key at `signing_key_path()`.
pub struct Apiserver {
    pub process: Managed,
    pub etcd: Etcd,
    port: u16,
}

pub const APISERVER_TOKEN: &str = "test-admin-token";

impl Apiserver {
    pub fn start() -> Option<Apiserver> {
        let bin = service("KARPOR_TEST_APISERVER_BIN")?;
        let etcd = Etcd::start()?;
        let (port, dir) = (free_port(), scratch());
        let key = dir.join("sa.key");
        let public = dir.join("sa.pub");
        for args in [
            vec!["genrsa", "-out", key.to_str().unwrap(), "2048"],
            vec![
                "rsa",
                "-in",
                key.to_str().unwrap(),
                "-pubout",
                "-out",
                public.to_str().unwrap(),
            ],
        ] {
            let out = Command::new("openssl").args(&args).output().unwrap();
            assert!(out.status.success(), "openssl {args:?}");
        }
        let tokens = dir.join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{APISERVER_TOKEN},admin,admin,system:masters\n"),
        )
        .unwrap();
        let arg = |k: &str, v: &str| format!("--{k}={v}");
        let args = vec![
            arg("etcd-servers", &etcd.url()),
            arg("bind-address", "127.0.0.1"),
            arg("advertise-address", "127.0.0.1"),
            arg("secure-port", &port.to_string()),
            arg("cert-dir", dir.join("certs").to_str().unwrap()),
            arg("service-account-key-file", public.to_str().unwrap()),
            arg("service-account-signing-key-file", key.to_str().unwrap()),
            // Its own address: it is then an OIDC issuer tests can reach (discovery
            // document and keys on this port).
            arg(
                "service-account-issuer",
                &format!("https://127.0.0.1:{port}"),
            ),
            arg("service-cluster-ip-range", "10.0.0.0/24"),
            arg("token-auth-file", tokens.to_str().unwrap()),
            arg("authorization-mode", "RBAC"),
            arg("endpoint-reconciler-type", "none"),
            arg("enable-priority-and-fairness", "false"),
        ];
        let mut process = Managed {
            name: "apiserver",
            program: bin,
            args,
            ready: Ready::Tcp(port),
            child: None,
            dir,
        };
        process.launch();
        Some(Apiserver {
            process,
            etcd,
            port,
        })
    }

    /// `https://127.0.0.1:PORT`: where it listens, and the issuer of its tokens.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Its serving certificate and the CA that signed it, PEM (written before it
    /// listens).
    pub fn ca_pem_path(&self) -> PathBuf {
        self.process.dir.join("certs/apiserver.crt")
    }

    /// The RSA key (PEM) its service-account tokens are signed with.
    pub fn signing_key_path(&self) -> PathBuf {
        self.process.dir.join("sa.key")
    }

    /// A kubeconfig with the admin token and the server's own CA, inline.
    pub fn kubeconfig(&self) -> String {
        // Written before the server listens, so present once it is ready.
        let pem = std::fs::read(self.ca_pem_path()).expect("the apiserver wrote its certificate");
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    token: {APISERVER_TOKEN}\ncontexts:\n- name: c\n  context: {{cluster: c, user: admin}}\ncurrent-context: c\n",
            self.url()
        )
    }
}
