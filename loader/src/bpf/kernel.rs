//! Kernel features, read from the kernel's BTF: what the running kernel
//! defines, not what its version number suggests (distributions backport).

use super::*;

pub(super) fn vmlinux_btf() -> Option<libbpf_rs::btf::Btf<'static>> {
    libbpf_rs::btf::Btf::from_vmlinux().ok()
}

/// The facts below, read once per process (parsing the kernel's BTF takes
/// tens of milliseconds).
pub(super) struct Features {
    struct_ops: bool,
    links: bool,
    arity: Option<usize>,
}

pub(super) fn features() -> &'static Features {
    static F: std::sync::OnceLock<Features> = std::sync::OnceLock::new();
    F.get_or_init(|| {
        let btf = vmlinux_btf();
        Features {
            struct_ops: btf.as_ref().is_some_and(|b| {
                b.type_by_name::<libbpf_rs::btf::types::Struct<'_>>(
                    "bpf_struct_ops_tcp_congestion_ops",
                )
                .is_some()
            }),
            // the kernel's link object of a registered struct_ops map (the
            // link type's enumerator is older: it named the programs'
            // trampoline links)
            links: btf.as_ref().is_some_and(|b| {
                b.type_by_name::<libbpf_rs::btf::types::Struct<'_>>("bpf_struct_ops_link")
                    .is_some()
            }),
            arity: btf.as_ref().and_then(arity_in),
        }
    })
}

/// BPF struct_ops for TCP congestion control: the kernel defines the
/// map value type of tcp_congestion_ops (Linux >= 5.6), and has a JIT
/// (struct_ops programs run only JITed).  libbpf's own probe
/// (`MapType::StructOps.is_supported`) creates a map with a field Linux 6.1
/// lacks and reads EINVAL there, so it is not used.
pub fn struct_ops_supported() -> bool {
    // (unreadable outside the initial network namespace: the load says)
    let jit = std::fs::read_to_string("/proc/sys/net/core/bpf_jit_enable")
        .map(|s| s.trim() != "0")
        .unwrap_or(true);
    jit && features().struct_ops
}

/// struct_ops links (BPF_LINK_CREATE of a struct_ops map, Linux >= 6.4).
pub fn struct_ops_links() -> bool {
    features().links
}

/// The number of arguments of the kernel's `cong_control` (2 before Linux
/// 6.10, 4 since), or None without BTF.
pub fn cong_control_arity() -> Option<usize> {
    features().arity
}

pub(super) fn arity_in(btf: &libbpf_rs::btf::Btf<'_>) -> Option<usize> {
    use libbpf_rs::btf::{types, ReferencesType};
    let ops: types::Struct<'_> = btf.type_by_name("tcp_congestion_ops")?;
    let member = ops
        .iter()
        .find(|m| m.name.and_then(|n| n.to_str()) == Some("cong_control"))?;
    let ptr: types::Ptr<'_> = btf.type_by_id(member.ty)?;
    let proto: types::FuncProto<'_> = btf.type_by_id(ptr.referenced_type_id())?;
    Some(proto.iter().count())
}

/// Why this kernel cannot run `algo` (None: it can).  ccpd runs in
/// cong_control, whose arguments the kernel chose twice so far.
pub fn kernel_lacks(algo: Algo) -> Option<String> {
    match (algo, cong_control_arity()) {
        (Algo::Ccpd, Some(n)) if n != 2 && n != 4 => Some(format!(
            "ccpd runs through cong_control(sk, rs) (Linux < 6.10) or cong_control(sk, ack, \
             flag, rs); this kernel's takes {n} arguments"
        )),
        _ => None,
    }
}

pub fn attached() -> Vec<Algo> {
    Algo::ALL.into_iter().filter(|a| is_attached(*a)).collect()
}

/// Root, with the capabilities that loading and attaching need:
/// CAP_BPF and CAP_PERFMON (struct_ops programs), CAP_NET_ADMIN (the
/// cgroup sock_ops program); CAP_SYS_ADMIN stands in for all three, as in
/// the kernel. Nothing else is needed (tests/tests/deploy.rs runs the
/// daemon with exactly these).
pub fn require_root() -> Result<(), CclError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(CclError::NotRoot);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let missing = missing_caps(&status);
    if !missing.is_empty() {
        return Err(CclError::MissingCaps(missing.join(", ")));
    }
    Ok(())
}

/// The needed capabilities absent from `CapEff` in a /proc/PID/status text
/// (none when the line cannot be read: the kernel will say EPERM then).
pub(crate) fn missing_caps(status: &str) -> Vec<&'static str> {
    const SYS_ADMIN: u32 = 21;
    const NEEDED: [(u32, &str); 3] = [(39, "CAP_BPF"), (38, "CAP_PERFMON"), (12, "CAP_NET_ADMIN")];
    let Some(eff) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
    else {
        return Vec::new();
    };
    if eff & (1 << SYS_ADMIN) != 0 {
        return Vec::new();
    }
    NEEDED
        .iter()
        .filter(|(bit, _)| eff & (1u64 << bit) == 0)
        .map(|(_, name)| *name)
        .collect()
}

/// bpffs at /sys/fs/bpf, and struct_ops support.
pub fn require_kernel() -> Result<(), CclError> {
    if !crate::host::system::bpffs_mounted() {
        return Err(CclError::Unsupported(
            "bpffs is not mounted at /sys/fs/bpf (fix: mount -t bpf bpf /sys/fs/bpf)".into(),
        ));
    }
    check_pin_root()?;
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(CclError::Unsupported(
            "the kernel has no BTF (/sys/kernel/btf/vmlinux); CONFIG_DEBUG_INFO_BTF=y is needed"
                .into(),
        ));
    }
    if !struct_ops_supported() {
        return Err(CclError::Unsupported(
            "this kernel cannot load BPF struct_ops for TCP (needs Linux >= 5.6 with \
             CONFIG_BPF_JIT and the JIT on: net.core.bpf_jit_enable)"
                .into(),
        ));
    }
    Ok(())
}
