//! attach and detach: register a loaded controller and pin what holds it
//! (built in a temporary pin directory, renamed into place), swap objects
//! under a live link, unregister and unpin.

use super::*;

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
pub(super) struct PinGuard {
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

    // Replacing an attached controller is an upgrade (crate::bpf::upgrade).
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
    crate::bpf::layout::stamp(&mut meta, algo, &crate::bpf::layout::Identity::ours(algo));
    let mut set_default = false;
    if opts.make_default {
        let prev = sysctl::default_cc()?;
        if prev != algo.name() {
            crate::bpf::layout::set_c_text(&mut meta.prev_default, &prev);
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
    identity: &crate::bpf::layout::Identity,
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
    let fields = crate::bpf::layout::open_params_fields(&open)
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
    crate::bpf::layout::stamp(&mut meta, algo, identity);
    // The fixture's own fields, as its release would have recorded them.
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    crate::bpf::layout::set_c_text(&mut meta.params_fields, &names.join(","));
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
/// map entry takes; the slice borrows it.  `'static` keeps a borrowed
/// struct out (`pod_bytes(&meta)` with `meta: &ccl_meta` would give the
/// reference's 8 bytes): pass the struct, not a reference to it.
pub(crate) fn pod_bytes<T: Copy + 'static>(v: &T) -> &[u8] {
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

pub(super) fn remove_pins(algo: Algo) {
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
pub(super) fn unpin(f: &Path) -> Result<()> {
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

pub use crate::bpf::layout::c_text as c_name;
