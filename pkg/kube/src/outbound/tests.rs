use super::*;
use crate::kubeconfig::{parse, select};

fn with_server(server: &str, proxy: Option<&str>) -> Kubeconfig {
    let proxy = proxy.map_or(String::new(), |p| format!(", proxy-url: '{p}'"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}'{proxy}}}\n\
         users:\n- name: u\n  user: {{token: t}}\n\
         contexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    );
    select(&parse(&text).unwrap(), None).unwrap()
}

#[test]
fn link_local_and_metadata_servers_are_refused_by_their_text() {
    for server in [
        "https://169.254.169.254",
        "https://169.254.0.1:6443/api",
        "https://[fe80::1]",
        "https://[FE80::1]:6443",
        "https://[febf::1]",
        "https://[fd00:ec2::254]",
        "https://[::ffff:169.254.169.254]",
        "http://100.100.100.200",
        "http://metadata.google.internal",
        "http://METADATA.google.internal./computeMetadata/v1/",
        "http://metadata",
        "http://instance-data:80",
        "http://user:pw@169.254.169.254",
        // What the system's resolver reads as 169.254.169.254.
        "http://2852039166",
        "http://0xa9fea9fe",
        "http://0xa9.0xfe.0xa9.0xfe",
        "http://0251.0376.0251.0376",
        "http://169.254.43518",
        "http://169.16689662",
    ] {
        let err = check_literal(&with_server(server, None)).unwrap_err();
        assert!(
            err.0.contains("link-local or cloud metadata"),
            "{server}: {err}"
        );
        assert!(err.0.contains(ALLOW_KEY), "{server}: {err}");
        assert!(err.0.contains("server"), "{server}: {err}");
        assert!(!err.0.contains("pw"), "user-info quoted: {err}");
    }
}

#[test]
fn a_metadata_proxy_is_refused_too() {
    let err = check_literal(&with_server(
        "https://10.0.0.1",
        Some("http://169.254.169.254:80"),
    ))
    .unwrap_err();
    assert!(err.0.contains("proxy-url"), "{err}");
}

#[test]
fn ordinary_servers_pass() {
    for server in [
        "https://127.0.0.1:6443",
        "https://10.0.0.1",
        "https://[::1]:6443",
        "https://[fec0::1]",
        "https://[fd00:ec2::253]",
        "https://100.100.100.201",
        "https://169.253.255.255",
        "https://169.255.0.1",
        "https://kubernetes.default.svc",
        "https://metadata.example.com",
        "https://my-metadata",
        "https://example.com:443/k8s/clusters/c-1",
    ] {
        check_literal(&with_server(server, None)).unwrap_or_else(|e| panic!("{server}: {e}"));
    }
}

#[test]
fn inet_aton_reads_what_the_c_library_reads() {
    let expect = Some(Ipv4Addr::new(169, 254, 169, 254));
    for text in [
        "169.254.169.254",
        "2852039166",
        "0xA9FEA9FE",
        "0251.0376.0251.0376",
        "169.254.43518",
        "169.16689662",
    ] {
        assert_eq!(inet_aton(text), expect, "{text}");
    }
    for text in [
        "",
        "1.2.3.4.5",
        "256.1.1.1",
        "1.2.65536",
        "4294967296",
        "08",
        "a.b.c.d",
        "1..2",
        "example.com",
    ] {
        assert_eq!(inet_aton(text), None, "{text}");
    }
}

#[test]
fn a_name_is_refused_when_any_of_its_addresses_is_forbidden() {
    let target = Target {
        cluster: "c",
        field: "server",
        url: "https://api.example:6443",
    };
    let ok: IpAddr = "10.0.0.1".parse().unwrap();
    let metadata: IpAddr = "169.254.169.254".parse().unwrap();
    refuse_resolved(&target, [ok]).unwrap();
    let err = refuse_resolved(&target, [ok, metadata]).unwrap_err();
    assert!(
        err.0
            .contains("server https://api.example:6443 resolves to 169.254.169.254"),
        "{err}"
    );
    assert!(err.0.contains(ALLOW_KEY), "{err}");
}

#[tokio::test]
async fn loopback_names_resolve_and_pass() {
    // `localhost` resolves from the hosts file, without a DNS query.
    check_resolved(
        &with_server("https://localhost:6443", None),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
}

#[test]
fn through_a_proxy_only_the_proxy_is_connected_to() {
    let direct = with_server("https://a.example", None);
    let fields: Vec<_> = connected(&direct).iter().map(|t| t.field).collect();
    assert_eq!(fields, ["server"]);
    let proxied = with_server("https://a.example", Some("http://proxy.example:3128"));
    let fields: Vec<_> = connected(&proxied).iter().map(|t| t.field).collect();
    assert_eq!(fields, ["proxy-url"]);
}
