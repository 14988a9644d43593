//! The testbed: the emulated bottleneck every ccload experiment and
//! privileged test runs on.
//!
//! - [`awake`]: idle CPUs kept polling while a link runs (VM wake-ups).
//! - [`netns`]: named network namespaces, removed on drop.
//! - [`link`]: the papers' dumbbell (sender, router with TBF + drop-tail
//!   pfifo, receiver) with random loss and a userspace [`delay`] line.
//! - [`trace`]: trace-driven bottlenecks (mahimahi capacity traces).
//! - [`traffic`]: bulk transfers with a chosen congestion control.
//! - [`iperf3`]: iperf3 as a flow's sender and receiver.
//! - [`veth`]: two namespaces on one veth pair, nothing between them.
//! - [`tcpinfo`], [`nl`]: per-socket TCP_INFO and qdisc sampling.
//!
//! The `lab` crate runs scenarios on it; the privileged tests use it
//! directly.  Every guard removes what it created in `Drop`.

use std::path::PathBuf;
use std::process::{Command, Output};

use anyhow::{bail, Context};

pub mod awake;
pub mod delay;
pub mod iperf3;
pub mod link;
pub mod netns;
pub mod nl;
pub mod tcpinfo;
pub mod trace;
pub mod traffic;
pub mod veth;

/// Why privileged work (BPF, netns, qdiscs) cannot run here, if it cannot.
pub fn privileged_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("kernel has no BTF".into());
    }
    if !ccload::host::system::bpffs_mounted() {
        return Some("bpffs not mounted at /sys/fs/bpf".into());
    }
    None
}

/// The `ccload` binary of this workspace: `$CCLOAD_BIN`, else the one
/// cargo built next to the running executable (`target/<profile>/` for
/// xtask, its parent for a test binary in `target/<profile>/deps/`).
pub fn ccload_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("CCLOAD_BIN") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe().context("current_exe")?;
    let near: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join("ccload"))
        .collect();
    match near.iter().find(|p| p.is_file()) {
        Some(p) => Ok(p.clone()),
        None => bail!(
            "ccload binary not found at {} (build it: cargo build --workspace, or set CCLOAD_BIN)",
            near[0].display()
        ),
    }
}

/// Run `ccload args...` and return its output, whatever its exit status.
pub fn ccload_output(args: &[&str]) -> anyhow::Result<Output> {
    let bin = ccload_bin()?;
    Command::new(&bin)
        .args(args)
        .output()
        .with_context(|| format!("spawn {}", bin.display()))
}

/// Run `ccload args...`; its stdout on success, its stderr as the error.
pub fn ccload_run(args: &[&str]) -> anyhow::Result<String> {
    let o = ccload_output(args)?;
    if !o.status.success() {
        bail!(
            "ccload {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Wait until the `ccload watch` child holds `algo`'s consumer lock (it has
/// opened the ring buffer, so records from now on reach it).  False when
/// the child exited first or `timeout` passed.
pub fn wait_watch_holding(
    child: &mut std::process::Child,
    algo: &str,
    timeout: std::time::Duration,
) -> bool {
    let lock = ccload::bpf::watch_lock_path(algo);
    let pid = child.id().to_string();
    let t = std::time::Instant::now();
    loop {
        if std::fs::read_to_string(&lock).is_ok_and(|s| s.trim() == pid) {
            return true;
        }
        if t.elapsed() > timeout || !matches!(child.try_wait(), Ok(None)) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
