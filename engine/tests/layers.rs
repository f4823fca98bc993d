//! The engine's layers, checked from its source: no module imports another in a circle, and each
//! layer uses only the ones below it (shared state < data < runtime < api). A `crate::` or
//! `super::` path in a module's code (comments and its `#[cfg(test)] mod tests` aside) counts as
//! a use of the module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("engine/src is readable") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module path of a source file: `runtime/conn.rs` → `runtime::conn`, `api/mod.rs` → `api`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without comments and without its unit-test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `prefix` path in `code`, as the segments that follow it.
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        out.push(rest[..end].split("::").filter(|s| !s.is_empty()).collect());
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.retain(|f| !f.ends_with("main.rs"));
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let resolve = |path: Vec<&str>| -> Option<String> {
        (1..=path.len())
            .rev()
            .map(|k| path[..k].join("::"))
            .find(|m| modules.contains(m))
    };
    let mut g = BTreeMap::new();
    for f in &files {
        let name = module_of(&src, f);
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        let mut deps = BTreeSet::new();
        for p in paths_after(&code, "crate::") {
            deps.extend(resolve(p));
        }
        let parent: Vec<&str> = name.split("::").collect();
        let parent = &parent[..parent.len().saturating_sub(1)];
        for p in paths_after(&code, "super::") {
            let full: Vec<&str> = parent.iter().copied().chain(p).collect();
            deps.extend(resolve(full));
        }
        deps.remove(&name);
        deps.remove(""); // `crate::` alone: the crate root re-exports
        g.insert(name, deps);
    }
    g
}

/// A cycle through `start`, if any (depth-first search).
fn cycle_from(g: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        g: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(g, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn no_module_imports_another_in_a_circle() {
    let g = graph();
    assert!(g.len() > 20, "found the engine's modules: {:?}", g.keys());
    for m in g.keys() {
        assert_eq!(cycle_from(&g, m), None, "an import cycle through {m}");
    }
}

#[test]
fn each_layer_uses_only_the_layers_below_it() {
    // Layer of a module: its top-level folder, or "state" for the shared files at the root.
    let layer = |m: &str| match m.split("::").next().unwrap_or("") {
        "data" => 1,
        "runtime" => 2,
        "api" => 3,
        "" => 4, // lib.rs wires the layers together
        _ => 0,
    };
    let g = graph();
    for (m, deps) in &g {
        for d in deps {
            // One folder per layer above the shared state, so "same layer" is "same folder"
            // there; within a layer the cycle test keeps the order.
            assert!(
                layer(d) <= layer(m),
                "{m} (layer {}) uses {d} (layer {})",
                layer(m),
                layer(d)
            );
        }
    }
    // The check can fail: the runtime must not know the API layer exists.
    assert!(g["runtime::conn"].contains("runtime::shard"));
    assert!(!g["runtime::conn"].iter().any(|d| d.starts_with("api")));
}
