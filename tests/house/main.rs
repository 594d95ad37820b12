//! House rules that a tool can check, run with the rest of the tests: no two modules of
//! a crate import each other, directly or round a longer loop (see CODE_STYLE.md).

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod modules;

use std::path::{Path, PathBuf};

/// Every crate's `src/`: the binary's and each one under `pkg/`.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    let mut members: Vec<PathBuf> = std::fs::read_dir(root.join("pkg"))
        .expect("pkg/ is readable")
        .map(|entry| entry.expect("pkg/ lists").path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    members.sort();
    sources.extend(members);
    sources
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let sources = crate_sources();
    assert!(sources.len() > 10, "found only {sources:?}");
    let mut found = Vec::new();
    for src in &sources {
        let graph = modules::Graph::read(src);
        assert!(graph.modules() > 1, "{}: no modules read", src.display());
        for cycle in graph.cycles() {
            found.push(format!("{}: {}", src.display(), cycle.join(" → ")));
        }
    }
    assert!(
        found.is_empty(),
        "module cycles (move what both need into a third module, or one side's part into \
         the other):\n{}",
        found.join("\n")
    );
}
