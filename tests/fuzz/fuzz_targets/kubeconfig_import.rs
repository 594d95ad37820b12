//! Any text through what a cluster registration does with a kubeconfig: parse within the
//! YAML limits (depth, nodes, no aliases), list contexts, select the current one, check it
//! is self-contained, store it, summarise and mask it. Never a panic, and never a file
//! read: a fuzzed path is refused by name.
#![no_main]
use karpor_kube::kubeconfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = kubeconfig::masked_text(text);
    let Ok(config) = kubeconfig::parse(text) else {
        return;
    };
    let _ = kubeconfig::contexts(&config);
    if let Ok(selected) = kubeconfig::select(&config, None) {
        let _ = kubeconfig::self_contained(&selected);
        let stored = kubeconfig::to_yaml(&selected);
        let _ = kubeconfig::summary(&selected);
        let _ = kubeconfig::masked_text(&stored);
    }
});
