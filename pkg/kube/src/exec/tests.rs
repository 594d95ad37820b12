use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::*;
use crate::kubeconfig::{parse, select};

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path
}

fn exec_kubeconfig(command: &str, env: &str) -> Kubeconfig {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:1'}}\n\
         users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {command}\n      env: {env}\n\
         contexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    );
    select(&parse(&text).unwrap(), None).unwrap()
}

fn settings(allowed: &[&str], timeout: Duration) -> Arc<ExecSettings> {
    Arc::new(ExecSettings {
        allowed_commands: allowed.iter().map(|c| c.to_string()).collect(),
        timeout,
        ..ExecSettings::default()
    })
}

/// `command` allowed, and the kubeconfig variables `names` for it.
fn allowing_env(command: &str, names: &[&str]) -> ExecSettings {
    ExecSettings {
        allowed_commands: vec![command.to_owned()],
        allowed_env: BTreeMap::from([(
            command.to_owned(),
            names.iter().map(|n| n.to_string()).collect(),
        )]),
        ..ExecSettings::default()
    }
}

fn setting(name: &str, value: &str) -> String {
    format!("[{{name: {name}, value: '{value}'}}]")
}

fn runner(config: &Kubeconfig, settings: Arc<ExecSettings>) -> ExecRunner {
    let exec = config.auth_infos[0]
        .auth_info
        .clone()
        .unwrap()
        .exec
        .unwrap();
    ExecRunner::new(exec, settings)
}

#[test]
fn exec_users_are_refused_unless_their_command_is_allowed() {
    let config = exec_kubeconfig("aws", "[]");
    let off = ExecSettings::default().check(&config).unwrap_err();
    assert!(off.0.contains("exec users are off"), "{off}");
    let other = settings(&["kubelogin"], Duration::from_secs(1))
        .check(&config)
        .unwrap_err();
    assert!(other.0.contains("\"aws\" is not in"), "{other}");
    settings(&["aws"], Duration::from_secs(1))
        .check(&config)
        .unwrap();
    // A path is not its base name: /tmp/x/aws is not `aws`.
    let elsewhere = exec_kubeconfig("/tmp/x/aws", "[]");
    assert!(settings(&["aws"], Duration::from_secs(1))
        .check(&elsewhere)
        .is_err());
    let preload = exec_kubeconfig("aws", "[{name: LD_PRELOAD, value: /tmp/x.so}]");
    let err = settings(&["aws"], Duration::from_secs(1))
        .check(&preload)
        .unwrap_err();
    assert!(err.0.contains("LD_PRELOAD"), "{err}");
}

#[test]
fn kubeconfig_variables_are_refused_unless_allowed_for_their_command() {
    for (name, value) in [
        ("BASH_ENV", "/tmp/x"),
        ("ENV", "/tmp/x"),
        ("SHELLOPTS", "xtrace"),
        ("PS4", "$(touch /tmp/x)"),
        ("NODE_OPTIONS", "--require /tmp/x.js"),
        ("PERL5OPT", "-Mx"),
        ("PYTHONWARNINGS", "ignore::x.Y"),
        ("GCONV_PATH", "/tmp/x"),
        ("AWS_PROFILE", "prod"),
    ] {
        let config = exec_kubeconfig("aws", &setting(name, value));
        let err = settings(&["aws"], Duration::from_secs(1))
            .check(&config)
            .unwrap_err();
        assert!(err.0.contains(&format!("exec env {name:?}")), "{err}");
        assert!(err.0.contains("kubernetes.exec.allowed_env"), "{err}");
        // Allowed for another command only: still refused.
        let elsewhere = ExecSettings {
            allowed_commands: vec!["aws".into(), "kubelogin".into()],
            ..allowing_env("kubelogin", &[name])
        };
        assert!(elsewhere.check(&config).is_err(), "{name}");
    }
    let config = exec_kubeconfig("aws", &setting("AWS_PROFILE", "prod"));
    allowing_env("aws", &["AWS_PROFILE"])
        .check(&config)
        .unwrap();
    // Names are exact: aws_profile is another variable.
    let lower = exec_kubeconfig("aws", &setting("aws_profile", "prod"));
    assert!(allowing_env("aws", &["AWS_PROFILE"]).check(&lower).is_err());
    // The server's own variables, whatever is allowed.
    let path = exec_kubeconfig("aws", &setting("PATH", "/tmp"));
    let err = allowing_env("aws", &["AWS_PROFILE"])
        .check(&path)
        .unwrap_err();
    assert!(err.0.contains("\"PATH\" is not accepted"), "{err}");
}

#[test]
fn allowed_env_names_allowed_commands_and_variable_names() {
    let mut unknown = allowing_env("aws", &["AWS_PROFILE"]);
    unknown.allowed_commands = vec!["kubelogin".into()];
    let issue = unknown.validate().unwrap_err();
    let (key, why) = (issue.key(), issue.problem());
    assert_eq!(key, "kubernetes.exec.allowed_env.aws");
    assert!(why.contains("kubernetes.exec.allowed_commands"), "{why}");
    for (bad, says) in [
        ("1X", "not a variable name"),
        ("A-B", "not a variable name"),
        ("", "not a variable name"),
        ("A=B", "not a variable name"),
        ("LD_PRELOAD", "the server's"),
        ("Path", "the server's"),
        ("DYLD_INSERT_LIBRARIES", "the server's"),
    ] {
        let issue = allowing_env("aws", &["AWS_PROFILE", bad])
            .validate()
            .unwrap_err();
        let (key, why) = (issue.key(), issue.problem());
        assert_eq!(key, "kubernetes.exec.allowed_env.aws[1]", "{bad}");
        assert!(why.contains(says), "{bad}: {why}");
    }
    allowing_env("/opt/bin/aws", &["AWS_PROFILE", "_X1"])
        .validate()
        .unwrap();
}

#[test]
fn metadata_servers_are_refused_unless_allowed() {
    let text = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://169.254.169.254'}\n\
                users:\n- name: u\n  user: {token: t}\n\
                contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
    let config = select(&parse(text).unwrap(), None).unwrap();
    let err = ExecSettings::default().check(&config).unwrap_err();
    assert!(
        err.0
            .contains("server https://169.254.169.254 is a link-local"),
        "{err}"
    );
    assert!(
        err.0.contains("kubernetes.allow_link_local_servers"),
        "{err}"
    );
    let allowing = ExecSettings {
        allow_link_local_servers: true,
        ..ExecSettings::default()
    };
    allowing.check(&config).unwrap();
}

#[test]
fn settings_refuse_relative_paths_and_a_zero_timeout() {
    let bad = ExecSettings {
        allowed_commands: vec!["bin/aws".into()],
        ..ExecSettings::default()
    };
    assert_eq!(
        bad.validate().unwrap_err().key(),
        "kubernetes.exec.allowed_commands[0]"
    );
    let zero = ExecSettings {
        timeout: Duration::ZERO,
        ..ExecSettings::default()
    };
    assert_eq!(
        zero.validate().unwrap_err().key(),
        "kubernetes.exec.timeout"
    );
}

#[tokio::test]
async fn an_allowed_plugin_gives_its_token_with_a_minimal_environment() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(
        dir.path(),
        "plugin",
        r#"printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t-%s-%s-%s","expirationTimestamp":"2999-01-01T00:00:00Z"}}' "$GIVEN" "${KARPOR_SECRET_ENV:-unset}" "$(echo "$KUBERNETES_EXEC_INFO" | grep -c ExecCredential)""#,
    );
    let command = plugin.display().to_string();
    let config = exec_kubeconfig(&command, "[{name: GIVEN, value: yes}]");
    std::env::set_var("KARPOR_SECRET_ENV", "leaked");
    let allowed = Arc::new(allowing_env(&command, &["GIVEN"]));
    allowed.check(&config).unwrap();
    let credential = runner(&config, allowed).run().await.unwrap();
    assert_eq!(credential.token.as_deref(), Some("t-yes-unset-1"));
    // Not allowed for this command: the runner does not pass it even unchecked.
    let credential = runner(&config, settings(&[&command], Duration::from_secs(5)))
        .run()
        .await
        .unwrap();
    assert_eq!(credential.token.as_deref(), Some("t--unset-1"));
    assert!(credential.renew_at.is_some());
}

#[tokio::test]
async fn a_slow_plugin_is_killed_with_its_children_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("child-alive");
    let plugin = script(
        dir.path(),
        "slow",
        &format!("(sleep 2; touch {}) &\nsleep 30", marker.display()),
    );
    let command = plugin.display().to_string();
    let config = exec_kubeconfig(&command, "[]");
    let started = Instant::now();
    let err = runner(&config, settings(&[&command], Duration::from_millis(300)))
        .run()
        .await
        .unwrap_err();
    assert_eq!(err, ExecError::Timeout(Duration::from_millis(300)));
    assert!(started.elapsed() < Duration::from_secs(5));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "the plugin's child outlived the timeout");
}

#[tokio::test]
async fn failures_and_bad_output_are_described_without_quoting_anything() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body, expected) in [
        (
            "fails",
            "echo exec-secret-output; exit 3",
            ExecError::Failed("3".into()),
        ),
        ("garbage", "echo exec-secret-output", ExecError::Output),
        ("empty", r#"echo '{"status":{}}'"#, ExecError::Empty),
    ] {
        let command = script(dir.path(), name, body).display().to_string();
        let config = exec_kubeconfig(&command, "[]");
        let err = runner(&config, settings(&[&command], Duration::from_secs(5)))
            .run()
            .await
            .unwrap_err();
        assert_eq!(err, expected);
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
