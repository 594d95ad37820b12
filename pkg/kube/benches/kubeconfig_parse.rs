//! How long the worst kubeconfigs of the size the API accepts (2 MiB) take to parse, with
//! the YAML limits (karpor-kube) against serde_yaml without them (what karpor used
//! before), in the same run. The old parser gets a tenth of the size: at 2 MiB the flow
//! nesting case runs for minutes.
//!
//! `cargo bench -p karpor-kube --bench kubeconfig_parse`

#![allow(clippy::unwrap_used)] // a benchmark stops at its first failure

use std::time::{Duration, Instant};

const TWO_MIB: usize = 2 * 1024 * 1024;

fn flow(size: usize) -> String {
    let half = size / 2 - 16;
    format!("clusters: {}{}", "[".repeat(half), "]".repeat(half))
}

fn block(size: usize) -> String {
    let mut text = String::from("clusters:\n");
    let mut depth = 0;
    while text.len() < size - 4096 {
        text.push_str(&" ".repeat(depth));
        text.push_str("- a:\n");
        depth = (depth + 2) % 4000;
    }
    text
}

fn wide(size: usize) -> String {
    let mut text = String::from("clusters: []\nextensions:\n");
    let mut i = 0;
    while text.len() < size - 64 {
        text.push_str(&format!(
            "- {{name: e{i}, extension: [1, 2, 3, 4, 5, 6, 7, 8]}}\n"
        ));
        i += 1;
    }
    text
}

fn aliases(size: usize) -> String {
    let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9u8 {
        let (name, previous) = ((b'a' + i) as char, (b'a' + i - 1) as char);
        text.push_str(&format!("{name}: &{name} ["));
        text.push_str(&vec![format!("*{previous}"); 10].join(", "));
        text.push_str("]\n");
    }
    while text.len() < size - 16 {
        text.push_str("# padding\n");
    }
    text
}

/// An ordinary kubeconfig of many contexts, as big as allowed.
fn ordinary(size: usize) -> String {
    let mut clusters = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    let mut users = String::from("users:\n");
    let mut contexts = String::from("contexts:\n");
    let mut i = 0;
    while clusters.len() + users.len() + contexts.len() < size - 512 {
        clusters.push_str(&format!(
            "- name: c{i}\n  cluster: {{server: 'https://10.0.{}.{}:6443', certificate-authority-data: Q0E=}}\n",
            i / 250,
            i % 250
        ));
        users.push_str(&format!("- name: u{i}\n  user: {{token: token-{i}}}\n"));
        contexts.push_str(&format!(
            "- name: x{i}\n  context: {{cluster: c{i}, user: u{i}}}\n"
        ));
        i += 1;
    }
    format!("{clusters}{users}{contexts}current-context: x0\n")
}

/// A name, how to make the text of a size, and the size.
type Case = (&'static str, fn(usize) -> String, usize);

fn time<T>(runs: u32, mut f: impl FnMut() -> T) -> Duration {
    let mut worst = Duration::ZERO;
    for _ in 0..runs {
        let started = Instant::now();
        std::hint::black_box(f());
        worst = worst.max(started.elapsed());
    }
    worst
}

fn main() {
    println!("| input | bytes | karpor-kube (limits), worst of 5 | outcome | serde_yaml at 1/10 size, worst of 3 |");
    println!("|---|---|---|---|---|");
    let cases: [Case; 6] = [
        ("flow nesting `[[[…]]]`", flow, TWO_MIB),
        ("block nesting", block, TWO_MIB),
        ("wide (many small nodes)", wide, TWO_MIB),
        ("alias bomb", aliases, TWO_MIB),
        ("ordinary, many contexts", ordinary, TWO_MIB),
        ("ordinary, within the node limit", ordinary, TWO_MIB / 6),
    ];
    for (name, make, size) in cases {
        let text = make(size);
        let limited = time(5, || karpor_kube::kubeconfig::parse(&text));
        let outcome = match karpor_kube::kubeconfig::parse(&text) {
            Ok(_) => "parsed".to_owned(),
            Err(e) => e.0.split(": ").last().unwrap_or_default().to_owned(),
        };
        let small = make(size / 10);
        let old = time(3, || {
            serde_yaml::from_str::<serde_yaml::Value>(&small).is_ok()
        });
        println!(
            "| {name} | {} | {:.1} ms | {outcome} | {:.1} ms |",
            text.len(),
            limited.as_secs_f64() * 1e3,
            old.as_secs_f64() * 1e3
        );
    }
}
