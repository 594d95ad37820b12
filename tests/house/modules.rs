//! A crate's modules and which of their siblings each one uses, read from its sources
//! with syn: `use` trees and paths that start at `crate`, `super` or `self`. Test code
//! (`#[cfg(test)]` items, `tests.rs` files) is left out: a test may use what it checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::visit::Visit;

/// A module's path from the crate root: `["live", "object"]` for `live/object.rs`.
type ModulePath = Vec<String>;

/// The modules of one crate and the sibling edges between them.
pub(crate) struct Graph {
    modules: BTreeSet<ModulePath>,
    /// `(parent, from, to)`: a module under `parent` named `from` (or something inside
    /// it) uses its sibling `to` (or something inside it).
    edges: BTreeSet<(ModulePath, String, String)>,
}

impl Graph {
    /// Reads every `.rs` file under `src`.
    pub(crate) fn read(src: &Path) -> Graph {
        let mut files = Vec::new();
        collect(src, src, &mut files);
        let modules = files.iter().map(|(module, _)| module.clone()).collect();
        let mut uses = Vec::new();
        for (module, path) in &files {
            let text = std::fs::read_to_string(path).expect("a source file is readable");
            let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut paths = Paths::default();
            paths.visit_file(&file);
            uses.push((module.clone(), paths.found));
        }
        Graph::from_uses(modules, uses)
    }

    /// `uses`: each module and the paths it names.
    fn from_uses(
        modules: BTreeSet<ModulePath>,
        uses: Vec<(ModulePath, Vec<Vec<String>>)>,
    ) -> Graph {
        let mut graph = Graph {
            modules,
            edges: BTreeSet::new(),
        };
        for (module, paths) in uses {
            for path in paths {
                if let Some(target) = graph.resolve(&module, &path) {
                    graph.add_edge(&module, &target);
                }
            }
        }
        graph
    }

    pub(crate) fn modules(&self) -> usize {
        self.modules.len()
    }

    /// The module a path names, as far as it names a module: `crate::a::b::Item` is
    /// `a::b` if that is a module, else `a`.
    fn resolve(&self, from: &ModulePath, path: &[String]) -> Option<ModulePath> {
        // A file's own module is where `self` starts (`a.rs` and `a/mod.rs` alike: the
        // children of both live under `a`); `super` goes one up from there.
        let mut base: ModulePath = match path.first()?.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => from.clone(),
            _ => return None,
        };
        let mut rest = &path[1..];
        if path[0] == "super" {
            base.pop()?;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        let mut resolved = base;
        for segment in rest {
            let mut next = resolved.clone();
            next.push(segment.clone());
            if !self.modules.contains(&next) {
                break;
            }
            resolved = next;
        }
        Some(resolved)
    }

    fn add_edge(&mut self, from: &ModulePath, to: &ModulePath) {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        // A module using its own parent or child is not a sibling edge.
        if common == from.len() || common == to.len() {
            return;
        }
        self.edges.insert((
            from[..common].to_vec(),
            from[common].clone(),
            to[common].clone(),
        ));
    }

    /// Each loop among siblings, as the modules round it (the first again at the end).
    pub(crate) fn cycles(&self) -> Vec<Vec<String>> {
        let mut by_parent: BTreeMap<&ModulePath, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
        for (parent, from, to) in &self.edges {
            by_parent
                .entry(parent)
                .or_default()
                .entry(from)
                .or_default()
                .insert(to);
        }
        let mut cycles = Vec::new();
        for (parent, edges) in by_parent {
            let prefix = parent.iter().map(|p| format!("{p}::")).collect::<String>();
            for cycle in loops(&edges) {
                cycles.push(cycle.iter().map(|m| format!("{prefix}{m}")).collect());
            }
        }
        cycles
    }
}

/// One loop through each strongly connected group of two or more modules (Tarjan's
/// algorithm finds the groups; a walk inside a group closes a loop).
fn loops<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(from, to)| std::iter::once(*from).chain(to.iter().copied()))
        .collect();
    let mut tarjan = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for node in &nodes {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    let mut found = Vec::new();
    for group in tarjan.groups.into_iter().filter(|g| g.len() > 1) {
        let members: BTreeSet<&str> = group.iter().copied().collect();
        let start = *members.first().expect("a group has members");
        // Walk inside the group until a module comes round again.
        let mut walk = vec![start];
        loop {
            let here = *walk.last().expect("the walk has a start");
            let next = edges[here]
                .iter()
                .copied()
                .find(|n| members.contains(n))
                .expect("every module of a group uses another of it");
            if let Some(at) = walk.iter().position(|m| *m == next) {
                let mut cycle = walk[at..].to_vec();
                cycle.push(next);
                found.push(cycle);
                break;
            }
            walk.push(next);
        }
    }
    found
}

struct Tarjan<'a, 'e> {
    edges: &'e BTreeMap<&'a str, BTreeSet<&'a str>>,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    on_stack: BTreeSet<&'a str>,
    groups: Vec<Vec<&'a str>>,
}

impl<'a> Tarjan<'a, '_> {
    fn visit(&mut self, node: &'a str) {
        let index = self.index.len();
        self.index.insert(node, index);
        self.low.insert(node, index);
        self.stack.push(node);
        self.on_stack.insert(node);
        let next: Vec<&'a str> = self
            .edges
            .get(node)
            .map(|to| to.iter().copied().collect())
            .unwrap_or_default();
        for to in next {
            if !self.index.contains_key(to) {
                self.visit(to);
                let low = self.low[node].min(self.low[to]);
                self.low.insert(node, low);
            } else if self.on_stack.contains(to) {
                let low = self.low[node].min(self.index[to]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == self.index[node] {
            let mut group = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack.remove(member);
                group.push(member);
                if member == node {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}

/// `(module path, file)` of every `.rs` file under `dir`, test files left out.
fn collect(src: &Path, dir: &Path, files: &mut Vec<(ModulePath, std::path::PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a source folder is readable")
        .map(|entry| entry.expect("a source folder lists").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(src, &path, files);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs")
            || path.file_name() == Some("tests.rs".as_ref())
        {
            continue;
        }
        let relative = path.strip_prefix(src).expect("under src");
        let mut module: ModulePath = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        let file = module.pop().expect("a file has a name");
        match file.as_str() {
            "lib.rs" | "main.rs" if module.is_empty() => {}
            "mod.rs" => {}
            _ => module.push(file.trim_end_matches(".rs").to_owned()),
        }
        files.push((module, path));
    }
}

/// The paths a file names that start at `crate`, `self` or `super`, outside test code.
#[derive(Default)]
struct Paths {
    found: Vec<Vec<String>>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

impl Paths {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.leaf(prefix, &r.ident),
            syn::UseTree::Glob(_) => self.found.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut path = prefix.to_vec();
        // `use crate::x::{self}` names `x` itself.
        if ident != "self" {
            path.push(ident.to_string());
        }
        self.found.push(path);
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Const(c) => &c.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if matches!(
            segments.first().map(String::as_str),
            Some("crate" | "self" | "super")
        ) {
            self.found.push(segments);
        }
        syn::visit::visit_path(self, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(files: &[(&str, &str)]) -> Graph {
        let mut modules = BTreeSet::new();
        let mut uses = Vec::new();
        for (name, text) in files {
            let module: ModulePath = name
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            modules.insert(module.clone());
            let mut paths = Paths::default();
            paths.visit_file(&syn::parse_file(text).unwrap());
            uses.push((module, paths.found));
        }
        Graph::from_uses(modules, uses)
    }

    #[test]
    fn a_loop_of_three_is_found_and_named_in_order() {
        let g = graph(&[
            ("", "mod a; mod b; mod c;"),
            ("a", "use crate::b::X;"),
            ("b", "fn f() { crate::c::g(); }"),
            ("c", "use super::{a::{self}, Y};"),
        ]);
        assert_eq!(g.cycles(), vec![vec!["a", "b", "c", "a"]]);
    }

    #[test]
    fn parents_children_and_test_code_make_no_loop() {
        let g = graph(&[
            ("", "mod a; mod b; pub struct Root;"),
            ("a", "use crate::Root; use crate::b::B; mod inner;"),
            ("a::inner", "use super::super::a::Thing; use crate::a::T;"),
            (
                "b",
                "#[cfg(test)] mod tests { use crate::a::X; }\n\
                 #[cfg(test)] fn helper() { crate::a::y(); }",
            ),
        ]);
        assert!(g.cycles().is_empty(), "{:?}", g.cycles());
    }

    #[test]
    fn a_loop_inside_a_folder_is_named_with_its_folder() {
        let g = graph(&[
            ("", "mod live;"),
            ("live", "mod x; mod y;"),
            ("live::x", "use super::y::Y;"),
            ("live::y", "use crate::live::x::X;"),
        ]);
        assert_eq!(g.cycles(), vec![vec!["live::x", "live::y", "live::x"]]);
    }

    #[test]
    fn a_loop_between_folders_is_found_at_their_level() {
        // The syncer's rooms: a module of one folder using one of another is an edge
        // between the folders, so two rooms may not use each other either.
        let g = graph(&[
            ("", "mod cluster; mod fleet;"),
            ("cluster", "mod fence; mod run;"),
            ("cluster::fence", ""),
            ("cluster::run", "use crate::fleet::lease::Lease;"),
            ("fleet", "mod lease; mod supervisor;"),
            ("fleet::lease", "use crate::cluster::fence::Fence;"),
            ("fleet::supervisor", "use crate::cluster::run::ClusterRun;"),
        ]);
        assert_eq!(g.cycles(), vec![vec!["cluster", "fleet", "cluster"]]);
    }

    #[test]
    fn folders_within_folders_are_checked_at_every_level() {
        let g = graph(&[
            ("", "mod a;"),
            ("a", "mod b;"),
            ("a::b", "mod x; mod y;"),
            ("a::b::x", "use super::y::Y;"),
            ("a::b::y", "fn f() { crate::a::b::x::g(); }"),
        ]);
        assert_eq!(g.cycles(), vec![vec!["a::b::x", "a::b::y", "a::b::x"]]);
    }
}
