use super::*;

const THREE: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://one.example:6443", certificate-authority-data: "Q0E="}
- name: two
  cluster: {server: "https://two.example:6443", insecure-skip-tls-verify: true}
users:
- name: token-user
  user: {token: secret-token-1}
- name: cert-user
  user: {client-certificate-data: "Q0VSVA==", client-key-data: "S0VZLXNlY3JldA=="}
- name: exec-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: get-token
      args: [--secret, exec-secret-arg]
      env: [{name: TOKEN, value: exec-secret-env}]
contexts:
- name: first
  context: {cluster: one, user: token-user}
- name: second
  context: {cluster: two, user: cert-user, namespace: apps}
- name: third
  context: {cluster: one, user: exec-user}
current-context: second
"#;

#[test]
fn every_context_is_selectable_and_the_current_one_is_the_default() {
    let config = parse(THREE).unwrap();
    assert_eq!(contexts(&config).len(), 3);
    let chosen = select(&config, None, None).unwrap();
    let s = summary(&chosen);
    assert_eq!(
        (s.context.as_str(), s.auth_kind.as_str()),
        ("second", "clientCertificate")
    );
    assert_eq!(s.namespace.as_deref(), Some("apps"));
    assert_eq!(chosen.clusters.len(), 1);
    assert_eq!(chosen.auth_infos.len(), 1);
    for (name, kind) in [("first", "token"), ("third", "exec")] {
        let chosen = select(&config, Some(name), None).unwrap();
        assert_eq!(summary(&chosen).auth_kind, kind);
        // The stored text reads back as the same single context.
        let again = parse(&to_yaml(&chosen)).unwrap();
        assert_eq!(summary(&again), summary(&chosen));
    }
}

#[test]
fn masking_hides_every_credential() {
    let config = parse(THREE).unwrap();
    for name in ["first", "second", "third"] {
        let text = to_yaml(&select(&config, Some(name), None).unwrap());
        let masked = mask(&text);
        for secret in [
            "secret-token-1",
            "S0VZLXNlY3JldA==",
            "exec-secret-arg",
            "exec-secret-env",
        ] {
            assert!(!masked.contains(secret), "{name}: {masked}");
        }
        assert!(masked.contains(MASK), "{masked}");
    }
}

#[test]
fn broken_shapes_are_refused_with_a_clear_message() {
    let config = parse(THREE).unwrap();
    let unknown = select(&config, Some("fourth"), None).unwrap_err();
    assert!(
        unknown.0.contains("\"fourth\" is not in the kubeconfig"),
        "{unknown}"
    );
    assert!(unknown.0.contains("first, second, third"), "{unknown}");
    let not_yaml = parse("clusters: [\n  - {name: a\n token: hunter2").unwrap_err();
    assert!(
        not_yaml.0.starts_with("the kubeconfig is not YAML at line"),
        "{not_yaml}"
    );
    assert!(!not_yaml.0.contains("hunter2"));
    let not_kubeconfig = parse("clusters: hunter2\n").unwrap_err();
    assert!(
        not_kubeconfig.0.contains("not a kubeconfig"),
        "{not_kubeconfig}"
    );
    assert!(!not_kubeconfig.0.contains("hunter2"), "{not_kubeconfig}");
    assert_eq!(parse("").unwrap_err().0, "the kubeconfig is empty");
    assert_eq!(
        parse("apiVersion: v1\nkind: Config\nclusters: []\n")
            .unwrap_err()
            .0,
        "the kubeconfig has no contexts"
    );
    let no_current = THREE.replace("current-context: second", "");
    let err = select(&parse(&no_current).unwrap(), None, None).unwrap_err();
    assert!(err.0.contains("no current-context"), "{err}");
    let no_server = THREE.replace("server: \"https://two.example:6443\", ", "");
    let err = select(&parse(&no_server).unwrap(), Some("second"), None).unwrap_err();
    assert_eq!(err.0, "cluster \"two\" has no server");
    let missing_user = THREE.replace("user: exec-user}", "user: nobody}");
    let err = select(&parse(&missing_user).unwrap(), Some("third"), None).unwrap_err();
    assert!(err.0.contains("user \"nobody\", which is not"), "{err}");
}

#[test]
fn ca_files_are_inlined_and_a_missing_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.crt"), "PEM").unwrap();
    let text = THREE.replace(
        "certificate-authority-data: \"Q0E=\"",
        "certificate-authority: ca.crt",
    );
    let config = parse(&text).unwrap();
    let chosen = select(&config, Some("first"), Some(dir.path())).unwrap();
    let cluster = chosen.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.certificate_authority, None);
    assert_eq!(cluster.certificate_authority_data.as_deref(), Some("UEVN"));
    let missing = select(&config, Some("first"), Some(&dir.path().join("elsewhere"))).unwrap_err();
    assert!(
        missing.0.contains("certificate-authority file") && missing.0.contains("cannot be read"),
        "{missing}"
    );
}
