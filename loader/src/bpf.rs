//! Kernel side: load a controller's skeleton, register it as struct_ops, pin it
//! so it outlives ccload, and read/write its pinned maps.
//!
//! Layout under bpffs, one directory per attached algorithm:
//!
//! ```text
//! /sys/fs/bpf/ccload/<algo>/link     struct_ops link (keeps the CC registered)
//!                          /params   ARRAY[CCL_NR_PROFILES] of struct ccl_<algo>_params
//!                          /stats    PERCPU_ARRAY[CCL_NR_STATS] of u64
//!                          /events   RINGBUF of struct ccl_event
//!                          /meta     ARRAY[1] of struct ccl_meta
//!                          /agg      PERCPU_ARRAY[CCL_NR_PROFILES] of struct ccl_agg
//! ```

use std::mem::MaybeUninit;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, MapType, Object, OpenObject, PrintLevel};

use crate::algos::{Algo, Params};
use crate::error::CclError;
use crate::intf;
use crate::sysctl;

/// Proof that what a killed ccload left under the pin root is gone
/// (`leftovers::sweep`, with the state lock held): a leftover `tmp-*` link
/// still registers its controller's name.
pub struct Swept(());

/// What pins takes the sweep to run once its input is checked (bad input
/// changes nothing): `&crate::leftovers::sweep`.
pub type Sweep<'a> = &'a dyn Fn() -> Result<Swept>;

impl Swept {
    /// Only for `leftovers::sweep`, after it removed the leftovers.
    pub(crate) fn after_sweep() -> Swept {
        Swept(())
    }
}

/// Where ccload pins its objects.
pub const PIN_ROOT: &str = "/sys/fs/bpf/ccload";

/// The maps every controller object has (see bpf/ccload_maps.bpf.h).
pub const MAPS: [&str; 5] = ["params", "stats", "events", "meta", "agg"];

/// The lock file a `watch` (or the daemon) holds while it consumes
/// `algo`'s ring buffer; it holds the consumer's pid.
pub fn watch_lock_path(algo: &str) -> PathBuf {
    Path::new(crate::lock::RUN_DIR).join(format!("watch-{algo}.lock"))
}

pub fn pin_dir(algo: Algo) -> PathBuf {
    Path::new(PIN_ROOT).join(algo.name())
}

pub fn link_pin(algo: Algo) -> PathBuf {
    pin_dir(algo).join("link")
}

pub fn map_pin(algo: Algo, map: &str) -> PathBuf {
    pin_dir(algo).join(map)
}

/// Where a controller registered without a struct_ops link (kernels
/// before 6.4) pins its struct_ops map: the registered map holds the
/// registration (the kernel keeps a reference until the map's element is
/// deleted), the pin is how `detach` and `status` find it.
pub fn reg_map_pin(algo: Algo) -> PathBuf {
    pin_dir(algo).join("struct_ops")
}

/// Is `algo` attached by ccload (its link, or its registered struct_ops
/// map, pinned)?
pub fn is_attached(algo: Algo) -> bool {
    link_pin(algo).exists() || reg_map_pin(algo).exists()
}

/// What keeps an attached controller registered after ccload exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// A pinned struct_ops link (Linux >= 6.4): `attach --replace` swaps
    /// the object under it atomically.
    Link,
    /// The registered struct_ops map, pinned (kernels without struct_ops
    /// links).
    Map,
}

impl Holder {
    pub fn describe(self) -> &'static str {
        match self {
            Holder::Link => "a pinned struct_ops link",
            Holder::Map => "its pinned struct_ops map (this kernel has no struct_ops links)",
        }
    }
}

// ---------------------------------------------------------------------------
// Kernel features, read from the kernel's BTF: what the running kernel
// defines, not what its version number suggests (distributions backport).

fn vmlinux_btf() -> Option<libbpf_rs::btf::Btf<'static>> {
    libbpf_rs::btf::Btf::from_vmlinux().ok()
}

/// The facts below, read once per process (parsing the kernel's BTF takes
/// tens of milliseconds).
struct Features {
    struct_ops: bool,
    links: bool,
    arity: Option<usize>,
}

fn features() -> &'static Features {
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

fn arity_in(btf: &libbpf_rs::btf::Btf<'_>) -> Option<usize> {
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
    if !crate::system::bpffs_mounted() {
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

// ---------------------------------------------------------------------------
// libbpf log capture: libbpf never prints to the terminal itself; a failed
// load is one line in ccload's words, and libbpf's log (with the verifier's)
// follows it under -v.

static LOG: Mutex<String> = Mutex::new(String::new());

fn capture_log(_level: PrintLevel, msg: String) {
    LOG.lock().unwrap().push_str(&msg);
}

fn capture_warn(level: PrintLevel, msg: String) {
    if level != PrintLevel::Debug {
        LOG.lock().unwrap().push_str(&msg);
    }
}

/// Collect libbpf's messages from here on (all of them when `verbose`).
pub(crate) fn start_capture(verbose: bool) {
    LOG.lock().unwrap().clear();
    if verbose {
        libbpf_rs::set_print(Some((PrintLevel::Debug, capture_log)));
    } else {
        libbpf_rs::set_print(Some((PrintLevel::Info, capture_warn)));
    }
}

fn take_log() -> String {
    std::mem::take(&mut *LOG.lock().unwrap())
}

/// What libbpf's log says failed, in a few words, and what to do about it.
pub(crate) fn explain_load_failure(log: &str, errno: Option<i32>) -> (String, String) {
    let kernel = crate::system::kernel_release();
    let find = |pat: &str| {
        log.lines().find_map(|l| {
            let i = l.find(pat)?;
            let rest = &l[i + pat.len()..];
            let end = rest.find('\'')?;
            Some((rest[..end].to_string(), l.to_string()))
        })
    };
    let errtext = errno
        .map(|e| std::io::Error::from_raw_os_error(e).to_string())
        .unwrap_or_else(|| "error".into());
    if let Some((prog, line)) = find("prog '") {
        if line.contains("BPF program is too large") || log.contains("BPF program is too large") {
            return (
                format!("the kernel's verifier gave up on program `{prog}` (too many instructions to check)"),
                format!("kernel {kernel} has a smaller verifier limit than ccload needs; `ccload doctor` says what this kernel supports"),
            );
        }
        if line.contains("load failed") || line.contains("failed to load") {
            return (
                format!("the kernel refused program `{prog}` ({errtext})"),
                format!(
                    "kernel {kernel} may lack a feature ccload needs (Linux >= 6.10 with BTF), or \
                     the pinned maps it reuses have another layout; `ccload doctor` checks the \
                     kernel, and `ccload attach --replace` upgrades an older attachment"
                ),
            );
        }
    }
    if let Some((map, _)) = find("map '") {
        return (
            format!("the kernel refused to create map `{map}` ({errtext})"),
            format!("kernel {kernel} may be too old for it (struct_ops links need Linux >= 6.4); `ccload doctor` checks the kernel"),
        );
    }
    (
        format!("libbpf failed ({errtext})"),
        "`ccload doctor` checks what the kernel supports".into(),
    )
}

/// A failed open or load of `what`, as one line; libbpf's log is added
/// under -v.
pub(crate) fn load_error(what: &str, err: libbpf_rs::Error, verbose: bool) -> anyhow::Error {
    let log = take_log();
    // libbpf-rs keeps the errno in its message ("... (os error 13)").
    let errno = {
        let m = format!("{err:#}");
        m.rfind("os error ").and_then(|i| {
            m[i + 9..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        })
    };
    let (summary, hint) = explain_load_failure(&log, errno);
    let log = if verbose {
        format!("\nlibbpf's log:\n{}", log.trim_end())
    } else {
        String::new()
    };
    anyhow::Error::new(err).context(CclError::Load {
        what: what.to_string(),
        summary,
        hint,
        log,
    })
}

// ---------------------------------------------------------------------------
// Loading.

/// Where the socket-storage map shared by every controller and cgroup
/// binding is pinned (per-socket profile bindings).
pub fn sk_profile_pin() -> PathBuf {
    Path::new(PIN_ROOT).join("sk_profile")
}

/// Point the object's `sk_profile` map at the shared pin: libbpf reuses it
/// when pinned, else creates and pins it at load.
pub fn share_sk_profile(obj: &mut OpenObject) -> Result<()> {
    ensure_pin_root()?;
    for mut map in obj.maps_mut() {
        if map.name() == "sk_profile" {
            map.set_pin_path(sk_profile_pin())?;
        }
    }
    Ok(())
}

/// Create the pin root (0700), or check the existing one: bpffs is often
/// mounted world-writable (1777), so a directory someone else made first
/// could hold maps or links they planted.
pub fn ensure_pin_root() -> Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(PIN_ROOT) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(check_pin_root()?),
        Err(e) => Err(e).with_context(|| format!("failed to create {PIN_ROOT}")),
    }
}

/// An existing pin root must be a real directory (not a symlink), owned by
/// root, writable by no one else. Absent is fine.
pub fn check_pin_root() -> Result<(), CclError> {
    match std::fs::symlink_metadata(PIN_ROOT) {
        Ok(md) => pin_root_problem(&md).map_or(Ok(()), |why| {
            Err(CclError::Unsupported(format!(
                "refusing to use {PIN_ROOT}: {why}; someone else may have created it. \
                 Inspect it, then remove it (rm -r {PIN_ROOT}) and run ccload again"
            )))
        }),
        Err(_) => Ok(()),
    }
}

fn pin_root_problem(md: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if md.file_type().is_symlink() {
        return Some("it is a symlink".into());
    }
    if !md.is_dir() {
        return Some("it is not a directory".into());
    }
    if md.uid() != 0 {
        return Some(format!("it is owned by uid {}, not root", md.uid()));
    }
    let mode = md.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Some(format!("it is group- or other-writable (mode {mode:04o})"));
    }
    None
}

/// Remove the shared pin and the pin root once nothing else is pinned there.
pub fn gc_pin_root() {
    let only_shared = std::fs::read_dir(PIN_ROOT)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .all(|e| e.file_name() == "sk_profile")
        })
        .unwrap_or(false);
    if only_shared {
        let _ = std::fs::remove_file(sk_profile_pin());
        let _ = std::fs::remove_dir(PIN_ROOT);
    }
}

/// TCP_CONG_NON_RESTRICTED (include/net/tcp.h): any process may select
/// the CC with setsockopt(TCP_CONGESTION), as for the names listed in
/// net.ipv4.tcp_allowed_congestion_control.
const TCP_CONG_NON_RESTRICTED: u32 = 0x1;

/// Set `flags` of the struct_ops value (struct tcp_congestion_ops) before
/// load.  The kernel copies it at registration (bpf_tcp_ca_init_member)
/// and forgets it at unregistration, so `--allow` needs no sysctl write
/// and no restore: the name leaves tcp_allowed_congestion_control with the
/// controller.
fn set_ca_flags(algo: Algo, obj: &mut OpenObject, flags: u32) -> Result<()> {
    let off = std::mem::offset_of!(crate::skel::ccpd::types::tcp_congestion_ops, flags);
    let mut n = 0;
    // every struct_ops map: the one this kernel gets is chosen later
    for mut map in obj.maps_mut() {
        if map.map_type() != MapType::StructOps {
            continue;
        }
        let v = map
            .initial_value_mut()
            .with_context(|| format!("{algo}: struct_ops map has no value"))?;
        let f = v
            .get_mut(off..off + 4)
            .with_context(|| format!("{algo}: struct_ops value too short for flags"))?;
        f.copy_from_slice(&flags.to_ne_bytes());
        n += 1;
    }
    if n == 0 {
        bail!("{algo}: object has no struct_ops map");
    }
    Ok(())
}

/// Prepare the open object: share `sk_profile`; reuse the algorithm's pinned
/// maps when `reuse`.
fn prepare(algo: Algo, obj: &mut OpenObject, reuse: bool) -> Result<()> {
    share_sk_profile(obj)?;
    if !reuse {
        return Ok(());
    }
    for mut map in obj.maps_mut() {
        let name = map.name().to_string_lossy().to_string();
        if MAPS.contains(&name.as_str()) {
            let pin = map_pin(algo, &name);
            if pin.exists() {
                map.reuse_pinned_map(&pin)
                    .with_context(|| format!("failed to reuse pinned map {}", pin.display()))?;
            }
        }
    }
    Ok(())
}

/// Suffix of the struct_ops maps and programs that run a controller's
/// cong_control as Linux < 6.10 calls it, (sk, rs) (bpf/ccload_maps.bpf.h,
/// CCL_CONG_CONTROL_SK_RS).
const SK_RS: &str = "_sk_rs";

/// Does this kernel call cong_control(sk, rs)?
fn two_arg_cong_control() -> bool {
    cong_control_arity() == Some(2)
}

/// The struct_ops map of `names` (an object's struct_ops maps, in order)
/// that this kernel gets: `<map>_sk_rs` where cong_control takes two
/// arguments and the object has one, else the first other.
fn chosen_ops_map(names: &[String], two_args: bool) -> Option<&String> {
    let variant = names.iter().find(|n| n.ends_with(SK_RS));
    match variant {
        Some(v) if two_args => Some(v),
        _ => names.iter().find(|n| !n.ends_with(SK_RS)),
    }
}

/// Of an object that carries its cong_control twice (ccpd), create the
/// struct_ops map and load the program this kernel calls; the other pair
/// stays out of the kernel.
fn choose_cong_control(obj: &mut OpenObject) -> Result<()> {
    let two = two_arg_cong_control();
    let names: Vec<String> = obj
        .maps()
        .filter(|m| m.map_type() == MapType::StructOps)
        .map(|m| m.name().to_string_lossy().to_string())
        .collect();
    if !names.iter().any(|n| n.ends_with(SK_RS)) {
        return Ok(());
    }
    let chosen = chosen_ops_map(&names, two).cloned();
    for mut map in obj.maps_mut() {
        if map.map_type() == MapType::StructOps {
            let name = map.name().to_string_lossy().to_string();
            map.set_autocreate(Some(&name) == chosen.as_ref())?;
        }
    }
    let variants: Vec<String> = obj
        .progs()
        .map(|p| p.name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(SK_RS))
        .collect();
    for mut prog in obj.progs_mut() {
        let name = prog.name().to_string_lossy().to_string();
        if name.ends_with(SK_RS) {
            prog.set_autoload(two);
        } else if two && variants.contains(&format!("{name}{SK_RS}")) {
            prog.set_autoload(false);
        }
    }
    Ok(())
}

/// The struct_ops map of a loaded object that [`choose_cong_control`]
/// created.
fn ops_map<'o>(obj: &'o mut Object, algo: Algo) -> Result<libbpf_rs::MapMut<'o>> {
    let names: Vec<String> = obj
        .maps()
        .filter(|m| m.map_type() == MapType::StructOps)
        .map(|m| m.name().to_string_lossy().to_string())
        .collect();
    let want = chosen_ops_map(&names, two_arg_cong_control())
        .cloned()
        .with_context(|| format!("{algo}: object has no struct_ops map"))?;
    obj.maps_mut()
        .find(|m| m.name().to_string_lossy() == want.as_str())
        .with_context(|| format!("{algo}: object has no struct_ops map"))
}

/// Fit an open object to the running kernel: the cong_control program it
/// calls (choose_cong_control), and registration through the map where it
/// has no struct_ops links (without_link).
fn for_this_kernel(obj: &mut OpenObject) -> Result<()> {
    choose_cong_control(obj)?;
    if !struct_ops_links() {
        without_link(obj)?;
    }
    Ok(())
}

/// Register `algo` from its loaded object and pin what holds the
/// registration in `dir`: the struct_ops link (`link`), or on a kernel
/// without struct_ops links the registered map itself (`struct_ops`).
/// Returns the pin.
fn register(obj: &mut Object, algo: Algo, dir: &Path) -> Result<PathBuf> {
    let mut map = ops_map(obj, algo)?;
    let mut link = map
        .attach_struct_ops()
        .with_context(|| format!("failed to register struct_ops `{algo}`"))?;
    if struct_ops_links() {
        let pin = dir.join("link");
        link.pin(&pin)
            .with_context(|| format!("failed to pin the {algo} link at {}", pin.display()))?;
        return Ok(pin);
    }
    // Without a link libbpf registered by writing the map's element;
    // dropping its link object would delete it again.
    link.disconnect();
    let pin = dir.join("struct_ops");
    if let Err(e) = map.pin(&pin) {
        let _ = map.delete(&0u32.to_ne_bytes());
        return Err(e).with_context(|| {
            format!(
                "failed to pin the {algo} struct_ops map at {}",
                pin.display()
            )
        });
    }
    Ok(pin)
}

/// Register through the struct_ops map itself, as kernels before 6.4
/// (no BPF_LINK_TYPE_STRUCT_OPS) do: the object's `.struct_ops.link`
/// sections ask for a link.
fn without_link(obj: &mut OpenObject) -> Result<()> {
    for mut map in obj.maps_mut() {
        if map.map_type() == MapType::StructOps {
            let f = map.map_flags() & !libbpf_sys::BPF_F_LINK;
            map.set_map_flags(f)?;
        }
    }
    Ok(())
}

/// A loaded, not yet registered controller (lives inside `with_loaded`).
pub struct Loaded<'a> {
    algo: Algo,
    obj: &'a mut Object,
}

impl Loaded<'_> {
    pub(crate) fn map(&self, name: &str) -> Result<MapHandle> {
        let m = self
            .obj
            .maps()
            .find(|m| m.name() == name)
            .with_context(|| format!("{}: object has no map `{name}`", self.algo))?;
        Ok(MapHandle::try_from(&m)?)
    }

    /// Swap the pinned link of this algorithm to this object's struct_ops map.
    /// libbpf writes the map value (state READY) before BPF_LINK_UPDATE.
    pub(crate) fn update_link(&mut self, link: &Link) -> Result<()> {
        use libbpf_rs::AsRawLibbpf;
        let algo = self.algo;
        let map = ops_map(self.obj, algo)?;
        // SAFETY: both pointers come from live libbpf objects owned by this scope.
        let ret = unsafe {
            libbpf_sys::bpf_link__update_map(
                link.as_libbpf_object().as_ptr(),
                map.as_libbpf_object().as_ptr(),
            )
        };
        if ret != 0 {
            bail!(
                "failed to swap {algo} to the new object (link update: {})",
                std::io::Error::from_raw_os_error(-ret)
            );
        }
        Ok(())
    }
}

macro_rules! load_skel {
    ($builder:ty, $algo:expr, $reuse:expr, $allow:expr, $verbose:expr, $f:expr) => {{
        let mut storage = MaybeUninit::uninit();
        let mut builder = <$builder>::default();
        builder.obj_builder.debug($verbose);
        start_capture($verbose);
        let mut open = builder
            .open(&mut storage)
            .map_err(|e| load_error(&format!("the {} BPF object", $algo), e, $verbose))?;
        if $allow {
            set_ca_flags($algo, open.open_object_mut(), TCP_CONG_NON_RESTRICTED)?;
        }
        prepare($algo, open.open_object_mut(), $reuse)?;
        for_this_kernel(open.open_object_mut())?;
        let mut skel = match open.load() {
            Ok(s) => s,
            Err(e) => return Err(load_error(&$algo.to_string(), e, $verbose)),
        };
        take_log();
        let mut loaded = Loaded {
            algo: $algo,
            obj: skel.object_mut(),
        };
        $f(&mut loaded)
    }};
}

/// Load `algo` (the verifier runs here), reusing its pinned maps when `reuse`,
/// and run `f` on the loaded object.  The object is closed when `f` returns;
/// what `f` pinned stays.
pub fn with_loaded<R>(
    algo: Algo,
    reuse: bool,
    verbose: bool,
    f: impl FnOnce(&mut Loaded<'_>) -> Result<R>,
) -> Result<R> {
    with_loaded_allow(algo, reuse, false, verbose, f)
}

/// [`with_loaded`], the controller selectable by any process when `allow`.
pub(crate) fn with_loaded_allow<R>(
    algo: Algo,
    reuse: bool,
    allow: bool,
    verbose: bool,
    f: impl FnOnce(&mut Loaded<'_>) -> Result<R>,
) -> Result<R> {
    macro_rules! load {
        ($builder:ty) => {
            load_skel!($builder, algo, reuse, allow, verbose, f)
        };
    }
    crate::algos::with_skel!(algo, load)
}

// ---------------------------------------------------------------------------
// attach / detach.

pub struct AttachOpts {
    pub algo: Algo,
    pub sets: Vec<(String, String)>,
    pub make_default: bool,
    /// Selectable by unprivileged sockets (tcp_allowed_congestion_control).
    pub allow: bool,
    pub verbose: bool,
}

/// Is `name` in net.ipv4.tcp_allowed_congestion_control (selectable by a
/// process without CAP_NET_ADMIN)?
pub fn is_allowed(name: &str) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
        .map(|s| s.split_whitespace().any(|n| n == name))
        .unwrap_or(false)
}

#[derive(Debug, PartialEq, Eq)]
pub enum AttachOutcome {
    Attached,
    AlreadyAttached,
}

/// Registered TCP congestion controls.
pub fn available_ccs() -> Result<Vec<String>> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .context("failed to read tcp_available_congestion_control")?;
    Ok(s.split_whitespace().map(str::to_string).collect())
}

pub fn is_registered(name: &str) -> bool {
    available_ccs()
        .map(|v| v.iter().any(|n| n == name))
        .unwrap_or(false)
}

/// Removes what a failed attach pinned.
struct PinGuard {
    paths: Vec<PathBuf>,
    dir: Option<PathBuf>,
    armed: bool,
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if self.armed {
            for p in &self.paths {
                let _ = unpin(p);
            }
            if let Some(d) = &self.dir {
                let _ = std::fs::remove_dir(d);
            }
            gc_pin_root();
        }
    }
}

pub fn attach(opts: &AttachOpts, sweep: Sweep) -> Result<AttachOutcome> {
    let algo = opts.algo;
    // Validate everything before touching the kernel.
    let mut params = algo.defaults();
    params.apply(&opts.sets)?;
    require_root()?;
    require_kernel()?;
    if let Some(why) = kernel_lacks(algo) {
        return Err(CclError::Unsupported(why).into());
    }

    // Replacing an attached controller is an upgrade (crate::upgrade).
    if is_attached(algo) {
        return Ok(AttachOutcome::AlreadyAttached);
    }
    if opts.make_default {
        sysctl::check_can_default(algo.name())?;
    }
    // What a killed ccload left (we hold the state lock: nobody is building).
    sweep()?;
    if !is_attached(algo) && is_registered(algo.name()) {
        bail!(CclError::NameTaken(algo.name().to_string()));
    }

    // Crash consistency: everything is pinned in a private directory first
    // and renamed into place in one step, with the restore metadata already
    // written; only then is the default changed.  A kill at any point leaves
    // either nothing visible or a complete attachment, plus at most a
    // `tmp-*` directory that the next state-changing command removes
    // (`leftovers::sweep`).
    let tmp = new_tmp_pin_dir(algo.name())?;
    let mut guard = PinGuard {
        paths: Vec::new(),
        dir: Some(tmp.clone()),
        armed: true,
    };

    let mut meta = intf::ccl_meta {
        attached_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        ..Default::default()
    };
    crate::layout::stamp(&mut meta, algo, &crate::layout::Identity::ours(algo));
    let mut set_default = false;
    if opts.make_default {
        let prev = sysctl::default_cc()?;
        if prev != algo.name() {
            crate::layout::set_c_text(&mut meta.prev_default, &prev);
            meta.default_set = 1;
            set_default = true;
        }
    }
    with_loaded_allow(algo, false, opts.allow, opts.verbose, |loaded| {
        let map = loaded.map("params")?;
        for profile in 0..intf::CCL_NR_PROFILES {
            let p = if profile == 0 {
                params.clone()
            } else {
                algo.defaults()
            };
            map.update(&profile.to_ne_bytes(), &p.to_bytes(), MapFlags::ANY)
                .context("failed to write tunables")?;
        }
        loaded
            .map("meta")?
            .update(&0u32.to_ne_bytes(), pod_bytes(&meta), MapFlags::ANY)
            .context("failed to write meta")?;
        for name in MAPS {
            let pin = tmp.join(name);
            loaded
                .map(name)?
                .pin(&pin)
                .with_context(|| format!("failed to pin {}", pin.display()))?;
            guard.paths.push(pin);
        }
        let pin = register(loaded.obj, algo, &tmp)?;
        guard.paths.insert(0, pin);
        Ok(())
    })?;
    let dir = pin_dir(algo);
    std::fs::rename(&tmp, &dir)
        .with_context(|| format!("failed to rename {} to {}", tmp.display(), dir.display()))?;
    guard.armed = false;

    if set_default {
        if let Err(e) = sysctl::set_default_cc(algo.name()) {
            let _ = detach(algo);
            return Err(e.context(format!("{algo} was not attached")));
        }
    }
    Ok(AttachOutcome::Attached)
}

/// Attach `algo` from a BPF object file built elsewhere, as a ccload of
/// another release leaves it: its own params layout (written by field name:
/// `values` first, this build's defaults for the names it shares, 0 for the
/// rest), `identity` in its meta, maps and link pinned where ccload pins
/// them.  For the upgrade tests' fixture objects (tests/build.rs); the CLI
/// attaches only the objects it embeds.
#[doc(hidden)]
pub fn attach_object_file(
    algo: Algo,
    path: &Path,
    identity: &crate::layout::Identity,
    values: &[(&str, u32)],
) -> Result<()> {
    require_root()?;
    require_kernel()?;
    if is_attached(algo) || is_registered(algo.name()) {
        bail!(CclError::NameTaken(algo.name().to_string()));
    }
    start_capture(false);
    let mut open = libbpf_rs::ObjectBuilder::default()
        .open_file(path)
        .map_err(|e| load_error(&path.display().to_string(), e, false))?;
    share_sk_profile(&mut open)?;
    for_this_kernel(&mut open)?;
    let fields = crate::layout::open_params_fields(&open)
        .with_context(|| format!("{}: no BTF for its params", path.display()))?;
    let mut obj = open
        .load()
        .map_err(|e| load_error(&path.display().to_string(), e, false))?;
    take_log();
    let tmp = new_tmp_pin_dir(&format!("{}-file", algo.name()))?;
    let mut guard = PinGuard {
        paths: Vec::new(),
        dir: Some(tmp.clone()),
        armed: true,
    };
    let find = |obj: &Object, name: &str| -> Result<MapHandle> {
        let m = obj
            .maps()
            .find(|m| m.name() == name)
            .with_context(|| format!("{}: no map `{name}`", path.display()))?;
        Ok(MapHandle::try_from(&m)?)
    };
    let params = find(&obj, "params")?;
    let mut bytes = vec![0u8; params.value_size() as usize];
    for f in &fields {
        let v = values
            .iter()
            .find(|(n, _)| *n == f.name)
            .map(|(_, v)| *v)
            .or_else(|| {
                let i = algo.fields().iter().position(|d| d.field == f.name)?;
                Some(algo.defaults().raw[i])
            })
            .unwrap_or(0);
        if f.size == 4 {
            bytes[f.off..f.off + 4].copy_from_slice(&v.to_ne_bytes());
        }
    }
    for profile in 0..intf::CCL_NR_PROFILES {
        params.update(&profile.to_ne_bytes(), &bytes, MapFlags::ANY)?;
    }
    let mut meta = intf::ccl_meta {
        attached_unix_s: 1,
        ..Default::default()
    };
    crate::layout::stamp(&mut meta, algo, identity);
    // The fixture's own fields, as its release would have recorded them.
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    crate::layout::set_c_text(&mut meta.params_fields, &names.join(","));
    find(&obj, "meta")?.update(&0u32.to_ne_bytes(), pod_bytes(&meta), MapFlags::ANY)?;
    for name in MAPS {
        let pin = tmp.join(name);
        find(&obj, name)?.pin(&pin)?;
        guard.paths.push(pin);
    }
    let pin = register(&mut obj, algo, &tmp)?;
    guard.paths.insert(0, pin);
    std::fs::rename(&tmp, pin_dir(algo))?;
    guard.armed = false;
    Ok(())
}

/// A struct of bpf/ccload_intf.h (bindgen: plain old data) as the bytes a
/// map entry takes; the slice borrows it.
pub(crate) fn pod_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is one of ccload_intf.h's bindgen structs (Copy, no
    // pointers); the slice covers exactly its bytes and borrows it.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// Unregister and unpin `algo`, restoring the default CC it replaced.
pub fn detach(algo: Algo) -> Result<()> {
    require_root()?;
    if !is_attached(algo) {
        // Clean up stray map pins of an interrupted attach, then report.
        remove_pins(algo);
        bail!(CclError::NotAttached { algo: algo.name() });
    }
    if let Ok(meta) = read_meta(algo) {
        if meta.default_set == 1 {
            let prev = c_name(&meta.prev_default);
            if sysctl::default_cc().ok().as_deref() == Some(algo.name()) && !prev.is_empty() {
                sysctl::set_default_cc(&prev)
                    .with_context(|| format!("failed to restore default CC `{prev}`"))?;
            }
        }
    }
    remove_pins(algo);
    if !wait_unregistered(&[algo]) {
        bail!("{algo} still registered 5 s after unpinning: another process holds its link");
    }
    Ok(())
}

/// Wait (up to 5 s) until none of `algos` is registered: link release, and
/// so unregistration, runs from a kernel workqueue after the last unpin.
pub fn wait_unregistered(algos: &[Algo]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while algos.iter().any(|a| is_registered(a.name())) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

fn remove_pins(algo: Algo) {
    let _ = unpin_dir(&pin_dir(algo));
    gc_pin_root();
}

/// Unpin everything in one pin directory (its link first) and remove it.
/// Errors name the path.
pub fn unpin_dir(dir: &Path) -> Result<()> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(d) => d.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("failed to read {}", dir.display())),
    };
    let holder = |f: &PathBuf| {
        f.file_name()
            .is_some_and(|n| n == "link" || n == "struct_ops")
    };
    files.sort_by_key(|f| !holder(f));
    for f in files {
        unpin(&f)?;
    }
    std::fs::remove_dir(dir).with_context(|| format!("failed to remove {}", dir.display()))
}

/// Remove one pin.  A registered struct_ops map (`struct_ops`, kernels
/// without struct_ops links) is unregistered first: its pin does not hold
/// the registration, the kernel's own reference does.
fn unpin(f: &Path) -> Result<()> {
    if f.file_name().is_some_and(|n| n == "struct_ops") {
        if let Ok(m) = MapHandle::from_pinned_path(f) {
            // ENOENT: not registered (any more); nothing to undo
            let _ = m.delete(&0u32.to_ne_bytes());
        }
    }
    std::fs::remove_file(f).with_context(|| format!("failed to unpin {}", f.display()))
}

/// Prefix of the private directories an attach or a cgroup binding pins
/// into before renaming them into place (bpffs allows no dot in a name).
pub const TMP_PREFIX: &str = "tmp-";

/// `<pin root>/tmp-<tag>-<pid>`: a private pin directory of this process.
pub fn tmp_pin_path(tag: &str) -> PathBuf {
    Path::new(PIN_ROOT).join(format!("{TMP_PREFIX}{tag}-{}", std::process::id()))
}

/// Create [`tmp_pin_path`]`(tag)` (and the pin root).
pub fn new_tmp_pin_dir(tag: &str) -> Result<PathBuf> {
    ensure_pin_root()?;
    let tmp = tmp_pin_path(tag);
    std::fs::create_dir(&tmp).with_context(|| format!("failed to create {}", tmp.display()))?;
    Ok(tmp)
}

pub use crate::layout::c_text as c_name;

// ---------------------------------------------------------------------------
// Pinned map access.

/// Bytes one telemetry record takes in a controller's ring, its 8-byte
/// ring header included.
pub const RB_RECORD_BYTES: usize = (crate::telemetry::EVENT_SIZE + 8 + 7) & !7;
/// Bytes of records waiting in a controller's ring that make the next
/// record wake its reader (ccl_event_submit()); fewer wake nobody, and
/// readers drain the ring every [`RB_DRAIN_MS`] instead.
pub const RB_WAKE_BYTES: usize = intf::CCL_RB_WAKE_BYTES as usize;
/// How often readers drain a controller's ring, ms.
pub const RB_DRAIN_MS: u64 = intf::CCL_RB_DRAIN_MS as u64;

pub fn open_map(algo: Algo, name: &str) -> Result<MapHandle> {
    if !is_attached(algo) {
        bail!(CclError::NotAttached { algo: algo.name() });
    }
    let pin = map_pin(algo, name);
    MapHandle::from_pinned_path(&pin).with_context(|| format!("failed to open {}", pin.display()))
}

/// The tunables of `profile`.  An object another release attached, with
/// another params layout, is read by field name (a tunable it lacks reads
/// as this build's default).
pub fn read_params(algo: Algo, profile: u32) -> Result<Params> {
    let map = open_map(algo, "params")?;
    let bytes = map
        .lookup(&profile.to_ne_bytes(), MapFlags::ANY)?
        .with_context(|| format!("{algo}: no params entry for profile {profile}"))?;
    let meta = read_meta(algo)?;
    if crate::layout::params_are_ours(algo, &meta, bytes.len()) {
        return Ok(Params::from_bytes(algo, &bytes)?);
    }
    let fields = crate::layout::params_fields(algo, &meta, bytes.len())?;
    Ok(crate::layout::carry_params(algo, &bytes, &fields).0)
}

/// Write the tunables of `profile`; an object with another params layout
/// (attached by another release) is refused with the way out.
pub fn write_params(algo: Algo, params: &Params, profile: u32) -> Result<()> {
    let map = open_map(algo, "params")?;
    let meta = read_meta(algo)?;
    let size = map.value_size() as usize;
    if !crate::layout::params_are_ours(algo, &meta, size) {
        let who = crate::layout::Identity::of(&meta).describe();
        bail!(CclError::Layout(format!(
            "{algo} was attached by {who}, whose tunables are laid out differently; \
             `ccload attach --algo {algo} --replace` upgrades it in place (tunables carried over, \
             connections kept), then tune again; nothing was changed"
        )));
    }
    map.update(&profile.to_ne_bytes(), &params.to_bytes(), MapFlags::ANY)
        .with_context(|| format!("failed to update {algo} params"))
}

/// Per-CPU stats summed, indexed by `enum ccl_stat_idx`.
pub fn read_stats(algo: Algo) -> Result<Vec<u64>> {
    let map = open_map(algo, "stats")?;
    let mut out = vec![0u64; intf::CCL_NR_STATS as usize];
    for (i, slot) in out.iter_mut().enumerate() {
        let per_cpu = map
            .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)?
            .unwrap_or_default();
        *slot = sum_percpu_u64(&per_cpu)?;
    }
    Ok(out)
}

/// The guard's counters of an attached controller: (ssth_repaired,
/// cwnd_repaired), times it repaired the kernel's ssthresh and cwnd (see
/// ccl_guard() in bpf/ccload_maps.bpf.h).
pub fn guard_repairs(algo: Algo) -> Result<[u64; 2]> {
    let s = read_stats(algo)?;
    Ok([
        s[intf::CCL_STAT_SSTH_REPAIRED as usize],
        s[intf::CCL_STAT_CWND_REPAIRED as usize],
    ])
}

/// Sum of a per-CPU u64 counter's values; a value shorter than 8 bytes (a
/// foreign map pinned under our name) is an error, not a panic.
pub(crate) fn sum_percpu_u64(per_cpu: &[Vec<u8>]) -> Result<u64> {
    let sum: std::result::Result<u64, CclError> = per_cpu
        .iter()
        .map(|b| {
            b.get(..8)
                .map(|v| u64::from_ne_bytes(v.try_into().unwrap()))
                .ok_or_else(|| {
                    CclError::Layout(format!("per-CPU counter of {} bytes, 8 expected", b.len()))
                })
        })
        .sum();
    Ok(sum?)
}

/// The meta entry, whatever release wrote it ([`crate::layout::decode_meta`]).
pub fn read_meta(algo: Algo) -> Result<intf::ccl_meta> {
    crate::layout::decode_meta(algo, &open_map(algo, "meta")?)
}

/// Kernel ids of an attached algorithm, for `status`.
#[derive(Debug, Default, serde::Serialize)]
pub struct Ids {
    /// What holds the registration.
    pub holder: Option<Holder>,
    /// 0 when a map holds it.
    pub link_id: u32,
    pub struct_ops_map_id: u32,
    pub map_ids: Vec<(String, u32)>,
}

pub fn ids(algo: Algo) -> Result<Ids> {
    let mut ids = Ids::default();
    if reg_map_pin(algo).exists() {
        ids.holder = Some(Holder::Map);
        ids.struct_ops_map_id = MapHandle::from_pinned_path(reg_map_pin(algo))?
            .info()?
            .info
            .id;
    } else {
        let info = Link::open(link_pin(algo))?.info()?;
        ids.holder = Some(Holder::Link);
        ids.link_id = info.id;
        if let libbpf_rs::query::LinkTypeInfo::StructOps(s) = info.info {
            ids.struct_ops_map_id = s.map_id;
        }
    }
    for m in MAPS {
        let h = open_map(algo, m)?;
        ids.map_ids.push((m.to_string(), h.info()?.info.id));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_cong_control_picks_the_struct_ops_map() {
        let both: Vec<String> = vec!["ccpd".into(), "ccpd_sk_rs".into()];
        assert_eq!(chosen_ops_map(&both, false).unwrap(), "ccpd");
        assert_eq!(chosen_ops_map(&both, true).unwrap(), "ccpd_sk_rs");
        // an object with one map gets it on every kernel
        let one: Vec<String> = vec!["hetcp".into()];
        assert_eq!(chosen_ops_map(&one, true).unwrap(), "hetcp");
        assert_eq!(chosen_ops_map(&one, false).unwrap(), "hetcp");
        assert!(chosen_ops_map(&[], false).is_none());
    }

    #[test]
    fn per_cpu_sums_reject_short_values() {
        let ok = vec![5u64.to_ne_bytes().to_vec(), 7u64.to_ne_bytes().to_vec()];
        assert_eq!(sum_percpu_u64(&ok).unwrap(), 12);
        let short = vec![vec![1u8, 2, 3, 4]];
        let e = sum_percpu_u64(&short).unwrap_err().to_string();
        assert!(e.contains("4 bytes"), "{e}");
    }

    #[test]
    fn skeleton_and_bindgen_agree_on_layouts() {
        use crate::skel::ccpd::types as sk;
        assert_eq!(
            std::mem::size_of::<sk::ccl_ccpd_params>(),
            std::mem::size_of::<intf::ccl_ccpd_params>()
        );
        assert_eq!(
            std::mem::size_of::<sk::ccl_meta>(),
            std::mem::size_of::<intf::ccl_meta>()
        );
    }

    #[test]
    fn needed_capabilities_are_read_from_capeff() {
        let st = |eff: u64| format!("Name:\tx\nCapEff:\t{eff:016x}\n");
        assert!(missing_caps(&st(u64::MAX)).is_empty());
        assert!(
            missing_caps(&st(1 << 21)).is_empty(),
            "CAP_SYS_ADMIN covers all"
        );
        assert_eq!(
            missing_caps(&st((1 << 39) | (1 << 12))),
            vec!["CAP_PERFMON"]
        );
        assert_eq!(missing_caps(&st(0)).len(), 3);
        assert!(missing_caps("no such line").is_empty());
    }

    #[test]
    fn pin_layout() {
        assert_eq!(
            link_pin(Algo::Ccpd),
            Path::new("/sys/fs/bpf/ccload/ccpd/link")
        );
        assert_eq!(
            map_pin(Algo::UbReno, "params"),
            Path::new("/sys/fs/bpf/ccload/ub_reno/params")
        );
    }
}
