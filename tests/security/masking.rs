//! Credentials are never answered: admins see a masked kubeconfig (URL user-info
//! included), guests only its summary, and nothing reaches the log.

use crate::{cluster_body, kubeconfig_with_user};
use karpor_testkit::api::{assert_no_secret_logged, Client, ADMIN, GUEST, WITH_TOKENS};
use karpor_testkit::process::Spawn;

const URL_SECRETS: &[&str] = &["url-password-1", "proxy-password-2", "secret-token-1"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_credentials_are_masked_for_admins_and_guests_see_no_kubeconfig() {
    let karpor = Spawn::serve(WITH_TOKENS)
        .with_env("GUEST_TOKEN", GUEST)
        .start();
    let admin = Client::with_token(&karpor, ADMIN);
    let guest = Client::with_token(&karpor, GUEST);
    let kubeconfig = kubeconfig_with_user("    token: secret-token-1").replace(
        "server: 'https://127.0.0.1:1'",
        "server: 'https://ops:url-password-1@127.0.0.1:1/', proxy-url: 'http://p:proxy-password-2@127.0.0.1:2'",
    );
    let (code, created) = admin
        .call(
            "POST",
            "/rest-api/v1/cluster/urls",
            Some(cluster_body(&kubeconfig)),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let masked = created["data"]["kubeConfig"].as_str().unwrap();
    assert!(masked.contains("https://******@127.0.0.1:1/"), "{masked}");
    assert!(masked.contains("http://******@127.0.0.1:2"), "{masked}");
    assert_eq!(
        created["data"]["kubeconfigSummary"]["server"],
        "https://******@127.0.0.1:1/"
    );
    for (who, client) in [("guest", &guest), ("admin", &admin)] {
        let (_, one) = client.call("GET", "/rest-api/v1/cluster/urls", None).await;
        let (_, all) = client.call("GET", "/rest-api/v1/clusters", None).await;
        for answer in [&one, &all] {
            let text = answer.to_string();
            for secret in URL_SECRETS {
                assert!(!text.contains(secret), "{who}: {secret} in {text}");
            }
        }
        if who == "guest" {
            assert!(one["data"]["kubeConfig"].is_null(), "{one}");
            assert!(all["data"]["items"][0]["kubeConfig"].is_null(), "{all}");
            assert_eq!(one["data"]["kubeconfigSummary"]["authKind"], "token");
        } else {
            assert!(one["data"]["kubeConfig"].is_string(), "{one}");
        }
    }
    let logs = karpor.logs();
    for secret in URL_SECRETS {
        assert!(!logs.contains(secret), "{secret} logged");
    }
    assert_no_secret_logged(&karpor);
}
