//! In-place upgrades: what another ccload release attached, read by field
//! name (crate::bpf::layout) and carried into this build's object without
//! closing a connection.
//!
//! `ccload attach --replace` and `ccload serve` (when the attached object
//! is not the one this binary embeds) run [`upgrade`]:
//!
//! 1. load this build's object; when the attachment's layout identity is
//!    this build's, its maps `params`, `stats`, `events`, `meta` and `agg`
//!    are reused as they are, else all are made anew;
//! 2. into a new `params`, the tunables of every profile by name (a
//!    tunable this build adds gets its default; one it no longer has, or a
//!    value out of this build's range, is reported); into a new `meta`, the
//!    old entry's fields (the prefix the two releases share); counters of a
//!    new `stats` or `agg` start at 0;
//! 3. the new maps' pins replace the old ones (the meta entry says "in
//!    change" until step 5, so an interrupted upgrade is redone);
//! 4. the struct_ops link is updated to the new ops in one step
//!    (BPF_LINK_UPDATE): new connections get the new code;
//! 5. the open sockets on the old ops, and the listeners that would hand
//!    the old ops to the connections they accept, are moved onto the new
//!    ops by name in ccload's network namespace and every other it may
//!    enter (bpf/migrate.bpf.c), as is a namespace's default CC that names
//!    the controller.  Their windows stay; the controller's per-flow state
//!    starts afresh.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::algos::{Algo, Params};
use crate::bpf::layout::{carry_params, params_are_ours, params_fields, stamp, Carried, Identity};
use crate::intf;

/// The identity recorded by whoever attached `algo`.
pub fn attached_identity(algo: Algo) -> Result<Identity> {
    Ok(Identity::of(&crate::bpf::read_meta(algo)?))
}

// ---------------------------------------------------------------------------
// The upgrade.

/// What an upgrade did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Report {
    pub from: Option<Identity>,
    pub to: Option<Identity>,
    /// Maps reused as they were (same layout).
    pub reused: Vec<String>,
    /// Maps made anew (their layout changed).
    pub renewed: Vec<String>,
    /// Tunables of profile 0 carried across layouts (when params was renewed).
    pub carried: Carried,
    /// Profiles whose tunables were carried.
    pub profiles: u32,
    /// Sockets moved onto the new code, and namespaces searched.
    pub sockets_moved: u64,
    pub sockets_failed: u64,
    pub namespaces: usize,
    /// Namespaces it could not enter (their sockets keep the old code).
    pub namespaces_unreached: usize,
    /// Namespaces whose default CC was set again to the new ops.
    pub defaults_reset: usize,
}

impl Report {
    /// One line per fact, for the CLI and the daemon's log.
    pub fn lines(&self, algo: Algo) -> Vec<String> {
        let mut l = Vec::new();
        let from = self
            .from
            .as_ref()
            .map_or("?".to_string(), Identity::describe);
        let to = self.to.as_ref().map_or("?".to_string(), Identity::describe);
        l.push(format!(
            "upgraded {algo} in place (its object replaced): {from} -> {to}"
        ));
        if !self.renewed.is_empty() {
            l.push(format!(
                "  maps made anew (layout changed): {}; reused: {}",
                self.renewed.join(", "),
                if self.reused.is_empty() {
                    "none".into()
                } else {
                    self.reused.join(", ")
                }
            ));
        }
        if self.renewed.iter().any(|m| m == "params") {
            l.push(format!(
                "  tunables of {} profile(s) carried over by name",
                self.profiles
            ));
            let c = &self.carried;
            if !c.added.is_empty() {
                l.push(format!(
                    "  new tunables at their defaults: {}",
                    c.added.join(", ")
                ));
            }
            for (n, v) in &c.removed {
                l.push(format!("  removed tunable: {n} (was {v})"));
            }
            for (n, v) in &c.reset {
                l.push(format!(
                    "  {n}={v} is out of this release's range: reset to its default"
                ));
            }
        }
        if self.renewed.iter().any(|m| m == "stats" || m == "agg") {
            l.push("  counters and aggregates start again at 0".into());
        }
        l.push(format!(
            "  {} open socket(s) moved onto the new code in {} network namespace(s){}",
            self.sockets_moved,
            self.namespaces,
            if self.sockets_failed > 0 {
                format!(
                    ", {} refused (they keep the old code until they close)",
                    self.sockets_failed
                )
            } else {
                String::new()
            }
        ));
        if self.namespaces_unreached > 0 {
            l.push(format!(
                "  {} other network namespace(s) not entered (setns needs CAP_SYS_ADMIN): their \
                 sockets keep the old code until they close",
                self.namespaces_unreached
            ));
        }
        l
    }
}

/// Upgrade the attached `algo` to this build's object in place (see the
/// module comment); `sets` are applied to profile 0 after the carry.
pub fn upgrade(
    algo: Algo,
    sets: &[(String, String)],
    allow: bool,
    verbose: bool,
    sweep: crate::bpf::Sweep,
) -> Result<Report> {
    use crate::bpf::{map_pin, open_map, MAPS};
    // Bad input changes nothing.
    algo.defaults().apply(sets)?;
    crate::bpf::require_root()?;
    crate::bpf::require_kernel()?;
    if !crate::bpf::is_attached(algo) {
        bail!(crate::error::CclError::NotAttached { algo: algo.name() });
    }
    sweep()?;
    // Everything read and validated before anything changes.
    let old_meta = crate::bpf::read_meta(algo)?;
    let mut report = Report {
        from: Some(Identity::of(&old_meta)),
        ..Default::default()
    };
    let same_layout = old_meta.layout_id == crate::bpf::layout::layout_id(algo);
    let mut params = carried_params(algo, &old_meta, &mut report)?;
    params[0].apply(sets)?;

    if crate::bpf::reg_map_pin(algo).exists() {
        bail!(crate::error::CclError::Unsupported(format!(
            "{algo} is held by {}: an object cannot be swapped under live sockets \
             without a struct_ops link (Linux >= 6.4); detach, then attach",
            crate::bpf::Holder::Map.describe()
        )));
    }
    let link = libbpf_rs::Link::open(crate::bpf::link_pin(algo))
        .with_context(|| format!("failed to open the pinned link of {algo}"))?;
    let tmp = crate::bpf::new_tmp_pin_dir(&format!("{}-up", algo.name()))?;
    let cleanup = TmpDir(tmp.clone());
    // The same layout identity: every map is read and written alike by both
    // objects, so all are kept.  Another: all are made anew (what carries
    // over is carried by name above).
    let renewed: Vec<&'static str> = MAPS
        .into_iter()
        .filter(|m| !(same_layout && map_pin(algo, m).exists()))
        .collect();
    let mut meta = old_meta;
    let mut ours = Identity::ours(algo);
    // "In change" until the link runs the new ops.
    let in_change = Identity {
        obj_id: 0,
        ..ours.clone()
    };
    stamp(&mut meta, algo, &in_change);

    crate::bpf::with_loaded_allow(algo, same_layout, allow, verbose, |loaded| {
        fill_new_maps(
            loaded,
            algo,
            &renewed,
            &params,
            !sets.is_empty(),
            &meta,
            &tmp,
        )?;
        // One step: new connections get the new code from here on.
        loaded.update_link(&link)
    })?;
    drop(cleanup);
    report.renewed = renewed.iter().map(|s| s.to_string()).collect();
    report.reused = MAPS
        .iter()
        .filter(|m| !renewed.contains(m))
        .map(|s| s.to_string())
        .collect();

    let moved = migrate_sockets(algo, verbose)?;
    report.sockets_moved = moved.matched;
    report.sockets_failed = moved.failed;
    report.namespaces = moved.namespaces;
    report.namespaces_unreached = moved.unreached;
    report.defaults_reset = moved.defaults_reset;

    ours.upgraded_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut meta = crate::bpf::read_meta(algo)?;
    stamp(&mut meta, algo, &ours);
    open_map(algo, "meta")?
        .update(
            &0u32.to_ne_bytes(),
            crate::bpf::pod_bytes(&meta),
            MapFlags::ANY,
        )
        .context("failed to write meta")?;
    report.to = Some(ours);
    Ok(report)
}

/// The new object's maps before its link goes live: the tunables (every
/// profile when the params map is renewed, else profile 0 when `--set`
/// changed it), meta "in change", and the renewed maps pinned in `tmp`
/// and moved over the old pins.
fn fill_new_maps(
    loaded: &mut crate::bpf::Loaded<'_>,
    algo: Algo,
    renewed: &[&'static str],
    params: &[Params],
    profile0_set: bool,
    meta: &intf::ccl_meta,
    tmp: &Path,
) -> Result<()> {
    use crate::bpf::map_pin;
    if renewed.contains(&"params") {
        let map = loaded.map("params")?;
        for (profile, p) in params.iter().enumerate() {
            map.update(
                &(profile as u32).to_ne_bytes(),
                &p.to_bytes(),
                MapFlags::ANY,
            )
            .context("failed to write tunables")?;
        }
    } else if profile0_set {
        loaded
            .map("params")?
            .update(&0u32.to_ne_bytes(), &params[0].to_bytes(), MapFlags::ANY)
            .context("failed to write tunables")?;
    }
    loaded
        .map("meta")?
        .update(
            &0u32.to_ne_bytes(),
            crate::bpf::pod_bytes(meta),
            MapFlags::ANY,
        )
        .context("failed to write meta")?;
    // The new maps' pins replace the old ones.
    for name in renewed.iter() {
        let t = tmp.join(name);
        loaded
            .map(name)?
            .pin(&t)
            .with_context(|| format!("failed to pin {}", t.display()))?;
    }
    for name in renewed.iter() {
        std::fs::rename(tmp.join(name), map_pin(algo, name)).with_context(|| {
            format!(
                "failed to move the new {name} map into {}",
                map_pin(algo, name).display()
            )
        })?;
    }
    Ok(())
}

/// The attached object's tunables, every profile, in this build's layout:
/// read as they are when the layout is ours, else carried field by field
/// by name (what profile 0 carried and dropped goes in `report`); a
/// profile never written reads as the defaults.
fn carried_params(
    algo: Algo,
    old_meta: &intf::ccl_meta,
    report: &mut Report,
) -> Result<Vec<Params>> {
    let old_params = crate::bpf::open_map(algo, "params")?;
    let size = old_params.value_size() as usize;
    let old_fields = if params_are_ours(algo, old_meta, size) {
        None
    } else {
        Some(params_fields(algo, old_meta, size)?)
    };
    let mut params = Vec::new();
    for profile in 0..intf::CCL_NR_PROFILES {
        let Some(bytes) = old_params.lookup(&profile.to_ne_bytes(), MapFlags::ANY)? else {
            params.push(algo.defaults());
            continue;
        };
        let (p, c) = match &old_fields {
            None => (Params::from_bytes(algo, &bytes)?, Carried::default()),
            Some(f) => carry_params(algo, &bytes, f),
        };
        if profile == 0 {
            report.carried = c;
        }
        params.push(p);
    }
    report.profiles = intf::CCL_NR_PROFILES;
    Ok(params)
}

/// Removes an upgrade's private pin directory (and what is left in it).
struct TmpDir(PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = crate::bpf::unpin_dir(&self.0);
    }
}

// ---------------------------------------------------------------------------
// Moving open sockets onto the new ops.

#[derive(Debug, Default)]
pub struct Moved {
    pub matched: u64,
    pub failed: u64,
    pub namespaces: usize,
    /// Namespaces ccload could not enter (setns needs CAP_SYS_ADMIN).
    pub unreached: usize,
    pub defaults_reset: usize,
}

/// Every network namespace a process of this host is in, and those named
/// under /run/netns, once each (by device and inode).
pub fn network_namespaces() -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let mut add = |p: PathBuf| {
        if let Ok(md) = std::fs::metadata(&p) {
            if seen.insert((md.dev(), md.ino())) {
                out.push(p);
            }
        }
    };
    add(PathBuf::from("/proc/self/ns/net"));
    if let Ok(d) = std::fs::read_dir("/run/netns") {
        for e in d.flatten() {
            add(e.path());
        }
    }
    if let Ok(d) = std::fs::read_dir("/proc") {
        for e in d.flatten() {
            let name = e.file_name();
            if name
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            {
                add(Path::new("/proc").join(&name).join("ns/net"));
            }
        }
    }
    out
}

/// Run the migration iterator in every network namespace (a thread each,
/// moved there with setns), and set a namespace's default CC again when it
/// names `algo` (the default holds the ops it was set to).
pub fn migrate_sockets(algo: Algo, verbose: bool) -> Result<Moved> {
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    use std::io::Read;
    use std::mem::MaybeUninit;
    let mut storage = MaybeUninit::uninit();
    crate::bpf::start_capture(verbose);
    let mut open = crate::skel::migrate::MigrateSkelBuilder::default()
        .open(&mut storage)
        .context("failed to open the migration object")?;
    let name = algo.name().as_bytes();
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .context("migration object has no .rodata")?;
    for (d, s) in rodata.target.iter_mut().zip(name) {
        *d = *s as _;
    }
    let skel = open
        .load()
        .map_err(|e| crate::bpf::load_error("the socket migration iterator", e, verbose))?;
    let link = skel
        .progs
        .ccl_migrate
        .attach()
        .context("failed to attach the socket migration iterator")?;
    let mut moved = Moved::default();
    // The first is ccload's own namespace: no setns (which needs
    // CAP_SYS_ADMIN, a capability the unit and the DaemonSet do not grant).
    for (i, ns) in network_namespaces().into_iter().enumerate() {
        let Ok(f) = std::fs::File::open(&ns) else {
            continue; // the process left
        };
        let r = std::thread::scope(|s| {
            s.spawn(|| -> Result<Option<bool>> {
                // SAFETY: setns on a thread of our own, with an fd we hold open.
                if i > 0 && unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Ok(None);
                }
                let mut it = libbpf_rs::Iter::new(&link)?;
                let mut sink = Vec::new();
                it.read_to_end(&mut sink)?;
                // /proc/sys/net is the namespace of the thread that opens it.
                let p = "/proc/sys/net/ipv4/tcp_congestion_control";
                let reset = match std::fs::read_to_string(p) {
                    Ok(cur) if cur.trim() == algo.name() => std::fs::write(p, algo.name()).is_ok(),
                    _ => false,
                };
                Ok(Some(reset))
            })
            .join()
        });
        match r {
            Ok(Ok(Some(reset))) => {
                moved.namespaces += 1;
                moved.defaults_reset += usize::from(reset);
            }
            Ok(Ok(None)) => moved.unreached += 1,
            Ok(Err(e)) => bail!("migrating {algo}'s sockets in {}: {e:#}", ns.display()),
            Err(_) => bail!("migration thread panicked"),
        }
    }
    let bss = skel
        .maps
        .bss_data
        .as_deref()
        .context("migration object has no .bss")?;
    moved.matched = bss.matched;
    moved.failed = bss.failed;
    Ok(moved)
}
