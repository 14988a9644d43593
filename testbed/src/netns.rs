//! Network namespaces for tests and the lab: named `ccl-t<pid>-<n>` (the
//! project's prefix), deleted on drop, so a failing run leaves none behind.
//! A process killed outright (SIGKILL, a machine restart) runs no drop: the
//! first namespace a later process creates reaps those of dead pids first.

use std::ffi::CString;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static NS_SEQ: AtomicU32 = AtomicU32::new(0);
static REAPED: std::sync::Once = std::sync::Once::new();

/// The pid in a name of ours, `ccl-t<pid>-<n>`; None for any other name.
pub fn owner_pid(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix("ccl-t")?.split_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Delete our namespaces (`ccl-t<pid>-<n>`) whose process no longer exists,
/// as on drop; returns their names.  A namespace of a live
/// process, or of anyone else's naming, is never touched.
pub fn reap_dead() -> Vec<String> {
    let mut gone = Vec::new();
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return gone;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if delete(&name) {
            gone.push(name);
        }
    }
    gone.sort();
    gone
}

/// Delete namespace `name`: its TCP sockets first (SOCK_DESTROY), because a
/// socket orphaned with data in flight would otherwise outlive the deleted
/// namespace for minutes, retransmitting into a dead link, and keep its
/// controller's struct_ops map alive after a test detached it.  Whether
/// the namespace was deleted.
pub fn delete(name: &str) -> bool {
    let _ = sh("ip", &["netns", "exec", name, "ss", "-K", "-t", "-a"]);
    sh("ip", &["netns", "del", name]).status.success()
}

/// A named network namespace `ccl-t<pid>-<n>` with lo up; deleted on drop.
pub struct NetNs {
    pub name: String,
}

fn sh(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

pub fn run_ok(cmd: &str, args: &[&str]) {
    let o = sh(cmd, args);
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl NetNs {
    pub fn new() -> NetNs {
        REAPED.call_once(|| {
            let gone = reap_dead();
            if !gone.is_empty() {
                eprintln!(
                    "testbed: deleted namespaces of processes that no longer exist: {}",
                    gone.join(", ")
                );
            }
        });
        let name = format!(
            "ccl-t{}-{}",
            std::process::id(),
            NS_SEQ.fetch_add(1, Ordering::SeqCst)
        );
        run_ok("ip", &["netns", "add", &name]);
        let ns = NetNs { name };
        run_ok("ip", &["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Run `f` on a thread that has entered this namespace.  Sockets created
    /// there stay in the namespace wherever they are used afterwards.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = CString::new(format!("/run/netns/{}", self.name)).unwrap();
        std::thread::spawn(move || {
            // SAFETY: open + setns on a path we created; only this thread moves.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                assert!(fd >= 0, "open netns");
                assert_eq!(libc::setns(fd, libc::CLONE_NEWNET), 0, "setns");
                libc::close(fd);
            }
            f()
        })
        .join()
        .expect("netns thread panicked")
    }

    /// A command line run inside the namespace (network only; mounts stay).
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Output {
        let mut v = vec![format!("--net=/run/netns/{}", self.name), cmd.to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        Command::new("nsenter").args(&v).output().expect("nsenter")
    }
}

impl Default for NetNs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        delete(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn only_our_names_have_an_owner() {
        assert_eq!(owner_pid("ccl-t24065-15"), Some(24065));
        assert_eq!(owner_pid("ccl-t1-0"), Some(1));
        for other in [
            "ccl-t24065",
            "ccl-t24065-",
            "ccl-tx-1",
            "ccl-t1-2a",
            "ns-t1-2",
            "ccl-t-1",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }
}
