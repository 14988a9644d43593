//! net.ipv4.tcp_congestion_control of the current network namespace.

use anyhow::{Context, Result};

const DEFAULT_CC: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

pub fn default_cc() -> Result<String> {
    Ok(std::fs::read_to_string(DEFAULT_CC)
        .with_context(|| format!("failed to read {DEFAULT_CC}"))?
        .trim()
        .to_string())
}

fn ns_inode(pid: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// Can `name` become this namespace's default?  The kernel allows a
/// restricted CC (not in tcp_allowed_congestion_control) only in the initial
/// namespace, and on 6.18 its refusal leaks a reference to the CC (the
/// struct_ops map then outlives detach), so refuse before writing.
pub fn check_can_default(name: &str) -> Result<()> {
    let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .unwrap_or_default();
    // init_net has the fixed inode PROC_NET_INIT_INO (0xEFFFFFF9) on recent
    // kernels; older ones are compared with pid 1 when that is readable.
    let me = ns_inode("self");
    let in_init = me == Some(0xEFFF_FFF9) || (me.is_some() && me == ns_inode("1"));
    if !in_init && !allowed.split_whitespace().any(|n| n == name) {
        anyhow::bail!(
            "cannot make {name} the default here: outside the initial network namespace the \
             kernel only allows CCs listed in net.ipv4.tcp_allowed_congestion_control \
             (select it per socket with TCP_CONGESTION instead)"
        );
    }
    Ok(())
}

pub fn set_default_cc(name: &str) -> Result<()> {
    match std::fs::write(DEFAULT_CC, name) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => anyhow::bail!(
            "cannot make {name} the default here: outside the initial network namespace the \
             kernel only allows CCs listed in net.ipv4.tcp_allowed_congestion_control \
             (select it per socket with TCP_CONGESTION instead)"
        ),
        r => r.with_context(|| format!("failed to set net.ipv4.tcp_congestion_control = {name}")),
    }
}
