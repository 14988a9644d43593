//! The module graph of every crate of the workspace has no circles.
//!
//! A module's dependencies are the `crate::<module>` paths in its code
//! (comments excluded): `use crate::a::b`, `use crate::{a, b::c}` and paths
//! written inline (`crate::a::f()`).  Two top-level modules that reach each
//! other, directly or through others, are a circle: one of them holds what
//! both need, and that belongs in a leaf module below both.
//!
//! `cargo test -p ccload-itests --test module_graph -- --nocapture` prints
//! every crate's graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Crates whose module graphs are checked, relative to the workspace root.
const CRATES: &[&str] = &[
    "loader/src",
    "bpf/core-tests/src",
    "lab/src",
    "qa/src",
    "testbed/src",
    "xtask/src",
];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The code of a Rust file without its comments and string literals (a
/// `crate::` in either is not a dependency).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'r' && i + 1 < b.len() && (b[i + 1] == b'"' || b[i + 1] == b'#') {
            // a raw string r"..." or r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == b'"' && (i == 0 || !is_ident(b[i - 1])) {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            } else {
                out.push('r');
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // a char literal ('"', '\'', '\n'), not a lifetime
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The first path segment of each item of a `{...}` use group starting at
/// `s[0] == '{'`.
fn group_heads(s: &str, heads: &mut BTreeSet<String>) {
    let mut depth = 0;
    let mut item_start = true;
    for (k, c) in s.char_indices() {
        match c {
            '{' => {
                depth += 1;
                item_start = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return;
                }
            }
            ',' if depth == 1 => item_start = true,
            c if depth == 1 && item_start && (c.is_ascii_alphabetic() || c == '_') => {
                let end = s[k..]
                    .find(|c: char| !is_ident(c as u8))
                    .map_or(s.len(), |e| k + e);
                heads.insert(s[k..end].to_string());
                item_start = false;
            }
            c if !c.is_whitespace() => item_start = false,
            _ => {}
        }
    }
}

/// The top-level modules a file's code names through `crate::`.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut heads = BTreeSet::new();
    let b = code.as_bytes();
    let mut from = 0;
    while let Some(k) = code[from..].find("crate::") {
        let at = from + k;
        from = at + 7;
        if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b'$') {
            continue; // `$crate::` in a macro, or `ccload_crate::`
        }
        let rest = code[from..].trim_start();
        if rest.starts_with('{') {
            group_heads(rest, &mut heads);
        } else {
            let end = rest
                .find(|c: char| !is_ident(c as u8))
                .unwrap_or(rest.len());
            if end > 0 {
                heads.insert(rest[..end].to_string());
            }
        }
    }
    heads
}

/// The top-level module a source file belongs to (`None` for the crate
/// root and binaries, which are not modules of the library).
fn module_of(src_dir: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src_dir).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    if first == "bin" || first == "main.rs" || first == "lib.rs" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn graph_of(src_dir: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
    let mut g = Graph::new();
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(src_dir, f)).collect();
    for f in &files {
        let Some(m) = module_of(src_dir, f) else {
            continue;
        };
        let code = code_only(&std::fs::read_to_string(f).expect("read source"));
        let deps = g.entry(m.clone()).or_default();
        for h in crate_refs(&code) {
            if h != m && modules.contains(&h) {
                deps.insert(h);
            }
        }
    }
    g
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn the_checker_finds_a_circle_and_reads_groups_and_inline_paths() {
    let code = code_only(
        "use crate::{a::X, b as B, c::{d, e}};\n\
         // crate::zz in a comment\n\
         fn f() { crate::g::h(); let s = \"crate::yy\"; let c = '\"'; $crate::q::r }\n",
    );
    let refs: Vec<String> = crate_refs(&code).into_iter().collect();
    assert_eq!(refs, ["a", "b", "c", "g"]);

    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    g.entry("d".into()).or_default().insert("a".into());
    assert_eq!(
        circles(&g),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
    g.get_mut("c").unwrap().clear();
    assert!(circles(&g).is_empty());
}

#[test]
fn no_crate_has_an_import_circle() {
    let root = ccload_itests::repo_root();
    let mut found = Vec::new();
    for dir in CRATES {
        let g = graph_of(&root.join(dir));
        assert!(!g.is_empty(), "{dir}: no modules read");
        println!("{dir}:");
        for (m, deps) in &g {
            println!(
                "  {m} -> {}",
                deps.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        for c in circles(&g) {
            found.push(format!("{dir}: {}", c.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "import circles:\n  {}",
        found.join("\n  ")
    );
}

/// ccload's top-level modules are its layers (src/lib.rs), lowest first:
/// each may use only those before it.
const LOADER_LAYERS: &[&str] = &["error", "units", "host", "bpf", "bind", "serve", "cli"];

#[test]
fn ccload_layers_use_only_the_layers_below_them() {
    let g = graph_of(&ccload_itests::repo_root().join("loader/src"));
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        if m == "fuzz_tests" {
            continue; // tests of parsers in several layers
        }
        let Some(rank) = LOADER_LAYERS.iter().position(|l| l == m) else {
            wrong.push(format!("{m} is not a layer of src/lib.rs's list"));
            continue;
        };
        for d in deps {
            if LOADER_LAYERS
                .iter()
                .position(|l| l == d)
                .is_none_or(|r| r >= rank)
            {
                wrong.push(format!("{m} uses {d}, which is not below it"));
            }
        }
    }
    assert!(wrong.is_empty(), "loader/src:\n  {}", wrong.join("\n  "));
}
