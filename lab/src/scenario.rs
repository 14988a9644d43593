//! Scenarios: a TOML file in `configs/lab/` describing a grid of link
//! settings x congestion controls x repetitions, the paper's numbers to
//! compare with, and the `[[checks]]` thresholds `lab check` enforces.
//! `checks` judges the thresholds on finished runs.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;
use std::sync::Arc;

use ccload_testbed::link::{LinkCfg, TraceLink};

use crate::arrivals::Arrivals;
use ccload_testbed::trace::{Limit, Trace, Walk};

/// The kernel congestion controls a scenario may name beside ours.
pub const KERNEL_CCS: [&str; 3] = ["reno", "cubic", "bbr"];

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub title: String,
    /// The paper (and figure or table) the experiment reproduces.
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
    /// Several flow sets, each a grid dimension of its own (cases are
    /// labelled `..._<name>`); when given, they replace `flows`.  Absent
    /// from the serialised scenario when empty, so a scenario written before
    /// the field existed keeps its runs' identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mixes: Vec<Mix>,
    /// What sends the flows' bytes unless a flow says otherwise: `lab`
    /// (the default; absent from the serialised scenario then, so that
    /// runs recorded before the field keep their identity) or `iperf3`.
    #[serde(default, skip_serializing_if = "Sender::is_lab")]
    pub sender: Sender,
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
    /// Scenarios (configs/lab/<name>.toml) that `lab check` of this one
    /// checks too, each into a sub-directory of that name: acceptance
    /// takes coexist's multi-flow cells, whose grid is not its own.
    /// Absent from the serialised scenario when empty (runs' identity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
    /// The directory of the scenario file ([`Scenario::load`]): trace files
    /// are relative to it.  None for a scenario read from a run's record,
    /// which runs nothing.
    #[serde(skip)]
    pub dir: Option<std::path::PathBuf>,
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
    /// Runs per CC in this cell (default: the scenario's repetitions).
    /// Absent from the serialised scenario when unset, so a scenario file
    /// written before the field existed keeps its runs' identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<u32>,
    /// The repetition number this cell's first run stands for in the
    /// seeded loss ([`Scenario::loss_seed_for`]): a confirmation's runs are
    /// repetitions 1.. of the grid's case, so they draw new losses rather
    /// than the failing run's again.  Set by `lab check`, never in a file.
    #[serde(skip)]
    pub rep_base: u32,
}

/// One acceptance threshold: for every case matching the filters, `cc`'s
/// runs against `against`'s in the same cases (one run each: the values;
/// repetitions: the paired test, `checks::Paired`).
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
    /// Only cases on these `[[grid.traces]]` (by name; empty = every case).
    #[serde(default)]
    pub trace: Vec<String>,
    /// goodput(cc) >= x * goodput(against)
    pub goodput_ratio_min: Option<f64>,
    /// retransmitted segments: retx(cc) <= x * retx(against) + retrans_slack
    pub retrans_ratio_max: Option<f64>,
    #[serde(default)]
    pub retrans_slack: f64,
    /// retransmitted segments per delivered segment: r(cc) is at most
    /// x * r(against) plus retrans_per_seg_slack.  For a controller that
    /// delivers more than its reference, the count ratio above would hold
    /// its extra goodput against it; this compares loss rates.
    pub retrans_per_seg_ratio_max: Option<f64>,
    #[serde(default)]
    pub retrans_per_seg_slack: f64,
    /// Both retransmission comparisons count only what was retransmitted
    /// after the warm-up, the window goodput is measured over.  For a
    /// controller whose slow start is the kernel's Reno slow start, as its
    /// reference's is: whether a run's slow start overshoots the path
    /// storage (thousands of retransmissions at a long RTT) or is ended
    /// early by a random loss (a handful) is then the same coin for both,
    /// and a count from the start compares the coins, not the laws.
    #[serde(default)]
    pub retrans_after_warmup: bool,
    /// p95 RTT inflation over the base RTT: (p95 - base)(cc) <= x * (p95 - base)(against)
    pub rtt_inflation_ratio_max: Option<f64>,
    /// p95 queueing delay at the bottleneck (the emulator's, per packet on
    /// a trace, sampled on a TBF): q95(cc) <= x * q95(against), with 1 ms
    /// of room when the reference queues nothing
    pub qdelay_ratio_max: Option<f64>,
    /// A short-flow mix: the arrivals' slowdown (FCT over the ideal) in
    /// size bin `slowdown_bin` ("small": under 100 KB, "medium", "large":
    /// 1 MB or more) at quantile `slowdown_q` (0.5 or 0.99): s(cc) is at
    /// most x * s(against)
    pub slowdown_ratio_max: Option<f64>,
    #[serde(default)]
    pub slowdown_bin: Option<String>,
    #[serde(default)]
    pub slowdown_q: Option<f64>,
    /// absolute: utilisation(cc) >= x (of the capacity a trace offered
    /// over the run, on a trace-driven link)
    pub utilisation_min: Option<f64>,
    /// Only these `[[mixes]]` (empty = every case).
    #[serde(default)]
    pub mix: Vec<String>,
    /// absolute: Jain's index of the flows' goodputs over the second half
    /// (after the warm-up) >= x: whether they converged to equal shares
    pub jain_min: Option<f64>,
    /// absolute: the mean of Jain's index over the 1-s bins after the
    /// warm-up in which every flow was active >= x: whether they also hold
    /// equal rates second by second (a loss-based flow's sawtooth does
    /// not: eight reno flows, 0.98 over the half, 0.92 in 1-s bins)
    pub jain_bins_min: Option<f64>,
    /// absolute: seconds from the last flow's start until it first gets
    /// 0.8x its fair share in a 1-s bin <= x (a run where it never does
    /// fails)
    pub late_fair_max_s: Option<f64>,
    /// late_fair_s(cc) <= x * late_fair_s(against) + late_fair_slack_s in
    /// the same case: how fast the late flow gets its share, against the
    /// kernel CC whose law `cc` keeps on that link (a late flow that never
    /// gets it counts as infinitely slow)
    pub late_fair_ratio_max: Option<f64>,
    #[serde(default)]
    pub late_fair_slack_s: f64,
    /// absolute: the goodput of the run's flows of the control under test
    /// (the mix's `$cc` flows) over the link's payload capacity >= x
    pub share_min: Option<f64>,
    /// share(cc) >= x * share(against) in the same case, where `against` is
    /// the control under test of the reference run (e.g. what reno keeps
    /// against cubic, in the mix `$cc` + cubic; what the first of two reno
    /// flows keeps, in the mix `$cc` + reno)
    pub share_ratio_min: Option<f64>,
    /// jain(cc) >= x * jain(against) in the same case: N flows of `cc`
    /// share as evenly as N flows of the reference do (for a loss-based
    /// law, whose 20-s split is the luck of where a full buffer dropped)
    pub jain_ratio_min: Option<f64>,
    /// long_rtt_share(cc) >= x * long_rtt_share(against) in the same case:
    /// the goodput fraction of the flows with the longest own RTT (flows
    /// with `rtt_ms`), e.g. what an 80-ms cubic flow keeps beside a 20-ms
    /// one
    pub long_rtt_share_ratio_min: Option<f64>,
    /// retransmitted segments of the run's flows of `cc` <= x * those of
    /// its other flows (the competitor in the same run) + retrans_slack
    pub peer_retrans_ratio_max: Option<f64>,
    /// absolute: share of TCP_INFO samples in Recovery or Loss <= x
    pub recovery_share_max: Option<f64>,
    /// absolute: retransmitted segments per delivered segment, over the
    /// whole run, <= x * the case's random loss rate (what a controller
    /// that never overflows the buffer retransmits is the loss itself)
    pub retrans_per_seg_loss_max: Option<f64>,
    /// `lab check`: a comparison with `against` that fails on one run per
    /// CC is confirmed, not retried: both CCs are measured again in that
    /// case until each has this many runs, and the comparison is judged
    /// per repetition by the paired test (the failing run included).  In a check without
    /// `against`, an absolute floor (e.g. share_min) that fails on one run
    /// is confirmed the same way on the mean of `cc`'s runs; in a check
    /// with one, its floors are never confirmed.  0 or 1: the single run
    /// stands.
    #[serde(default)]
    pub confirm_reps: u32,
    /// Cases whose failing comparison is confirmed on a different number
    /// of runs than `confirm_reps` (the first entry that matches): where
    /// one run's noise is as large as the threshold's margin, three runs
    /// that include the failing one do not separate noise from harm.
    #[serde(default)]
    pub confirm_reps_in: Vec<ConfirmIn>,
    /// What the threshold stands for, printed with its verdict.
    pub why: String,
}

/// A set of cases (the check's filter fields; empty = every value) and
/// the runs per CC that confirm a failing comparison there.  The four
/// filter fields repeat `Check`'s: serde's `flatten` cannot share them
/// with `deny_unknown_fields`, which catches a misspelt threshold.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmIn {
    #[serde(default)]
    pub rate_mbit: Vec<f64>,
    #[serde(default)]
    pub rtt_ms: Vec<f64>,
    #[serde(default)]
    pub buffer_bdp: Vec<f64>,
    #[serde(default)]
    pub loss: Vec<f64>,
    pub confirm_reps: u32,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    pub rate_mbit: f64,
    /// Several rates (overrides rate_mbit; cases are labelled `<rate>M_`).
    #[serde(default)]
    pub rates_mbit: Vec<f64>,
    #[serde(default)]
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
    /// Random loss drawn by the delay line from a seed of (case,
    /// repetition), the same for every CC of that run ([`loss_seed`]), not
    /// by iptables: still Bernoulli per packet, but two CCs that send the
    /// same packets lose the same ones, so a comparison is not decided by
    /// where a handful of losses fell.  Absent when false, so a scenario
    /// written before it existed keeps its runs' identity.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paired_loss: bool,
    /// A LAN: no delay line, the router reaches the receiver over a veth
    /// pair ([`LinkCfg::veth`]), so rates past the delay line's and the
    /// hosts' own RTT (`rtt_ms = [0]`); a rate of 0 is unlimited.  Cases are
    /// labelled `veth` where others name their RTT.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub veth: bool,
    /// TSO, GSO and GRO on (true) or off at every device, a case each
    /// (labelled `_offl` when on); absent: off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offloads: Vec<bool>,
    /// Variable-capacity links, a case each (labelled `<name>_`): when
    /// given, they replace the rates.  Absent when empty (runs' identity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<TraceSpec>,
    /// RTT and buffer pairs (`[[grid.paths]]`) in place of every RTT with
    /// every buffer: a base station's deep queue at 40 ms and a 1-BDP one
    /// at 80 ms, say.  Absent when empty (runs' identity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathSpec>,
}

/// One RTT with one buffer, in BDPs or in packets.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    pub rtt_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_bdp: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_pkts: Option<u32>,
}

impl Grid {
    /// Every (RTT, buffer) of the grid, in case order: its paths, or every
    /// RTT with every buffer (validation leaves one of buffer_bdp and
    /// buffer_pkts empty).
    fn path_list(&self) -> Vec<PathSpec> {
        if !self.paths.is_empty() {
            return self.paths.clone();
        }
        let path = |rtt_ms, buffer_pkts, buffer_bdp| PathSpec {
            rtt_ms,
            buffer_bdp,
            buffer_pkts,
        };
        self.rtt_ms
            .iter()
            .flat_map(|&rtt| {
                let pkts = self
                    .buffer_pkts
                    .iter()
                    .map(move |&b| path(rtt, Some(b), None));
                let bdps = self
                    .buffer_bdp
                    .iter()
                    .map(move |&k| path(rtt, None, Some(k)));
                pkts.chain(bdps)
            })
            .collect()
    }
}

/// A variable-capacity bottleneck (`[[grid.traces]]`): a measured mahimahi
/// trace per direction, or a synthetic capacity.  The delay line queues the
/// data in the case's drop-tail buffer and drains it at the trace's
/// opportunities ([`ccload_testbed::trace`]); there is no TBF.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The cases' label prefix and what a check's `trace` filter names.
    pub name: String,
    /// The data direction's trace file (relative to the scenario's
    /// directory) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<String>,
    /// ... and the ACK direction's (absent: not shaped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<String>,
    /// The down trace's mean capacity, Mbit/s: buffers in BDPs and the
    /// case's rate are of it.  Needed with `down` (the run's record must
    /// not need the file) and checked against the file when loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_mbit: Option<f64>,
    /// Where in the traces each run starts, s.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset_s: f64,
    /// A synthetic capacity instead of files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternate: Option<Alternate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk: Option<WalkSpec>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// A capacity alternating between two rates, each stretch a seeded
/// uniform draw from `every_s`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Alternate {
    pub rates_mbit: [f64; 2],
    pub every_s: [f64; 2],
    pub seed: u64,
}

/// A seeded random walk of the capacity with outages
/// ([`ccload_testbed::trace::Walk`]).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WalkSpec {
    pub mean_mbit: f64,
    pub min_mbit: f64,
    pub max_mbit: f64,
    pub step_ms: u64,
    pub sigma: f64,
    /// Mean gap between outages, s (absent: none), and their length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage_every_s: Option<f64>,
    #[serde(default)]
    pub outage_s: f64,
    pub seed: u64,
}

/// The period of a synthetic trace, ms (runs are shorter).
const SYNTHETIC_PERIOD_MS: u64 = 300_000;

impl TraceSpec {
    /// The capacity the case is sized by, Mbit/s.
    pub fn nominal_mbit(&self) -> f64 {
        match (&self.alternate, &self.walk) {
            (Some(a), _) => (a.rates_mbit[0] + a.rates_mbit[1]) / 2.0,
            (_, Some(w)) => w.mean_mbit,
            _ => self.mean_mbit.unwrap_or(0.0),
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        let n = &self.name;
        anyhow::ensure!(
            !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "trace {n:?}: a name of letters, digits and '-'"
        );
        let kinds = [
            self.down.is_some(),
            self.alternate.is_some(),
            self.walk.is_some(),
        ];
        anyhow::ensure!(
            kinds.iter().filter(|&&k| k).count() == 1,
            "trace {n}: give exactly one of down (a file), alternate, walk"
        );
        anyhow::ensure!(
            self.down.is_some() || self.up.is_none(),
            "trace {n}: `up` goes with a `down` file (a synthetic link shapes the data only)"
        );
        anyhow::ensure!(
            self.down.is_none() || self.mean_mbit.is_some_and(|m| m > 0.0),
            "trace {n}: a trace file needs mean_mbit, its mean capacity (checked against the file)"
        );
        anyhow::ensure!(self.offset_s >= 0.0, "trace {n}: offset_s >= 0");
        if let Some(a) = &self.alternate {
            anyhow::ensure!(
                a.rates_mbit.iter().all(|&r| r > 0.0 && r <= DELAY_LINE_MAX_MBIT)
                    && a.every_s[0] > 0.0
                    && a.every_s[1] >= a.every_s[0],
                "trace {n}: alternate rates in (0, {DELAY_LINE_MAX_MBIT}] Mbit/s,                  0 < every_s[0] <= every_s[1]"
            );
        }
        if let Some(w) = &self.walk {
            anyhow::ensure!(
                0.0 < w.min_mbit
                    && w.min_mbit <= w.mean_mbit
                    && w.mean_mbit <= w.max_mbit
                    && w.max_mbit <= DELAY_LINE_MAX_MBIT
                    && w.step_ms > 0
                    && (0.0..=2.0).contains(&w.sigma)
                    && w.outage_s >= 0.0
                    && w.outage_every_s.is_none_or(|g| g > 0.0),
                "trace {n}: walk needs 0 < min <= mean <= max <= {DELAY_LINE_MAX_MBIT} Mbit/s,                  step_ms > 0, sigma in [0, 2], outage_every_s > 0"
            );
        }
        Ok(())
    }

    /// The data direction's trace and the ACK direction's, loaded (files
    /// relative to `dir`, read once per process) or generated.
    pub fn traces(
        &self,
        dir: Option<&std::path::Path>,
    ) -> anyhow::Result<(Arc<Trace>, Option<Arc<Trace>>)> {
        if let Some(a) = &self.alternate {
            let ms = |s: f64| (s * 1e3).round() as u64;
            let t = Trace::alternating(
                (a.rates_mbit[0], a.rates_mbit[1]),
                (ms(a.every_s[0]), ms(a.every_s[1])),
                a.seed,
                SYNTHETIC_PERIOD_MS,
            );
            return Ok((Arc::new(t), None));
        }
        if let Some(w) = &self.walk {
            let t = Trace::random_walk(&Walk {
                mean_mbit: w.mean_mbit,
                min_mbit: w.min_mbit,
                max_mbit: w.max_mbit,
                step_ms: w.step_ms,
                sigma: w.sigma,
                outage_every_ms: w.outage_every_s.map(|g| (g * 1e3).round() as u64),
                outage_ms: (w.outage_s * 1e3).round() as u64,
                seed: w.seed,
                period_ms: SYNTHETIC_PERIOD_MS,
            });
            return Ok((Arc::new(t), None));
        }
        let file = |f: &String| -> anyhow::Result<Arc<Trace>> {
            let p = dir.map_or_else(|| std::path::PathBuf::from(f), |d| d.join(f));
            load_trace(&p)
        };
        let down = file(
            self.down
                .as_ref()
                .expect("validated: down or a synthetic link"),
        )?;
        let up = self.up.as_ref().map(file).transpose()?;
        Ok((down, up))
    }
}

/// A trace file, parsed once per process (a grid runs each many times).
fn load_trace(path: &std::path::Path) -> anyhow::Result<Arc<Trace>> {
    static CACHE: std::sync::Mutex<BTreeMap<std::path::PathBuf, Arc<Trace>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = c.get(path) {
        return Ok(t.clone());
    }
    let t = Arc::new(Trace::load(path)?);
    c.insert(path.to_path_buf(), t.clone());
    Ok(t)
}

/// The highest rate the delay line is validated to carry, Mbit/s; a veth
/// link ([`Grid::veth`]) runs past it.
pub const DELAY_LINE_MAX_MBIT: f64 = 300.0;
/// A veth link's highest shaped rate, Mbit/s (0 = unlimited).
pub const VETH_MAX_MBIT: f64 = 100_000.0;

/// The loss seed of repetition `rep` of `case` under `paired_loss`: FNV-1a
/// of the case label, then the repetition.
pub fn loss_seed(case: &str, rep: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in case.bytes().chain(rep.to_le_bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The base RTT of a case of `rtt` ms with `flows`: the shortest of the
/// case's and the flows' own ones (`FlowSpec::rtt_ms`); the delay line's
/// base delay is half of it.
fn base_rtt(flows: &[FlowSpec], rtt: f64) -> f64 {
    flows.iter().filter_map(|f| f.rtt_ms).fold(rtt, f64::min)
}

/// The delay line's classes for `flows` on a case of `rtt` ms: the extra
/// one-way delay over the base of each distinct longer RTT, in first-seen
/// order (a flow without `rtt_ms` has the case's).
fn extra_delays(flows: &[FlowSpec], rtt: f64) -> Vec<f64> {
    let base = base_rtt(flows, rtt);
    let mut out: Vec<f64> = Vec::new();
    for f in flows {
        let x = (f.rtt_ms.unwrap_or(rtt) - base) / 2.0;
        if x > 0.0 && !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// A flow's delay class on a case of `rtt` ms (0: the base RTT); the index
/// into [`extra_delays`] plus one.
pub fn delay_class(flows: &[FlowSpec], f: &FlowSpec, rtt: f64) -> usize {
    let x = (f.rtt_ms.unwrap_or(rtt) - base_rtt(flows, rtt)) / 2.0;
    extra_delays(flows, rtt)
        .iter()
        .position(|&e| e == x)
        .map_or(0, |i| i + 1)
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
    /// This flow's own base RTT, ms (default: the case's): the delay line's
    /// base is the shortest RTT of the case's flows, and it adds the
    /// difference for the others, half in each direction.
    #[serde(default)]
    pub rtt_ms: Option<f64>,
    /// What sends this flow (default: the scenario's `sender`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<Sender>,
    /// One of a mix's `arrivals` (a short flow): what it adds to the link
    /// counts in the run's goodput, its completion time in the slowdowns.
    #[serde(skip)]
    pub arrival: bool,
}

/// What sends a flow's bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sender {
    /// The lab's own: 64-KiB blocking writes, a reader on the other end.
    #[default]
    Lab,
    /// `iperf3 -c` and `iperf3 -s -1` (docs/lab.md, "Senders").  Bulk flows
    /// only: a mix's arrivals are the lab's.
    Iperf3,
}

impl Sender {
    pub fn is_lab(&self) -> bool {
        *self == Sender::Lab
    }
}

/// A named set of flows sharing the bottleneck (`[[mixes]]`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    pub name: String,
    pub flows: Vec<FlowSpec>,
    /// Fixed-size flows arriving beside `flows` (a short-flow mix).
    #[serde(default)]
    pub arrivals: Option<Arrivals>,
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
    pub mixes: Option<Vec<Mix>>,
    pub cells: Option<Vec<Cell>>,
    pub traces: Option<Vec<TraceSpec>>,
    pub paths: Option<Vec<PathSpec>>,
    /// The scenario's `sender` for the quick variant.
    pub sender: Option<Sender>,
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
        let mut s: Scenario = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
        s.validate()?;
        s.dir = path.parent().map(std::path::Path::to_path_buf);
        s.check_traces()?;
        Ok(s)
    }

    /// Every trace of the grid read and parsed (or generated), a file's
    /// mean checked against `mean_mbit` (within 3 %), every period against the offset
    /// and the run: a bad file is one error before any run starts.
    pub fn check_traces(&self) -> anyhow::Result<()> {
        for t in &self.grid.traces {
            let (down, up) = t.traces(self.dir.as_deref())?;
            let (got, said) = (down.mean_mbit(), t.nominal_mbit());
            // a file's stated mean; a synthetic link's is its nominal rate
            anyhow::ensure!(
                t.down.is_none() || (got - said).abs() <= 0.03 * said,
                "trace {}: its mean capacity is {got:.2} Mbit/s, mean_mbit says {said}",
                t.name
            );
            for (dir, tr) in [("down", Some(&down)), ("up", up.as_ref())] {
                if let Some(tr) = tr {
                    anyhow::ensure!(
                        (t.offset_s * 1e3) < tr.period_ms() as f64,
                        "trace {}: offset_s {} is past the end of its {dir} trace ({} ms)",
                        t.name,
                        t.offset_s,
                        tr.period_ms()
                    );
                }
            }
        }
        Ok(())
    }

    /// The trace-driven link of `case` (None on a fixed-rate one).
    pub fn trace_link(&self, case: &Case) -> anyhow::Result<Option<TraceLink>> {
        let Some(t) = &case.trace else {
            return Ok(None);
        };
        let (down, up) = t.traces(self.dir.as_deref())?;
        Ok(Some(TraceLink {
            down,
            up,
            offset_ms: (t.offset_s * 1e3).round() as u64,
            buffer: Limit::Packets(case.link.buffer_pkts),
        }))
    }

    /// What decides the runs, without what only documents or judges them
    /// (title, paper, description, scaling, paper_numbers, checks): two
    /// scenario files with the same runs give equal values.
    pub fn runs_identity(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("a scenario serialises");
        if let Some(m) = v.as_object_mut() {
            for k in [
                "title",
                "paper",
                "description",
                "scaling",
                "paper_numbers",
                "checks",
                // the caller compares the variant it runs (Scenario::quick)
                "quick",
                // other scenarios' runs, in their own directories
                "also",
            ] {
                m.remove(k);
            }
        }
        v
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        let g = &self.grid;
        let rate_ok = |r: f64| {
            if g.veth {
                (0.0..=VETH_MAX_MBIT).contains(&r)
            } else {
                r > 0.0 && r <= DELAY_LINE_MAX_MBIT
            }
        };
        anyhow::ensure!(
            g.rates_mbit.iter().all(|&r| rate_ok(r)) && rate_ok(g.rate_mbit),
            "{}",
            if g.veth {
                format!("a veth link's rates: 0 (unlimited) to {VETH_MAX_MBIT} Mbit/s")
            } else {
                format!(
                    "rates must be in (0, {DELAY_LINE_MAX_MBIT}] Mbit/s: the delay line is \
                     measured up to that (a veth link, `veth = true`, runs past it)"
                )
            }
        );
        if g.veth {
            anyhow::ensure!(
                g.rtt_ms == [0.0] && !g.paired_loss && g.buffer_bdp.is_empty(),
                "a veth link has no delay line: rtt_ms = [0] (the hosts' own RTT), buffers in \
                 buffer_pkts, no paired_loss"
            );
        } else {
            anyhow::ensure!(
                g.offloads.iter().all(|&o| !o),
                "offloads = [true] needs a veth link: through the delay line's TUN devices a \
                 queue of 64-KiB GSO packets is not the buffer it says"
            );
        }
        for t in &g.traces {
            t.validate()?;
            anyhow::ensure!(
                !g.veth,
                "trace {}: a trace-driven link needs the delay line, not a veth pair",
                t.name
            );
            anyhow::ensure!(
                g.traces.iter().filter(|o| o.name == t.name).count() == 1,
                "two traces named {}",
                t.name
            );
        }
        let all_flows = self
            .flows
            .iter()
            .chain(self.mixes.iter().flat_map(|m| &m.flows));
        for f in all_flows {
            anyhow::ensure!(
                f.bytes.is_none() || f.sender.unwrap_or(self.sender).is_lab(),
                "flow of {} with bytes: iperf3 flows are timed (iperf3 -n ends its test once \
                 the bytes are written, before they arrive; the lab's sender times a fixed size \
                 to its last byte at the receiver)",
                f.cc
            );
        }
        for c in &self.checks {
            for n in &c.trace {
                anyhow::ensure!(
                    g.traces.iter().any(|t| &t.name == n),
                    "check on {}: no trace named {n}",
                    c.cc
                );
            }
        }
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
            anyhow::ensure!(
                c.repetitions.is_none_or(|n| n >= 1),
                "cell `{}`: repetitions >= 1",
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
        if g.paths.is_empty() {
            anyhow::ensure!(
                !g.rtt_ms.is_empty() && g.rtt_ms.iter().all(|&r| (0.0..=1000.0).contains(&r)),
                "rtt_ms: 0..1000 ms"
            );
            anyhow::ensure!(
                g.buffer_bdp.is_empty() != g.buffer_pkts.is_empty(),
                "give exactly one of buffer_bdp, buffer_pkts"
            );
        } else {
            anyhow::ensure!(
                g.rtt_ms.is_empty() && g.buffer_bdp.is_empty() && g.buffer_pkts.is_empty(),
                "[[grid.paths]] replaces rtt_ms, buffer_bdp and buffer_pkts: give it alone"
            );
            for p in &g.paths {
                anyhow::ensure!(
                    (0.0..=1000.0).contains(&p.rtt_ms)
                        && p.buffer_bdp.is_some() != p.buffer_pkts.is_some(),
                    "path {p:?}: rtt_ms in 0..1000 ms and exactly one of buffer_bdp, buffer_pkts"
                );
            }
        }
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
        for f in self
            .flows
            .iter()
            .chain(self.mixes.iter().flat_map(|m| &m.flows))
        {
            anyhow::ensure!(
                f.start_s < self.duration_s,
                "flow starts after the run ends"
            );
            if let Some(r) = f.rtt_ms {
                anyhow::ensure!(
                    !g.veth,
                    "a flow's rtt_ms ({r}) needs the delay line: a veth link has none"
                );
                anyhow::ensure!(r > 0.0 && r <= 1000.0, "a flow's rtt_ms ({r}): 0..1000 ms");
            }
        }
        for m in &self.mixes {
            anyhow::ensure!(
                !m.flows.is_empty() && !m.name.is_empty() && !m.name.contains(char::is_whitespace),
                "mix {:?}: a name without spaces and at least one flow",
                m.name
            );
            anyhow::ensure!(
                m.flows.iter().any(|f| f.cc == "$cc"),
                "mix {}: no flow of the control under test ($cc)",
                m.name
            );
            if let Some(a) = &m.arrivals {
                a.validate()
                    .map_err(|e| anyhow::anyhow!("mix {}: {e}", m.name))?;
                anyhow::ensure!(
                    g.n_flows.iter().all(|&n| n == 1),
                    "mix {}: arrivals with n_flows > 1",
                    m.name
                );
                anyhow::ensure!(
                    !g.traces.is_empty()
                        || (g.rates_mbit.is_empty() && g.rate_mbit > 0.0)
                        || (!g.rates_mbit.is_empty() && g.rates_mbit.iter().all(|&r| r > 0.0)),
                    "mix {}: arrivals need a link rate (their load is of it)",
                    m.name
                );
            }
        }
        for c in &self.checks {
            if c.slowdown_ratio_max.is_some() {
                anyhow::ensure!(
                    c.against.is_some()
                        && crate::arrivals::slowdown_metric(
                            c.slowdown_bin.as_deref().unwrap_or(""),
                            c.slowdown_q.unwrap_or(0.0)
                        )
                        .is_some(),
                    "check on {}: slowdown_ratio_max needs `against`, slowdown_bin (small, medium, large) and slowdown_q (0.5 or 0.99)",
                    c.cc
                );
            }
            for m in &c.mix {
                anyhow::ensure!(
                    self.mixes.iter().any(|x| &x.name == m),
                    "check on {}: no mix named {m}",
                    c.cc
                );
            }
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
        ov!(s.mixes, q.mixes);
        ov!(s.cells, q.cells);
        ov!(s.grid.traces, q.traces);
        ov!(s.grid.paths, q.paths);
        ov!(s.sender, q.sender);
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
        let offloads = if g.offloads.is_empty() {
            vec![false]
        } else {
            g.offloads.clone()
        };
        let links: Vec<(f64, Option<&TraceSpec>)> = if g.traces.is_empty() {
            rates.iter().map(|&r| (r, None)).collect()
        } else {
            g.traces
                .iter()
                .map(|t| (t.nominal_mbit(), Some(t)))
                .collect()
        };
        let mut out = Vec::new();
        for &(rate, trace) in &links {
            for p in g.path_list() {
                let rtt = p.rtt_ms;
                // The buffer's label, packets and BDPs (0 when in packets).
                let (blabel, bpkts, k) = match (p.buffer_pkts, p.buffer_bdp) {
                    (Some(b), _) => (format!("{b}p"), b as f64, 0.0),
                    (None, k) => {
                        let k = k.expect("validated: a buffer in packets or BDPs");
                        let bdp = rate * 1e6 / 8.0 * rtt / 1e3 / g.mtu as f64;
                        (format!("{k}bdp"), (k * bdp).round().max(2.0), k)
                    }
                };
                let mixes: Vec<Mix> = if self.mixes.is_empty() {
                    vec![Mix {
                        name: String::new(),
                        flows: self.flows.clone(),
                        arrivals: None,
                    }]
                } else {
                    self.mixes
                        .iter()
                        .map(|m| {
                            let mut m = m.clone();
                            if let Some(a) = &m.arrivals {
                                m.flows
                                    .extend(a.flows(rate, self.duration_s).into_iter().map(
                                        |(start_s, bytes)| FlowSpec {
                                            cc: a.cc.clone(),
                                            start_s,
                                            stop_s: None,
                                            bytes: Some(bytes),
                                            rtt_ms: None,
                                            // arrivals are the lab's own
                                            sender: Some(Sender::Lab),
                                            arrival: true,
                                        },
                                    ));
                            }
                            m
                        })
                        .collect()
                };
                for &offl in &offloads {
                    for &loss in &g.loss {
                        for &n in &g.n_flows {
                            for Mix {
                                name: mix, flows, ..
                            } in &mixes
                            {
                                let mut label = match (g.rates_mbit.is_empty(), rate == 0.0) {
                                    _ if trace.is_some() => String::new(),
                                    (true, _) => String::new(),
                                    (false, true) => "unlim_".to_string(),
                                    (false, false) => format!("{rate}M_"),
                                };
                                if let Some(t) = trace {
                                    label += &format!("{}_", t.name);
                                }
                                if g.veth {
                                    label += &format!("veth_{blabel}");
                                } else {
                                    label += &format!("{}ms_{blabel}", rtt);
                                }
                                if offl {
                                    label += "_offl";
                                }
                                if g.loss.len() > 1 || loss > 0.0 {
                                    label += &format!("_loss{loss:e}");
                                }
                                if g.n_flows.len() > 1 || n > 1 {
                                    label += &format!("_n{n}");
                                }
                                if !mix.is_empty() {
                                    label += &format!("_{mix}");
                                }
                                out.push(Case {
                                    label,
                                    link: LinkCfg {
                                        rate_mbit: rate,
                                        buffer_pkts: bpkts as u32,
                                        loss,
                                        loss_seed: None,
                                        mtu: g.mtu,
                                        delay_ms: base_rtt(flows, rtt) / 2.0,
                                        rev_delay_ms: None,
                                        extra_delay_ms: extra_delays(flows, rtt),
                                        veth: g.veth,
                                        offloads: offl,
                                        trace: None,
                                    },
                                    trace: trace.cloned(),
                                    n_flows: n,
                                    buffer_bdp: k,
                                    rtt_ms: rtt,
                                    mix: mix.clone(),
                                    flows: flows.clone(),
                                });
                            }
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

    /// Runs per CC in `case`: its cell's `repetitions`, else the scenario's.
    pub fn reps_for(&self, case: &str) -> u32 {
        self.cells
            .iter()
            .find(|c| c.case == case)
            .and_then(|c| c.repetitions)
            .unwrap_or(self.repetitions)
    }

    /// The seed of the paired loss of run `rep` of `case` (None without
    /// `paired_loss`): its cell's `rep_base` added, so a confirmation's
    /// first run is the case's repetition 1, not 0 again.
    pub fn loss_seed_for(&self, case: &str, rep: u32) -> Option<u64> {
        let base = self
            .cells
            .iter()
            .find(|c| c.case == case)
            .map_or(0, |c| c.rep_base);
        self.grid.paired_loss.then(|| loss_seed(case, base + rep))
    }

    /// Does the (case, cc) pair run?  All pairs unless `cells` lists some.
    pub fn wants(&self, case: &str, cc: &str) -> bool {
        self.cells.is_empty()
            || self
                .cells
                .iter()
                .any(|c| c.case == case && c.ccs.iter().any(|x| x == cc))
    }

    /// The runs some `[[checks]]` threshold reads, as cells: every (case,
    /// cc) the scenario runs where a check applies to the case and names
    /// the cc as its controller or its reference.  `lab check` measures only
    /// these: the acceptance grid's bbr column and the cubic and ccpd runs
    /// of cells no ccpd or hetcp threshold covers are read by no threshold
    /// (219 of its 378 runs are), so measuring them changes no verdict.  A
    /// cell keeps the scenario's duration and repetitions for its case.
    pub fn judged_cells(&self) -> Vec<Cell> {
        let mut out = Vec::new();
        for case in self.cases() {
            let ccs: Vec<String> = self
                .ccs
                .iter()
                .filter(|cc| self.wants(&case.label, cc))
                .filter(|cc| {
                    self.checks.iter().any(|c| {
                        applies(&case, c) && (&c.cc == *cc || c.against.as_ref() == Some(*cc))
                    })
                })
                .cloned()
                .collect();
            if ccs.is_empty() {
                continue;
            }
            let given = self.cells.iter().find(|c| c.case == case.label);
            out.push(Cell {
                case: case.label.clone(),
                ccs,
                duration_s: given.and_then(|c| c.duration_s),
                repetitions: given.and_then(|c| c.repetitions),
                rep_base: 0,
            });
        }
        out
    }
}

#[derive(Clone, Debug)]
pub struct Case {
    pub label: String,
    /// The link; on a trace-driven case `link.rate_mbit` is the trace's
    /// nominal mean and `link.trace` is filled in when the run starts
    /// ([`Scenario::trace_link`]).
    pub link: LinkCfg,
    pub trace: Option<TraceSpec>,
    pub n_flows: u32,
    /// Buffer as a BDP fraction (0 when given in packets).
    pub buffer_bdp: f64,
    pub rtt_ms: f64,
    /// The `[[mixes]]` name ("" without mixes) and the flows of its runs.
    pub mix: String,
    pub flows: Vec<FlowSpec>,
}

impl Case {
    /// The run's flows in the order they start and are summarised: each
    /// `$cc` flow `n_flows` times, the others once.
    pub fn run_flows(&self) -> impl Iterator<Item = &FlowSpec> {
        self.flows.iter().flat_map(move |f| {
            let copies = if f.cc == "$cc" { self.n_flows } else { 1 };
            std::iter::repeat_n(f, copies as usize)
        })
    }

    /// Per run flow (`run_flows`): is it a flow of the control under test?
    /// In a mix of a controller with one of its own kind (reno + reno) the
    /// flows' cc names cannot tell.
    pub fn under_test(&self) -> Vec<bool> {
        self.run_flows().map(|f| f.cc == "$cc").collect()
    }
}

/// Is `case` within a check's filters (an empty list is every value)?
pub(crate) fn applies(case: &Case, c: &Check) -> bool {
    in_filter(case, &c.rate_mbit, &c.rtt_ms, &c.buffer_bdp, &c.loss)
        && (c.mix.is_empty() || c.mix.contains(&case.mix))
        && (c.trace.is_empty()
            || case
                .trace
                .as_ref()
                .is_some_and(|t| c.trace.contains(&t.name)))
}

pub(crate) fn in_filter(case: &Case, rate: &[f64], rtt: &[f64], bdp: &[f64], loss: &[f64]) -> bool {
    let within = |set: &[f64], v: f64| set.is_empty() || set.iter().any(|x| (x - v).abs() < 1e-9);
    within(rate, case.link.rate_mbit)
        && within(rtt, case.rtt_ms)
        && within(bdp, case.buffer_bdp)
        && within(loss, case.link.loss)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
                        n as f64
                            * (q.for_case(&c.label).duration_s + 1.5)
                            * q.reps_for(&c.label) as f64
                    })
                    .sum::<f64>();
                let limit = if q.checks.is_empty() { 120.0 } else { 600.0 };
                assert!(secs < limit, "{}: quick takes ~{secs:.0} s", p.display());
                assert!(!s.cases().is_empty());
                for other in &s.also {
                    let o = Scenario::load(&dir.join(format!("{other}.toml")))
                        .unwrap_or_else(|e| panic!("{}: also {other}: {e:#}", p.display()));
                    assert!(
                        !o.checks.is_empty(),
                        "{other}: `also` checks it, it has no checks"
                    );
                    assert!(o.also.is_empty(), "{other}: `also` nests one level only");
                }
                n += 1;
            }
        }
        assert!(n >= 4, "four papers' scenarios at least, found {n}");
    }

    /// A scenario of `ccs` (a TOML array), one flow per run, 10-s runs
    /// repeated `reps` times, then `rest` (cells, `[grid]`, `[quick]`,
    /// `[[checks]]`); not validated.
    pub(crate) fn scenario(ccs: &str, reps: u32, rest: &str) -> Scenario {
        toml::from_str(&format!(
            "title = \"t\"\npaper = \"p\"\ndescription = \"d\"\nccs = {ccs}\n\
             duration_s = 10\nrepetitions = {reps}\nflows = [{{ cc = \"$cc\" }}]\n{rest}"
        ))
        .unwrap()
    }

    /// A short-flow mix: its arrivals join the mix's flows as fixed-size
    /// arrivals, the same in every run of the case, their load of the
    /// case's rate; bad arrivals and slowdown checks are refused.
    #[test]
    fn a_short_flow_mix_expands_its_arrivals_and_checks_them() {
        let text = |arrivals: &str, check: &str| {
            format!(
                "[grid]\nrate_mbit = 40\nrtt_ms = [40]\nbuffer_bdp = [1]\n\
                 [[mixes]]\nname = \"web\"\nflows = [{{ cc = \"$cc\" }}]\n\
                 arrivals = {{ {arrivals} }}\n[quick]\n\
                 [[checks]]\ncc = \"ccpd\"\nagainst = \"cubic\"\n{check}why = \"w\"\n"
            )
        };
        let good = "load = 0.5, sizes = \"web_search\", seed = 1, from_s = 1";
        let check = "slowdown_ratio_max = 1.0\nslowdown_bin = \"small\"\nslowdown_q = 0.99\n";
        let s = scenario(r#"["ccpd", "cubic"]"#, 1, &text(good, check));
        s.validate().unwrap();
        let c = s.cases();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].label, "40ms_1bdp_web");
        let f: Vec<&FlowSpec> = c[0].run_flows().collect();
        // the long flow, then the arrivals: 0.5 x 40 Mbit/s over 9 s of
        // 1.67-MB flows is about 13
        assert!(!f[0].arrival && f[0].bytes.is_none());
        let a = &f[1..];
        assert!((5..30).contains(&a.len()), "{}", a.len());
        assert!(a
            .iter()
            .all(|x| x.arrival && x.bytes.is_some() && x.cc == "$cc"));
        assert!(a.iter().all(|x| (1.0..10.0).contains(&x.start_s)));
        let again = s.cases();
        assert!(again[0]
            .run_flows()
            .zip(c[0].run_flows())
            .all(|(x, y)| x.start_s == y.start_s && x.bytes == y.bytes));
        for (arr, chk, want) in [
            (
                "load = 1.5, sizes = \"web_search\", seed = 1",
                check,
                "load",
            ),
            ("load = 0.5, sizes = \"hadoop\", seed = 1", check, "hadoop"),
            (
                good,
                "slowdown_ratio_max = 1.0\nslowdown_bin = \"tiny\"\nslowdown_q = 0.99\n",
                "slowdown_bin",
            ),
            (
                good,
                "slowdown_ratio_max = 1.0\nslowdown_bin = \"small\"\nslowdown_q = 0.9\n",
                "slowdown_q",
            ),
        ] {
            let e = scenario(r#"["ccpd", "cubic"]"#, 1, &text(arr, chk))
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    /// `[[grid.traces]]`: cases per trace sized by its mean, files read
    /// and checked when the scenario is loaded (one error naming the file,
    /// before any run), synthetic links generated, checks filtered by
    /// trace name.
    #[test]
    fn trace_grids_load_check_and_label_their_cases() {
        let dir = std::env::temp_dir().join(format!("ccl-lab-tr-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("tr")).unwrap();
        // 2 opportunities a ms for 1 s: 24 Mbit/s.
        let two: String = (1..=1000).map(|t| format!("{t}\n{t}\n")).collect();
        std::fs::write(dir.join("tr/two.down"), &two).unwrap();
        std::fs::write(dir.join("tr/bad.down"), "1\n5\n4\n").unwrap();
        let text = |down: &str, mean: f64, offset: f64| {
            format!(
                r#"title = "t"
paper = "p"
description = "d"
ccs = ["ccpd", "bbr"]
duration_s = 10
repetitions = 1
flows = [{{ cc = "$cc" }}]
[grid]
rate_mbit = 20
rtt_ms = [40]
buffer_bdp = [1, 4]
[[grid.traces]]
name = "two"
down = "{down}"
mean_mbit = {mean}
offset_s = {offset}
[[grid.traces]]
name = "alt"
alternate = {{ rates_mbit = [24, 6], every_s = [1, 4], seed = 1 }}
[quick]
[[checks]]
cc = "ccpd"
against = "bbr"
trace = ["alt"]
goodput_ratio_min = 0.9
why = "w"
"#
            )
        };
        let load = |t: String| {
            let p = dir.join("s.toml");
            std::fs::write(&p, t).unwrap();
            Scenario::load(&p).map_err(|e| format!("{e:#}"))
        };
        let s = load(text("tr/two.down", 24.0, 0.5)).unwrap();
        let cases = s.cases();
        let labels: Vec<&str> = cases.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "two_40ms_1bdp",
                "two_40ms_4bdp",
                "alt_40ms_1bdp",
                "alt_40ms_4bdp"
            ]
        );
        // 24 Mbit/s x 40 ms = 80 packets; alt's nominal rate is 15.
        assert_eq!(cases[0].link.buffer_pkts, 80);
        assert_eq!(cases[2].link.buffer_pkts, 50);
        assert_eq!(cases[0].link.rate_mbit, 24.0);
        let tl = s.trace_link(&cases[1]).unwrap().unwrap();
        assert_eq!((tl.offset_ms, tl.buffer), (500, Limit::Packets(320)));
        assert!((tl.down.mean_mbit() - 24.0).abs() < 1e-9 && tl.up.is_none());
        let alt = s.trace_link(&cases[2]).unwrap().unwrap();
        assert!(
            (alt.down.mean_mbit() - 15.0).abs() < 2.0,
            "{}",
            alt.down.mean_mbit()
        );
        // The check applies to alt's cases only.
        let c = &s.checks[0];
        assert!(!applies(&cases[0], c) && applies(&cases[2], c));
        // The record of a run (no files) still has its cases.
        let rec: Scenario = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(rec.cases().len(), 4);

        // Bad files, means and offsets: one error each, naming the file.
        let e = load(text("tr/bad.down", 24.0, 0.0)).unwrap_err();
        assert!(e.contains("bad.down") && e.contains("line 3"), "{e}");
        let e = load(text("tr/none.down", 24.0, 0.0)).unwrap_err();
        assert!(e.contains("none.down"), "{e}");
        let e = load(text("tr/two.down", 12.0, 0.0)).unwrap_err();
        assert!(
            e.contains("24.00 Mbit/s") && e.contains("mean_mbit says 12"),
            "{e}"
        );
        let e = load(text("tr/two.down", 24.0, 2.0)).unwrap_err();
        assert!(e.contains("offset_s 2 is past the end"), "{e}");
        let e = load(text("tr/two.down", 24.0, 0.0).replace("name = \"alt\"", "name = \"two\""))
            .unwrap_err();
        assert!(e.contains("two traces named two"), "{e}");
        let e =
            load(text("tr/two.down", 24.0, 0.0).replace("trace = [\"alt\"]", "trace = [\"x\"]"))
                .unwrap_err();
        assert!(e.contains("no trace named x"), "{e}");

        // `[[grid.paths]]`: an RTT with its own buffer, not every pair.
        let paths = text("tr/two.down", 24.0, 0.0).replace(
            "rtt_ms = [40]\nbuffer_bdp = [1, 4]\n",
            "[[grid.paths]]\nrtt_ms = 40\nbuffer_pkts = 200\n\
             [[grid.paths]]\nrtt_ms = 80\nbuffer_bdp = 1\n",
        );
        let s = load(paths.clone()).unwrap();
        let cases = s.cases();
        let got: Vec<(&str, u32, f64)> = cases
            .iter()
            .map(|c| (c.label.as_str(), c.link.buffer_pkts, c.rtt_ms))
            .collect();
        // 1 BDP at 80 ms: 160 packets of the 24-Mbit/s trace, 100 of alt's 15.
        assert_eq!(
            got,
            [
                ("two_40ms_200p", 200, 40.0),
                ("two_80ms_1bdp", 160, 80.0),
                ("alt_40ms_200p", 200, 40.0),
                ("alt_80ms_1bdp", 100, 80.0)
            ]
        );
        let e = load(paths.replace("buffer_pkts = 200", "buffer_pkts = 200\nbuffer_bdp = 4"))
            .unwrap_err();
        assert!(e.contains("exactly one of buffer_bdp, buffer_pkts"), "{e}");
        let e = load(paths.replace("[grid]\n", "[grid]\nrtt_ms = [20]\n")).unwrap_err();
        assert!(e.contains("[[grid.paths]] replaces rtt_ms"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
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
        let s = scenario(
            r#"["reno", "ctcp_plus:plus=0"]"#,
            1,
            r#"[grid]
rate_mbit = 100
rtt_ms = [80]
buffer_bdp = [0.125, 1]
[quick]
"#,
        );
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

    /// A veth grid: past the delay line's rates (0 = unlimited), the hosts'
    /// RTT, a case per offload setting; and what a veth link cannot do is
    /// refused, as are rates past the delay line's without one.
    #[test]
    fn a_veth_grid_runs_past_the_delay_line_and_refuses_delays() {
        let s = scenario(
            r#"["ccpd", "cubic"]"#,
            1,
            "[grid]\nveth = true\nrate_mbit = 0\nrates_mbit = [0, 1000]\nrtt_ms = [0]\n\
             buffer_pkts = [500]\noffloads = [false, true]\n[quick]\n",
        );
        s.validate().unwrap();
        let c = s.cases();
        let labels: Vec<&str> = c.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "unlim_veth_500p",
                "unlim_veth_500p_offl",
                "1000M_veth_500p",
                "1000M_veth_500p_offl"
            ]
        );
        assert!(c.iter().all(|c| c.link.veth && c.link.delay_ms == 0.0));
        assert_eq!(
            c.iter().map(|c| c.link.offloads).collect::<Vec<_>>(),
            [false, true, false, true]
        );
        for (grid, what) in [
            (
                "veth = true\nrate_mbit = 0\nrtt_ms = [1]\nbuffer_pkts = [500]",
                "rtt_ms = [0]",
            ),
            (
                "veth = true\nrate_mbit = 0\nrtt_ms = [0]\nbuffer_bdp = [1]",
                "buffer_pkts",
            ),
            (
                "veth = true\nrate_mbit = 200000\nrtt_ms = [0]\nbuffer_pkts = [5]",
                "veth link's rates",
            ),
            (
                "rate_mbit = 1000\nrtt_ms = [1]\nbuffer_bdp = [1]",
                "delay line is measured",
            ),
            (
                "rate_mbit = 0\nrtt_ms = [1]\nbuffer_bdp = [1]",
                "delay line is measured",
            ),
            (
                "rate_mbit = 100\nrtt_ms = [1]\nbuffer_bdp = [1]\noffloads = [true]",
                "needs a veth link",
            ),
        ] {
            let s = scenario(r#"["cubic"]"#, 1, &format!("[grid]\n{grid}\n[quick]\n"));
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains(what), "{grid}: {e}");
        }
    }

    /// paired_loss: one seed per (case, repetition), shared by the CCs;
    /// unset, it is not serialised (recorded grids keep their identity).
    #[test]
    fn paired_loss_seeds_each_case_and_repetition() {
        let text = |extra: &str| {
            scenario(
                r#"["ub_reno", "reno"]"#,
                2,
                &format!(
                    "[grid]\nrate_mbit = 100\nrtt_ms = [190]\nloss = [1e-4]\n{extra}[quick]\n"
                ),
            )
        };
        let plain = text("");
        assert!(!plain.grid.paired_loss);
        assert!(plain.runs_identity()["grid"].get("paired_loss").is_none());
        let paired = text("paired_loss = true\n");
        assert!(paired.grid.paired_loss);
        assert_ne!(plain.runs_identity(), paired.runs_identity());
        let a = loss_seed("100M_190ms_1bdp_loss1e-4", 0);
        assert_eq!(a, loss_seed("100M_190ms_1bdp_loss1e-4", 0));
        assert_ne!(a, loss_seed("100M_190ms_1bdp_loss1e-4", 1));
        assert_ne!(a, loss_seed("100M_190ms_0.5bdp_loss1e-4", 0));
        // The runs' seeds: none without paired_loss; a confirming cell's
        // first run (rep_base 1) is repetition 1, not the grid's 0 again.
        let case = "100M_190ms_1bdp_loss1e-4";
        assert_eq!(plain.loss_seed_for(case, 0), None);
        assert_eq!(paired.loss_seed_for(case, 0), Some(a));
        let mut confirming = paired.clone();
        confirming.cells = vec![Cell {
            case: case.into(),
            ccs: vec!["ub_reno".into(), "reno".into()],
            duration_s: None,
            repetitions: Some(2),
            rep_base: 1,
        }];
        assert_eq!(confirming.loss_seed_for(case, 0), Some(loss_seed(case, 1)));
        assert_eq!(confirming.loss_seed_for(case, 1), Some(loss_seed(case, 2)));
        // rep_base is the check's, never read from or written to a file
        let text = toml::to_string(&confirming.cells[0]).unwrap();
        assert!(!text.contains("rep_base"), "{text}");
    }

    #[test]
    fn a_cell_runs_its_own_repetitions() {
        let text = |cells: &str| {
            scenario(
                r#"["reno", "cubic"]"#,
                2,
                &format!("{cells}\n[grid]\nrate_mbit = 20\nrtt_ms = [10, 80]\nbuffer_bdp = [1]\n[quick]\n"),
            )
        };
        let plain = text(r#"cells = [{ case = "10ms_1bdp", ccs = ["reno"] }]"#);
        plain.validate().unwrap();
        assert_eq!(plain.reps_for("10ms_1bdp"), 2);
        // Unset, the field is not serialised: directories recorded before
        // it existed still resume (their runs' identity is unchanged).
        let id = plain.runs_identity();
        assert!(id["cells"][0].get("repetitions").is_none(), "{id}");
        let more = text(
            r#"cells = [{ case = "10ms_1bdp", ccs = ["reno"], repetitions = 5 },
                       { case = "80ms_1bdp", ccs = ["cubic"] }]"#,
        );
        more.validate().unwrap();
        assert_eq!(more.reps_for("10ms_1bdp"), 5);
        assert_eq!(more.reps_for("80ms_1bdp"), 2);
        let zero = text(r#"cells = [{ case = "10ms_1bdp", ccs = ["reno"], repetitions = 0 }]"#);
        let e = zero.validate().unwrap_err().to_string();
        assert!(e.contains("repetitions >= 1"), "{e}");
    }

    /// A resumption compares the runs of the variant it makes: a full
    /// check's finished runs stand when only the quick variant changed, and
    /// a quick check's do not when its quick runs changed.
    #[test]
    fn the_quick_variant_is_not_part_of_the_full_runs_identity() {
        let with = |quick: &str| {
            scenario(
                r#"["reno"]"#,
                1,
                &format!(
                    "[grid]\nrate_mbit = 20\nrtt_ms = [10]\nbuffer_bdp = [1]\n[quick]\n{quick}"
                ),
            )
        };
        let (a, b) = (with("duration_s = 20"), with("duration_s = 30"));
        assert_eq!(a.runs_identity(), b.runs_identity());
        assert_ne!(a.quick().runs_identity(), b.quick().runs_identity());
        assert_ne!(a.runs_identity(), a.quick().runs_identity());
    }

    /// `sender`: the scenario's default for its flows, a flow's own
    /// choice over it, the lab's for a mix's arrivals; `lab` is absent
    /// from a run's identity (runs recorded before the field stand) and
    /// `iperf3` is in it; an unknown sender is refused.
    #[test]
    fn a_flow_runs_on_the_sender_it_or_its_scenario_chose() {
        let grid = "[grid]\nrate_mbit = 20\nrtt_ms = [10]\nbuffer_bdp = [1]\n[quick]\n";
        let with = |top: &str| -> Result<Scenario, toml::de::Error> {
            toml::from_str(&format!(
                "title = \"t\"\npaper = \"p\"\ndescription = \"d\"\nccs = [\"reno\"]\n\
                 duration_s = 10\nrepetitions = 1\n{top}\n{grid}"
            ))
        };
        let plain = with(r#"flows = [{ cc = "$cc" }]"#).unwrap();
        let iperf = with(
            r#"sender = "iperf3"
flows = [{ cc = "$cc" }, { cc = "cubic", sender = "lab" }]"#,
        )
        .unwrap();
        assert_eq!(plain.sender, Sender::Lab);
        let c = iperf.cases();
        let chosen: Vec<Sender> = c[0]
            .run_flows()
            .map(|f| f.sender.unwrap_or(iperf.sender))
            .collect();
        assert_eq!(chosen, [Sender::Iperf3, Sender::Lab]);
        assert!(plain.runs_identity().get("sender").is_none());
        assert_eq!(iperf.runs_identity()["sender"], "iperf3");
        assert_ne!(
            plain.runs_identity(),
            with(
                r#"sender = "iperf3"
flows = [{ cc = "$cc" }]"#
            )
            .unwrap()
            .runs_identity()
        );
        let e = with(
            r#"sender = "netperf"
flows = [{ cc = "$cc" }]"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("netperf") && e.contains("iperf3"), "{e}");
        let mixed = with(
            r#"flows = []
mixes = [{ name = "web", flows = [{ cc = "$cc" }], arrivals = { load = 0.5, sizes = "web_search", seed = 1, from_s = 1 } }]
sender = "iperf3""#,
        )
        .unwrap();
        let mc = mixed.cases();
        let f: Vec<&FlowSpec> = mc[0].run_flows().collect();
        assert!(f[0].sender.is_none() && f.len() > 1);
        assert!(f[1..]
            .iter()
            .all(|x| x.arrival && x.sender == Some(Sender::Lab)));
        // the quick variant may choose its own
        let q: Scenario = toml::from_str(
            &toml::to_string(&iperf)
                .unwrap()
                .replace("[quick]\n", "[quick]\nsender = \"lab\"\n"),
        )
        .unwrap();
        assert_eq!((q.sender, q.quick().sender), (Sender::Iperf3, Sender::Lab));
        assert_eq!(iperf.quick().sender, Sender::Iperf3);
        let sized = with(
            r#"sender = "iperf3"
flows = [{ cc = "$cc", bytes = 1000000 }]"#,
        )
        .unwrap();
        let e = sized.validate().unwrap_err().to_string();
        assert!(e.contains("iperf3 flows are timed"), "{e}");
        assert!(iperf.validate().is_ok());
    }
}
