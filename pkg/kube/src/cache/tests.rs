use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use super::*;

const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(1),
    read: Some(Duration::from_secs(1)),
};

/// A kubeconfig whose server is closed (nothing listens on port 1): a client of it is
/// built without connecting.
fn kubeconfig(user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:1'}}\n\
         users:\n- name: u\n  user:\n{user}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    )
}

fn token(value: &str) -> String {
    kubeconfig(&format!("    token: {value}"))
}

fn cache(allowed: &[&str]) -> ClientCache {
    let exec = ExecSettings {
        allowed_commands: allowed.iter().map(|c| c.to_string()).collect(),
        ..ExecSettings::default()
    };
    ClientCache::new(Arc::new(exec), TIMEOUTS)
}

/// A plugin that takes a while, notes each run in `runs`, and gives a lasting token.
fn slow_plugin(dir: &Path, runs: &Path) -> String {
    let path = dir.join("plugin");
    let body = format!(
        "#!/bin/sh\necho run >> {}\nsleep 0.3\n\
         echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"t\",\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}}}'\n",
        runs.display()
    );
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path.display().to_string()
}

fn exec_user(command: &str) -> String {
    kubeconfig(&format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {command}"
    ))
}

fn runs(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

#[tokio::test]
async fn the_same_text_gives_the_held_client_and_a_new_text_a_new_one() {
    let cache = cache(&[]);
    cache.get("a", &token("one")).await.unwrap();
    cache.get("a", &token("one")).await.unwrap();
    assert_eq!(cache.builds(), 1);
    cache.get("a", &token("two")).await.unwrap();
    assert_eq!(cache.builds(), 2);
    cache.get("a", &token("two")).await.unwrap();
    assert_eq!(cache.builds(), 2);
    // Another cluster with the same text is another client.
    cache.get("b", &token("two")).await.unwrap();
    assert_eq!((cache.builds(), cache.len()), (3, 2));
}

#[tokio::test]
async fn a_forgotten_cluster_is_built_again() {
    let cache = cache(&[]);
    cache.get("a", &token("one")).await.unwrap();
    cache.forget("a");
    assert!(cache.is_empty());
    cache.get("a", &token("one")).await.unwrap();
    assert_eq!((cache.builds(), cache.len()), (2, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_callers_share_one_build_and_one_plugin_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs");
    let plugin = slow_plugin(dir.path(), &log);
    let cache = Arc::new(cache(&[&plugin]));
    let text = exec_user(&plugin);
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let (cache, text) = (cache.clone(), text.clone());
            tokio::spawn(async move { cache.get("a", &text).await.map(|_| ()) })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap().unwrap();
    }
    assert_eq!((cache.builds(), runs(&log)), (1, 1));
    // A token from a plugin lives in the client, which renews it itself: held.
    cache.get("a", &text).await.unwrap();
    assert_eq!((cache.builds(), runs(&log)), (1, 1));
}

#[tokio::test]
async fn a_failed_build_is_answered_from_memory() {
    let cache = cache(&[]);
    let refused = exec_user("/bin/true");
    for _ in 0..3 {
        let Err(err) = cache.get("a", &refused).await else {
            panic!("a refused exec user gave a client");
        };
        assert!(err.to_string().contains("exec users are off"), "{err}");
    }
    assert_eq!(cache.builds(), 1);
    // A fixed kubeconfig is a new text: built at once.
    cache.get("a", &token("one")).await.unwrap();
    assert_eq!(cache.builds(), 2);
}

#[tokio::test]
async fn what_is_due_is_built_again() {
    let cache = cache(&[]);
    let text = token("one");
    let client = cache.get("a", &text).await.unwrap();
    let now = Instant::now();
    // A client whose certificate is due, as a plugin's expiry makes it.
    let due = Entry {
        fingerprint: fingerprint(&text),
        built: OnceCell::new_with(Some(Built::Client {
            client,
            renew_at: Some(now),
        })),
    };
    cache.lock().insert("a".to_owned(), Arc::new(due));
    cache.get("a", &text).await.unwrap();
    assert_eq!(cache.builds(), 2);
    cache.get("a", &text).await.unwrap();
    assert_eq!(cache.builds(), 2);
}

#[test]
fn failures_are_fresh_for_a_few_seconds_only() {
    let now = Instant::now();
    let failed = |ago: Duration| Built::Failed {
        error: ClientError::Unusable("x".into()),
        at: now.checked_sub(ago).unwrap(),
    };
    assert!(failed(Duration::ZERO).fresh(now));
    assert!(!failed(RETRY_FAILED_AFTER).fresh(now));
}
