//! The inotify pieces `cfgwatch` and `cgwatch` share: one non-blocking
//! inotify instance (the `inotify` crate) watching some directories,
//! registered with tokio, and a drain of its queued events (their names do
//! not matter to either: both look at the file system again).

use std::io;
use std::path::PathBuf;

use inotify::{Inotify, WatchMask};
use tokio::io::unix::AsyncFd;

/// An inotify instance with `mask` on each of `dirs`.  A directory that
/// cannot be watched (gone since it was listed) is an error when `strict`,
/// else skipped.
pub(super) fn watch<'a>(
    dirs: impl IntoIterator<Item = &'a PathBuf>,
    mask: WatchMask,
    strict: bool,
) -> io::Result<AsyncFd<Inotify>> {
    // non-blocking and close-on-exec (inotify_init1)
    let ino = Inotify::init()?;
    for d in dirs {
        if let Err(e) = ino.watches().add(d, mask) {
            if strict {
                return Err(e);
            }
        }
    }
    // SAFETY: the AsyncFd owns the Inotify, whose fd stays open and the
    // same for its whole life (Inotify only closes it on drop or close()).
    unsafe { AsyncFd::register(ino) }.map_err(|e| e.into_parts().1)
}

/// Discard the queued events.
pub(super) fn drain(ino: &mut Inotify) {
    let mut buf = [0u8; 4096];
    while ino
        .read_events(&mut buf)
        .is_ok_and(|mut e| e.next().is_some())
    {}
}
