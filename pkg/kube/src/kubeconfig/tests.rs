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
    let chosen = select(&config, None).unwrap();
    let s = summary(&chosen);
    assert_eq!(
        (s.context.as_str(), s.auth_kind.as_str()),
        ("second", "clientCertificate")
    );
    assert_eq!(s.namespace.as_deref(), Some("apps"));
    assert_eq!(chosen.clusters.len(), 1);
    assert_eq!(chosen.auth_infos.len(), 1);
    for (name, kind) in [("first", "token"), ("third", "exec")] {
        let chosen = select(&config, Some(name)).unwrap();
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
        let masked = to_yaml(&mask(&select(&config, Some(name)).unwrap()));
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
    let unknown = select(&config, Some("fourth")).unwrap_err();
    assert!(
        unknown.0.contains("\"fourth\" is not in the kubeconfig"),
        "{unknown}"
    );
    assert!(unknown.0.contains("first, second, third"), "{unknown}");
    let not_yaml = parse("clusters: [\n  - {name: a\n token: hunter2").unwrap_err();
    assert!(
        not_yaml.0.starts_with("the text is not a kubeconfig") && not_yaml.0.contains("at line"),
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
    let err = select(&parse(&no_current).unwrap(), None).unwrap_err();
    assert!(err.0.contains("no current-context"), "{err}");
    let no_server = THREE.replace("server: \"https://two.example:6443\", ", "");
    let err = select(&parse(&no_server).unwrap(), Some("second")).unwrap_err();
    assert_eq!(err.0, "cluster \"two\" has no server");
    let missing_user = THREE.replace("user: exec-user}", "user: nobody}");
    let err = select(&parse(&missing_user).unwrap(), Some("third")).unwrap_err();
    assert!(err.0.contains("user \"nobody\", which is not"), "{err}");
}

#[test]
fn files_are_inlined_by_the_cli_and_refused_by_the_server_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.crt"), "PEM").unwrap();
    std::fs::write(dir.path().join("token"), "file-token\n").unwrap();
    let text = THREE
        .replace(
            "certificate-authority-data: \"Q0E=\"",
            "certificate-authority: ca.crt",
        )
        .replace("token: secret-token-1", "tokenFile: token");
    let config = parse(&text).unwrap();
    let chosen = select(&config, Some("first")).unwrap();
    let refused = self_contained(&chosen).unwrap_err();
    assert!(
        refused
            .0
            .contains("certificate-authority names a file on the server"),
        "{refused}"
    );
    assert!(!refused.0.contains("ca.crt"), "{refused}");
    let mut inlined = chosen.clone();
    inline_files(&mut inlined, Some(dir.path())).unwrap();
    self_contained(&inlined).unwrap();
    let cluster = inlined.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.certificate_authority_data.as_deref(), Some("UEVN"));
    let user = inlined.auth_infos[0].auth_info.as_ref().unwrap();
    assert!(user.token_file.is_none());
    assert!(
        to_yaml(&inlined).contains("token: file-token"),
        "{}",
        to_yaml(&inlined)
    );
    let missing =
        inline_files(&mut chosen.clone(), Some(&dir.path().join("elsewhere"))).unwrap_err();
    assert!(
        missing.0.contains("certificate-authority file") && missing.0.contains("cannot be read"),
        "{missing}"
    );
}

#[test]
fn every_field_that_names_a_file_is_refused_by_name() {
    for (from, to, field) in [
        (
            "certificate-authority-data: \"Q0E=\"",
            "certificate-authority: /etc/shadow",
            "certificate-authority",
        ),
        (
            "token: secret-token-1",
            "tokenFile: /etc/shadow",
            "tokenFile",
        ),
        (
            "client-certificate-data: \"Q0VSVA==\"",
            "client-certificate: /etc/shadow",
            "client-certificate",
        ),
        (
            "client-key-data: \"S0VZLXNlY3JldA==\"",
            "client-key: /etc/shadow",
            "client-key",
        ),
    ] {
        let config = parse(&THREE.replace(from, to)).unwrap();
        let refusal = config
            .contexts
            .iter()
            .find_map(|c| self_contained(&select(&config, Some(&c.name)).unwrap()).err())
            .unwrap_or_else(|| panic!("{field} accepted"));
        assert!(
            refusal.0.contains(&format!("{field} names a file")),
            "{refusal}"
        );
        assert!(!refusal.0.contains("shadow"), "{refusal}");
    }
}

#[test]
fn url_user_info_is_masked_in_summaries_contexts_and_masked_text() {
    let text = THREE.replace(
        "server: \"https://one.example:6443\"",
        "server: \"https://admin:pa55word@one.example:6443/k8s?x=1\", proxy-url: \"http://u:proxy-pa55@proxy:3128\"",
    );
    let config = parse(&text).unwrap();
    let chosen = select(&config, Some("first")).unwrap();
    assert_eq!(
        summary(&chosen).server,
        "https://******@one.example:6443/k8s?x=1"
    );
    assert!(contexts(&config).iter().all(|c| !c
        .server
        .as_deref()
        .unwrap_or_default()
        .contains("pa55")));
    let masked = to_yaml(&mask(&chosen));
    assert!(!masked.contains("pa55"), "{masked}");
    assert!(masked.contains("one.example:6443"), "{masked}");
    assert_eq!(mask_url("https://host:1/a@b"), "https://host:1/a@b");
}

#[test]
fn auth_providers_are_refused() {
    let text = THREE.replace(
        "user: {token: secret-token-1}",
        "user: {auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}}",
    );
    let config = parse(&text).unwrap();
    let err = self_contained(&select(&config, Some("first")).unwrap()).unwrap_err();
    assert!(err.0.contains("auth-provider is not supported"), "{err}");
}
