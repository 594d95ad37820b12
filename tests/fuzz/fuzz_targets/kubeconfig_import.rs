//! Any text through what a cluster import does with a kubeconfig: parse, list contexts,
//! select the current one, store it, summarise and mask it. Never a panic.
#![no_main]
use karpor_api::kubeconfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = kubeconfig::mask(text);
    let Ok(config) = kubeconfig::parse(text) else {
        return;
    };
    let _ = kubeconfig::contexts(&config);
    // No base directory: a fuzzed relative file path is refused, not read.
    if let Ok(selected) = kubeconfig::select(&config, None, None) {
        let stored = kubeconfig::to_yaml(&selected);
        let _ = kubeconfig::summary(&selected);
        let _ = kubeconfig::mask(&stored);
    }
});
