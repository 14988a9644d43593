//! The inotify pieces `cfgwatch` and `cgwatch` share: one non-blocking
//! inotify fd watching some directories, registered with tokio, and a
//! drain of its queued events (their names do not matter to either: both
//! look at the file system again).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use tokio::io::unix::AsyncFd;

/// An inotify fd with `mask` on each of `dirs`.  A directory that cannot
/// be watched (gone since it was listed) is an error when `strict`, else
/// skipped.
pub(super) fn watch<'a>(
    dirs: impl IntoIterator<Item = &'a PathBuf>,
    mask: u32,
    strict: bool,
) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: plain syscall; the fd is owned below.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    for d in dirs {
        let c = std::ffi::CString::new(d.as_os_str().as_encoded_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a valid fd and C string.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), mask) } < 0 && strict {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and the
    // same for its whole life.
    unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)
}

/// Discard the queued events.
pub(super) fn drain(fd: &AsyncFd<OwnedFd>) {
    let mut buf = [0u8; 4096];
    // SAFETY: reading into a buffer we own.
    while unsafe { libc::read(fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}
