//! Which cgroups a config's `[[cgroups]]` entries name, now.
//!
//! An entry's path may name a cgroup that does not exist yet (the service
//! has not started) and may hold shell wildcards in any component (`*`, `?`,
//! `[...]`, matched per component: `*` never crosses a `/`), so one entry
//! covers a family of cgroups that come and go:
//! `/sys/fs/cgroup/system.slice/nginx*.service`,
//! `/sys/fs/cgroup/kubepods.slice/*/*/cri-containerd-*.scope`.
//! [`resolve`] expands the entries against the cgroup tree; `apply` binds
//! what exists, and `serve` resolves again whenever a directory that can
//! hold a match changes ([`watch_dirs`]) and on a period, so a cgroup is
//! bound when it appears and bound again when it is recreated.  When two
//! entries name one cgroup, the first in the file binds it.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::bind::cgroup::CgroupDir;

/// One `[[cgroups]]` entry: which cgroups, and what their sockets get.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupRule {
    /// Absolute; may hold wildcards and name cgroups that do not exist.
    pub pattern: PathBuf,
    /// The congestion control: one of ours or a kernel CC.
    pub cc: String,
    /// Its profile id (0 = the defaults).
    pub profile: u32,
    /// Path rules before that choice (path_rules.rs), in order.
    pub path_rules: Vec<crate::bind::path_rules::PathRule>,
}

/// Does this path component hold a wildcard?
fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Does `p` hold a wildcard anywhere?
pub fn has_glob(p: &Path) -> bool {
    p.to_str().is_some_and(is_glob)
}

/// One component's wildcard, compiled (globset: `*`, `?`, `[...]`,
/// `[!...]`; a `/` is never matched, components are matched one by one).
fn component_glob(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    Ok(globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()?
        .compile_matcher())
}

/// Does the wildcard `pattern` match the component `name`?  A malformed
/// pattern (refused by [`check_pattern`] on load) matches nothing.
fn component_matches(pattern: &str, name: &str) -> bool {
    component_glob(pattern).is_ok_and(|g| g.is_match(name))
}

/// A wildcard is well formed (a `[` has its `]`, ...).
pub fn check_pattern(p: &Path) -> Result<(), String> {
    if !p.is_absolute() {
        return Err(format!("{}: a cgroup path must be absolute", p.display()));
    }
    for c in p.components() {
        let Component::Normal(c) = c else { continue };
        let Some(s) = c.to_str() else {
            return Err(format!("{}: not UTF-8", p.display()));
        };
        if is_glob(s) {
            if let Err(e) = component_glob(s) {
                return Err(format!("{}: `{s}`: {}", p.display(), e.kind()));
            }
        }
    }
    Ok(())
}

impl CgroupRule {
    /// Does this entry name the cgroup at `path` (absolute, canonical)?
    pub fn matches(&self, path: &Path) -> bool {
        let pc: Vec<_> = self.pattern.components().collect();
        let xc: Vec<_> = path.components().collect();
        pc.len() == xc.len()
            && pc.iter().zip(&xc).all(|(p, x)| match (p, x) {
                (Component::Normal(p), Component::Normal(x)) => match (p.to_str(), x.to_str()) {
                    (Some(p), Some(x)) if is_glob(p) => component_matches(p, x),
                    _ => p == x,
                },
                _ => p == x,
            })
    }

    /// The existing directories this entry names.
    pub fn expand(&self) -> Vec<PathBuf> {
        let mut level = vec![PathBuf::from("/")];
        for c in self.pattern.components() {
            let Component::Normal(c) = c else { continue };
            // compiled once for every directory of the level (a
            // malformed pattern, refused on load, matches nothing)
            let pat = c
                .to_str()
                .filter(|s| is_glob(s))
                .map(|s| component_glob(s).ok());
            let mut next = Vec::new();
            for dir in &level {
                match &pat {
                    None => {
                        let p = dir.join(c);
                        if p.is_dir() {
                            next.push(p);
                        }
                    }
                    Some(pat) => {
                        let Ok(rd) = std::fs::read_dir(dir) else {
                            continue;
                        };
                        let mut names: Vec<PathBuf> = rd
                            .filter_map(|e| e.ok())
                            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                            .filter(|e| {
                                e.file_name()
                                    .to_str()
                                    .is_some_and(|n| pat.as_ref().is_some_and(|g| g.is_match(n)))
                            })
                            .map(|e| e.path())
                            .collect();
                        names.sort();
                        next.extend(names);
                    }
                }
            }
            level = next;
            if level.is_empty() {
                break;
            }
        }
        level
    }
}

/// What the entries name now.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Resolved {
    /// (cgroup path, cgroup id, index of the entry that binds it).
    pub bound: Vec<(PathBuf, u64, usize)>,
    /// Entries that name no existing cgroup.
    pub missing: Vec<usize>,
}

/// Expand every entry; the first entry that names a cgroup binds it.  A
/// match that is not a cgroup v2 directory, or goes through a symlink, is
/// skipped.
pub fn resolve(rules: &[CgroupRule]) -> Resolved {
    let mut out = Resolved::default();
    let mut seen = BTreeSet::new();
    for (i, r) in rules.iter().enumerate() {
        let mut any = false;
        for p in r.expand() {
            let Ok(cg) = CgroupDir::open(&p) else {
                continue;
            };
            any = true;
            if seen.insert(cg.id) {
                out.bound.push((cg.path, cg.id, i));
            }
        }
        if !any {
            out.missing.push(i);
        }
    }
    out
}

/// The directories whose entries can change what `rules` name: every
/// existing directory that a proper prefix of an entry names, within the
/// cgroup2 mount.  `serve` watches them (inotify) and, when one changes,
/// resolves again.
pub fn watch_dirs(rules: &[CgroupRule]) -> BTreeSet<PathBuf> {
    let Some(mount) = crate::host::system::cgroup2_mount() else {
        return BTreeSet::new();
    };
    let mut out = BTreeSet::new();
    for r in rules {
        let comps: Vec<_> = r.pattern.components().collect();
        for k in 1..comps.len() {
            let prefix = CgroupRule {
                pattern: comps[..k].iter().collect(),
                cc: String::new(),
                profile: 0,
                path_rules: Vec::new(),
            };
            for d in prefix.expand() {
                if d.starts_with(&mount) {
                    out.insert(d);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(p: &str) -> CgroupRule {
        CgroupRule {
            pattern: p.into(),
            cc: "cubic".into(),
            profile: 0,
            path_rules: Vec::new(),
        }
    }

    #[test]
    fn wildcards_match_per_component() {
        let r = rule("/sys/fs/cgroup/system.slice/nginx*.service");
        assert!(r.matches(Path::new("/sys/fs/cgroup/system.slice/nginx.service")));
        assert!(r.matches(Path::new("/sys/fs/cgroup/system.slice/nginx-2.service")));
        assert!(!r.matches(Path::new("/sys/fs/cgroup/system.slice/apache.service")));
        assert!(!r.matches(Path::new("/sys/fs/cgroup/system.slice/x/nginx.service")));
        let k = rule("/k/kubepods.slice/*/*/cri-containerd-*.scope");
        assert!(k.matches(Path::new(
            "/k/kubepods.slice/a.slice/b.slice/cri-containerd-12.scope"
        )));
        assert!(!k.matches(Path::new(
            "/k/kubepods.slice/a.slice/cri-containerd-12.scope"
        )));
        assert!(
            rule("/a/b").matches(Path::new("/a/b")) && !rule("/a/b").matches(Path::new("/a/c"))
        );
        assert!(rule("/a/[bc]").matches(Path::new("/a/c")));
        assert!(!rule("/a/[!bc]").matches(Path::new("/a/c")));
        assert!(rule("/a/[!bc]").matches(Path::new("/a/d")));
        assert!(rule("/a/?.scope").matches(Path::new("/a/1.scope")));
        assert!(!rule("/a/?.scope").matches(Path::new("/a/12.scope")));
        assert!(rule("/a/*").matches(Path::new("/a/.hidden")));
        assert!(has_glob(Path::new("/a/*")) && !has_glob(Path::new("/a/b")));
        assert!(check_pattern(Path::new("rel/x")).is_err());
        assert!(check_pattern(Path::new("/a/[b")).is_err());
        assert!(check_pattern(Path::new("/a/[b]*")).is_ok());
    }

    #[test]
    fn expand_walks_the_tree_and_watch_dirs_are_the_prefixes() {
        let root = std::env::temp_dir().join(format!("ccl-rules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in [
            "s/nginx.service",
            "s/nginx-2.service",
            "s/db.service",
            "s/x/nginx.service",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("s/nginx-file.service"), "").unwrap();
        let r = rule(&format!("{}/s/nginx*.service", root.display()));
        assert_eq!(
            r.expand(),
            vec![root.join("s/nginx-2.service"), root.join("s/nginx.service")]
        );
        assert!(rule(&format!("{}/s/none*", root.display()))
            .expand()
            .is_empty());
        assert_eq!(
            rule(&format!("{}/s/db.service", root.display())).expand(),
            vec![root.join("s/db.service")]
        );
        assert!(rule(&format!("{}/nope/db.service", root.display()))
            .expand()
            .is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }
}
