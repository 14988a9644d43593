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
    let _ = try_in_named(name, || {
        Command::new("ss").args(["-K", "-t", "-a"]).output()
    });
    sh("ip", &["netns", "del", name]).status.success()
}

/// Run `f` on a thread that has entered namespace `name` (/run/netns).
/// A process it starts runs in that namespace too (a child inherits its
/// parent thread's namespaces): one exec per command, where `ip netns
/// exec` or `nsenter` costs two and a mount namespace.  That is most of
/// a link's set-up time in a TCG guest (docs/testing.md, "Other kernels").
fn try_in_named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<T> {
    let path = CString::new(format!("/run/netns/{name}")).unwrap();
    std::thread::spawn(move || {
        // SAFETY: open + setns on a path of ours; only this thread moves.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let r = libc::setns(fd, libc::CLONE_NEWNET);
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            if r != 0 {
                return Err(e);
            }
        }
        Ok(f())
    })
    .join()
    .expect("netns thread panicked")
}

fn in_named<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    try_in_named(name, f).unwrap_or_else(|e| panic!("setns {name}: {e}"))
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
        in_named(&self.name, f)
    }

    /// A command line run inside the namespace (network only; mounts stay).
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Output {
        let (cmd, args) = (cmd.to_string(), owned(args));
        self.run(move || Command::new(&cmd).args(&args).output())
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// `cmd args` inside the namespace with `input` on its standard input
    /// (`ip -b -`, `tc -b -`: many commands, one process); panics unless
    /// it succeeds.
    pub fn exec_ok_with(&self, cmd: &str, args: &[&str], input: &str) {
        let (c, a, input) = (cmd.to_string(), owned(args), input.to_string());
        let o = self
            .run(move || -> std::io::Result<Output> {
                use std::io::Write as _;
                let mut child = Command::new(&c)
                    .args(&a)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()?;
                child
                    .stdin
                    .take()
                    .expect("stdin")
                    .write_all(input.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert!(
            o.status.success(),
            "{cmd} {args:?} in {}: {}",
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// Set sysctls of this namespace (`net.ipv4.ip_forward` = "1"):
    /// written under /proc/sys by a thread inside it, no process started.
    pub fn sysctls(&self, kv: &[(&str, &str)]) {
        let kv: Vec<(String, String)> = kv
            .iter()
            .map(|(k, v)| (format!("/proc/sys/{}", k.replace('.', "/")), v.to_string()))
            .collect();
        let name = self.name.clone();
        self.run(move || {
            for (path, v) in kv {
                std::fs::write(&path, &v).unwrap_or_else(|e| panic!("{path} = {v} in {name}: {e}"));
            }
        });
    }
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
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
