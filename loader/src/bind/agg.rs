//! The in-kernel aggregates (`struct ccl_agg`, bpf/ccload_intf.h): read them
//! from a controller's `agg` map (one slot per profile) or a cgroup
//! program's (one slot), sum the per-CPU copies, and derive what people
//! read: ratios, means and quantiles.  `status`, `stats`, `serve` and the
//! rollout all read them here, so they print the same numbers.

use std::path::Path;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::Serialize;

use crate::bpf::algos::Algo;
use crate::error::CclError;
use crate::{bpf, intf};

pub const NR_COUNTERS: usize = intf::CCL_AGG_NR_COUNTERS as usize;
pub const NR_HISTS: usize = intf::CCL_AGG_NR_HISTS as usize;
pub const BUCKETS: usize = intf::CCL_HIST_BUCKETS as usize;

/// One counter or histogram of the table in ccload_intf.h.
#[derive(Clone, Copy, Debug)]
pub struct Desc {
    pub name: &'static str,
    pub unit: &'static str,
    pub help: &'static str,
}

fn descs(raw: &'static [intf::ccl_agg_desc]) -> Vec<Desc> {
    let s = |p: *const std::os::raw::c_char| -> &'static str {
        // SAFETY: string literals of host_core.c, NUL-terminated, static.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_str()
            .expect("ASCII descriptor")
    };
    raw.iter()
        .map(|d| Desc {
            name: s(d.name),
            unit: s(d.unit),
            help: s(d.help),
        })
        .collect()
}

/// The counters, in `enum ccl_agg_counter` order.
pub fn counters() -> &'static [Desc] {
    static D: std::sync::OnceLock<Vec<Desc>> = std::sync::OnceLock::new();
    // SAFETY: a C array of NR_COUNTERS entries (host_core.c).
    D.get_or_init(|| {
        descs(unsafe {
            std::slice::from_raw_parts(intf::ccl_agg_counter_desc.as_ptr(), NR_COUNTERS)
        })
    })
}

/// The histograms, in `enum ccl_agg_hist` order.
pub fn hists() -> &'static [Desc] {
    static D: std::sync::OnceLock<Vec<Desc>> = std::sync::OnceLock::new();
    // SAFETY: a C array of NR_HISTS entries (host_core.c).
    D.get_or_init(|| {
        descs(unsafe { std::slice::from_raw_parts(intf::ccl_agg_hist_desc.as_ptr(), NR_HISTS) })
    })
}

fn index(table: &[Desc], name: &str) -> usize {
    table
        .iter()
        .position(|d| d.name == name)
        .unwrap_or_else(|| panic!("no aggregate named {name}"))
}

/// Smallest value of histogram bucket `b` (the C function, so the bucket
/// arithmetic exists once).
pub fn bucket_lower(b: usize) -> u64 {
    // SAFETY: pure function of an integer.
    unsafe { intf::ccl_hist_lower(b as u32) }
}

/// One slot summed over CPUs.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Agg {
    pub c: [u64; NR_COUNTERS],
    pub hist: [[u64; BUCKETS]; NR_HISTS],
}

impl Default for Agg {
    fn default() -> Agg {
        Agg {
            c: [0; NR_COUNTERS],
            hist: [[0; BUCKETS]; NR_HISTS],
        }
    }
}

impl Agg {
    /// Sum the per-CPU values of one map entry.
    pub fn from_percpu(per_cpu: &[Vec<u8>]) -> Result<Agg> {
        let size = std::mem::size_of::<intf::ccl_agg>();
        let mut out = Agg::default();
        for v in per_cpu {
            if v.len() < size {
                return Err(CclError::Layout(format!(
                    "aggregate of {} bytes, {size} expected",
                    v.len()
                ))
                .into());
            }
            // SAFETY: plain old data of checked size.
            let a: intf::ccl_agg = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
            out.add(&Agg {
                c: a.c,
                hist: a.hist,
            });
        }
        Ok(out)
    }

    pub fn add(&mut self, o: &Agg) {
        for (a, b) in self.c.iter_mut().zip(&o.c) {
            *a = a.wrapping_add(*b);
        }
        for (h, oh) in self.hist.iter_mut().zip(&o.hist) {
            for (a, b) in h.iter_mut().zip(oh) {
                *a = a.wrapping_add(*b);
            }
        }
    }

    /// What happened between `earlier` and `self` (an interval's counts).
    pub fn since(&self, earlier: &Agg) -> Agg {
        let mut out = self.clone();
        for (a, b) in out.c.iter_mut().zip(&earlier.c) {
            *a = a.saturating_sub(*b);
        }
        for (h, eh) in out.hist.iter_mut().zip(&earlier.hist) {
            for (a, b) in h.iter_mut().zip(eh) {
                *a = a.saturating_sub(*b);
            }
        }
        out
    }

    pub fn get(&self, name: &str) -> u64 {
        self.c[index(counters(), name)]
    }

    pub fn hist(&self, name: &str) -> &[u64; BUCKETS] {
        &self.hist[index(hists(), name)]
    }

    /// Quantile `q` (0..=1) of a histogram, interpolated linearly inside
    /// its bucket; None without samples.
    pub fn quantile(&self, name: &str, q: f64) -> Option<f64> {
        quantile(self.hist(name), q)
    }

    /// Retransmitted segments per data segment sent.
    pub fn retrans_ratio(&self) -> Option<f64> {
        let out = self.get("segs_out");
        (out > 0).then(|| self.get("retrans_segs") as f64 / out as f64)
    }

    /// Mean of a sampled quantity from its `_sum` counter.
    pub fn mean(&self, sum: &str) -> Option<f64> {
        let n = self.get("samples");
        (n > 0).then(|| self.get(sum) as f64 / n as f64)
    }

    pub fn summary(&self) -> Summary {
        let ms = |v: Option<f64>| v.map(|us| us / 1000.0);
        let mbps = |v: Option<f64>| v.map(|k| k / 1000.0);
        Summary {
            flows_started: self.get("flows_started"),
            flows_ended: self.get("flows_ended"),
            bytes_acked: self.get("bytes_acked"),
            segs_out: self.get("segs_out"),
            retrans_segs: self.get("retrans_segs"),
            retrans_ratio: self.retrans_ratio(),
            loss_events: self.get("loss_events"),
            rtos: self.get("rtos"),
            recovery_s: self.get("recovery_ns") as f64 / 1e9,
            samples: self.get("samples"),
            srtt_ms_mean: ms(self.mean("srtt_sum_us")),
            srtt_ms_p50: ms(self.quantile("srtt", 0.5)),
            srtt_ms_p95: ms(self.quantile("srtt", 0.95)),
            srtt_ms_p99: ms(self.quantile("srtt", 0.99)),
            cwnd_mean: self.mean("cwnd_sum"),
            cwnd_p50: self.quantile("cwnd", 0.5),
            cwnd_p95: self.quantile("cwnd", 0.95),
            rate_mbps_mean: mbps(self.mean("rate_sum_kbps")),
            rate_mbps_p50: mbps(self.quantile("rate", 0.5)),
            short_flows: self.hist("fct").iter().sum(),
            fct_ms_p50: ms(self.quantile("fct", 0.5)),
            fct_ms_p95: ms(self.quantile("fct", 0.95)),
        }
    }
}

/// Quantile of bucket counts (see [`Agg::quantile`]).
pub fn quantile(h: &[u64; BUCKETS], q: f64) -> Option<f64> {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * total as f64).max(f64::MIN_POSITIVE);
    let mut seen = 0u64;
    for (b, &n) in h.iter().enumerate() {
        if n == 0 {
            continue;
        }
        if (seen + n) as f64 >= rank {
            let lo = bucket_lower(b) as f64;
            let hi = if b + 1 < BUCKETS {
                bucket_lower(b + 1) as f64
            } else {
                lo
            };
            let frac = ((rank - seen as f64) / n as f64).clamp(0.0, 1.0);
            return Some(lo + (hi - lo) * frac);
        }
        seen += n;
    }
    None
}

/// What `stats` prints for one slot; human units (ms, Mbit/s) in the
/// field names.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub flows_started: u64,
    pub flows_ended: u64,
    pub bytes_acked: u64,
    pub segs_out: u64,
    pub retrans_segs: u64,
    pub retrans_ratio: Option<f64>,
    pub loss_events: u64,
    pub rtos: u64,
    pub recovery_s: f64,
    pub samples: u64,
    pub srtt_ms_mean: Option<f64>,
    pub srtt_ms_p50: Option<f64>,
    pub srtt_ms_p95: Option<f64>,
    pub srtt_ms_p99: Option<f64>,
    pub cwnd_mean: Option<f64>,
    pub cwnd_p50: Option<f64>,
    pub cwnd_p95: Option<f64>,
    pub rate_mbps_mean: Option<f64>,
    pub rate_mbps_p50: Option<f64>,
    /// Short flows that ended (at most 1 MiB each way), and their
    /// completion times, start to close.
    pub short_flows: u64,
    pub fct_ms_p50: Option<f64>,
    pub fct_ms_p95: Option<f64>,
}

fn read_slot(map: &MapHandle, slot: u32) -> Result<Agg> {
    let v = map
        .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)?
        .unwrap_or_default();
    Agg::from_percpu(&v)
}

/// Per profile of an attached controller: every profile, index = profile.
pub fn read_algo(algo: Algo) -> Result<Vec<Agg>> {
    let map = bpf::open_map(algo, "agg")?;
    (0..intf::CCL_NR_PROFILES)
        .map(|p| read_slot(&map, p))
        .collect()
}

/// The aggregate of a cgroup binding or watch pinned at `pin`: the sum of
/// its slots (slot 0 for the connections no path rule chose, 1 + i for
/// rule i's; a binding made before path rules has slot 0 alone).
pub fn read_pinned(pin: &Path) -> Result<Agg> {
    Ok(sum(&read_pinned_slots(pin)?))
}

fn sum(slots: &[Agg]) -> Agg {
    let mut s = Agg::default();
    for a in slots {
        s.add(a);
    }
    s
}

/// Each slot of the aggregate pinned at `pin`.
pub fn read_pinned_slots(pin: &Path) -> Result<Vec<Agg>> {
    let map = MapHandle::from_pinned_path(pin)
        .with_context(|| format!("failed to open {}", pin.display()))?;
    let n = map.info().map(|i| i.info.max_entries).unwrap_or(1);
    (0..n).map(|s| read_slot(&map, s)).collect()
}

/// What the connections of one slot did (`cgroup list`, per path rule).
fn slot_counts(a: &Agg) -> crate::bind::cgroup::SlotCounts {
    crate::bind::cgroup::SlotCounts {
        connections: a.get("flows_started"),
        bytes_acked: a.get("bytes_acked"),
        segs_out: a.get("segs_out"),
        retrans_segs: a.get("retrans_segs"),
    }
}

/// The counts of each binding's path rules (slot 1 + i) and of the
/// connections none chose (slot 0), from its pinned aggregate.
pub fn fill_rule_counts(bindings: &mut [crate::bind::cgroup::Binding]) {
    for b in bindings.iter_mut().filter(|b| !b.rules.is_empty()) {
        if let Ok(slots) = read_pinned_slots(&crate::bind::cgroup::agg_pin(b.cgroup_id)) {
            fill_from(b, &slots);
        }
    }
}

/// [`fill_rule_counts`] for one binding whose slots are read.
fn fill_from(b: &mut crate::bind::cgroup::Binding, slots: &[Agg]) {
    for (i, r) in b.rules.iter_mut().enumerate() {
        if let Some(a) = slots.get(1 + i) {
            r.counts = slot_counts(a);
        }
    }
    if let (Some(u), Some(a)) = (b.unmatched.as_mut(), slots.first()) {
        *u = slot_counts(a);
    }
}

/// Every aggregate slot worth reporting: profile 0 of each attached
/// controller and every profile that saw a flow; every cgroup binding or
/// watch (one made by a ccload without aggregates is skipped).
pub struct All {
    pub algos: Vec<(Algo, u32, Agg)>,
    pub cgroups: Vec<CgroupAgg>,
}

/// A binding or watch with its aggregate: the total, and each slot (0 for
/// the connections no path rule chose, 1 + i for rule i's).
pub struct CgroupAgg {
    pub binding: crate::bind::cgroup::Binding,
    pub total: Agg,
    pub slots: Vec<Agg>,
}

pub fn collect() -> Result<All> {
    let mut algos = Vec::new();
    for a in bpf::attached() {
        for (p, slot) in read_algo(a)?.into_iter().enumerate() {
            if p == 0 || slot.get("flows_started") > 0 {
                algos.push((a, p as u32, slot));
            }
        }
    }
    let mut cgroups = Vec::new();
    // Each binding's slots read once: its rules' counts and its total.
    for mut b in crate::bind::cgroup::list()? {
        if let Ok(slots) = read_pinned_slots(&crate::bind::cgroup::agg_pin(b.cgroup_id)) {
            fill_from(&mut b, &slots);
            cgroups.push(CgroupAgg {
                binding: b,
                total: sum(&slots),
                slots,
            });
        }
    }
    Ok(All { algos, cgroups })
}
