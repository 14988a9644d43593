//! Per-cgroup deployment: `ccload cgroup set|unset|list`.
//!
//! Each binding is one instance of `bpf/cgroup.bpf.c` (cgroup sock_ops)
//! attached to one cgroup v2 directory; its link and maps are pinned under
//! `/sys/fs/bpf/ccload/cgroup/<cgroup id>/`, so the binding outlives ccload.
//! The program sets TCP_CONGESTION on the cgroup's connections (active and
//! passive) and writes their tunable profile into the shared `sk_profile`
//! socket storage that every controller reads.  Every binding also keeps
//! in-kernel aggregates of the cgroup's connections (`agg`, crate::bind::agg);
//! a *watch* is a binding with no algorithm: aggregates only.

use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::bind::path_rules::PathRule;
use crate::bpf::algos::Algo;
use crate::bpf::{self, PIN_ROOT};
use crate::intf;

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

pub fn cg_root() -> PathBuf {
    Path::new(PIN_ROOT).join("cgroup")
}

fn cg_dir(id: u64) -> PathBuf {
    cg_root().join(id.to_string())
}

/// The pinned aggregates (`agg` map) of the binding or watch of cgroup `id`.
pub fn agg_pin(id: u64) -> PathBuf {
    cg_dir(id).join("agg")
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Binding {
    pub cgroup: Option<PathBuf>,
    pub cgroup_id: u64,
    /// The congestion control given to the sockets; "" for a watch
    /// (aggregates only, the sockets keep theirs).
    pub algo: String,
    pub profile: u32,
    pub active: u64,
    pub passive: u64,
    pub errors: u64,
    /// Path rules, in order (path_rules.rs); each with its aggregate.
    pub rules: Vec<RuleCount>,
    /// With path rules: the connections none of them chose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmatched: Option<SlotCounts>,
    /// `set` attached the controller for this binding.
    #[serde(skip)]
    pub auto_attached: bool,
}

/// What the connections of one aggregate slot did: how many there were
/// (ended ones included), the bytes acked and the data segments sent and
/// retransmitted.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SlotCounts {
    pub connections: u64,
    pub bytes_acked: u64,
    pub segs_out: u64,
    pub retrans_segs: u64,
}

/// A path rule of a binding and what it chose so far.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RuleCount {
    #[serde(flatten)]
    pub rule: PathRule,
    /// The rule as written (`dst 10.0.0.0/8 -> cubic`).
    pub text: String,
    /// The connections it chose (its aggregate slot).
    #[serde(flatten)]
    pub counts: SlotCounts,
}

/// A cgroup v2 directory, opened once: its id and the attach all use this
/// fd, so a path swapped (renamed, replaced by a symlink) after the checks
/// cannot redirect the binding.
pub struct CgroupDir {
    /// Absolute, without symlinks (relative paths are taken from the
    /// current directory).
    pub path: PathBuf,
    /// The cgroup id (the kernfs inode number).
    pub id: u64,
    fd: std::os::fd::OwnedFd,
}

impl CgroupDir {
    pub fn open(path: &Path) -> Result<CgroupDir> {
        use std::os::fd::FromRawFd;
        let abs = std::path::absolute(path)
            .with_context(|| format!("cgroup {}: bad path", path.display()))?;
        let real = std::fs::canonicalize(&abs)
            .with_context(|| format!("cgroup {}: no such directory", path.display()))?;
        if real != normalize(&abs) {
            bail!(
                "cgroup {} goes through a symlink (it is {}); give the real path",
                path.display(),
                real.display()
            );
        }
        let c = std::ffi::CString::new(real.as_os_str().as_encoded_bytes())?;
        // SAFETY: open(2) on a valid C string; the fd is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            bail!("cgroup {}: {e}", real.display());
        }
        // SAFETY: a fresh fd we own.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        if !is_cgroup2(&fd).with_context(|| format!("statfs {}", real.display()))? {
            bail!(
                "{} is not in a cgroup v2 hierarchy (sock_ops programs attach to cgroup2 only)",
                real.display()
            );
        }
        let file = std::fs::File::from(fd.try_clone()?);
        let id = file
            .metadata()
            .with_context(|| format!("stat {}", real.display()))?
            .ino();
        Ok(CgroupDir { path: real, id, fd })
    }
}

/// `p` with `.` and `..` components resolved lexically (`absolute` keeps
/// them), to compare with the canonical path.
fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` (which need not exist) is inside a cgroup v2 hierarchy: its
/// nearest existing ancestor is a cgroup v2 directory.
/// Is the filesystem of `fd` cgroup v2? (`CgroupDir::open` and
/// `check_in_cgroup2`.)
fn is_cgroup2(fd: &impl AsRawFd) -> std::io::Result<bool> {
    // SAFETY: fstatfs on an open fd into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_type as i64 == CGROUP2_SUPER_MAGIC)
}

pub fn check_in_cgroup2(path: &Path) -> Result<()> {
    let mut p = path;
    while !p.exists() {
        p = p
            .parent()
            .with_context(|| format!("{}: no existing ancestor", path.display()))?;
    }
    let dir = std::fs::File::open(p).with_context(|| format!("open {}", p.display()))?;
    if !is_cgroup2(&dir).with_context(|| format!("statfs {}", p.display()))? {
        bail!(
            "{} is not in a cgroup v2 hierarchy ({} is not a cgroup v2 directory)",
            path.display(),
            p.display()
        );
    }
    Ok(())
}

/// The cgroup v2 id (its kernfs inode) of `path`, which must be a cgroup v2
/// directory.
pub fn cgroup_id(path: &Path) -> Result<u64> {
    Ok(CgroupDir::open(path)?.id)
}

/// Whether `name` can be given to sockets: a registered CC, or one of ours
/// (attached on first use by [`set`]).
fn check_algo(name: &str) -> Result<()> {
    if bpf::is_registered(name) || name.parse::<Algo>().is_ok() {
        return Ok(());
    }
    bail!(
        "unknown congestion control `{name}` (available: {})",
        bpf::available_ccs().unwrap_or_default().join(" ")
    )
}

/// Bind the TCP connections of processes in cgroup `path` to `algo` with
/// tunable profile `profile`.  Replaces an existing binding of that cgroup.
/// One of our controllers that is not attached is attached first, with
/// its defaults, as the kernel loads a CC module on first use
/// (`Binding::auto_attached`); if the binding then fails, it is detached
/// again, so a failed `set` changes nothing.
pub fn set(path: &Path, algo: &str, profile: u32, sweep: bpf::Sweep) -> Result<Binding> {
    set_with_rules(path, algo, profile, &[], sweep)
}

/// Attach one of ours with its defaults because a binding names it (as the
/// kernel loads a CC module on first use).
pub fn attach_first_use(a: Algo, sweep: bpf::Sweep) -> Result<()> {
    bpf::attach(
        &bpf::AttachOpts {
            algo: a,
            sets: Vec::new(),
            make_default: false,
            allow: false,
            verbose: false,
        },
        sweep,
    )
    .with_context(|| format!("attaching {a} for the binding"))?;
    Ok(())
}

/// [`set`] with path rules: a connection matching one gets its CC and
/// profile, the others `algo` and `profile` (path_rules.rs).  Every rule's
/// CC must be registered (ours attached, or a kernel CC).
pub fn set_with_rules(
    path: &Path,
    algo: &str,
    profile: u32,
    rules: &[PathRule],
    sweep: bpf::Sweep,
) -> Result<Binding> {
    crate::bind::path_rules::check(rules)?;
    for r in rules {
        check_algo(&r.cc)?;
        if r.profile >= intf::CCL_NR_PROFILES {
            bail!(
                "rule `{r}`: profile {} out of range 0..{}; nothing was changed",
                r.profile,
                intf::CCL_NR_PROFILES - 1
            );
        }
    }
    let auto = match algo.parse::<Algo>() {
        Ok(a) if !bpf::is_attached(a) => Some(a),
        _ => None,
    };
    // Everything that can be checked without the kernel is checked first.
    bpf::require_root()?;
    CgroupDir::open(path)?;
    check_algo(algo)?;
    if profile >= intf::CCL_NR_PROFILES {
        bail!(
            "profile {profile} out of range 0..{}; nothing was changed",
            intf::CCL_NR_PROFILES - 1
        );
    }
    if let Some(a) = auto {
        attach_first_use(a, sweep)?;
    }
    if let Some(r) = rules.iter().find(|r| !bpf::is_registered(&r.cc)) {
        if let Some(a) = auto {
            let _ = bpf::detach(a);
        }
        bail!(
            "rule `{r}`: {} is not attached (`ccload attach --algo {}` first); nothing was changed",
            r.cc,
            r.cc
        );
    }
    match bind(path, algo, profile, rules, sweep) {
        Ok(mut b) => {
            b.auto_attached = auto.is_some();
            Ok(b)
        }
        Err(e) => {
            if let Some(a) = auto {
                let _ = bpf::detach(a);
            }
            Err(e)
        }
    }
}

/// Watch cgroup `path`: keep in-kernel aggregates of its TCP connections
/// (`ccload stats`) without changing their congestion control.  Replaces
/// a binding of that cgroup (a bound cgroup has the aggregates too).
pub fn watch(path: &Path, sweep: bpf::Sweep) -> Result<Binding> {
    bpf::require_root()?;
    bind(path, "", 0, &[], sweep)
}

fn bind(
    path: &Path,
    algo: &str,
    profile: u32,
    rules: &[PathRule],
    sweep: bpf::Sweep,
) -> Result<Binding> {
    bpf::require_root()?;
    let cg = CgroupDir::open(path)?;
    let id = cg.id;
    if !algo.is_empty() && !bpf::is_registered(algo) {
        bail!("{algo} is not attached (detached meanwhile?); nothing was changed");
    }
    if profile >= intf::CCL_NR_PROFILES {
        bail!(
            "profile {profile} out of range 0..{}; nothing was changed",
            intf::CCL_NR_PROFILES - 1
        );
    }
    if algo.len() >= intf::CCL_NAME_MAX as usize {
        bail!("congestion control name `{algo}` too long");
    }
    bpf::require_kernel()?;
    // What a killed ccload left (the state lock is held: nobody is building).
    sweep()?;
    // Crash consistency: the new binding is attached and pinned in a private
    // directory, then renamed into place.  Its program runs after the old
    // one's (cgroup programs run in attach order), so the new choice holds
    // from the moment it is attached, and the cgroup is never unbound during
    // a rebind.  A kill leaves at most `tmp-*` directories, which the next
    // state-changing command removes (`leftovers::sweep`).
    std::fs::create_dir_all(cg_root())
        .with_context(|| format!("failed to create {}", cg_root().display()))?;
    let tmp = bpf::new_tmp_pin_dir(&format!("cg-{id}"))?;
    if let Err(e) = attach(&cg, algo, profile, rules, &tmp) {
        let _ = bpf::unpin_dir(&tmp);
        bpf::gc_pin_root();
        return Err(e);
    }
    let dir = cg_dir(id);
    let old = bpf::tmp_pin_path(&format!("cg-old-{id}"));
    let had_old = dir.exists();
    if had_old {
        std::fs::rename(&dir, &old)
            .with_context(|| format!("failed to rename {} to {}", dir.display(), old.display()))?;
    }
    std::fs::rename(&tmp, &dir)
        .with_context(|| format!("failed to rename {} to {}", tmp.display(), dir.display()))?;
    if had_old {
        let _ = bpf::unpin_dir(&old);
    }
    Ok(Binding {
        cgroup: Some(cg.path.clone()),
        cgroup_id: id,
        algo: algo.to_string(),
        profile,
        active: 0,
        passive: 0,
        errors: 0,
        rules: rules
            .iter()
            .map(|r| RuleCount {
                rule: r.clone(),
                text: r.to_string(),
                counts: SlotCounts::default(),
            })
            .collect(),
        unmatched: (!rules.is_empty()).then(SlotCounts::default),
        auto_attached: false,
    })
}

fn attach(cg: &CgroupDir, algo: &str, profile: u32, rules: &[PathRule], dir: &Path) -> Result<()> {
    let (path, id) = (&cg.path, cg.id);
    let mut storage = MaybeUninit::uninit();
    let builder = crate::skel::cgroup::CgroupSkelBuilder::default();
    let mut open = builder
        .open(&mut storage)
        .context("failed to open the cgroup BPF object")?;
    bpf::share_sk_profile(open.open_object_mut())?;
    let mut skel = open
        .load()
        .context("failed to load the cgroup sock_ops program")?;
    let (krules, keys) = crate::bind::path_rules::to_kernel(rules)?;
    let mut b = intf::ccl_cg_binding {
        cgroup_id: id,
        profile,
        nr_rules: krules.len() as u32,
        ..Default::default()
    };
    for (d, s) in b.algo.iter_mut().zip(algo.bytes()) {
        *d = s as std::os::raw::c_char;
    }
    // The rules before the binding that counts them.
    for (i, r) in krules.iter().enumerate() {
        skel.maps
            .rules
            .update(&(i as u32).to_ne_bytes(), bpf::pod_bytes(r), MapFlags::ANY)?;
    }
    for (k, i) in &keys {
        skel.maps
            .prefixes
            .update(bpf::pod_bytes(k), &i.to_ne_bytes(), MapFlags::ANY)
            .context("path rule prefixes")?;
    }
    skel.maps
        .binding
        .update(&0u32.to_ne_bytes(), bpf::pod_bytes(&b), MapFlags::ANY)?;
    let mut link = skel
        .progs
        .ccl_cgroup_sockops
        .attach_cgroup(cg.fd.as_raw_fd())
        .with_context(|| format!("failed to attach sock_ops to {}", path.display()))?;
    skel.maps.binding.pin(dir.join("binding"))?;
    skel.maps.cg_stats.pin(dir.join("cg_stats"))?;
    skel.maps.agg.pin(dir.join("agg"))?;
    skel.maps.agg_sk.pin(dir.join("agg_sk"))?;
    skel.maps.rules.pin(dir.join("rules"))?;
    skel.maps.prefixes.pin(dir.join("prefixes"))?;
    link.pin(dir.join("link"))?;
    Ok(())
}

fn remove(id: u64) {
    let _ = bpf::unpin_dir(&cg_dir(id));
    let _ = std::fs::remove_dir(cg_root());
    bpf::gc_pin_root();
}

/// Remove the binding of cgroup `path`; false if it had none.
pub fn unset(path: &Path) -> Result<bool> {
    bpf::require_root()?;
    let id = cgroup_id(path)?;
    if !cg_dir(id).join("link").exists() {
        return Ok(false);
    }
    remove(id);
    Ok(true)
}

/// Remove every binding (e.g. `detach --all`).
pub fn unset_all() -> usize {
    let ids: Vec<u64> = std::fs::read_dir(cg_root())
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for &id in &ids {
        remove(id);
    }
    ids.len()
}

/// Find the directory of cgroup `id` under the cgroup2 mount.
fn find_path(id: u64) -> Option<PathBuf> {
    let mut stack = vec![crate::host::system::cgroup2_mount()?];
    while let Some(d) = stack.pop() {
        if std::fs::metadata(&d).ok()?.ino() == id {
            return Some(d);
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                    .map(|e| e.path()),
            );
        }
    }
    None
}

pub fn list() -> Result<Vec<Binding>> {
    read_bindings(true)
}

/// [`list`] without the paths (`cgroup` None): finding a path walks the
/// cgroup tree.
pub fn list_without_paths() -> Result<Vec<Binding>> {
    read_bindings(false)
}

/// The bindings without their paths: cgroup id -> (algorithm, profile).
pub fn bound_ids() -> Result<std::collections::BTreeMap<u64, (String, u32)>> {
    Ok(list_without_paths()?
        .into_iter()
        .map(|b| (b.cgroup_id, (b.algo, b.profile)))
        .collect())
}

fn read_bindings(paths: bool) -> Result<Vec<Binding>> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(cg_root()) else {
        return Ok(out);
    };
    for e in rd.filter_map(|e| e.ok()) {
        let Some(id) = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()) else {
            continue;
        };
        // A binding without its link (or its maps) is a leftover of a killed
        // ccload: `status`/`doctor` report it, `detach --all` removes it.
        if !e.path().join("link").exists() {
            continue;
        }
        let pin = e.path().join("binding");
        let m = MapHandle::from_pinned_path(&pin)
            .with_context(|| format!("failed to open {}", pin.display()))?;
        let bytes = m
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
            .context("binding entry missing")?;
        if bytes.len() != std::mem::size_of::<intf::ccl_cg_binding>() {
            bail!(crate::error::CclError::Layout("ccl_cg_binding size".into()));
        }
        // SAFETY: plain old data, size checked.
        let b: intf::ccl_cg_binding = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
        let pin = e.path().join("cg_stats");
        let st = MapHandle::from_pinned_path(&pin)
            .with_context(|| format!("failed to open {}", pin.display()))?;
        let mut c = [0u64; intf::CCL_CG_NR_STATS as usize];
        for (i, slot) in c.iter_mut().enumerate() {
            *slot = bpf::sum_percpu_u64(
                &st.lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)?
                    .unwrap_or_default(),
            )?;
        }
        let (rules, unmatched) = read_rules(&e.path(), b.nr_rules)?;
        out.push(Binding {
            cgroup: if paths { find_path(id) } else { None },
            cgroup_id: id,
            algo: bpf::c_name(&b.algo),
            profile: b.profile,
            active: c[intf::CCL_CG_ACTIVE as usize],
            passive: c[intf::CCL_CG_PASSIVE as usize],
            errors: c[intf::CCL_CG_ERRORS as usize],
            rules,
            unmatched,
            auto_attached: false,
        });
    }
    out.sort_by_key(|b| b.cgroup_id);
    Ok(out)
}

/// The path rules pinned in a binding's directory, and (zero) counts for
/// the connections none chose; a binding without rules, or made before
/// them, has neither.  `agg::fill_rule_counts` reads the counts.
fn read_rules(dir: &Path, n: u32) -> Result<(Vec<RuleCount>, Option<SlotCounts>)> {
    let n = n.min(intf::CCL_CG_MAX_RULES);
    if n == 0 || !dir.join("rules").exists() {
        return Ok((Vec::new(), None));
    }
    let rm = MapHandle::from_pinned_path(dir.join("rules"))?;
    let mut krules = Vec::new();
    for i in 0..n {
        let v = rm
            .lookup(&i.to_ne_bytes(), MapFlags::ANY)?
            .context("path rule missing")?;
        if v.len() != std::mem::size_of::<intf::ccl_path_rule>() {
            bail!(crate::error::CclError::Layout("ccl_path_rule size".into()));
        }
        // SAFETY: plain old data, size checked.
        krules.push(unsafe { std::ptr::read_unaligned::<intf::ccl_path_rule>(v.as_ptr().cast()) });
    }
    let pm = MapHandle::from_pinned_path(dir.join("prefixes"))?;
    let mut keys = Vec::new();
    for k in pm.keys() {
        if k.len() != std::mem::size_of::<intf::ccl_prefix_key>() {
            continue;
        }
        // SAFETY: plain old data, size checked.
        let key: intf::ccl_prefix_key = unsafe { std::ptr::read_unaligned(k.as_ptr().cast()) };
        if let Some(v) = pm.lookup(&k, MapFlags::ANY)? {
            let mut i = [0u8; 4];
            i.copy_from_slice(&v[..4]);
            keys.push((key, u32::from_ne_bytes(i)));
        }
    }
    let rules = crate::bind::path_rules::from_kernel(&krules, &keys)
        .into_iter()
        .map(|rule| RuleCount {
            text: rule.to_string(),
            rule,
            counts: SlotCounts::default(),
        })
        .collect();
    Ok((rules, Some(SlotCounts::default())))
}

/// The socket storage (struct ccl_agg_sk) of each binding and watch, by
/// cgroup id: it holds the aggregate slot, i.e. the path rule, that chose
/// each connection's CC.  Bindings made before it was pinned have none.
pub fn sk_storage_maps() -> Vec<(u64, MapHandle)> {
    let Ok(rd) = std::fs::read_dir(cg_root()) else {
        return Vec::new();
    };
    rd.filter_map(|e| {
        let e = e.ok()?;
        let id = e.file_name().to_str()?.parse::<u64>().ok()?;
        let m = MapHandle::from_pinned_path(e.path().join("agg_sk")).ok()?;
        Some((id, m))
    })
    .collect()
}

/// Remove the binding with cgroup id `id` (its directory may be gone).
pub fn unset_id(id: u64) {
    remove(id);
}
