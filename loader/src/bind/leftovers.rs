//! Leftovers: kernel state of ccload's that no complete attachment or
//! binding owns, as a kill at the wrong moment (or an older ccload) can
//! leave them.  `status` and `doctor` report them with the fix;
//! `detach --all` and every command that pins (under the state lock, so no
//! other ccload is building them) remove them.
//!
//! - `<pin root>/tmp-*`: an attach or a cgroup binding killed while pinning
//!   (it pins in a private directory and renames it into place; bpffs allows
//!   no dot in a name, hence no leading dot);
//! - `<pin root>/<algo>/` without `link`: map pins of an interrupted attach;
//! - `<pin root>/cgroup/<id>/` without `link`: an interrupted binding;
//! - a controller registered under one of our names with no pin: held by
//!   another process or loader (reported; ccload cannot remove it).

use std::path::{Path, PathBuf};

use crate::bpf::algos::Algo;
use crate::bpf::{self, PIN_ROOT};

#[derive(Debug, Clone, serde::Serialize)]
pub struct Leftover {
    pub path: PathBuf,
    pub what: String,
    /// Can `detach --all` (or the next attach) remove it?
    pub removable: bool,
}

fn is_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .map(|m| m.is_dir())
        .unwrap_or(false)
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// What is left over now (reads only).
pub fn find() -> Vec<Leftover> {
    let root = Path::new(PIN_ROOT);
    let mut out = Vec::new();
    for p in entries(root) {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if name.starts_with(bpf::TMP_PREFIX) {
            out.push(Leftover {
                what: "unfinished attach or binding (killed while pinning)".into(),
                path: p,
                removable: true,
            });
        }
    }
    for a in Algo::ALL {
        let d = bpf::pin_dir(a);
        if is_dir(&d) && !bpf::is_attached(a) {
            out.push(Leftover {
                what: format!("pins of an interrupted attach of {a} (no link)"),
                path: d,
                removable: true,
            });
        } else if !d.exists() && bpf::is_registered(a.name()) {
            out.push(Leftover {
                what: format!(
                    "`{a}` is registered but not pinned by ccload: another process or loader \
                     holds it (bpftool struct_ops list; end that process)"
                ),
                path: d,
                removable: false,
            });
        }
    }
    for d in entries(&crate::bind::cgroup::cg_root()) {
        if is_dir(&d) && !d.join("link").exists() {
            out.push(Leftover {
                what: "cgroup binding without its link (interrupted `cgroup set`)".into(),
                path: d,
                removable: true,
            });
        }
    }
    out
}

/// Remove every removable leftover (`remove`) before pinning: the
/// `bpf::Sweep` that `bpf::attach` and the cgroup bindings take.
pub fn sweep() -> anyhow::Result<bpf::Swept> {
    remove().map(|(s, _)| s)
}

/// Remove every removable leftover; returns what was removed.  Call with the
/// state lock held.  A removed `tmp-*` directory may have held a link: wait
/// (up to 5 s) until the kernel has released the names it registered.
pub fn remove() -> anyhow::Result<(bpf::Swept, Vec<Leftover>)> {
    let found: Vec<Leftover> = find().into_iter().filter(|l| l.removable).collect();
    let mut had_link = false;
    for l in &found {
        had_link |= l.path.join("link").exists() || l.path.join("struct_ops").exists();
        bpf::unpin_dir(&l.path)?;
    }
    let _ = std::fs::remove_dir(crate::bind::cgroup::cg_root()); // only if empty
    if !found.is_empty() {
        bpf::gc_pin_root();
    }
    if had_link {
        // Only names without an attachment can have been held by a tmp-* link.
        let free: Vec<Algo> = Algo::ALL
            .into_iter()
            .filter(|a| !bpf::is_attached(*a))
            .collect();
        bpf::wait_unregistered(&free);
    }
    Ok((bpf::Swept::after_sweep(), found))
}
