//! An attached controller's pinned maps: tunables per profile, counters,
//! the telemetry ring's sizes, meta and object ids.

use super::*;

/// Bytes one telemetry record takes in a controller's ring, its 8-byte
/// ring header included.
pub const RB_RECORD_BYTES: usize = (crate::bpf::telemetry::EVENT_SIZE + 8 + 7) & !7;
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
    if crate::bpf::layout::params_are_ours(algo, &meta, bytes.len()) {
        return Ok(Params::from_bytes(algo, &bytes)?);
    }
    let fields = crate::bpf::layout::params_fields(algo, &meta, bytes.len())?;
    Ok(crate::bpf::layout::carry_params(algo, &bytes, &fields).0)
}

/// Write the tunables of `profile`; an object with another params layout
/// (attached by another release) is refused with the way out.
pub fn write_params(algo: Algo, params: &Params, profile: u32) -> Result<()> {
    let map = open_map(algo, "params")?;
    let meta = read_meta(algo)?;
    let size = map.value_size() as usize;
    if !crate::bpf::layout::params_are_ours(algo, &meta, size) {
        let who = crate::bpf::layout::Identity::of(&meta).describe();
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

/// The meta entry, whatever release wrote it ([`crate::bpf::layout::decode_meta`]).
pub fn read_meta(algo: Algo) -> Result<intf::ccl_meta> {
    crate::bpf::layout::decode_meta(algo, &open_map(algo, "meta")?)
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
