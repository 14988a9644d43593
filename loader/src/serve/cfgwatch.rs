//! Re-apply the config when its file changes.
//!
//! inotify watches the directory that holds the config path (as given, not
//! resolved), so every way a file is replaced wakes the daemon: written in
//! place, renamed over by an editor or a package manager, or, in a
//! Kubernetes ConfigMap volume, swapped by the kubelet, which renames a new
//! `..data` symlink into the directory that the file's own symlink goes
//! through.  A burst of events settles for [`SETTLE`]; then the file is read,
//! and the daemon reloads only when its bytes differ from those last loaded
//! (a `touch` or an unrelated file in the directory changes nothing).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// How long a burst of events (write, then rename, then chmod) is let
/// settle before the file is read.
pub(super) const SETTLE: Duration = Duration::from_millis(200);

pub(super) struct ConfigWatch {
    fd: AsyncFd<inotify::Inotify>,
    path: PathBuf,
    /// The bytes of the config as last loaded (None: unreadable).
    last: Option<Vec<u8>>,
    /// Events seen: read the file at this instant.
    settle_at: Option<Instant>,
}

impl ConfigWatch {
    /// Watch `path`'s directory; `loaded` is the text the running config
    /// was parsed from.  The file is compared with it once the watch is in
    /// place, so a change made between that load and now is not missed.
    pub(super) fn new(path: &Path, loaded: Option<&str>) -> io::Result<ConfigWatch> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        use inotify::WatchMask as M;
        let mask = M::CLOSE_WRITE
            | M::MODIFY
            | M::MOVED_TO
            | M::CREATE
            | M::DELETE
            | M::ATTRIB
            | M::ONLYDIR;
        Ok(ConfigWatch {
            fd: super::inotify::watch([&dir], mask, true)?,
            path: path.to_path_buf(),
            last: loaded.map(|t| t.as_bytes().to_vec()),
            settle_at: Some(Instant::now()),
        })
    }

    /// The config was (re)loaded from `text` (None: unreadable): the bytes
    /// to compare with from now on.
    pub(super) fn loaded(&mut self, text: Option<&str>) {
        self.last = text.map(|t| t.as_bytes().to_vec());
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
                let now = std::fs::read(&self.path).ok();
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
    /// `changed`; an unchanged file and rewriting the same bytes do not.
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
        rt.block_on(async {
            // A change made after the load and before the watch existed.
            let mut w = ConfigWatch::new(&path, Some("a = 0\n")).unwrap();
            assert!(within(&mut w).await, "change before the watch");
            // Loaded as it is: nothing to report.
            let mut w = ConfigWatch::new(&path, Some("a = 1\n")).unwrap();
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
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
