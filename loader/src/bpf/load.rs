//! Loading a controller's object for the running kernel: the pin root and
//! the socket-storage map every controller shares, the cong_control variant
//! this kernel calls, and registration through a struct_ops link or, before
//! Linux 6.4, through the struct_ops map itself.

use super::*;

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

pub(super) fn pin_root_problem(md: &std::fs::Metadata) -> Option<String> {
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
pub(super) const TCP_CONG_NON_RESTRICTED: u32 = 0x1;

/// Set `flags` of the struct_ops value (struct tcp_congestion_ops) before
/// load.  The kernel copies it at registration (bpf_tcp_ca_init_member)
/// and forgets it at unregistration, so `--allow` needs no sysctl write
/// and no restore: the name leaves tcp_allowed_congestion_control with the
/// controller.
pub(super) fn set_ca_flags(algo: Algo, obj: &mut OpenObject, flags: u32) -> Result<()> {
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
pub(super) fn prepare(algo: Algo, obj: &mut OpenObject, reuse: bool) -> Result<()> {
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
pub(super) const SK_RS: &str = "_sk_rs";

/// Does this kernel call cong_control(sk, rs)?
pub(super) fn two_arg_cong_control() -> bool {
    cong_control_arity() == Some(2)
}

/// The struct_ops map of `names` (an object's struct_ops maps, in order)
/// that this kernel gets: `<map>_sk_rs` where cong_control takes two
/// arguments and the object has one, else the first other.
pub(super) fn chosen_ops_map(names: &[String], two_args: bool) -> Option<&String> {
    let variant = names.iter().find(|n| n.ends_with(SK_RS));
    match variant {
        Some(v) if two_args => Some(v),
        _ => names.iter().find(|n| !n.ends_with(SK_RS)),
    }
}

/// Of an object that carries its cong_control twice (ccpd), create the
/// struct_ops map and load the program this kernel calls; the other pair
/// stays out of the kernel.
pub(super) fn choose_cong_control(obj: &mut OpenObject) -> Result<()> {
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
pub(super) fn ops_map<'o>(obj: &'o mut Object, algo: Algo) -> Result<libbpf_rs::MapMut<'o>> {
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
pub(super) fn for_this_kernel(obj: &mut OpenObject) -> Result<()> {
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
pub(super) fn register(obj: &mut Object, algo: Algo, dir: &Path) -> Result<PathBuf> {
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
pub(super) fn without_link(obj: &mut OpenObject) -> Result<()> {
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
    pub(super) obj: &'a mut Object,
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

/// `CCLOAD_VERIFIER_STATS=1`: the verifier's statistics of every program
/// it checks (log level 4), printed after the load; where the time of an
/// attach goes on an older kernel's verifier (docs/testing.md).
fn verifier_stats(obj: &mut OpenObject) -> bool {
    if std::env::var_os("CCLOAD_VERIFIER_STATS").is_none_or(|v| v != "1") {
        return false;
    }
    for mut prog in obj.progs_mut() {
        prog.set_log_level(4);
    }
    start_capture(true);
    true
}

fn print_verifier_stats(log: &str) {
    let mut prog = "";
    for l in log.lines() {
        if let Some(i) = l.find("prog '") {
            if l.contains("BEGIN PROG LOAD LOG") {
                let rest = &l[i + 6..];
                prog = &rest[..rest.find('\'').unwrap_or(rest.len())];
            }
        } else if l.starts_with("processed ") || l.starts_with("verification time") {
            eprintln!("verifier: {prog}: {l}");
        }
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
        let stats = verifier_stats(open.open_object_mut());
        let mut skel = match open.load() {
            Ok(s) => s,
            Err(e) => return Err(load_error(&$algo.to_string(), e, $verbose)),
        };
        let log = take_log();
        if stats {
            print_verifier_stats(&log);
        }
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
    crate::bpf::algos::with_skel!(algo, load)
}
