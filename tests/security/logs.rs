//! A caller cannot forge log lines: a request id that is long or not plain is replaced,
//! and values in text logs are quoted and escaped.

use std::time::Duration;

use crate::raw;
use karpor_testkit::process::{wait_for, Spawn, EMBEDDED};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_request_ids_are_replaced_and_logged_values_escaped() {
    let karpor = Spawn::serve(&format!("{EMBEDDED}log: {{level: debug}}\n")).start();
    let client = reqwest::Client::new();
    let forged = [
        "x\" level=ERROR msg=\"cluster deleted\" by=\"admin",
        "2026-11-30T00:00:00Z ERROR karpor: audit cluster=prod removed",
        &"a".repeat(65),
        "id\u{1b}[31mred",
    ];
    for id in forged {
        let Ok(response) = client
            .get(karpor.url("/rest-api/v1/clusters"))
            .header("x-request-id", id)
            .send()
            .await
        else {
            // A value HTTP itself refuses never reaches karpor.
            continue;
        };
        let echoed = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_ne!(echoed, id);
        assert_eq!(echoed.len(), 36, "a new UUID: {echoed}");
        let envelope: serde_json::Value = response.json().await.unwrap();
        assert_eq!(envelope["traceID"], echoed.as_str());
    }
    let plain = client
        .get(karpor.url("/rest-api/v1/clusters"))
        .header("x-request-id", "trace-42.a_b:c")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.headers()["x-request-id"], "trace-42.a_b:c");

    // A Host with spaces and an equals sign is logged as one quoted value.
    let port = karpor.addr.port();
    let (status, _) = raw(
        karpor.addr,
        &format!(
            "GET / HTTP/1.1\r\nHost: evil x=1 level=ERROR:{port}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 403);
    let host = format!("host=\"evil x=1 level=ERROR:{port}\"");
    wait_for(
        Duration::from_secs(10),
        "the foreign Host is logged",
        || async { karpor.logs().contains(&host) },
    )
    .await;
    let logs = karpor.logs();
    for id in forged {
        assert!(!logs.contains(id), "forged id logged as is: {id}");
    }
    for line in logs.lines() {
        assert!(
            !line.contains('\u{1b}'),
            "an escape sequence reached the log"
        );
    }
}
