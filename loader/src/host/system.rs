//! What the running system offers ccload, read without changing anything:
//! bpffs and cgroup v2 mounts, the kernel's version.  A leaf: the kernel side
//! (`bpf`), the cgroup side (`cgroup`) and `doctor` all read these.

use std::path::PathBuf;

const BPF_FS_MAGIC: i64 = 0xcafe4a11;

fn statfs_magic(path: &str) -> Option<i64> {
    let c = std::ffi::CString::new(path).ok()?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_type as i64)
}

/// Is bpffs mounted at /sys/fs/bpf?
pub fn bpffs_mounted() -> bool {
    statfs_magic("/sys/fs/bpf") == Some(BPF_FS_MAGIC)
}

/// Where cgroup2 is mounted (`/sys/fs/cgroup` or `/sys/fs/cgroup/unified`).
pub fn cgroup2_mount() -> Option<PathBuf> {
    let m = std::fs::read_to_string("/proc/self/mounts").ok()?;
    m.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
}

/// The running kernel's release (`uname -r`), "unknown" when unreadable.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// (major, minor) of the running kernel.
pub fn kernel_version() -> Option<(u32, u32)> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_version_parses() {
        let (maj, _) = kernel_version().expect("osrelease readable");
        assert!(maj >= 3);
    }
}
