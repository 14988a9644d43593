//! `ccload doctor`: can this machine run ccload?  One line per check, with the
//! fix when a check fails.

use std::path::Path;

use crate::host::system::{bpffs_mounted, kernel_version};

/// Result of one check.
#[derive(Debug, serde::Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// Works, with less than a current kernel gives (said in `detail`).
    pub degraded: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// The checks as they are made: each check's line, and the names of the
/// ones that work with less than a current kernel gives.
#[derive(Default)]
struct Checks {
    v: Vec<Check>,
    degraded: Vec<&'static str>,
}

impl Checks {
    fn add(&mut self, name: &'static str, ok: bool, detail: String, fix: Option<&str>) {
        self.v.push(Check {
            name,
            ok,
            degraded: false,
            detail,
            fix: if ok { None } else { fix.map(str::to_string) },
        })
    }
}

pub fn checks() -> Vec<Check> {
    let mut c = Checks::default();
    kernel_checks(&mut c);
    host_checks(&mut c);
    let Checks { mut v, degraded } = c;
    for c in &mut v {
        c.degraded = degraded.contains(&c.name);
    }
    v
}

/// The kernel: its version, BTF, struct_ops, links and cong_control's
/// arguments.
fn kernel_checks(c: &mut Checks) {
    // The oldest kernel the matrix boots (cargo xtask kernels; docs/install.md
    // says what each kernel gets).
    let kv = kernel_version();
    c.add(
        "kernel",
        kv.is_some_and(|v| v >= (6, 1)),
        match kv {
            Some((a, b)) => format!("Linux {a}.{b} (need >= 6.1; every feature from 6.4)"),
            None => "unknown version".into(),
        },
        Some("boot a kernel >= 6.1 with CONFIG_BPF_JIT, CONFIG_DEBUG_INFO_BTF"),
    );
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    c.add(
        "btf",
        btf,
        "/sys/kernel/btf/vmlinux".into(),
        Some("rebuild the kernel with CONFIG_DEBUG_INFO_BTF=y"),
    );
    let so = crate::bpf::struct_ops_supported();
    c.add(
        "struct_ops",
        so,
        if so {
            "the kernel defines tcp_congestion_ops struct_ops, and the JIT is on".into()
        } else {
            "no struct_ops for tcp_congestion_ops in the kernel's BTF, or the BPF JIT is off".into()
        },
        Some("needs CONFIG_BPF_JIT=y and net.core.bpf_jit_enable=1"),
    );
    if btf && so {
        let links = crate::bpf::struct_ops_links();
        c.add(
            "links",
            true,
            if links {
                "struct_ops links: attachments are pinned links, `attach --replace` swaps objects"
                    .into()
            } else {
                "no struct_ops links (Linux < 6.4): each controller is held by its pinned \
                 struct_ops map; `attach --replace` is unavailable (detach, then attach)"
                    .into()
            },
            None,
        );
        if !links {
            c.degraded.push("links");
        }
        let arity = crate::bpf::cong_control_arity();
        c.add(
            "cong_control",
            arity.is_some(),
            match arity {
                Some(4) => "cong_control(sk, ack, flag, rs)".into(),
                Some(2) => {
                    "cong_control(sk, rs) (Linux < 6.10): ccpd runs its (sk, rs) program".into()
                }
                Some(n) => format!("cong_control takes {n} arguments: ccpd cannot run"),
                None => "tcp_congestion_ops not found in BTF".into(),
            },
            Some("rebuild the kernel with CONFIG_DEBUG_INFO_BTF=y"),
        );
        if arity.is_some_and(|n| n != 4 && n != 2) {
            c.degraded.push("cong_control");
        }
    }
}

/// The host around it: bpffs and ccload's pin root, the capabilities,
/// cgroup v2 and anything an earlier run left.
fn host_checks(c: &mut Checks) {
    let fs = bpffs_mounted();
    c.add(
        "bpffs",
        fs,
        "/sys/fs/bpf".into(),
        Some("mount -t bpf bpf /sys/fs/bpf"),
    );
    if fs {
        let problem = crate::bpf::check_pin_root().err();
        c.add(
            "pin root",
            problem.is_none(),
            problem.map_or_else(
                || format!("{} absent or root-owned 0700", crate::bpf::PIN_ROOT),
                |e| e.to_string(),
            ),
            Some("inspect it, then rm -r /sys/fs/bpf/ccload"),
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let missing = crate::bpf::missing_caps(&status);
    c.add(
        "capabilities",
        missing.is_empty(),
        if missing.is_empty() {
            "CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN (or CAP_SYS_ADMIN)".into()
        } else {
            format!("missing {}", missing.join(", "))
        },
        Some("run as root (sudo ccload ...) with CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN"),
    );
    let cg = crate::host::system::cgroup2_mount().map(|p| p.display().to_string());
    c.add(
        "cgroup2",
        cg.is_some(),
        cg.unwrap_or_else(|| "no cgroup2 mount".into()),
        Some("mount -t cgroup2 none /sys/fs/cgroup/unified (needed by `ccload cgroup`)"),
    );
    let left = crate::bind::leftovers::find();
    let fix = if left.iter().all(|l| l.removable) {
        "`ccload detach --all` removes them (the next attach or cgroup set does too)"
    } else {
        "see each item; `ccload detach --all` removes those ccload owns"
    };
    c.add(
        "leftovers",
        left.is_empty(),
        if left.is_empty() {
            "no half-built pins or bindings".into()
        } else {
            left.iter()
                .map(|l| format!("{}: {}", l.path.display(), l.what))
                .collect::<Vec<_>>()
                .join("; ")
        },
        Some(fix),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_have_fixes_when_failing() {
        // (a degraded check passes: it says what is missing in its detail)
        for c in checks() {
            assert!(c.ok || c.fix.is_some(), "{} failed without a fix", c.name);
        }
    }
}
