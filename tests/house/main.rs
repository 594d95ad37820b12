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

/// How many `.rs` files are under `dir`.
fn rust_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("a source folder is readable")
        .map(|entry| entry.expect("a source folder lists").path())
        .map(|path| {
            if path.is_dir() {
                rust_files(&path)
            } else {
                usize::from(path.extension().is_some_and(|e| e == "rs"))
            }
        })
        .sum()
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let sources = crate_sources();
    assert!(sources.len() > 10, "found only {sources:?}");
    let mut found = Vec::new();
    for src in &sources {
        let graph = modules::Graph::read(src);
        // A reader that found nothing would pass every crate: each file is a module
        // (a crate of one file, like karpor-config, has just its root).
        let files = rust_files(src);
        assert!(
            graph.modules() >= files.min(2),
            "{}: {} modules read from {files} files",
            src.display(),
            graph.modules()
        );
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
