//! The lab: paper-style experiments on the emulated link.  A scenario (TOML
//! in `configs/lab/`) is a grid of link settings x congestion controls x
//! repetitions; each run moves N bulk flows through a fresh [`Bottleneck`],
//! samples every flow's TCP_INFO and the bottleneck queue every 10 ms, and
//! summarises goodput, utilisation, completion time, RTT, queue,
//! retransmits and Jain's index.  `cargo xtask lab` drives it and writes
//! CSV/JSON/plots/report.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::link::{Bottleneck, LinkCfg, PFIFO};

/// Set by Ctrl-C: runs stop early and the guards remove their namespaces.
pub static STOP: AtomicBool = AtomicBool::new(false);

// ---------------------------------------------------------------------------
// Scenarios.

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub title: String,
    /// ALGORITHMS.md section the experiment reproduces.
    pub paper: String,
    pub description: String,
    /// How the paper's setting was scaled to what the emulator sustains.
    #[serde(default)]
    pub scaling: String,
    pub grid: Grid,
    /// Congestion controls compared; `name` or `name:key=value,...` to run
    /// one of ours with tunables (e.g. `ctcp_plus:plus=0`).
    pub ccs: Vec<String>,
    /// Flows of every run; `cc = "$cc"` means the control under test.
    pub flows: Vec<FlowSpec>,
    /// Seconds per run (timed flows stop here at the latest).
    pub duration_s: f64,
    /// Measurement starts after this many seconds (skip slow start / the
    /// first cycle, as the papers do).
    #[serde(default)]
    pub warmup_s: f64,
    pub repetitions: u32,
    /// Overrides for `--quick` (under 2 minutes in total).
    pub quick: Quick,
    /// The paper's numbers, shown beside the measured ones in report.md.
    #[serde(default)]
    pub paper_numbers: Vec<PaperRow>,
    /// Thresholds that `cargo xtask lab check` enforces (acceptance).
    #[serde(default)]
    pub checks: Vec<Check>,
    /// Only these (case, ccs) pairs run (empty = the whole grid x ccs).
    #[serde(default)]
    pub cells: Vec<Cell>,
}

/// One grid case and the CCs to run in it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    pub case: String,
    pub ccs: Vec<String>,
    /// Seconds per run in this cell (default: the scenario's duration_s).
    #[serde(default)]
    pub duration_s: Option<f64>,
}

/// One acceptance threshold: for every case matching the filters, the mean
/// over repetitions of `cc`'s runs against `against`'s in the same cases.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// The run's cc spec as listed in `ccs` (e.g. "ccpd" or "ccpd:kp=4").
    pub cc: String,
    /// Reference CC measured in the same run (a kernel CC).
    #[serde(default)]
    pub against: Option<String>,
    /// Where the check applies (empty = every value).
    #[serde(default)]
    pub rate_mbit: Vec<f64>,
    #[serde(default)]
    pub rtt_ms: Vec<f64>,
    #[serde(default)]
    pub buffer_bdp: Vec<f64>,
    #[serde(default)]
    pub loss: Vec<f64>,
    /// goodput(cc) >= x * goodput(against)
    pub goodput_ratio_min: Option<f64>,
    /// retransmitted segments: retx(cc) <= x * retx(against) + retrans_slack
    pub retrans_ratio_max: Option<f64>,
    #[serde(default)]
    pub retrans_slack: f64,
    /// p95 RTT inflation over the base RTT: (p95 - base)(cc) <= x * (p95 - base)(against)
    pub rtt_inflation_ratio_max: Option<f64>,
    /// absolute: utilisation(cc) >= x
    pub utilisation_min: Option<f64>,
    /// absolute: share of TCP_INFO samples in Recovery or Loss <= x
    pub recovery_share_max: Option<f64>,
    /// What the threshold stands for (ALGORITHMS 6.x "what must hold").
    pub why: String,
}

/// One evaluated threshold of one case.
#[derive(Clone, Debug, Serialize)]
pub struct CheckOutcome {
    pub case: String,
    pub cc: String,
    pub against: String,
    pub metric: &'static str,
    pub value: f64,
    pub reference: f64,
    pub bound: String,
    pub pass: bool,
    pub why: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    pub rate_mbit: f64,
    /// Several rates (overrides rate_mbit; cases are labelled `<rate>M_`).
    #[serde(default)]
    pub rates_mbit: Vec<f64>,
    pub rtt_ms: Vec<f64>,
    /// Buffer as a fraction of the BDP (packets), or ...
    #[serde(default)]
    pub buffer_bdp: Vec<f64>,
    /// ... in packets.
    #[serde(default)]
    pub buffer_pkts: Vec<u32>,
    #[serde(default = "zero_loss")]
    pub loss: Vec<f64>,
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Number of copies of every `$cc` flow (N-flow experiments).
    #[serde(default = "one")]
    pub n_flows: Vec<u32>,
}

fn zero_loss() -> Vec<f64> {
    vec![0.0]
}
fn default_mtu() -> u32 {
    1500
}
fn one() -> Vec<u32> {
    vec![1]
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub cc: String,
    #[serde(default)]
    pub start_s: f64,
    /// Stop sending at this time (default: the run's duration).
    #[serde(default)]
    pub stop_s: Option<f64>,
    /// Fixed-size transfer: completion time is reported.
    #[serde(default)]
    pub bytes: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    pub duration_s: Option<f64>,
    pub warmup_s: Option<f64>,
    pub repetitions: Option<u32>,
    pub rate_mbit: Option<f64>,
    pub rates_mbit: Option<Vec<f64>>,
    pub rtt_ms: Option<Vec<f64>>,
    pub buffer_bdp: Option<Vec<f64>>,
    pub buffer_pkts: Option<Vec<u32>>,
    pub loss: Option<Vec<f64>>,
    pub n_flows: Option<Vec<u32>>,
    pub ccs: Option<Vec<String>>,
    pub flows: Option<Vec<FlowSpec>>,
    pub cells: Option<Vec<Cell>>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PaperRow {
    pub case: String,
    pub cc: String,
    pub metric: String,
    pub value: f64,
}

impl Scenario {
    pub fn load(path: &std::path::Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)?;
        let s: Scenario = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
        s.validate()?;
        Ok(s)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        let g = &self.grid;
        anyhow::ensure!(
            g.rates_mbit.iter().all(|&r| r > 0.0 && r <= 300.0),
            "rates_mbit must be in (0, 300]"
        );
        let labels: Vec<String> = self.cases().into_iter().map(|c| c.label).collect();
        for c in &self.cells {
            anyhow::ensure!(
                labels.contains(&c.case),
                "cell `{}` is not a case of the grid ({})",
                c.case,
                labels.join(", ")
            );
            anyhow::ensure!(
                c.ccs.iter().all(|x| self.ccs.contains(x)),
                "cell `{}`: its ccs must be listed in ccs",
                c.case
            );
        }
        for c in &self.checks {
            anyhow::ensure!(
                self.ccs.contains(&c.cc) && c.against.as_ref().is_none_or(|a| self.ccs.contains(a)),
                "check on `{}`: cc and against must be listed in ccs",
                c.cc
            );
        }
        anyhow::ensure!(
            g.rate_mbit > 0.0 && g.rate_mbit <= 300.0,
            "rate_mbit must be in (0, 300]: the delay line is measured up to 300 Mbit/s"
        );
        anyhow::ensure!(
            !g.rtt_ms.is_empty() && g.rtt_ms.iter().all(|&r| (0.0..=1000.0).contains(&r)),
            "rtt_ms: 0..1000 ms"
        );
        anyhow::ensure!(
            g.buffer_bdp.is_empty() != g.buffer_pkts.is_empty(),
            "give exactly one of buffer_bdp, buffer_pkts"
        );
        anyhow::ensure!(
            g.loss.iter().all(|&p| (0.0..0.5).contains(&p)),
            "loss: probability in [0, 0.5)"
        );
        anyhow::ensure!(
            !self.ccs.is_empty() && !self.flows.is_empty(),
            "ccs and flows must not be empty"
        );
        anyhow::ensure!(
            self.duration_s > self.warmup_s && self.repetitions >= 1,
            "duration_s > warmup_s, repetitions >= 1"
        );
        for f in &self.flows {
            anyhow::ensure!(
                f.start_s < self.duration_s,
                "flow starts after the run ends"
            );
        }
        Ok(())
    }

    /// The scenario with its `quick` overrides applied.
    pub fn quick(&self) -> Scenario {
        let q = &self.quick;
        let mut s = self.clone();
        macro_rules! ov {
            ($dst:expr, $src:expr) => {
                if let Some(v) = $src.clone() {
                    $dst = v;
                }
            };
        }
        ov!(s.duration_s, q.duration_s);
        ov!(s.warmup_s, q.warmup_s);
        ov!(s.repetitions, q.repetitions);
        ov!(s.grid.rate_mbit, q.rate_mbit);
        ov!(s.grid.rates_mbit, q.rates_mbit);
        ov!(s.grid.rtt_ms, q.rtt_ms);
        ov!(s.grid.loss, q.loss);
        ov!(s.grid.n_flows, q.n_flows);
        ov!(s.ccs, q.ccs);
        ov!(s.flows, q.flows);
        ov!(s.cells, q.cells);
        if let Some(v) = q.buffer_bdp.clone() {
            s.grid.buffer_bdp = v;
            s.grid.buffer_pkts.clear();
        }
        if let Some(v) = q.buffer_pkts.clone() {
            s.grid.buffer_pkts = v;
            s.grid.buffer_bdp.clear();
        }
        s
    }

    /// Every grid point, in a stable order.
    pub fn cases(&self) -> Vec<Case> {
        let g = &self.grid;
        let rates = if g.rates_mbit.is_empty() {
            vec![g.rate_mbit]
        } else {
            g.rates_mbit.clone()
        };
        let mut out = Vec::new();
        for &rate in &rates {
            for &rtt in &g.rtt_ms {
                let bufs: Vec<(String, f64, f64)> = if g.buffer_bdp.is_empty() {
                    g.buffer_pkts
                        .iter()
                        .map(|&b| (format!("{b}p"), b as f64, 0.0))
                        .collect()
                } else {
                    let bdp = rate * 1e6 / 8.0 * rtt / 1e3 / g.mtu as f64;
                    g.buffer_bdp
                        .iter()
                        .map(|&k| (format!("{k}bdp"), (k * bdp).round().max(2.0), k))
                        .collect()
                };
                for (blabel, bpkts, k) in &bufs {
                    for &loss in &g.loss {
                        for &n in &g.n_flows {
                            let mut label = if g.rates_mbit.is_empty() {
                                String::new()
                            } else {
                                format!("{rate}M_")
                            };
                            label += &format!("{}ms_{blabel}", rtt);
                            if g.loss.len() > 1 || loss > 0.0 {
                                label += &format!("_loss{loss:e}");
                            }
                            if g.n_flows.len() > 1 || n > 1 {
                                label += &format!("_n{n}");
                            }
                            out.push(Case {
                                label,
                                link: LinkCfg {
                                    rate_mbit: rate,
                                    buffer_pkts: *bpkts as u32,
                                    loss,
                                    mtu: g.mtu,
                                    delay_ms: rtt / 2.0,
                                    rev_delay_ms: None,
                                },
                                n_flows: n,
                                buffer_bdp: *k,
                                rtt_ms: rtt,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The scenario as run in `case`: a cell's own duration applies.
    pub fn for_case(&self, case: &str) -> Scenario {
        let mut s = self.clone();
        if let Some(d) = self
            .cells
            .iter()
            .find(|c| c.case == case)
            .and_then(|c| c.duration_s)
        {
            s.duration_s = d;
        }
        s
    }

    /// Does the (case, cc) pair run?  All pairs unless `cells` lists some.
    pub fn wants(&self, case: &str, cc: &str) -> bool {
        self.cells.is_empty()
            || self
                .cells
                .iter()
                .any(|c| c.case == case && c.ccs.iter().any(|x| x == cc))
    }

    /// Evaluate `checks` on finished runs (mean over repetitions per case
    /// and cc).  Cases with no run of `cc` or `against` are skipped.
    pub fn evaluate(&self, runs: &[RunSummary]) -> Vec<CheckOutcome> {
        let mean = |case: &str, cc: &str, f: &dyn Fn(&RunSummary) -> f64| -> Option<f64> {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.case == case && r.cc == cc)
                .map(f)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let within =
            |set: &[f64], v: f64| set.is_empty() || set.iter().any(|x| (x - v).abs() < 1e-9);
        let mut out = Vec::new();
        for case in self.cases() {
            for c in &self.checks {
                if !(within(&c.rate_mbit, case.link.rate_mbit)
                    && within(&c.rtt_ms, case.rtt_ms)
                    && within(&c.buffer_bdp, case.buffer_bdp)
                    && within(&c.loss, case.link.loss))
                {
                    continue;
                }
                let me = |f: &dyn Fn(&RunSummary) -> f64| mean(&case.label, &c.cc, f);
                let other = |f: &dyn Fn(&RunSummary) -> f64| {
                    c.against.as_ref().and_then(|a| mean(&case.label, a, f))
                };
                let against = c.against.clone().unwrap_or_default();
                let mut push = |metric,
                                value: Option<f64>,
                                reference: f64,
                                bound: String,
                                pass: &dyn Fn(f64) -> bool| {
                    if let Some(v) = value {
                        out.push(CheckOutcome {
                            case: case.label.clone(),
                            cc: c.cc.clone(),
                            against: against.clone(),
                            metric,
                            value: v,
                            reference,
                            bound,
                            pass: pass(v),
                            why: c.why.clone(),
                        });
                    }
                };
                let good = |r: &RunSummary| r.goodput_mbit;
                let retx = |r: &RunSummary| r.retransmits as f64;
                let infl = |r: &RunSummary| (r.rtt_p95_ms - r.rtt_base_ms).max(0.0);
                if let (Some(x), Some(o)) = (c.goodput_ratio_min, other(&good)) {
                    push(
                        "goodput_mbit",
                        me(&good),
                        o,
                        format!(">= {x} x {o:.2}"),
                        &|v| v >= x * o,
                    );
                }
                if let (Some(x), Some(o)) = (c.retrans_ratio_max, other(&retx)) {
                    let lim = x * o + c.retrans_slack;
                    push(
                        "retransmits",
                        me(&retx),
                        o,
                        format!("<= {x} x {o:.0} + {}", c.retrans_slack),
                        &|v| v <= lim,
                    );
                }
                if let (Some(x), Some(o)) = (c.rtt_inflation_ratio_max, other(&infl)) {
                    // a reference that adds no delay leaves 1 ms of room
                    let lim = (x * o).max(1.0);
                    push(
                        "rtt_p95_inflation_ms",
                        me(&infl),
                        o,
                        format!("<= max({x} x {o:.1}, 1)"),
                        &|v| v <= lim,
                    );
                }
                if let Some(x) = c.utilisation_min {
                    push(
                        "utilisation",
                        me(&|r| r.utilisation),
                        0.0,
                        format!(">= {x}"),
                        &|v| v >= x,
                    );
                }
                if let Some(x) = c.recovery_share_max {
                    push(
                        "recovery_share",
                        me(&|r| r.recovery_share),
                        0.0,
                        format!("<= {x}"),
                        &|v| v <= x,
                    );
                }
            }
        }
        out
    }
}

#[derive(Clone, Debug)]
pub struct Case {
    pub label: String,
    pub link: LinkCfg,
    pub n_flows: u32,
    /// Buffer as a BDP fraction (0 when given in packets).
    pub buffer_bdp: f64,
    pub rtt_ms: f64,
}

/// `name:key=value,...` -> (name, [(key, value)]).
pub fn parse_cc(spec: &str) -> (String, Vec<(String, String)>) {
    match spec.split_once(':') {
        None => (spec.to_string(), vec![]),
        Some((n, rest)) => (
            n.to_string(),
            rest.split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
    }
}

// ---------------------------------------------------------------------------
// TCP_INFO (uapi linux/tcp.h, the prefix we read).

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
}

pub fn tcp_info(fd: i32) -> Option<TcpInfo> {
    let mut ti = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as u32;
    // SAFETY: out-buffer of the given length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut TcpInfo).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(ti)
}

// ---------------------------------------------------------------------------
// One run.

/// One 10-ms sample of one flow.
#[derive(Clone, Debug, Serialize)]
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
}

#[derive(Clone, Debug, Serialize)]
pub struct QueueSample {
    pub t: f64,
    pub qlen: u32,
    pub backlog: u32,
    pub drops: u32,
}

#[derive(Clone, Debug, Serialize)]
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
}

#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    pub case: String,
    pub cc: String,
    pub rep: u32,
    pub goodput_mbit: f64,
    pub utilisation: f64,
    pub jain: f64,
    /// Mean Jain index over 1-s bins in which every flow was active.
    pub jain_bins: f64,
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
    /// Share of the flows' TCP_INFO samples (after warm-up) in Recovery/Loss.
    pub recovery_share: f64,
    pub lateness_p50_us: u64,
    pub lateness_p99_us: u64,
    pub lateness_max_us: u64,
    pub realtime: bool,
    /// False when the delay line's p99 lateness exceeded its limit.
    pub valid: bool,
    pub flows: Vec<FlowSummary>,
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

struct Flow {
    cc: String,
    start: f64,
    stop: f64,
    bytes: Option<u64>,
    rx: Arc<AtomicU64>,
    done_at: Arc<std::sync::Mutex<Option<f64>>>,
}

/// Run one case with `cc` substituted for `$cc`; `tick` is called about
/// every 100 ms with the elapsed fraction (progress bars).
pub fn run_case(
    sc: &Scenario,
    case: &Case,
    cc: &str,
    rep: u32,
    tick: &mut dyn FnMut(f64),
) -> anyhow::Result<RunResult> {
    let mut link = Bottleneck::new(case.link.clone());
    let (cc_name, _) = parse_cc(cc);
    let mut flows = Vec::new();
    for f in &sc.flows {
        let copies = if f.cc == "$cc" { case.n_flows } else { 1 };
        for _ in 0..copies {
            flows.push(Flow {
                cc: if f.cc == "$cc" {
                    cc_name.clone()
                } else {
                    f.cc.clone()
                },
                start: f.start_s,
                stop: f.stop_s.unwrap_or(sc.duration_s).min(sc.duration_s),
                bytes: f.bytes,
                rx: Arc::new(AtomicU64::new(0)),
                done_at: Arc::new(std::sync::Mutex::new(None)),
            });
        }
    }
    let t0 = Instant::now();
    let stop_all = Arc::new(AtomicBool::new(false));
    let mut socks: Vec<Option<Arc<TcpStream>>> = vec![None; flows.len()];
    let mut threads = Vec::new();
    let mut probe = link.qdisc_probe();
    let mut samples = Vec::new();
    let mut queue = Vec::new();
    let mut next_tick = 0.0;
    let end = sc.duration_s;
    let mut started = vec![false; flows.len()];
    loop {
        let t = t0.elapsed().as_secs_f64();
        if t >= end || STOP.load(Ordering::Relaxed) {
            break;
        }
        for (i, f) in flows.iter().enumerate() {
            if !started[i] && t >= f.start {
                started[i] = true;
                let (s, th) = start_flow(&link, i, f, t0, stop_all.clone())?;
                socks[i] = Some(s);
                threads.push(th);
            }
        }
        for (i, s) in socks.iter().enumerate() {
            let Some(s) = s else { continue };
            if let Some(ti) = tcp_info(s.as_raw_fd()) {
                samples.push(FlowSample {
                    t,
                    flow: i,
                    cwnd: ti.snd_cwnd,
                    srtt_us: ti.rtt,
                    min_rtt_us: ti.min_rtt,
                    delivered: ti.delivered,
                    total_retrans: ti.total_retrans,
                    pacing_rate: ti.pacing_rate,
                    delivery_rate: ti.delivery_rate,
                    rx_bytes: flows[i].rx.load(Ordering::Relaxed),
                    ca_state: ti.ca_state,
                });
            }
        }
        if let Ok(Some(q)) = probe.by_handle(PFIFO) {
            queue.push(QueueSample {
                t,
                qlen: q.qlen,
                backlog: q.backlog,
                drops: q.drops,
            });
        }
        let all_done = flows
            .iter()
            .all(|f| f.bytes.is_some() && f.done_at.lock().unwrap().is_some());
        if all_done {
            break;
        }
        if t >= next_tick {
            tick((t / end).min(1.0));
            next_tick = t + 0.1;
        }
        let next = Duration::from_millis(10 * (1 + (t0.elapsed().as_millis() / 10) as u64));
        std::thread::sleep(next.saturating_sub(t0.elapsed()));
    }
    let t_end = t0.elapsed().as_secs_f64();
    stop_all.store(true, Ordering::Relaxed);
    let qfinal = link.queue();
    let random_drops = link.random_drops();
    drop(socks);
    for th in threads {
        let _ = th.join();
    }
    let rep_delay = link.stop_delay().expect("delay line running");
    drop(link);
    let comb = rep_delay.combined();
    let summary = summarise(
        sc,
        case,
        cc,
        rep,
        &flows,
        &samples,
        &queue,
        t_end,
        qfinal.drops as u64,
        random_drops,
    );
    let summary = RunSummary {
        lateness_p50_us: comb.lateness_us(0.5),
        lateness_p99_us: comb.lateness_us(0.99),
        lateness_max_us: comb.lateness_us(1.0),
        realtime: comb.realtime,
        valid: rep_delay.valid(),
        ..summary
    };
    Ok(RunResult {
        summary,
        samples,
        queue,
    })
}

type FlowThread = std::thread::JoinHandle<()>;

fn start_flow(
    link: &Bottleneck,
    i: usize,
    f: &Flow,
    t0: Instant,
    stop_all: Arc<AtomicBool>,
) -> anyhow::Result<(Arc<TcpStream>, FlowThread)> {
    let bind: SocketAddr = (link.receiver_ip, 0).into();
    let cc = f.cc.clone();
    let listener = link.receiver.run(move || -> std::io::Result<TcpListener> {
        let l = TcpListener::bind(bind)?;
        crate::set_cc(l.as_raw_fd(), &cc)?;
        Ok(l)
    })?;
    let addr = listener.local_addr()?;
    let rx = f.rx.clone();
    let done_at = f.done_at.clone();
    let want = f.bytes;
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let mut buf = vec![0u8; 1 << 18];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            let tot = rx.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            if want.is_some_and(|w| tot >= w) {
                *done_at.lock().unwrap() = Some(t0.elapsed().as_secs_f64());
            }
        }
    });
    let cc = f.cc.clone();
    let stream = link
        .sender
        .run(move || -> std::io::Result<TcpStream> {
            let sock = crate::socket_for(addr)?;
            crate::set_cc(sock.as_raw_fd(), &cc)?;
            crate::connect(sock, addr)
        })
        .map_err(|e| anyhow::anyhow!("flow {i} ({}): {e}", f.cc))?;
    let s = Arc::new(stream);
    let s2 = s.clone();
    let (stop, bytes) = (f.stop, f.bytes);
    let th = std::thread::spawn(move || {
        let chunk = vec![0x5au8; 1 << 16];
        let mut left = bytes.unwrap_or(u64::MAX);
        let mut w: &TcpStream = &s2;
        // Blocking writes; a send timeout lets the loop see its deadline.
        let _ = s2.set_write_timeout(Some(Duration::from_millis(50)));
        while left > 0
            && !stop_all.load(Ordering::Relaxed)
            && !STOP.load(Ordering::Relaxed)
            && t0.elapsed().as_secs_f64() < stop
        {
            let n = left.min(chunk.len() as u64) as usize;
            match w.write(&chunk[..n]) {
                Ok(k) => left -= k as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
        let _ = s2.shutdown(std::net::Shutdown::Write);
    });
    Ok((s, th))
}

#[allow(clippy::too_many_arguments)]
fn summarise(
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
    let payload = (case.link.mtu - 52) as f64 / case.link.mtu as f64;
    let mut per_flow = Vec::new();
    let mut all_rtt = Vec::new();
    let mut by_flow: BTreeMap<usize, Vec<&FlowSample>> = BTreeMap::new();
    for s in samples {
        by_flow.entry(s.flow).or_default().push(s);
    }
    let mut total_good = 0.0;
    for (i, f) in flows.iter().enumerate() {
        let v = by_flow.get(&i).cloned().unwrap_or_default();
        let from = w0.max(f.start);
        let win: Vec<&&FlowSample> = v.iter().filter(|s| s.t >= from).collect();
        let good = match (win.first(), win.last()) {
            (Some(a), Some(b)) if b.t > a.t => {
                (b.rx_bytes - a.rx_bytes) as f64 * 8.0 / (b.t - a.t) / 1e6
            }
            _ => 0.0,
        };
        total_good += good;
        let mut rtts: Vec<f64> = win.iter().map(|s| s.srtt_us as f64 / 1e3).collect();
        all_rtt.extend(rtts.iter().copied());
        let mean = if rtts.is_empty() {
            0.0
        } else {
            rtts.iter().sum::<f64>() / rtts.len() as f64
        };
        per_flow.push(FlowSummary {
            flow: i,
            cc: f.cc.clone(),
            start_s: f.start,
            goodput_mbit: good,
            completion_s: f.done_at.lock().unwrap().map(|t| t - f.start),
            bytes: f.rx.load(Ordering::Relaxed),
            rtt_mean_ms: mean,
            rtt_p95_ms: quantile(&mut rtts, 0.95),
            retransmits: v.last().map(|s| s.total_retrans).unwrap_or(0),
        });
    }
    // Jain's index over 1-s bins where every flow is active.
    let mut bins = Vec::new();
    let mut t = w0.max(flows.iter().map(|f| f.start).fold(0.0, f64::max));
    let stop_min = flows
        .iter()
        .map(|f| f.stop)
        .fold(f64::MAX, f64::min)
        .min(t_end);
    while t + 1.0 <= stop_min {
        let rates: Vec<f64> = (0..flows.len())
            .map(|i| {
                let v = by_flow.get(&i).map(|v| v.as_slice()).unwrap_or(&[]);
                let a = v.iter().find(|s| s.t >= t);
                let b = v.iter().find(|s| s.t >= t + 1.0);
                match (a, b) {
                    (Some(a), Some(b)) => (b.rx_bytes - a.rx_bytes) as f64,
                    _ => 0.0,
                }
            })
            .collect();
        if rates.iter().any(|&r| r > 0.0) {
            bins.push(jain(&rates));
        }
        t += 1.0;
    }
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
    let goods: Vec<f64> = per_flow.iter().map(|f| f.goodput_mbit).collect();
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
    RunSummary {
        case: case.label.clone(),
        cc: cc.to_string(),
        rep,
        goodput_mbit: total_good,
        utilisation: total_good / (case.link.rate_mbit * payload),
        jain: jain(&goods),
        jain_bins: if bins.is_empty() {
            0.0
        } else {
            bins.iter().sum::<f64>() / bins.len() as f64
        },
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_bounds() {
        assert!((jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        assert!((jain(&[3.0, 1.0]) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn every_shipped_scenario_parses_and_its_quick_variant_is_short() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/lab");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let s = Scenario::load(&p).unwrap_or_else(|e| panic!("{e:#}"));
                let q = s.quick();
                q.validate().unwrap();
                // Under 2 minutes: runs x duration plus ~1.5 s of setup each
                // (the acceptance subset, run by scripts/test.sh: 10 minutes).
                let secs: f64 = q
                    .cases()
                    .iter()
                    .map(|c| {
                        let n = q.ccs.iter().filter(|cc| q.wants(&c.label, cc)).count();
                        n as f64 * (q.for_case(&c.label).duration_s + 1.5)
                    })
                    .sum::<f64>()
                    * q.repetitions as f64;
                let limit = if q.checks.is_empty() { 120.0 } else { 600.0 };
                assert!(secs < limit, "{}: quick takes ~{secs:.0} s", p.display());
                assert!(!s.cases().is_empty());
                n += 1;
            }
        }
        assert!(n >= 4, "four papers' scenarios at least, found {n}");
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_location() {
        let dir = std::env::temp_dir().join(format!("ccl-lab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.toml");
        std::fs::write(
            &p,
            "title = \"x\"\npaper = \"y\"\ndescription = \"z\"\nbogus = 1\n",
        )
        .unwrap();
        let e = format!("{:#}", Scenario::load(&p).unwrap_err());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("bogus") && e.contains("line 4"), "{e}");
    }

    #[test]
    fn grid_expands_buffers_from_the_bdp() {
        let s: Scenario = toml::from_str(
            r#"
title = "t"
paper = "p"
description = "d"
ccs = ["reno", "ctcp_plus:plus=0"]
duration_s = 10
repetitions = 1
flows = [{ cc = "$cc" }]
[grid]
rate_mbit = 100
rtt_ms = [80]
buffer_bdp = [0.125, 1]
[quick]
"#,
        )
        .unwrap();
        let c = s.cases();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].link.buffer_pkts, 83); // 667 x 1/8
        assert_eq!(c[1].link.buffer_pkts, 667);
        assert_eq!(c[0].link.delay_ms, 40.0);
        assert_eq!(
            parse_cc("ctcp_plus:plus=0").1,
            vec![("plus".into(), "0".into())]
        );
    }
}
