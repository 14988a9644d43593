//! When to bind the config's cgroups again: as soon as a directory that can
//! hold one of them changes (inotify on `cgroup_rules::watch_dirs`: a
//! service started, a pod created, a cgroup removed and made again), and
//! every [`PERIOD`] as a backstop (an event lost to a full queue, a
//! directory created between a resolve and its watch).  cgroupfs reports
//! mkdir and rmdir like any file system.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use crate::bind::cgroup_rules::{self, CgroupRule};

/// Reconcile at least this often.
pub(super) const PERIOD: Duration = Duration::from_secs(10);
/// A burst of mkdirs (a pod's cgroups) settles this long first.
const SETTLE: Duration = Duration::from_millis(50);

pub(super) struct CgroupWatch {
    fd: Option<AsyncFd<inotify::Inotify>>,
    dirs: BTreeSet<PathBuf>,
    settle_at: Option<Instant>,
    next_poll: Instant,
}

impl CgroupWatch {
    pub(super) fn new() -> CgroupWatch {
        CgroupWatch {
            fd: None,
            dirs: BTreeSet::new(),
            settle_at: None,
            next_poll: Instant::now() + PERIOD,
        }
    }

    /// Watch the directories that can change what `rules` name (after each
    /// reconcile: a new directory level may exist now).
    pub(super) fn rewatch(&mut self, rules: &[CgroupRule]) -> io::Result<()> {
        self.next_poll = Instant::now() + PERIOD;
        let dirs = cgroup_rules::watch_dirs(rules);
        if dirs == self.dirs && (self.fd.is_some() || dirs.is_empty()) {
            return Ok(());
        }
        self.fd = None;
        self.dirs = dirs;
        if self.dirs.is_empty() {
            return Ok(());
        }
        use inotify::WatchMask as M;
        let mask = M::CREATE | M::DELETE | M::MOVED_TO | M::DELETE_SELF | M::ONLYDIR;
        // A directory that vanished since it was listed is skipped: the
        // period covers it.
        self.fd = Some(super::inotify::watch(&self.dirs, mask, false)?);
        Ok(())
    }

    fn drain(&mut self) {
        if let Some(fd) = &mut self.fd {
            super::inotify::drain(fd.get_mut());
        }
    }

    /// Resolves when the cgroups should be reconciled.  Cancel-safe.
    pub(super) async fn due(&mut self) -> io::Result<()> {
        loop {
            if let Some(at) = self.settle_at {
                tokio::time::sleep_until(at).await;
                self.settle_at = None;
                self.drain();
                return Ok(());
            }
            let (fd, poll) = (self.fd.as_ref(), self.next_poll);
            let readable = async move {
                match fd {
                    Some(fd) => fd.readable().await.map(Some),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = readable => {
                    if let Some(mut g) = r? {
                        g.clear_ready();
                    }
                    self.drain();
                    self.settle_at = Some(Instant::now() + SETTLE);
                }
                _ = tokio::time::sleep_until(poll) => {
                    self.next_poll = Instant::now() + PERIOD;
                    return Ok(());
                }
            }
        }
    }
}
