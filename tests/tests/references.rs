//! What the repository's code and documents point at is in the
//! repository: every path written as `docs/...`, `bpf/...`, `loader/...`
//! (and the other top-level directories) exists, every relative Markdown
//! link resolves, a name cited with its file (`` `name` in path ``) is
//! in that file, and nothing cites a document the repository does not
//! hold (the project's issue tracker, its specification).  The dated record
//! (`docs/notebook/`) and the stored lab results (`docs/grid/`) are history
//! and are not read.

use std::path::PathBuf;

use ccload_itests::{repo_files, repo_root};

/// Paths that stand for something else: libbpf's headers (`#include
/// <bpf/bpf_helpers.h>`), the fifth-controller recipe's files, which the
/// reader creates, and a placeholder.
const NOT_FILES: &[&str] = &[
    "bpf/bpf_core_read.h",
    "bpf/bpf_endian.h",
    "bpf/bpf_helpers.h",
    "bpf/bpf_tracing.h",
    "bpf/core/demo_core.h",
    "bpf/demo.bpf.c",
    "docs/demo.md",
    "bpf/vmlinux/ARCH",
];

const DIRS: &[&str] = &[
    "docs", "bpf", "loader", "lab", "qa", "testbed", "tests", "xtask", "configs", "scripts",
    "deploy", ".ci",
];

fn tracked() -> Vec<PathBuf> {
    repo_files()
        .into_iter()
        .filter(|f| !f.starts_with("docs/grid/") && !f.starts_with("docs/notebook/"))
        .filter(|f| {
            [
                ".rs", ".c", ".h", ".md", ".toml", ".sh", ".yaml", ".service", "run",
            ]
            .iter()
            .any(|e| f.ends_with(e))
        })
        .filter(|f| !f.contains("vmlinux") && *f != "Cargo.lock")
        .map(PathBuf::from)
        .collect()
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./-".contains(c)
}

/// The repository paths a text names (`docs/lab.md`, `loader/src/bind/cgroup.rs`).
fn repo_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for d in DIRS {
        let needle = format!("{d}/");
        let mut from = 0;
        while let Some(k) = text[from..].find(&needle) {
            let at = from + k;
            from = at + needle.len();
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| is_path_char(c) || c == '<') {
                continue; // a longer path (/usr/share/doc/...), or <bpf/...>
            }
            let end = text[at..]
                .find(|c: char| !is_path_char(c))
                .map_or(text.len(), |e| at + e);
            let p = text[at..end].trim_end_matches(['.', '-', '/']);
            if p.len() > needle.len() && !text[end..].starts_with(['*', '<', '{']) {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// The relative targets of a Markdown file's links, `[text](target)`.
fn md_links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .map(|t| t.split('#').next().unwrap_or("").to_string())
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

/// Names cited with the file they are in: "`NAME` in PATH", "`NAME()` in
/// `PATH`", "`NAME` (PATH": (NAME without its `()` and path prefix, PATH).
fn cited_names(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('`') {
        let rest = &text[i + 1..];
        let Some(end) = rest.find('`') else { break };
        let name = &rest[..end];
        let ident = name.trim_end_matches("()");
        let ident = ident.rsplit("::").next().unwrap_or(ident);
        if ident.is_empty() || !ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let after = &rest[end + 1..];
        let Some(tail) = after
            .strip_prefix(" in ")
            .or_else(|| after.strip_prefix(" ("))
            .map(|t| t.trim_start_matches('`'))
        else {
            continue;
        };
        if let Some(p) = repo_paths(tail).into_iter().find(|p| tail.starts_with(p)) {
            out.push((ident.to_string(), p));
        }
    }
    out
}

#[test]
fn the_checker_reads_paths_and_links() {
    let t = "see docs/lab.md, loader/src/bind/cgroup.rs. /usr/share/doc/ccload and \
             <bpf/bpf_helpers.h>; bpf/core/*_core.h; [a](choosing.md#x) [b](https://x)";
    assert_eq!(repo_paths(t), ["docs/lab.md", "loader/src/bind/cgroup.rs"]);
    assert_eq!(md_links(t), ["choosing.md"]);
    let t = "`serial()` in tests/src/lib.rs, `CCL_ALGOS` (bpf/ccload_intf.h), \
             `x::y` in `loader/src/bind/cgroup.rs`; `z` is in docs/lab.md, `q` in the docs";
    assert_eq!(
        cited_names(t),
        [
            ("serial".to_string(), "tests/src/lib.rs".to_string()),
            ("CCL_ALGOS".into(), "bpf/ccload_intf.h".into()),
            ("y".into(), "loader/src/bind/cgroup.rs".into()),
        ]
    );
}

#[test]
fn what_the_repository_points_at_is_in_it() {
    let root = repo_root();
    let mut missing = Vec::new();
    for f in tracked() {
        let Ok(text) = std::fs::read_to_string(root.join(&f)) else {
            continue;
        };
        for p in repo_paths(&text) {
            if !NOT_FILES.contains(&p.as_str()) && !root.join(&p).exists() {
                missing.push(format!("{}: {p}", f.display()));
            }
        }
        // a name cited with its file is defined (or at least named) there
        for (name, p) in cited_names(&text) {
            let there = std::fs::read_to_string(root.join(&p)).unwrap_or_default();
            if !NOT_FILES.contains(&p.as_str()) && !there.contains(&name) {
                missing.push(format!("{}: `{name}` is not in {p}", f.display()));
            }
        }
        if f.extension().is_some_and(|e| e == "md") {
            let dir = root.join(&f).parent().unwrap().to_path_buf();
            for l in md_links(&text) {
                if !dir.join(&l).exists() && !NOT_FILES.contains(&l.as_str()) {
                    missing.push(format!("{}: link {l}", f.display()));
                }
            }
        }
        // (built here, so that this file does not cite them itself)
        let cites = [
            ["ALGORITHMS", ".md"],
            ["ALGORITHMS", " "],
            ["issue", " #"],
            ["interpretation", " register"],
        ];
        for cite in cites.map(|c| c.concat()) {
            if text.contains(&cite) {
                missing.push(format!("{}: cites `{}`", f.display(), cite.trim()));
            }
        }
        // an issue by its number: the tracker is not in the repository
        let issue = ["issue", " "].concat();
        if text
            .match_indices(&issue)
            .any(|(i, m)| text[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
        {
            missing.push(format!("{}: cites an issue by number", f.display()));
        }
    }
    assert!(
        missing.is_empty(),
        "points outside the repository:\n  {}",
        missing.join("\n  ")
    );
}
