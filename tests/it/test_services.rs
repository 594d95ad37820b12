//! The test script's services answer where it says they are: a broken service start
//! fails here, by name, rather than as a puzzling failure in some other test.

use std::time::Duration;

use karpor_testkit::process::get;
use karpor_testkit::service;

#[tokio::test]
async fn etcd_answers_its_health_endpoint() {
    let Some(etcd) = service("KARPOR_TEST_ETCD") else {
        return;
    };
    let (status, body) = get(&format!("{etcd}/health")).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"health\":\"true\""), "{body}");
}

#[tokio::test]
async fn both_search_servers_answer_cluster_health() {
    for var in ["KARPOR_TEST_ES_URL", "KARPOR_TEST_OPENSEARCH_URL"] {
        let Some(url) = service(var) else {
            return;
        };
        let (status, body) = get(&format!("{url}/_cluster/health")).await;
        assert_eq!(status, 200, "{var}: {body}");
        assert!(body.contains("\"status\""), "{var}: {body}");
    }
}

#[tokio::test]
async fn mariadb_accepts_connections_to_the_test_database() {
    let Some(url) = service("KARPOR_TEST_MYSQL_URL") else {
        return;
    };
    let address = url
        .trim_start_matches("mysql://")
        .split(['@', '/'])
        .nth(1)
        .unwrap()
        .to_owned();
    assert!(url.ends_with("/karpor_test"), "{url}");
    let connected = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect(address),
    )
    .await;
    assert!(matches!(connected, Ok(Ok(_))), "{url}: {connected:?}");
}

#[derive(serde::Deserialize)]
struct Kubeconfig {
    clusters: Vec<NamedCluster>,
    users: Vec<NamedUser>,
}

#[derive(serde::Deserialize)]
struct NamedCluster {
    cluster: ClusterEntry,
}

#[derive(serde::Deserialize)]
struct ClusterEntry {
    server: String,
    #[serde(rename = "certificate-authority")]
    certificate_authority: String,
}

#[derive(serde::Deserialize)]
struct NamedUser {
    user: UserEntry,
}

#[derive(serde::Deserialize)]
struct UserEntry {
    token: String,
}

#[tokio::test]
async fn both_kube_apiservers_answer_with_their_kubeconfigs() {
    for var in ["KARPOR_TEST_KUBECONFIG_A", "KARPOR_TEST_KUBECONFIG_B"] {
        let Some(path) = service(var) else {
            return;
        };
        let config: Kubeconfig =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let cluster = &config.clusters[0].cluster;
        let ca = std::fs::read(&cluster.certificate_authority).unwrap();
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let response = client
            .get(format!("{}/version", cluster.server))
            .bearer_auth(&config.users[0].user.token)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{var}: {e}"));
        assert_eq!(response.status(), 200, "{var}");
        let body = response.text().await.unwrap();
        assert!(body.contains("\"gitVersion\": \"v1.20.2"), "{var}: {body}");
    }
}
