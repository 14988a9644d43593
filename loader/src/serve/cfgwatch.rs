//! Re-apply the config when one of its files changes.
//!
//! inotify watches the directories that hold the config's paths (as given, not
//! resolved), so every way a file is replaced wakes the daemon: written in
//! place, renamed over by an editor or a package manager, or, in a
//! Kubernetes ConfigMap volume, swapped by the kubelet, which renames a new
//! `..data` symlink into the directory that the file's own symlink goes
//! through.  A burst of events settles for [`SETTLE`]; then the file is read,
//! and the daemon reloads only when its bytes differ from those last loaded
//! (a `touch` or an unrelated file in the directory changes nothing).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use crate::bind::config::Source;

/// How long a burst of events (write, then rename, then chmod) is let
/// settle before the file is read.
pub(super) const SETTLE: Duration = Duration::from_millis(200);

pub(super) struct ConfigWatch {
    fd: AsyncFd<inotify::Inotify>,
    paths: Vec<PathBuf>,
    /// The bytes of the config's files as last loaded, each after its
    /// length (None: one was unreadable).
    last: Option<Vec<u8>>,
    /// Events seen: read the file at this instant.
    settle_at: Option<Instant>,
}

impl ConfigWatch {
    /// Watch the directories of `paths`; `loaded` is what the running
    /// config was parsed from.  The files are compared with it once the
    /// watch is in place, so a change made between that load and now is not
    /// missed.
    pub(super) fn new(paths: &[PathBuf], loaded: Option<&[Source]>) -> io::Result<ConfigWatch> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for p in paths {
            let d = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        use inotify::WatchMask as M;
        let mask = M::CLOSE_WRITE
            | M::MODIFY
            | M::MOVED_TO
            | M::CREATE
            | M::DELETE
            | M::ATTRIB
            | M::ONLYDIR;
        Ok(ConfigWatch {
            fd: super::inotify::watch(&dirs, mask, true)?,
            paths: paths.to_vec(),
            last: loaded.map(|s| fingerprint(s.iter().map(|s| s.text.as_bytes()))),
            settle_at: Some(Instant::now()),
        })
    }

    /// The config was (re)loaded from `srcs` (None: unreadable): the bytes
    /// to compare with from now on.
    pub(super) fn loaded(&mut self, srcs: Option<&[Source]>) {
        self.last = srcs.map(|s| fingerprint(s.iter().map(|s| s.text.as_bytes())));
    }

    fn drain(&mut self) {
        super::inotify::drain(self.fd.get_mut());
    }

    /// Resolves when the config file's content has changed.  Cancel-safe:
    /// a pending settle survives being dropped mid-wait.
    pub(super) async fn changed(&mut self) -> io::Result<()> {
        loop {
            if let Some(at) = self.settle_at {
                tokio::time::sleep_until(at).await;
                self.settle_at = None;
                self.drain();
                let now = self
                    .paths
                    .iter()
                    .map(std::fs::read)
                    .collect::<io::Result<Vec<_>>>()
                    .ok()
                    .map(|b| fingerprint(b.iter().map(|b| b.as_slice())));
                if now != self.last {
                    self.last = now;
                    return Ok(());
                }
                continue;
            }
            let mut g = self.fd.readable_mut().await?;
            super::inotify::drain(g.get_inner_mut());
            g.clear_ready();
            self.settle_at = Some(Instant::now() + SETTLE);
        }
    }
}

/// Every file's bytes, each after its length: equal exactly when each
/// file is.
fn fingerprint<'a>(files: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut v = Vec::new();
    for f in files {
        v.extend_from_slice(&(f.len() as u64).to_le_bytes());
        v.extend_from_slice(f);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn within(w: &mut ConfigWatch) -> bool {
        tokio::time::timeout(Duration::from_secs(2), w.changed())
            .await
            .is_ok()
    }

    /// A file that changed between its load and the watch, a ConfigMap-style
    /// symlink swap, a rename over and a write in place each resolve
    /// `changed`, in either file of a two-file config (in two directories);
    /// an unchanged file and rewriting the same bytes do not.
    #[test]
    fn content_changes_wake_it_and_touches_do_not() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = std::env::temp_dir().join(format!("ccl-cfgwatch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("v1")).unwrap();
        std::fs::create_dir_all(dir.join("v2")).unwrap();
        std::fs::write(dir.join("v1/c.toml"), "a = 1\n").unwrap();
        std::fs::write(dir.join("v2/c.toml"), "a = 2\n").unwrap();
        std::os::unix::fs::symlink("v1", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/c.toml", dir.join("c.toml")).unwrap();
        let path = dir.join("c.toml");
        std::fs::create_dir_all(dir.join("pool")).unwrap();
        let pool = dir.join("pool/p.toml");
        std::fs::write(&pool, "b = 1\n").unwrap();
        let paths = [path.clone(), pool.clone()];
        let srcs = |a: &str| {
            [(&path, a), (&pool, "b = 1\n")].map(|(p, t)| Source {
                path: p.clone(),
                text: t.to_string(),
            })
        };
        rt.block_on(async {
            // A change made after the load and before the watch existed.
            let mut w = ConfigWatch::new(&paths, Some(&srcs("a = 0\n"))).unwrap();
            assert!(within(&mut w).await, "change before the watch");
            // Loaded as it is: nothing to report.
            let mut w = ConfigWatch::new(&paths, Some(&srcs("a = 1\n"))).unwrap();
            assert!(!within(&mut w).await, "unchanged file at the start");
            // The kubelet's swap: a new symlink renamed over ..data.
            std::os::unix::fs::symlink("v2", dir.join("..data_tmp")).unwrap();
            std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
            assert!(within(&mut w).await, "symlink swap");
            // An editor's rename over the link: a plain file from here.
            std::fs::write(dir.join("new.toml"), "a = 3\n").unwrap();
            std::fs::rename(dir.join("new.toml"), &path).unwrap();
            assert!(within(&mut w).await, "rename over");
            // Same bytes again (a touch): nothing.
            std::fs::write(&path, "a = 3\n").unwrap();
            assert!(!within(&mut w).await, "unchanged content woke it");
            // Written in place.
            std::fs::write(&path, "a = 4\n").unwrap();
            assert!(within(&mut w).await, "write in place");
            // The second file, in its own directory.
            std::fs::write(&pool, "b = 2\n").unwrap();
            assert!(within(&mut w).await, "the second file");
            std::fs::write(&pool, "b = 2\n").unwrap();
            assert!(!within(&mut w).await, "the second file, unchanged");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
