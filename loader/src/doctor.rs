//! `ccload doctor`: can this machine run ccload?  One line per check, with the
//! fix when a check fails.

use std::path::Path;

use libbpf_rs::MapType;

use crate::system::{bpffs_mounted, kernel_version};

/// Result of one check.
#[derive(Debug, serde::Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// Number of parameters of tcp_congestion_ops.cong_control in kernel BTF.
fn cong_control_arity() -> Option<usize> {
    use libbpf_rs::btf::{types, Btf, ReferencesType};
    let btf = Btf::from_vmlinux().ok()?;
    let ops: types::Struct<'_> = btf.type_by_name("tcp_congestion_ops")?;
    let member = ops
        .iter()
        .find(|m| m.name.and_then(|n| n.to_str()) == Some("cong_control"))?;
    let ptr: types::Ptr<'_> = btf.type_by_id(member.ty)?;
    let proto: types::FuncProto<'_> = btf.type_by_id(ptr.referenced_type_id())?;
    Some(proto.iter().count())
}

pub fn checks() -> Vec<Check> {
    let mut v = Vec::new();
    let mut add = |name, ok, detail: String, fix: Option<&str>| {
        v.push(Check {
            name,
            ok,
            detail,
            fix: if ok { None } else { fix.map(str::to_string) },
        })
    };

    let kv = kernel_version();
    add(
        "kernel",
        kv.is_some_and(|v| v >= (6, 10)),
        match kv {
            Some((a, b)) => {
                format!("Linux {a}.{b} (need >= 6.10 for cong_control(sk, ack, flag, rs))")
            }
            None => "unknown version".into(),
        },
        Some("boot a kernel >= 6.10 with CONFIG_BPF_JIT, CONFIG_DEBUG_INFO_BTF"),
    );
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    add(
        "btf",
        btf,
        "/sys/kernel/btf/vmlinux".into(),
        Some("rebuild the kernel with CONFIG_DEBUG_INFO_BTF=y"),
    );
    let so = MapType::StructOps.is_supported().unwrap_or(false);
    add(
        "struct_ops",
        so,
        if so {
            "BPF_MAP_TYPE_STRUCT_OPS loads".into()
        } else {
            "not supported".into()
        },
        Some("needs CONFIG_BPF_JIT=y and root; run as root to probe"),
    );
    let arity = if btf { cong_control_arity() } else { None };
    add(
        "cong_control",
        arity == Some(4),
        match arity {
            Some(n) => format!("cong_control takes {n} arguments (ccload's objects use 4)"),
            None => "tcp_congestion_ops not found in BTF".into(),
        },
        Some("needs Linux >= 6.10"),
    );
    let fs = bpffs_mounted();
    add(
        "bpffs",
        fs,
        "/sys/fs/bpf".into(),
        Some("mount -t bpf bpf /sys/fs/bpf"),
    );
    if fs {
        let problem = crate::bpf::check_pin_root().err();
        add(
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
    add(
        "capabilities",
        missing.is_empty(),
        if missing.is_empty() {
            "CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN (or CAP_SYS_ADMIN)".into()
        } else {
            format!("missing {}", missing.join(", "))
        },
        Some("run as root (sudo ccload ...) with CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN"),
    );
    let cg = crate::system::cgroup2_mount().map(|p| p.display().to_string());
    add(
        "cgroup2",
        cg.is_some(),
        cg.unwrap_or_else(|| "no cgroup2 mount".into()),
        Some("mount -t cgroup2 none /sys/fs/cgroup/unified (needed by `ccload cgroup`)"),
    );
    let left = crate::leftovers::find();
    let fix = if left.iter().all(|l| l.removable) {
        "`ccload detach --all` removes them (the next attach or cgroup set does too)"
    } else {
        "see each item; `ccload detach --all` removes those ccload owns"
    };
    add(
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
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_have_fixes_when_failing() {
        for c in checks() {
            assert!(c.ok || c.fix.is_some(), "{} failed without a fix", c.name);
        }
    }
}
