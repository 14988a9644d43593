//! Locks in /run/ccload: the state lock every command that changes kernel
//! state holds while it does (attach, detach, tune, apply, cgroup set/unset,
//! `watch --every`, each apply of the daemon), and the per-algorithm
//! telemetry consumer locks (`stream::lock_consumer`).
//!
//! flock(2) locks die with their process, so a killed ccload never leaves a
//! lock behind; the holder writes its pid into the file so that a waiting
//! command can say who it is waiting for.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::error::CclError;

pub const RUN_DIR: &str = "/run/ccload";
pub const STATE_LOCK: &str = "/run/ccload/lock";

/// How long a command waits for another one to finish changing state.
/// `CCLOAD_LOCK_WAIT` (seconds, a finite number >= 0) overrides it.
const DEFAULT_WAIT: Duration = Duration::from_secs(10);

fn wait() -> Duration {
    std::env::var("CCLOAD_LOCK_WAIT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 3600.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_WAIT)
}

/// An flock held on a pid file; released on drop or when the process dies.
pub struct PidLock(#[allow(dead_code)] File);

/// Lock `path` exclusively, waiting up to `wait`.  Err(holder pid) when
/// another process still holds it after that.
pub(crate) fn pid_lock(path: &str, wait: Duration) -> Result<std::result::Result<PidLock, String>> {
    std::fs::create_dir_all(RUN_DIR).with_context(|| format!("failed to create {RUN_DIR}"))?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("failed to open {path}"))?;
    let deadline = Instant::now() + wait;
    loop {
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(e).with_context(|| format!("flock {path}"));
        }
        if Instant::now() >= deadline {
            let holder = std::fs::read_to_string(path).unwrap_or_default();
            return Ok(Err(holder.trim().to_string()));
        }
        // Short polls: a holder that runs commands back to back leaves
        // gaps of a few ms between them, which a 20-ms poll kept missing.
        std::thread::sleep(Duration::from_millis(2 + u64::from(std::process::id() % 4)));
    }
    let mut f = f;
    f.set_len(0).with_context(|| format!("truncate {path}"))?;
    write!(f, "{}", std::process::id()).with_context(|| format!("write {path}"))?;
    Ok(Ok(PidLock(f)))
}

/// Take the state lock.  None when not root: the command then fails on its
/// own root check, with the error that explains it.
pub fn state() -> Result<Option<PidLock>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let w = wait();
    match pid_lock(STATE_LOCK, w)? {
        Ok(l) => Ok(Some(l)),
        Err(pid) => Err(CclError::Busy {
            pid,
            waited: w.as_secs_f64(),
        }
        .into()),
    }
}
