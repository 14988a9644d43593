//! What a run measured: per-flow samples, the queue, and the summary of a
//! run (goodput, utilisation, RTT quantiles, queue, retransmissions per
//! segment, time in Recovery, Jain's index); aggregates over repetitions.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::scenario::{Case, Scenario};

pub(crate) struct Flow {
    pub(crate) cc: String,
    pub(crate) start: f64,
    pub(crate) stop: f64,
    pub(crate) bytes: Option<u64>,
    /// A short-flow mix's arrival ([`crate::scenario::FlowSpec::arrival`]).
    pub(crate) arrival: bool,
    /// Its base RTT where the case's flows have different ones; its delay
    /// class.
    pub(crate) path_rtt_ms: Option<f64>,
    pub(crate) class: usize,
    pub(crate) rx: Arc<AtomicU64>,
    pub(crate) done_at: Arc<std::sync::Mutex<Option<f64>>>,
}

/// One 10-ms sample of one flow.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct FlowSample {
    pub t: f64,
    pub flow: usize,
    pub cwnd: u32,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub delivered: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub delivery_rate: u64,
    pub rx_bytes: u64,
    /// TCP_INFO tcpi_ca_state (3 = Recovery, 4 = Loss)
    pub ca_state: u8,
    /// The kernel's loss accounting, TCP_INFO's snd_ssthresh, unacked
    /// (packets_out), sacked, lost and retrans (retrans_out): with cwnd
    /// they are what the kernel's PRR computes the window from.  Recorded
    /// to find where a wild window comes from (docs/notebook/results-history.md 3r); 0 in
    /// samples stored before they were.
    pub ssthresh: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans_out: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct QueueSample {
    pub t: f64,
    pub qlen: u32,
    pub backlog: u32,
    pub drops: u32,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct FlowSummary {
    pub flow: usize,
    pub cc: String,
    pub start_s: f64,
    pub goodput_mbit: f64,
    pub completion_s: Option<f64>,
    pub bytes: u64,
    pub rtt_mean_ms: f64,
    pub rtt_p95_ms: f64,
    pub retransmits: u32,
    /// The flow's base RTT, ms, where the run's flows have different ones
    /// (`rtt_ms` of a scenario's flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_rtt_ms: Option<f64>,
    /// Where most of the flow's retransmissions came: the
    /// [`RETRANS_PEAK_S`] window with the most (none without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrans_peak: Option<RetransPeak>,
}

/// The window a flow's retransmission burst is counted over, s.
pub const RETRANS_PEAK_S: f64 = 0.5;

/// A flow's largest burst of retransmissions: `n` segments in the
/// [`RETRANS_PEAK_S`] from `t_s` (run time), and its TCP_INFO there (the
/// window when it began, the largest in it, its CA state then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct RetransPeak {
    pub t_s: f64,
    pub n: u32,
    pub cwnd: u32,
    pub cwnd_max: u32,
    pub ca_state: u8,
}

/// The [`RETRANS_PEAK_S`] window of `v` (one flow's samples in time order)
/// whose retransmission count grew most; ties keep the first.
pub fn retrans_peak(v: &[&FlowSample]) -> Option<RetransPeak> {
    let mut best: Option<RetransPeak> = None;
    let mut j = 0;
    for (i, a) in v.iter().enumerate() {
        // the retransmissions counted after sample i-1: from there
        let before = if i == 0 { 0 } else { v[i - 1].total_retrans };
        if a.total_retrans == before {
            continue;
        }
        j = j.max(i);
        while j + 1 < v.len() && v[j + 1].t < a.t + RETRANS_PEAK_S {
            j += 1;
        }
        let n = v[j].total_retrans.saturating_sub(before);
        if best.is_none_or(|b| n > b.n) {
            best = Some(RetransPeak {
                t_s: a.t,
                n,
                cwnd: if i == 0 { a.cwnd } else { v[i - 1].cwnd },
                cwnd_max: v[i.saturating_sub(1)..=j]
                    .iter()
                    .map(|s| s.cwnd)
                    .max()
                    .unwrap_or(0),
                ca_state: a.ca_state,
            });
        }
    }
    best
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct RunSummary {
    pub case: String,
    pub cc: String,
    pub rep: u32,
    pub goodput_mbit: f64,
    pub utilisation: f64,
    pub jain: f64,
    /// Mean Jain index over 1-s bins in which every flow was active.
    pub jain_bins: f64,
    /// Seconds from the last flow's start until Jain's index over 1-s bins
    /// first holds >= 0.9 (in that bin and the two after it); None = never,
    /// or one flow.
    #[serde(default)]
    pub jain_09_s: Option<f64>,
    /// Seconds from the last flow's start until its goodput in a 1-s bin
    /// first reaches 0.8x its fair share (the bin's total over the flows);
    /// None = never, or all flows started together.
    #[serde(default)]
    pub late_fair_s: Option<f64>,
    pub queue_mean_pkts: f64,
    pub queue_p95_pkts: f64,
    pub queue_drops: u64,
    pub random_drops: u64,
    pub rtt_mean_ms: f64,
    pub rtt_p50_ms: f64,
    pub rtt_p95_ms: f64,
    /// Smallest min_rtt seen (the path's base RTT as the flows saw it).
    pub rtt_base_ms: f64,
    pub retransmits: u32,
    /// Retransmitted segments per delivered segment.
    pub retrans_per_seg: f64,
    /// Retransmitted segments after the warm-up, the window goodput, RTT
    /// and the Recovery share are measured over (slow start's overshoot
    /// left out).  None in a run recorded before the field existed until
    /// its samples fill it in (`stored::load_finished`).
    #[serde(default)]
    pub retrans_warm: Option<u32>,
    /// ... per segment delivered after the warm-up.
    #[serde(default)]
    pub retrans_per_seg_warm: Option<f64>,
    /// Share of the flows' TCP_INFO samples (after warm-up) in Recovery/Loss.
    pub recovery_share: f64,
    /// The largest congestion window (segments) any flow's TCP_INFO showed,
    /// slow start included: what [`window_bound`] judges.  None in a run
    /// recorded before the field existed until its samples fill it in.
    #[serde(default)]
    pub cwnd_max: Option<u32>,
    /// The sample with that window and its flow's sample before it: the
    /// kernel's accounting around the largest window, kept in runs.jsonl
    /// (which travels with a grid; samples.csv does not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cwnd_max_at: Vec<FlowSample>,
    /// For a ccload controller: how many times its guard repaired the
    /// kernel's ssthresh and cwnd during the run (the controller's counters
    /// `ssth_repaired` and `cwnd_repaired`, read before and after; see
    /// ccl_guard() in bpf/ccload_maps.bpf.h).  None for a kernel CC and in
    /// runs recorded before the guard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repairs: Option<[u64; 2]>,
    /// Queueing delay at the bottleneck, ms: per packet from the delay
    /// line on a trace-driven link (the whole run), else the TBF queue's
    /// backlog over the rate in the 10-ms samples after the warm-up.  None
    /// on an unlimited link and in runs recorded before the fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdelay_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdelay_p95_ms: Option<f64>,
    /// A trace-driven link: the capacity its trace offered over the run,
    /// Mbit/s of IP bytes (utilisation is of this, not the nominal mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_mbit: Option<f64>,
    pub lateness_p50_us: u64,
    pub lateness_p99_us: u64,
    pub lateness_max_us: u64,
    pub realtime: bool,
    /// False when the delay line's p99 lateness exceeded its limit.
    pub valid: bool,
    pub flows: Vec<FlowSummary>,
    /// A short-flow mix: the arrivals' slowdowns per size bin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fct: Vec<crate::arrivals::FctBin>,
}

/// The shortest delay-line hold-up that counts as a path stall, us (see
/// [`RunSummary::stalled`]).
pub const STALL_MIN_US: u64 = 2_000;

impl RunSummary {
    /// The goodput of the flows with the longest own base RTT
    /// ([`FlowSummary::path_rtt_ms`]) over all flows' goodput; None when no
    /// flow has an RTT of its own.
    pub fn long_rtt_share(&self) -> Option<f64> {
        let long = self
            .flows
            .iter()
            .filter_map(|f| f.path_rtt_ms)
            .reduce(f64::max)?;
        let all: f64 = self.flows.iter().map(|f| f.goodput_mbit).sum();
        let mine: f64 = self
            .flows
            .iter()
            .filter(|f| f.path_rtt_ms == Some(long))
            .map(|f| f.goodput_mbit)
            .sum();
        (all > 0.0).then_some(mine / all)
    }

    /// The goodput of the run's flows that `mine` picks (by their index in
    /// `flows`) over the link's payload capacity: one controller's share of
    /// a shared link.
    pub fn share_of_flows(&self, mine: impl Fn(usize) -> bool) -> f64 {
        if self.utilisation.is_nan() || self.utilisation <= 0.0 {
            return 0.0;
        }
        let capacity = self.goodput_mbit / self.utilisation;
        let picked: f64 = self
            .flows
            .iter()
            .enumerate()
            .filter(|(i, _)| mine(*i))
            .map(|(_, f)| f.goodput_mbit)
            .sum();
        picked / capacity
    }

    /// The delay line released some packet later than an eighth of the base
    /// RTT (at least [`STALL_MIN_US`]): for that long the emulated path
    /// stood still, and the ACKs held meanwhile left as one burst into the
    /// bottleneck.  On a drop-tail buffer shorter than the burst that is a
    /// loss event the host made, not the controller (50 Mbit/s, 40 ms,
    /// 21 packets: one 15-ms stall took reno from ~40 to 78 retransmissions
    /// and 39 to 32 Mbit/s; ctcp_plus's three runs behind a failed CI check
    /// held stalls of 8-20 ms, reno's of 1-3 ms).  Such runs stay valid
    /// (their p99 is the host's usual one); a check measures again the ones
    /// behind a failing threshold.
    pub fn stalled(&self) -> bool {
        let eighth = if self.rtt_base_ms.is_finite() && self.rtt_base_ms > 0.0 {
            (self.rtt_base_ms * 1000.0 / 8.0) as u64
        } else {
            0
        };
        self.lateness_max_us > eighth.max(STALL_MIN_US)
    }

    /// Which of two measurements of one run a check keeps (smaller first):
    /// a valid one, then one without a stall, then the less late.
    pub fn lateness_rank(&self) -> (bool, bool, u64, u64) {
        (
            !self.valid,
            self.stalled(),
            self.lateness_max_us,
            self.lateness_p99_us,
        )
    }
}

pub struct RunResult {
    pub summary: RunSummary,
    pub samples: Vec<FlowSample>,
    pub queue: Vec<QueueSample>,
}

pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 {
        return 0.0;
    }
    s * s / (x.len() as f64 * q)
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// Bytes each flow received in [t, t + 1) s (0 for a flow with no samples
/// there).
fn bin_bytes(by_flow: &BTreeMap<usize, Vec<&FlowSample>>, n: usize, t: f64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let v = by_flow.get(&i).map(|v| v.as_slice()).unwrap_or(&[]);
            let a = v.iter().find(|s| s.t >= t);
            let b = v.iter().find(|s| s.t >= t + 1.0);
            match (a, b) {
                (Some(a), Some(b)) => (b.rx_bytes - a.rx_bytes) as f64,
                _ => 0.0,
            }
        })
        .collect()
}

/// How fast the flows converge, in 1-s bins from the last flow's start t0
/// until `stop` (the first flow's end): (seconds until Jain's index first
/// holds >= 0.9 for three bins, seconds until the last flow first gets 0.8x
/// the bin's fair share).
fn convergence(
    flows: &[Flow],
    by_flow: &BTreeMap<usize, Vec<&FlowSample>>,
    t0: f64,
    stop: f64,
) -> (Option<f64>, Option<f64>) {
    if flows.len() < 2 {
        return (None, None);
    }
    let last = flows.iter().position(|f| f.start == t0).unwrap_or(0);
    let late = flows.iter().any(|f| f.start < t0);
    let mut bins = Vec::new();
    let mut t = t0;
    while t + 1.0 <= stop {
        bins.push((t - t0, bin_bytes(by_flow, flows.len(), t)));
        t += 1.0;
    }
    let fair = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let jain_09 = (0..bins.len())
        .find(|&i| {
            bins[i..(i + 3).min(bins.len())]
                .iter()
                .all(|(_, v)| jain(v) >= 0.9)
        })
        .map(|i| bins[i].0);
    let late_fair = late
        .then(|| {
            bins.iter()
                .find(|(_, v)| fair(v) > 0.0 && v[last] >= 0.8 * fair(v))
                .map(|b| b.0)
        })
        .flatten();
    (jain_09, late_fair)
}

/// The share of an MTU-sized packet that is TCP payload (40 bytes of
/// headers and 12 of timestamps): goodput over the link's rate at most.
pub(crate) fn payload_share(mtu: u32) -> f64 {
    (mtu - 52) as f64 / mtu as f64
}

/// How the long flows (`steady`) shared the link after the last of them
/// started: the mean of Jain's index over 1-s bins where one of them
/// moved bytes, and (when no flow is a short arrival) the time to Jain 0.9
/// and a late joiner's time to 0.8 of its share.
fn sharing(
    flows: &[Flow],
    by_flow: &BTreeMap<usize, Vec<&FlowSample>>,
    steady: &[usize],
    w0: f64,
    t_end: f64,
) -> (f64, Option<f64>, Option<f64>) {
    // Jain's index over 1-s bins where every flow is active; a short-flow
    // mix's arrivals come and go, and only its long flows share.
    let t_last = steady.iter().map(|&i| flows[i].start).fold(0.0, f64::max);
    let stop_min = steady
        .iter()
        .map(|&i| flows[i].stop)
        .fold(f64::MAX, f64::min)
        .min(t_end);
    let mut bins = Vec::new();
    let mut t = w0.max(t_last);
    while t + 1.0 <= stop_min {
        let all = bin_bytes(by_flow, flows.len(), t);
        let rates: Vec<f64> = steady.iter().map(|&i| all[i]).collect();
        if rates.iter().any(|&r| r > 0.0) {
            bins.push(jain(&rates));
        }
        t += 1.0;
    }
    let (jain_09_s, late_fair_s) = if steady.len() == flows.len() {
        convergence(flows, by_flow, t_last, stop_min)
    } else {
        (None, None)
    };
    let mean = if bins.is_empty() {
        0.0
    } else {
        bins.iter().sum::<f64>() / bins.len() as f64
    };
    (mean, jain_09_s, late_fair_s)
}

/// Flow `i`'s summary over the measured window (from the warm-up `w0` or
/// its start), from its samples `v`, and its RTT samples (ms) in that
/// window.
fn flow_summary(
    i: usize,
    f: &Flow,
    v: &[&FlowSample],
    w0: f64,
    t_end: f64,
) -> (FlowSummary, Vec<f64>) {
    let from = w0.max(f.start);
    let win: Vec<&&FlowSample> = v.iter().filter(|s| s.t >= from).collect();
    let good = if f.arrival {
        // a short flow: what it added to the link over the window (its
        // own rate is its slowdown's business)
        let rx = f.rx.load(Ordering::Relaxed);
        let before = if f.start >= w0 {
            0
        } else {
            win.first().map_or(rx, |a| a.rx_bytes)
        };
        rx.saturating_sub(before) as f64 * 8.0 / (t_end - w0).max(1e-3) / 1e6
    } else {
        match (win.first(), win.last()) {
            (Some(a), Some(b)) if b.t > a.t => {
                (b.rx_bytes - a.rx_bytes) as f64 * 8.0 / (b.t - a.t) / 1e6
            }
            _ => 0.0,
        }
    };
    let mut rtts: Vec<f64> = win.iter().map(|s| s.srtt_us as f64 / 1e3).collect();
    let mean = if rtts.is_empty() {
        0.0
    } else {
        rtts.iter().sum::<f64>() / rtts.len() as f64
    };
    let fs = FlowSummary {
        flow: i,
        cc: f.cc.clone(),
        start_s: f.start,
        goodput_mbit: good,
        completion_s: f.done_at.lock().unwrap().map(|t| t - f.start),
        bytes: f.rx.load(Ordering::Relaxed),
        rtt_mean_ms: mean,
        rtt_p95_ms: quantile(&mut rtts, 0.95),
        retransmits: v.last().map(|s| s.total_retrans).unwrap_or(0),
        path_rtt_ms: f.path_rtt_ms,
        retrans_peak: retrans_peak(v),
    };
    (fs, rtts)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn summarise(
    sc: &Scenario,
    case: &Case,
    cc: &str,
    rep: u32,
    flows: &[Flow],
    samples: &[FlowSample],
    queue: &[QueueSample],
    t_end: f64,
    queue_drops: u64,
    random_drops: u64,
) -> RunSummary {
    let w0 = sc.warmup_s;
    let payload = payload_share(case.link.mtu);
    let mut per_flow = Vec::new();
    let mut all_rtt = Vec::new();
    let mut by_flow: BTreeMap<usize, Vec<&FlowSample>> = BTreeMap::new();
    for s in samples {
        by_flow.entry(s.flow).or_default().push(s);
    }
    let mut total_good = 0.0;
    for (i, f) in flows.iter().enumerate() {
        let v = by_flow.get(&i).cloned().unwrap_or_default();
        let (fs, rtts) = flow_summary(i, f, &v, w0, t_end);
        total_good += fs.goodput_mbit;
        all_rtt.extend(rtts);
        per_flow.push(fs);
    }
    let steady: Vec<usize> = (0..flows.len()).filter(|&i| !flows[i].arrival).collect();
    let (jain_bins, jain_09_s, late_fair_s) = sharing(flows, &by_flow, &steady, w0, t_end);
    let fct = arrivals_fct(case, flows, payload, t_end);
    let mut q: Vec<f64> = queue
        .iter()
        .filter(|s| s.t >= w0)
        .map(|s| s.qlen as f64)
        .collect();
    let qmean = if q.is_empty() {
        0.0
    } else {
        q.iter().sum::<f64>() / q.len() as f64
    };
    let rtt_mean = if all_rtt.is_empty() {
        0.0
    } else {
        all_rtt.iter().sum::<f64>() / all_rtt.len() as f64
    };
    let goods: Vec<f64> = steady.iter().map(|&i| per_flow[i].goodput_mbit).collect();
    let after: Vec<&FlowSample> = samples.iter().filter(|s| s.t >= w0).collect();
    let recovery_share = if after.is_empty() {
        0.0
    } else {
        after.iter().filter(|s| s.ca_state >= 3).count() as f64 / after.len() as f64
    };
    let rtt_base_ms = samples
        .iter()
        .filter(|s| s.min_rtt_us > 0)
        .map(|s| s.min_rtt_us as f64 / 1e3)
        .fold(f64::MAX, f64::min);
    let delivered: u64 = by_flow
        .values()
        .map(|v| v.last().map(|s| s.delivered as u64).unwrap_or(0))
        .sum();
    let retx: u32 = per_flow.iter().map(|f| f.retransmits).sum();
    let mut r = RunSummary {
        case: case.label.clone(),
        cc: cc.to_string(),
        rep,
        goodput_mbit: total_good,
        // 0 on an unlimited link (a veth at rate 0): no capacity to share
        utilisation: if case.link.rate_mbit > 0.0 {
            total_good / (case.link.rate_mbit * payload)
        } else {
            0.0
        },
        jain: jain(&goods),
        jain_bins,
        jain_09_s,
        late_fair_s,
        queue_mean_pkts: qmean,
        queue_p95_pkts: quantile(&mut q, 0.95),
        queue_drops,
        random_drops,
        rtt_mean_ms: rtt_mean,
        rtt_p50_ms: quantile(&mut all_rtt.clone(), 0.5),
        rtt_p95_ms: quantile(&mut all_rtt, 0.95),
        rtt_base_ms: if rtt_base_ms == f64::MAX {
            0.0
        } else {
            rtt_base_ms
        },
        retransmits: retx,
        retrans_per_seg: retx as f64 / delivered.max(1) as f64,
        recovery_share,
        lateness_p50_us: 0,
        lateness_p99_us: 0,
        lateness_max_us: 0,
        realtime: false,
        valid: false,
        flows: per_flow,
        fct,
        ..Default::default()
    };
    (r.qdelay_p50_ms, r.qdelay_p95_ms) = queue_delay(case, queue, w0);
    fill_from_samples(&mut r, samples, w0);
    r
}

/// The arrivals' flow completion times against their ideal, binned by
/// size (the short-flow mixes).
fn arrivals_fct(
    case: &Case,
    flows: &[Flow],
    payload: f64,
    t_end: f64,
) -> Vec<crate::arrivals::FctBin> {
    crate::arrivals::fct_bins(
        &flows
            .iter()
            .filter(|f| f.arrival && f.start < t_end)
            .map(|f| {
                let bytes = f.bytes.unwrap_or(0);
                let done = *f.done_at.lock().unwrap();
                let rtt = f.path_rtt_ms.unwrap_or(case.rtt_ms);
                let ideal = crate::arrivals::ideal_fct_s(bytes, case.link.rate_mbit * payload, rtt);
                let took = done.unwrap_or(t_end) - f.start;
                (bytes, took / ideal, done.is_some())
            })
            .collect::<Vec<_>>(),
    )
}

/// The queueing delay's p50 and p95 after the warm-up, ms, from the
/// sampled backlog of a fixed-rate link (backlog bytes / rate: the delay
/// a packet joining the queue saw); a trace-driven link's delay line
/// measures it per packet instead (`with_link`).
fn queue_delay(case: &Case, queue: &[QueueSample], w0: f64) -> (Option<f64>, Option<f64>) {
    if case.link.rate_mbit <= 0.0 || case.trace.is_some() {
        return (None, None);
    }
    let mut d: Vec<f64> = queue
        .iter()
        .filter(|s| s.t >= w0)
        .map(|s| s.backlog as f64 * 8.0 / (case.link.rate_mbit * 1e3))
        .collect();
    if d.is_empty() {
        return (None, None);
    }
    (
        Some(quantile(&mut d.clone(), 0.5)),
        Some(quantile(&mut d, 0.95)),
    )
}

/// The largest window a sane controller shows on a path that stores
/// `storage` packets (BDP + buffer): 16 times that, at least 1,000
/// segments.  Slow start overshoots to about twice the storage and BBR
/// keeps about two BDPs; a window beyond the bound sends into drops
/// whatever the law says, as a window left by a skipped hook does
/// (billions of segments; docs/known-issues.md).
pub fn window_bound(storage_pkts: f64) -> u32 {
    (WINDOW_BOUND_X * storage_pkts)
        .max(WINDOW_BOUND_MIN as f64)
        .min(u32::MAX as f64) as u32
}

/// [`window_bound`]'s multiple of the path's storage and its floor, and the
/// metric name of the threshold it makes (`Scenario::evaluate`).
pub const WINDOW_BOUND_X: f64 = 16.0;
pub const WINDOW_BOUND_MIN: u32 = 1000;
pub const WINDOW_METRIC: &str = "cwnd_max";

/// Retransmitted and delivered segments after the warm-up `w0`, summed over
/// the flows, each flow from its first sample at or after max(w0, its own
/// first sample) to its last: a flow that starts late has its own warm-up.
pub fn after_warmup(samples: &[FlowSample], w0: f64) -> (u32, u64) {
    let mut by_flow: BTreeMap<usize, Vec<&FlowSample>> = BTreeMap::new();
    for s in samples {
        by_flow.entry(s.flow).or_default().push(s);
    }
    let (mut retx, mut delivered) = (0u32, 0u64);
    for v in by_flow.values() {
        let from = w0.max(v[0].t);
        if let (Some(a), Some(b)) = (v.iter().find(|s| s.t >= from), v.last()) {
            retx += b.total_retrans.saturating_sub(a.total_retrans);
            delivered += b.delivered.saturating_sub(a.delivered) as u64;
        }
    }
    (retx, delivered)
}

/// Fill what `r` derives from its samples: the retransmissions after the
/// warm-up `w0`, the largest window and the samples around it.
pub fn fill_from_samples(r: &mut RunSummary, samples: &[FlowSample], w0: f64) {
    let (retx, delivered) = after_warmup(samples, w0);
    r.retrans_warm = Some(retx);
    r.retrans_per_seg_warm = Some(retx as f64 / delivered.max(1) as f64);
    r.cwnd_max = None;
    r.cwnd_max_at.clear();
    // the first sample with the largest window
    if let Some(i) = (0..samples.len()).max_by_key(|&i| (samples[i].cwnd, std::cmp::Reverse(i))) {
        let flow = samples[i].flow;
        if let Some(j) = (0..i).rev().find(|&j| samples[j].flow == flow) {
            r.cwnd_max_at.push(samples[j].clone());
        }
        r.cwnd_max_at.push(samples[i].clone());
        r.cwnd_max = Some(samples[i].cwnd);
    }
}

/// Mean / min / max of a metric over repetitions, per (case, cc).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Agg {
    pub case: String,
    pub cc: String,
    pub reps: usize,
    pub goodput: [f64; 3],
    pub utilisation: [f64; 3],
    pub rtt_mean_ms: f64,
    pub rtt_p95_ms: f64,
    pub queue_mean_pkts: f64,
    pub retransmits: f64,
    pub jain: f64,
    pub jain_bins: f64,
    pub completion_s: Option<f64>,
    pub all_valid: bool,
}

fn mmm(v: &[f64]) -> [f64; 3] {
    let n = v.len().max(1) as f64;
    [
        v.iter().sum::<f64>() / n,
        v.iter().copied().fold(f64::MAX, f64::min),
        v.iter().copied().fold(f64::MIN, f64::max),
    ]
}

pub fn aggregate(runs: &[&RunSummary]) -> Vec<Agg> {
    let mut m: BTreeMap<(String, String), Vec<&RunSummary>> = BTreeMap::new();
    let mut order = Vec::new();
    for r in runs {
        let key = (r.case.clone(), r.cc.clone());
        if !m.contains_key(&key) {
            order.push(key.clone());
        }
        m.entry(key).or_default().push(r);
    }
    order
        .into_iter()
        .map(|key| {
            let v = &m[&key];
            let f = |g: &dyn Fn(&RunSummary) -> f64| v.iter().map(|r| g(r)).collect::<Vec<_>>();
            let mean = |g: &dyn Fn(&RunSummary) -> f64| mmm(&f(g))[0];
            let comp: Vec<f64> = v
                .iter()
                .filter_map(|r| {
                    let c: Vec<f64> = r.flows.iter().filter_map(|f| f.completion_s).collect();
                    (c.len() == r.flows.len()).then(|| c.iter().copied().fold(0.0, f64::max))
                })
                .collect();
            Agg {
                case: key.0.clone(),
                cc: key.1.clone(),
                reps: v.len(),
                goodput: mmm(&f(&|r| r.goodput_mbit)),
                utilisation: mmm(&f(&|r| r.utilisation)),
                rtt_mean_ms: mean(&|r| r.rtt_mean_ms),
                rtt_p95_ms: mean(&|r| r.rtt_p95_ms),
                queue_mean_pkts: mean(&|r| r.queue_mean_pkts),
                retransmits: mean(&|r| r.retransmits as f64),
                jain: mean(&|r| r.jain),
                jain_bins: mean(&|r| r.jain_bins),
                completion_s: (comp.len() == v.len() && !comp.is_empty()).then(|| mmm(&comp)[0]),
                all_valid: v.iter().all(|r| r.valid),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(flow: usize, t: f64, delivered: u32, total_retrans: u32) -> FlowSample {
        FlowSample {
            t,
            flow,
            cwnd: 10,
            delivered,
            total_retrans,
            ..Default::default()
        }
    }

    /// The largest window of any flow, the sample that showed it and that
    /// flow's sample before it (not another flow's).
    #[test]
    fn the_largest_window_is_kept_with_the_sample_before_it() {
        let s = |flow: usize, t: f64, cwnd: u32, ssthresh: u32| FlowSample {
            t,
            flow,
            cwnd,
            ssthresh,
            ..Default::default()
        };
        let v = [
            s(0, 0.0, 10, 7),
            s(1, 0.0, 12, 7),
            s(0, 0.01, 6, 3),
            s(1, 0.01, 11, 7),
            s(0, 0.02, 309_638_495, 3),
            s(1, 0.02, 12, 7),
        ];
        let mut r = RunSummary::default();
        fill_from_samples(&mut r, &v, 0.0);
        assert_eq!(r.cwnd_max, Some(309_638_495));
        let at: Vec<(usize, f64, u32)> = r
            .cwnd_max_at
            .iter()
            .map(|s| (s.flow, s.t, s.cwnd))
            .collect();
        assert_eq!(at, [(0, 0.01, 6), (0, 0.02, 309_638_495)]);
        // a first sample has nothing before it
        fill_from_samples(&mut r, &v[..1], 0.0);
        assert_eq!(r.cwnd_max_at.len(), 1);
        fill_from_samples(&mut r, &[], 0.0);
        assert_eq!((r.cwnd_max, r.cwnd_max_at.len()), (None, 0));
    }

    /// A flow's largest burst of retransmissions: the half second with the
    /// most, from the sample where the count first grew, and the window
    /// before it; none for a flow that retransmitted nothing.
    #[test]
    fn the_largest_retransmission_burst_is_found() {
        let at = |t: f64, retx: u32, cwnd: u32| FlowSample {
            cwnd,
            ca_state: if retx > 0 { 3 } else { 0 },
            ..sample(0, t, 0, retx)
        };
        let v = [
            at(0.0, 0, 10),
            at(0.4, 5, 600), // 5 at slow start's end ...
            at(0.5, 5, 300),
            at(7.0, 5, 310),
            at(7.1, 40, 320), // ... 35 + 300 within 0.5 s of 7.1 s
            at(7.3, 340, 700),
            at(7.7, 345, 200),  // (0.6 s after 7.1: another window)
            at(20.0, 400, 250), // 55 alone
        ];
        let r: Vec<&FlowSample> = v.iter().collect();
        let p = retrans_peak(&r).unwrap();
        assert_eq!(
            (p.t_s, p.n, p.cwnd, p.cwnd_max, p.ca_state),
            (7.1, 335, 310, 700, 3)
        );
        let quiet = [at(0.0, 0, 10), at(1.0, 0, 20)];
        let r: Vec<&FlowSample> = quiet.iter().collect();
        assert_eq!(retrans_peak(&r), None);
        // a first sample that already counts some
        let r = [&v[4]];
        assert_eq!(retrans_peak(&r).map(|p| p.n), Some(40));
    }

    /// Slow start's overshoot (3,000 retransmissions by 3 s) is left out;
    /// a flow that starts after the warm-up counts from its first sample.
    #[test]
    fn retransmissions_after_the_warmup() {
        let v = [
            sample(0, 0.0, 0, 0),
            sample(0, 3.0, 9_000, 3_000),
            sample(0, 4.99, 20_000, 3_010),
            sample(0, 5.0, 21_000, 3_012),
            sample(0, 40.0, 121_000, 3_020),
            sample(1, 8.0, 100, 7),
            sample(1, 40.0, 50_100, 57),
        ];
        assert_eq!(after_warmup(&v, 5.0), (8 + 50, 100_000 + 50_000));
        let mut r = RunSummary::default();
        fill_from_samples(&mut r, &v, 5.0);
        assert_eq!(r.retrans_warm, Some(58));
        assert!((r.retrans_per_seg_warm.unwrap() - 58.0 / 150_000.0).abs() < 1e-15);
        // no samples: nothing retransmitted, nothing delivered
        assert_eq!(after_warmup(&[], 5.0), (0, 0));
    }

    /// A short-flow mix: an arrival adds its bytes after the warm-up to the
    /// run's goodput (not its own rate), its completion time over the
    /// ideal is its slowdown (one still running counts with the time it
    /// had), and Jain's index is of the long flows only.
    #[test]
    fn a_mix_counts_its_arrivals_in_goodput_and_slowdowns() {
        let mut sc = crate::scenario::tests::scenario(
            r#"["ccpd"]"#,
            1,
            "[grid]\nrate_mbit = 40\nrtt_ms = [40]\nbuffer_bdp = [1]\n[quick]\n",
        );
        sc.warmup_s = 5.0;
        let case = &sc.cases()[0];
        let flow = |start: f64, bytes: Option<u64>, rx: u64, done: Option<f64>| Flow {
            cc: "ccpd".into(),
            start,
            stop: 10.0,
            bytes,
            arrival: bytes.is_some(),
            path_rtt_ms: None,
            class: 0,
            rx: Arc::new(AtomicU64::new(rx)),
            done_at: Arc::new(std::sync::Mutex::new(done)),
        };
        let flows = [
            flow(0.0, None, 5_000_000, None),
            flow(6.0, Some(50_000), 50_000, Some(6.5)),
            flow(8.0, Some(2_000_000), 1_000_000, None),
            // arrives after the run: not a flow of it
            flow(11.0, Some(10_000), 0, None),
        ];
        let s = |t: f64, rx: u64| FlowSample {
            t,
            flow: 0,
            rx_bytes: rx,
            ..Default::default()
        };
        let samples = [s(5.0, 0), s(10.0, 5_000_000)];
        let r = summarise(&sc, case, "ccpd", 0, &flows, &samples, &[], 10.0, 0, 0);
        // 8 Mbit/s, plus 50 KB and 1 MB over the 5 s after the warm-up
        assert!(
            (r.goodput_mbit - (8.0 + 0.08 + 1.6)).abs() < 1e-9,
            "{}",
            r.goodput_mbit
        );
        assert_eq!((r.jain, r.jain_09_s), (1.0, None));
        // ideal: 60 ms plus the size at 40 x 1448/1500 Mbit/s of payload
        let pay = 40.0 * 1448.0 / 1500.0 * 1e6;
        let small = 0.5 / (0.06 + 50_000.0 * 8.0 / pay);
        let large = 2.0 / (0.06 + 2_000_000.0 * 8.0 / pay);
        assert_eq!(r.fct.len(), 2);
        assert_eq!(
            (r.fct[0].bin.as_str(), r.fct[0].flows, r.fct[0].unfinished),
            ("small", 1, 0)
        );
        assert!((r.fct[0].p50 - small).abs() < 1e-9 && (small - 7.107).abs() < 1e-3);
        assert_eq!((r.fct[1].bin.as_str(), r.fct[1].unfinished), ("large", 1));
        assert!((r.fct[1].p99 - large).abs() < 1e-9, "{:?}", r.fct[1]);
    }

    /// A flow joins at 10 s at 1 MB/s beside one at 9 MB/s and gains 1 MB/s
    /// each second: the joiner first gets 0.8x the fair share (4 of 5 MB) in
    /// the bin from 13 s, where Jain's index first reaches 0.9 (6:4 MB,
    /// 0.96; 7:3 is 0.86) and then holds; flows started together have no
    /// joiner.
    #[test]
    fn convergence_is_timed_from_the_last_start() {
        let flow = |start: f64| Flow {
            cc: "ccpd".into(),
            start,
            stop: 30.0,
            bytes: None,
            arrival: false,
            path_rtt_ms: None,
            class: 0,
            rx: Default::default(),
            done_at: Default::default(),
        };
        let mut v = Vec::new();
        let (mut rx0, mut rx1) = (0u64, 0u64);
        for t in 0..=30u32 {
            let s = |flow: usize, rx: u64| FlowSample {
                t: t as f64,
                flow,
                rx_bytes: rx,
                ..Default::default()
            };
            v.push(s(0, rx0));
            v.push(s(1, rx1));
            let joiner = if t >= 10 {
                (1 + t - 10).min(5) as u64
            } else {
                0
            };
            rx1 += joiner * 1_000_000;
            rx0 += (10 - joiner) * 1_000_000;
        }
        let mut by_flow: BTreeMap<usize, Vec<&FlowSample>> = BTreeMap::new();
        for s in &v {
            by_flow.entry(s.flow).or_default().push(s);
        }
        let (j, late) = convergence(&[flow(0.0), flow(10.0)], &by_flow, 10.0, 30.0);
        assert_eq!((j, late), (Some(3.0), Some(3.0)));
        let (_, late) = convergence(&[flow(10.0), flow(10.0)], &by_flow, 10.0, 30.0);
        assert_eq!(late, None, "no joiner");
        assert_eq!(convergence(&[flow(0.0)], &by_flow, 0.0, 30.0), (None, None));
    }

    #[test]
    fn jain_index_bounds() {
        assert!((jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        assert!((jain(&[3.0, 1.0]) - 0.8).abs() < 1e-12);
    }
}
