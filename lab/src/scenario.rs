//! Scenarios: a TOML file in `configs/lab/` describing a grid of link
//! settings x congestion controls x repetitions, the paper's numbers to
//! compare with, and the `[[checks]]` thresholds `lab check` enforces.
//!
//! Size: over 400 lines because the schema, its validation, the grid
//! expansion and the check evaluator must agree field by field; about a
//! sixth is its tests.

use serde::{Deserialize, Serialize};

use ccload_testbed::link::LinkCfg;

use crate::summary::RunSummary;

/// The kernel congestion controls a scenario may name beside ours.
pub const KERNEL_CCS: [&str; 3] = ["reno", "cubic", "bbr"];

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
    /// Several flow sets, each a grid dimension of its own (cases are
    /// labelled `..._<name>`); when given, they replace `flows`.  Absent
    /// from the serialised scenario when empty, so a scenario written before
    /// the field existed keeps its runs' identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mixes: Vec<Mix>,
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
    /// absolute: utilisation(cc) >= x
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
    /// absolute: the goodput of the run's flows of `cc` over the link's
    /// payload capacity >= x
    pub share_min: Option<f64>,
    /// share(cc) >= x * share(against) in the same case, where `against` is
    /// the control under test of the reference run (e.g. what reno keeps
    /// against cubic, in the mix `$cc` + cubic)
    pub share_ratio_min: Option<f64>,
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
    /// case until each has this many runs, and the mean over all of them
    /// (the failing one included) is judged.  In a check without
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
    /// What the threshold stands for (ALGORITHMS 6.x "what must hold").
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
    /// Runs of `cc` in the case whose mean `value` is.
    pub runs: usize,
    /// The check's `confirm_reps` (a failing comparison is measured again).
    #[serde(skip)]
    pub confirm_reps: u32,
    /// A comparison on two or more repetitions of both CCs: the paired
    /// test that judged it ([`Paired`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
}

/// A comparison judged on repetitions: per repetition run by both CCs (the
/// same seeded loss, minutes apart), the margin by which `cc` keeps within
/// the bound (goodput: a - x b; retransmissions: x b + slack - a; >= 0 is
/// within), and the one-sided 95 % upper confidence bound of its mean
/// (Student's t on n - 1 degrees of freedom).  The comparison fails only
/// when that bound is below 0: the runs show `cc` beyond the bound, not a
/// mean that noise put there.  Measured: on the 2-packet buffer one run's
/// goodput moves 11-12 % (nine runs of reno: 3.86-5.33 Mbit/s), and at
/// 100 Mbit/s, 80 ms, BDP/8 a 40-s run never outgrows the window its slow
/// start left (126-243 segments) or a later host-made loss: the kernel's
/// reno against itself under a second label read 0.870x over six paired
/// repetitions (46-72 Mbit/s against 51-72), which the mean would fail
/// and this test passes (margin -5.3, bound +2.3; docs/results.md 3q).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Paired {
    /// Repetitions with a run of both CCs.
    pub n: usize,
    /// Mean margin, in the metric's units.
    pub margin: f64,
    /// Its one-sided 95 % upper bound.
    pub upper: f64,
}

/// One-sided 95 % quantile of Student's t with `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
        1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
        1.703, 1.701, 1.699, 1.697,
    ];
    match df {
        0 => f64::INFINITY,
        d => T.get(d - 1).copied().unwrap_or(1.645),
    }
}

impl Paired {
    /// The test on per-repetition margins; None below two.
    pub fn of(margins: &[f64]) -> Option<Paired> {
        let n = margins.len();
        if n < 2 {
            return None;
        }
        let mean = margins.iter().sum::<f64>() / n as f64;
        let var = margins.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Some(Paired {
            n,
            margin: mean,
            upper: mean + t95(n - 1) * (var / n as f64).sqrt(),
        })
    }

    /// Within the bound unless the runs show otherwise (a NaN margin,
    /// a run without the metric, fails).
    pub fn pass(&self) -> bool {
        self.upper >= 0.0
    }
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
}

/// A named set of flows sharing the bottleneck (`[[mixes]]`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    pub name: String,
    pub flows: Vec<FlowSpec>,
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
        }
        for c in &self.checks {
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
                let mixes = if self.mixes.is_empty() {
                    vec![Mix {
                        name: String::new(),
                        flows: self.flows.clone(),
                    }]
                } else {
                    self.mixes.clone()
                };
                for ((blabel, bpkts, k), &offl) in bufs
                    .iter()
                    .flat_map(|b| offloads.iter().map(move |o| (b, o)))
                {
                    for &loss in &g.loss {
                        for &n in &g.n_flows {
                            for Mix { name: mix, flows } in &mixes {
                                let mut label = match (g.rates_mbit.is_empty(), rate == 0.0) {
                                    (true, _) => String::new(),
                                    (false, true) => "unlim_".to_string(),
                                    (false, false) => format!("{rate}M_"),
                                };
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
                                        buffer_pkts: *bpkts as u32,
                                        loss,
                                        loss_seed: None,
                                        mtu: g.mtu,
                                        delay_ms: base_rtt(flows, rtt) / 2.0,
                                        rev_delay_ms: None,
                                        extra_delay_ms: extra_delays(flows, rtt),
                                        veth: g.veth,
                                        offloads: offl,
                                    },
                                    n_flows: n,
                                    buffer_bdp: *k,
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

    /// Evaluate `checks` on finished runs (mean over repetitions per case
    /// and cc).  Cases with no run of `cc` or `against` are skipped.  A
    /// comparison on one run of `cc` is judged on the means; on two or more
    /// repetitions of both CCs, by the paired test ([`Paired`]).
    pub fn evaluate(&self, runs: &[RunSummary]) -> Vec<CheckOutcome> {
        let of = |case: &str, cc: &str| -> Vec<&RunSummary> {
            runs.iter()
                .filter(|r| r.case == case && r.cc == cc)
                .collect()
        };
        let mean = |v: &[&RunSummary], f: &dyn Fn(&RunSummary) -> f64| -> Option<f64> {
            (!v.is_empty()).then(|| v.iter().map(|r| f(r)).sum::<f64>() / v.len() as f64)
        };
        let mut out = Vec::new();
        for case in self.cases() {
            let here = |rate: &[f64], rtt: &[f64], bdp: &[f64], loss: &[f64]| {
                in_filter(&case, rate, rtt, bdp, loss)
            };
            for c in &self.checks {
                if !applies(&case, c) {
                    continue;
                }
                let confirm_reps = c
                    .confirm_reps_in
                    .iter()
                    .find(|w| here(&w.rate_mbit, &w.rtt_ms, &w.buffer_bdp, &w.loss))
                    .map_or(c.confirm_reps, |w| w.confirm_reps);
                let mine = of(&case.label, &c.cc);
                let theirs = c
                    .against
                    .as_ref()
                    .map(|a| of(&case.label, a))
                    .unwrap_or_default();
                let me = |f: &dyn Fn(&RunSummary) -> f64| mean(&mine, f);
                let other = |f: &dyn Fn(&RunSummary) -> f64| mean(&theirs, f);
                let against = c.against.clone().unwrap_or_default();
                let n_runs = mine.len();
                // What a miss is confirmed on: a comparison's confirm_reps;
                // an absolute floor's only in a check without `against`
                // (set below around the floors), judged on the mean of all
                // the runs.
                let confirm =
                    std::cell::Cell::new(if c.against.is_some() { confirm_reps } else { 0 });
                // A comparison's verdict: on one run of `cc`, the means
                // against the bound; on repetitions of both, the paired test
                // on `margin(a, b)` (>= 0: within) per shared repetition.
                // `b` is the reference's mean, `other(f)`, which the caller
                // has in hand.
                let compare = |f: &dyn Fn(&RunSummary) -> f64,
                               b: f64,
                               margin: &dyn Fn(f64, f64) -> f64|
                 -> (Option<f64>, Option<Paired>, bool) {
                    let Some(a) = me(f) else {
                        return (None, None, false);
                    };
                    let margins: Vec<f64> = mine
                        .iter()
                        .filter_map(|x| {
                            let y = theirs.iter().find(|y| y.rep == x.rep)?;
                            Some(margin(f(x), f(y)))
                        })
                        .collect();
                    // one run of `cc` pairs at most once: Paired::of is None
                    let paired = Paired::of(&margins);
                    let pass = paired.map_or(margin(a, b) >= 0.0, |p| p.pass());
                    (Some(a), paired, pass)
                };
                let mut push = |metric,
                                value: Option<f64>,
                                reference: f64,
                                bound: String,
                                paired: Option<Paired>,
                                pass: bool| {
                    if let Some(v) = value {
                        out.push(CheckOutcome {
                            case: case.label.clone(),
                            cc: c.cc.clone(),
                            against: against.clone(),
                            metric,
                            value: v,
                            reference,
                            bound,
                            pass,
                            why: c.why.clone(),
                            runs: n_runs,
                            confirm_reps: confirm.get(),
                            paired,
                        });
                    }
                };
                let good = |r: &RunSummary| r.goodput_mbit;
                // after the warm-up: a run without the count fails (NaN)
                let warm = c.retrans_after_warmup;
                let retx = |r: &RunSummary| {
                    if warm {
                        r.retrans_warm.map_or(f64::NAN, f64::from)
                    } else {
                        r.retransmits as f64
                    }
                };
                let (retx_name, per_seg_name) = if warm {
                    ("retransmits_after_warmup", "retrans_per_seg_after_warmup")
                } else {
                    ("retransmits", "retrans_per_seg")
                };
                let infl = |r: &RunSummary| (r.rtt_p95_ms - r.rtt_base_ms).max(0.0);
                if let (Some(x), Some(o)) = (c.goodput_ratio_min, other(&good)) {
                    let (v, p, pass) = compare(&good, o, &|a, b| a - x * b);
                    push("goodput_mbit", v, o, format!(">= {x} x {o:.2}"), p, pass);
                }
                if let (Some(x), Some(o)) = (c.retrans_ratio_max, other(&retx)) {
                    let s = c.retrans_slack;
                    let (v, p, pass) = compare(&retx, o, &|a, b| x * b + s - a);
                    push(retx_name, v, o, format!("<= {x} x {o:.0} + {s}"), p, pass);
                }
                let per_seg = |r: &RunSummary| {
                    if warm {
                        r.retrans_per_seg_warm.unwrap_or(f64::NAN)
                    } else {
                        r.retrans_per_seg
                    }
                };
                if let (Some(x), Some(o)) = (c.retrans_per_seg_ratio_max, other(&per_seg)) {
                    let s = c.retrans_per_seg_slack;
                    let (v, p, pass) = compare(&per_seg, o, &|a, b| x * b + s - a);
                    push(
                        per_seg_name,
                        v,
                        o,
                        format!("<= {x} x {o:.5} + {s}"),
                        p,
                        pass,
                    );
                }
                if let (Some(x), Some(o)) = (c.rtt_inflation_ratio_max, other(&infl)) {
                    // a reference that adds no delay leaves 1 ms of room
                    let (v, p, pass) = compare(&infl, o, &|a, b| (x * b).max(1.0) - a);
                    push(
                        "rtt_p95_inflation_ms",
                        v,
                        o,
                        format!("<= max({x} x {o:.1}, 1)"),
                        p,
                        pass,
                    );
                }
                // absolute floors on one of the run's own values
                let compared = confirm.replace(if c.against.is_some() { 0 } else { confirm_reps });
                let share = |r: &RunSummary| r.share_of(&parse_cc(&r.cc).0);
                let floors: [(&'static str, Option<f64>, &Metric); 4] = [
                    ("utilisation", c.utilisation_min, &|r| r.utilisation),
                    ("jain", c.jain_min, &|r| r.jain),
                    ("jain_bins", c.jain_bins_min, &|r| r.jain_bins),
                    ("share", c.share_min, &share),
                ];
                for (metric, min, f) in floors {
                    if let Some(x) = min {
                        let v = me(f);
                        push(
                            metric,
                            v,
                            0.0,
                            format!(">= {x}"),
                            None,
                            v.is_some_and(|v| v >= x),
                        );
                    }
                }
                // a late flow that never gets its share: infinitely slow
                let late = |r: &RunSummary| r.late_fair_s.unwrap_or(f64::INFINITY);
                if let Some(x) = c.late_fair_max_s {
                    let v = me(&late);
                    push(
                        "late_fair_s",
                        v,
                        0.0,
                        format!("<= {x}"),
                        None,
                        v.is_some_and(|v| v <= x),
                    );
                }
                if let Some(x) = c.peer_retrans_ratio_max {
                    let s = c.retrans_slack;
                    let split = |r: &RunSummary| {
                        let name = parse_cc(&r.cc).0;
                        r.flows.iter().fold((0.0, 0.0), |(m, o), f| {
                            if f.cc == name {
                                (m + f.retransmits as f64, o)
                            } else {
                                (m, o + f.retransmits as f64)
                            }
                        })
                    };
                    let v = me(&|r| split(r).0);
                    let o = me(&|r| split(r).1).unwrap_or(0.0);
                    push(
                        "retransmits_vs_peers",
                        v,
                        o,
                        format!("<= {x} x {o:.0} + {s}"),
                        None,
                        v.is_some_and(|v| v <= x * o + s),
                    );
                }
                confirm.set(compared);
                if let (Some(x), Some(o)) = (c.share_ratio_min, other(&share)) {
                    let (v, p, pass) = compare(&share, o, &|a, b| a - x * b);
                    push("share", v, o, format!(">= {x} x {o:.3}"), p, pass);
                }
                if let (Some(x), Some(o)) = (c.late_fair_ratio_max, other(&late)) {
                    let s = c.late_fair_slack_s;
                    let (v, p, pass) = compare(&late, o, &|a, b| x * b + s - a);
                    push(
                        "late_fair_s",
                        v,
                        o,
                        format!("<= {x} x {o:.1} + {s}"),
                        p,
                        pass,
                    );
                }
                let long = |r: &RunSummary| r.long_rtt_share().unwrap_or(f64::NAN);
                if let (Some(x), Some(o)) = (c.long_rtt_share_ratio_min, other(&long)) {
                    let (v, p, pass) = compare(&long, o, &|a, b| a - x * b);
                    push("long_rtt_share", v, o, format!(">= {x} x {o:.3}"), p, pass);
                }
                if let Some(x) = c.recovery_share_max {
                    let v = me(&|r| r.recovery_share);
                    push(
                        "recovery_share",
                        v,
                        0.0,
                        format!("<= {x}"),
                        None,
                        v.is_some_and(|v| v <= x),
                    );
                }
                if let Some(x) = c.retrans_per_seg_loss_max {
                    let v = me(&|r| r.retrans_per_seg);
                    let loss = case.link.loss;
                    push(
                        "retrans_per_seg",
                        v,
                        loss,
                        format!("<= {x} x loss {loss:e}"),
                        None,
                        v.is_some_and(|v| v <= x * loss),
                    );
                }
            }
            // Every checked controller, in every case a check reads it: no
            // run's window beyond what any law could want (summary::
            // window_bound).  The largest of its runs, not the mean: one
            // wild window is a fault however the other runs went.
            use crate::summary::{window_bound, WINDOW_BOUND_MIN, WINDOW_BOUND_X, WINDOW_METRIC};
            let storage = case.link.bdp_pkts() + case.link.buffer_pkts as f64;
            let bound = window_bound(storage);
            let mut seen: Vec<&str> = Vec::new();
            for c in &self.checks {
                if seen.contains(&c.cc.as_str()) || !applies(&case, c) {
                    continue;
                }
                seen.push(&c.cc);
                let mine = of(&case.label, &c.cc);
                let Some(w) = mine.iter().filter_map(|r| r.cwnd_max).max() else {
                    continue;
                };
                out.push(CheckOutcome {
                    case: case.label.clone(),
                    cc: c.cc.clone(),
                    against: String::new(),
                    metric: WINDOW_METRIC,
                    value: w as f64,
                    reference: 0.0,
                    bound: format!(
                        "<= {bound} ({WINDOW_BOUND_X} x {storage:.0} stored, >= {WINDOW_BOUND_MIN})"
                    ),
                    pass: w <= bound,
                    why: format!(
                        "a sane window: no run beyond {WINDOW_BOUND_X} times what the path stores"
                    ),
                    runs: mine.len(),
                    confirm_reps: 0,
                    paired: None,
                });
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
    /// The `[[mixes]]` name ("" without mixes) and the flows of its runs.
    pub mix: String,
    pub flows: Vec<FlowSpec>,
}

/// One value read from a run, as the checks compare it.
type Metric<'a> = dyn Fn(&RunSummary) -> f64 + 'a;

/// Is `case` within a check's filters (an empty list is every value)?
fn applies(case: &Case, c: &Check) -> bool {
    in_filter(case, &c.rate_mbit, &c.rtt_ms, &c.buffer_bdp, &c.loss)
        && (c.mix.is_empty() || c.mix.contains(&case.mix))
}

fn in_filter(case: &Case, rate: &[f64], rtt: &[f64], bdp: &[f64], loss: &[f64]) -> bool {
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
mod tests {
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

    /// `judged_cells` keeps the pairs a threshold reads, and only those: on
    /// the shipped acceptance grid every outcome is the same whether every
    /// (case, cc) ran or only the judged ones, and a skipped pair is read by
    /// no check (the verdict cannot depend on it).
    #[test]
    fn a_check_measures_only_the_runs_its_thresholds_read() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/lab");
        let s = Scenario::load(&dir.join("acceptance.toml")).unwrap();
        let judged = s.judged_cells();
        let n: usize = judged.iter().map(|c| c.ccs.len()).sum();
        let all = s.cases().len() * s.ccs.len();
        assert_eq!((all, n), (378, 219));
        assert!(judged.iter().all(|c| !c.ccs.iter().any(|x| x == "bbr")));
        // Every pair with its own made-up numbers (distinct per pair, so a
        // mixed-up lookup shows).
        let mut runs = Vec::new();
        for (i, case) in s.cases().iter().enumerate() {
            for (j, cc) in s.ccs.iter().enumerate() {
                let x = (i * 7 + j * 3) as f64;
                runs.push(RunSummary {
                    case: case.label.clone(),
                    cc: cc.clone(),
                    goodput_mbit: 10.0 + x,
                    utilisation: 0.5 + (x % 10.0) / 20.0,
                    retransmits: (x * 11.0) as u32,
                    retrans_per_seg: x / 1e4,
                    retrans_warm: Some(x as u32),
                    retrans_per_seg_warm: Some(x / 2e4),
                    rtt_p95_ms: case.rtt_ms + x,
                    rtt_base_ms: case.rtt_ms,
                    recovery_share: (x % 5.0) / 10.0,
                    ..Default::default()
                });
            }
        }
        let kept: Vec<RunSummary> = runs
            .iter()
            .filter(|r| {
                judged
                    .iter()
                    .any(|c| c.case == r.case && c.ccs.contains(&r.cc))
            })
            .cloned()
            .collect();
        assert_eq!(kept.len(), 219);
        let key = |o: &CheckOutcome| {
            format!(
                "{} {} {} {} {} {} {}",
                o.case, o.cc, o.against, o.metric, o.value, o.reference, o.pass
            )
        };
        let a: Vec<String> = s.evaluate(&runs).iter().map(key).collect();
        let b: Vec<String> = s.evaluate(&kept).iter().map(key).collect();
        assert!(!a.is_empty() && a.iter().any(|k| k.ends_with("false")));
        assert_eq!(a, b);
        // The quick variant's cells are all judged already.
        let q = s.quick();
        let qn: usize = q.judged_cells().iter().map(|c| c.ccs.len()).sum();
        let qall: usize = q.cells.iter().map(|c| c.ccs.len()).sum();
        assert_eq!(qn, qall);
        // A cell keeps its own duration.
        assert!(q
            .judged_cells()
            .iter()
            .any(|c| c.case == "100M_190ms_1bdp_loss1e-4" && c.duration_s == Some(40.0)));
    }

    /// A scenario of `ccs` (a TOML array), one flow per run, 10-s runs
    /// repeated `reps` times, then `rest` (cells, `[grid]`, `[quick]`,
    /// `[[checks]]`); not validated.
    fn scenario(ccs: &str, reps: u32, rest: &str) -> Scenario {
        toml::from_str(&format!(
            "title = \"t\"\npaper = \"p\"\ndescription = \"d\"\nccs = {ccs}\n\
             duration_s = 10\nrepetitions = {reps}\nflows = [{{ cc = \"$cc\" }}]\n{rest}"
        ))
        .unwrap()
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

    /// One run each is a point comparison; a confirmed comparison is judged
    /// per repetition (`Paired`): two copies of one law whose runs scatter
    /// (the 100M/80ms/BDP8 cell's slow-start exits) pass although the mean
    /// of three is 0.91x, and a controller below the bound in every
    /// repetition fails.
    #[test]
    fn a_confirmed_comparison_fails_only_when_its_runs_show_it() {
        let s = scenario(
            r#"["ctcp_plus", "reno"]"#,
            1,
            r#"[grid]
rate_mbit = 100
rtt_ms = [80]
buffer_bdp = [0.125]
[quick]
[[checks]]
cc = "ctcp_plus"
against = "reno"
goodput_ratio_min = 0.95
retrans_ratio_max = 2.0
retrans_slack = 20
confirm_reps = 3
why = "no harm"
[[checks]]
cc = "ctcp_plus"
utilisation_min = 0.5
confirm_reps = 3
why = "absolute"
"#,
        );
        let case = s.cases()[0].label.clone();
        let run = |cc: &str, rep: u32, g: f64| RunSummary {
            case: case.clone(),
            cc: cc.into(),
            rep,
            goodput_mbit: g,
            utilisation: g / 100.0,
            retransmits: 160,
            ..Default::default()
        };
        // One run each: 66 against 70 is 0.94x, a miss to confirm; 67 passes.
        let o = s.evaluate(&[run("ctcp_plus", 0, 66.0), run("reno", 0, 70.0)]);
        assert_eq!(o.len(), 3);
        assert!(!o[0].pass && o[0].runs == 1 && o[0].confirm_reps == 3);
        assert!(o[0].paired.is_none());
        let o = s.evaluate(&[run("ctcp_plus", 0, 67.0), run("reno", 0, 70.0)]);
        assert!(o[0].pass);
        // An absolute floor of a check without `against` is confirmed too,
        // on the mean of the CC's runs (a share against one reno: a Reno
        // pair's split in one 40-s run is the luck of its first losses).
        let o = s.evaluate(&[run("ctcp_plus", 0, 40.0), run("reno", 0, 70.0)]);
        assert!(!o[2].pass && o[2].confirm_reps == 3 && o[2].metric == "utilisation");
        let o = s.evaluate(&[
            run("ctcp_plus", 0, 40.0),
            run("ctcp_plus", 1, 70.0),
            run("ctcp_plus", 2, 60.0),
        ]);
        let u = o.iter().find(|o| o.metric == "utilisation").unwrap();
        assert!(
            u.pass && u.runs == 3 && (u.value - 0.5667).abs() < 1e-3,
            "{u:?}"
        );
        let o = s.evaluate(&[
            run("ctcp_plus", 0, 40.0),
            run("ctcp_plus", 1, 50.0),
            run("ctcp_plus", 2, 55.0),
        ]);
        assert!(!o.iter().find(|o| o.metric == "utilisation").unwrap().pass);
        let judge = |a: [f64; 3], b: [f64; 3]| {
            let mut runs = Vec::new();
            for i in 0..3 {
                runs.push(run("ctcp_plus", i as u32, a[i]));
                runs.push(run("reno", i as u32, b[i]));
            }
            s.evaluate(&runs).remove(0)
        };
        // Scatter: the means are 0.907x, the margins -23.4, +23.6, -8.5.
        let o = judge([45.0, 72.0, 58.0], [72.0, 51.0, 70.0]);
        let p = o.paired.expect("three repetitions of each are paired");
        assert_eq!((p.n, o.runs), (3, 3));
        assert!(o.value < 0.95 * o.reference, "{o:?}");
        assert!(
            (p.margin - (175.0 - 0.95 * 193.0) / 3.0).abs() < 1e-9,
            "{p:?}"
        );
        assert!(p.margin < 0.0 && p.upper > 0.0 && o.pass, "{o:?}");
        // Consistent harm: 0.58x in every repetition.
        let o = judge([40.0, 42.0, 41.0], [70.0, 71.0, 72.0]);
        assert!(!o.pass && o.paired.unwrap().upper < 0.0, "{o:?}");
        // Only repetitions run by both are paired: reno's extra ones count
        // in its mean, not in the test.
        let mut runs = vec![run("ctcp_plus", 0, 40.0), run("ctcp_plus", 1, 41.0)];
        runs.extend((0..5).map(|i| run("reno", i, 70.0)));
        let o = s.evaluate(&runs);
        assert_eq!((o[0].paired.unwrap().n, o[0].runs), (2, 2));
        assert!(!o[0].pass);
        // The retransmission comparison uses the same test: margins
        // 2 x 160 + 20 - 160.
        assert_eq!(o[1].metric, "retransmits");
        assert!(o[1].pass && (o[1].paired.unwrap().margin - 180.0).abs() < 1e-9);
        assert_eq!((t95(1), t95(8), t95(100)), (6.314, 1.860, 1.645));
        assert_eq!(t95(0), f64::INFINITY);
    }

    /// Every checked controller gets a window bound in every case a check
    /// reads it, judged on the largest window of any of its runs: the run
    /// that showed 1,896,535,746 segments fails however its goodput read.
    #[test]
    fn a_wild_window_fails_the_check() {
        let s = scenario(
            r#"["ctcp_plus", "reno"]"#,
            1,
            r#"[grid]
rate_mbit = 20
rtt_ms = [10]
buffer_bdp = [0.125]
[quick]
[[checks]]
cc = "ctcp_plus"
against = "reno"
goodput_ratio_min = 0.95
why = "no harm"
[[checks]]
cc = "ctcp_plus"
utilisation_min = 0.1
why = "absolute"
"#,
        );
        let case = s.cases()[0].label.clone();
        let run = |cc: &str, rep: u32, w: u32| RunSummary {
            case: case.clone(),
            cc: cc.into(),
            rep,
            goodput_mbit: 4.0,
            utilisation: 0.2,
            cwnd_max: Some(w),
            ..Default::default()
        };
        // 20 Mbit/s, 10 ms: a BDP of 16.7 packets, a 2-packet buffer.
        assert_eq!(crate::summary::window_bound(18.7), 1000);
        assert_eq!(crate::summary::window_bound(3_333.0), 53_328);
        let judge = |w: [u32; 2]| {
            let runs = [
                run("ctcp_plus", 0, w[0]),
                run("ctcp_plus", 1, w[1]),
                run("reno", 0, 20),
            ];
            let o = s.evaluate(&runs);
            // one window row for ctcp_plus (two checks name it), none for reno
            let rows: Vec<_> = o.into_iter().filter(|o| o.metric == "cwnd_max").collect();
            assert_eq!(rows.len(), 1, "{rows:?}");
            assert_eq!((rows[0].cc.as_str(), rows[0].runs), ("ctcp_plus", 2));
            rows[0].clone()
        };
        let o = judge([21, 1_896_535_746]);
        assert!(!o.pass && o.value == 1_896_535_746.0, "{o:?}");
        assert_eq!(o.confirm_reps, 0, "a wild window is not measured away");
        assert!(judge([21, 18]).pass);
        assert!(judge([1000, 18]).pass && !judge([1001, 18]).pass);
    }

    /// With `retrans_after_warmup` the comparison reads the counts after
    /// the warm-up: reno's slow start cut short by a random loss (2 in all)
    /// against an overshoot (3,143, of which 3 after it) no longer decides
    /// it; a run without the count fails rather than passing unjudged.
    #[test]
    fn retransmissions_can_be_compared_after_the_warmup() {
        let text = |warm: bool| {
            scenario(
                r#"["ub_reno", "reno"]"#,
                1,
                &format!(
                    "[grid]\nrate_mbit = 100\nrtt_ms = [190]\nbuffer_bdp = [1]\n[quick]\n\
                     [[checks]]\ncc = \"ub_reno\"\nagainst = \"reno\"\n\
                     retrans_ratio_max = 2.0\nretrans_slack = 20\n\
                     retrans_per_seg_ratio_max = 2.0\nretrans_per_seg_slack = 0.0001\n\
                     retrans_after_warmup = {warm}\nwhy = \"no harm\"\n"
                ),
            )
        };
        let case = text(false).cases()[0].label.clone();
        let run = |cc: &str, all: u32, warm: Option<u32>| RunSummary {
            case: case.clone(),
            cc: cc.into(),
            retransmits: all,
            retrans_per_seg: all as f64 / 100_000.0,
            retrans_warm: warm,
            retrans_per_seg_warm: warm.map(|w| w as f64 / 90_000.0),
            ..Default::default()
        };
        let runs = [run("ub_reno", 3_143, Some(3)), run("reno", 2, Some(1))];
        let whole = text(false).evaluate(&runs);
        assert_eq!(whole.len(), 2);
        assert!(whole.iter().all(|o| !o.pass), "{whole:?}");
        assert_eq!(whole[0].metric, "retransmits");
        let warm = text(true).evaluate(&runs);
        assert!(warm.iter().all(|o| o.pass), "{warm:?}");
        assert_eq!(
            (warm[0].metric, warm[0].value, warm[0].reference),
            ("retransmits_after_warmup", 3.0, 1.0)
        );
        assert_eq!(warm[1].metric, "retrans_per_seg_after_warmup");
        // more than twice reno's after the warm-up still fails
        let worse = [run("ub_reno", 3_200, Some(60)), run("reno", 2, Some(1))];
        assert!(text(true).evaluate(&worse).iter().all(|o| !o.pass));
        // a run with no count after the warm-up is not passed
        let missing = [run("ub_reno", 3, None), run("reno", 2, Some(1))];
        let o = text(true).evaluate(&missing);
        assert!(o.iter().all(|o| !o.pass && o.value.is_nan()), "{o:?}");
    }

    /// `[[mixes]]`: each flow set is a case of its own (`..._<name>`) with its
    /// flows; the sharing checks read the runs' per-flow goodput and
    /// retransmissions: Jain over 1-s bins, one controller's share of the
    /// link (absolute, or against the same mix's reference run), and its
    /// retransmissions against its competitor's in the same run.
    #[test]
    fn mixes_are_cases_and_sharing_is_checked_per_run() {
        use crate::summary::FlowSummary;
        let s = scenario(
            r#"["ccpd", "hetcp", "reno"]"#,
            1,
            "[grid]\nrate_mbit = 100\nrtt_ms = [40]\nbuffer_bdp = [1]\n[quick]\n\
             [[mixes]]\nname = \"x2\"\nflows = [{ cc = \"$cc\" }, { cc = \"$cc\" }]\n\
             [[mixes]]\nname = \"vs_cubic\"\nflows = [{ cc = \"$cc\" }, { cc = \"cubic\" }]\n\
             [[checks]]\ncc = \"ccpd\"\nmix = [\"x2\"]\njain_min = 0.95\njain_bins_min = 0.9\nwhy = \"fair\"\n\
             [[checks]]\ncc = \"ccpd\"\nmix = [\"vs_cubic\"]\nshare_min = 0.4\n\
             peer_retrans_ratio_max = 2.0\nretrans_slack = 50\nwhy = \"share\"\n\
             [[checks]]\ncc = \"hetcp\"\nagainst = \"reno\"\nmix = [\"vs_cubic\"]\n\
             share_ratio_min = 0.95\nwhy = \"as reno\"\n",
        );
        s.validate().unwrap();
        let cases = s.cases();
        let labels: Vec<&str> = cases.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["40ms_1bdp_x2", "40ms_1bdp_vs_cubic"]);
        assert_eq!(cases[1].flows[1].cc, "cubic");
        let flow = |cc: &str, g: f64, retx: u32| FlowSummary {
            cc: cc.into(),
            goodput_mbit: g,
            retransmits: retx,
            ..Default::default()
        };
        let run = |case: &str, cc: &str, jain: f64, flows: Vec<FlowSummary>| RunSummary {
            case: case.into(),
            cc: cc.into(),
            goodput_mbit: flows.iter().map(|f| f.goodput_mbit).sum(),
            utilisation: flows.iter().map(|f| f.goodput_mbit).sum::<f64>() / 96.5,
            jain,
            jain_bins: jain - 0.05,
            flows,
            ..Default::default()
        };
        let judge = |runs: &[RunSummary]| -> Vec<(&'static str, bool)> {
            s.evaluate(runs)
                .iter()
                .map(|o| (o.metric, o.pass))
                .collect()
        };
        // The same four runs each time: two ccpd flows, ccpd and hetcp
        // against cubic, and reno against cubic (hetcp's reference).
        let runs = |jain: f64, x2: [f64; 2], vs: [(f64, u32); 2], hetcp: f64| {
            [
                run(
                    "40ms_1bdp_x2",
                    "ccpd",
                    jain,
                    vec![flow("ccpd", x2[0], 0), flow("ccpd", x2[1], 0)],
                ),
                run(
                    "40ms_1bdp_vs_cubic",
                    "ccpd",
                    jain,
                    vec![
                        flow("ccpd", vs[0].0, vs[0].1),
                        flow("cubic", vs[1].0, vs[1].1),
                    ],
                ),
                run(
                    "40ms_1bdp_vs_cubic",
                    "hetcp",
                    0.9,
                    vec![flow("hetcp", hetcp, 0), flow("cubic", 96.0 - hetcp, 0)],
                ),
                run(
                    "40ms_1bdp_vs_cubic",
                    "reno",
                    0.9,
                    vec![flow("reno", 34.7, 0), flow("cubic", 61.5, 0)],
                ),
            ]
        };
        // the starving pair and the flow that yields to cubic fail ...
        let bad = runs(0.51, [94.7, 1.4], [(1.2, 300), (94.9, 40)], 30.0);
        let o = judge(&bad);
        assert!(o.contains(&("jain", false)), "{o:?}");
        assert!(o.contains(&("jain_bins", false)), "{o:?}");
        assert!(o.contains(&("share", false)), "{o:?}");
        assert!(o.contains(&("retransmits_vs_peers", false)), "{o:?}");
        assert_eq!(o.iter().filter(|(m, _)| *m == "share").count(), 2, "{o:?}");
        // ... a fair pair and a fair share pass
        let good = runs(0.99, [47.0, 46.0], [(44.9, 130), (49.0, 41)], 34.0);
        let o = judge(&good);
        assert!(
            o.iter().filter(|(m, _)| *m != "cwnd_max").all(|(_, p)| *p),
            "{o:?}"
        );
        assert!((good[1].share_of("ccpd") - 44.9 / 96.5).abs() < 1e-9);
    }

    /// Flows with RTTs of their own: the delay line's base is the shortest
    /// RTT, a class per longer one adds half the difference each way, and
    /// `long_rtt_share_ratio_min` compares the longest-RTT flows' fraction
    /// of the goodput with the reference CC's in the same case.
    #[test]
    fn flows_with_their_own_rtt_get_delay_classes_and_a_long_rtt_check() {
        use crate::summary::FlowSummary;
        let s = scenario(
            r#"["ccpd", "cubic"]"#,
            1,
            "[grid]\nrate_mbit = 100\nrtt_ms = [40]\nbuffer_bdp = [1]\n[quick]\n\
             [[mixes]]\nname = \"rtt\"\nflows = [{ cc = \"$cc\", rtt_ms = 20 }, \
             { cc = \"$cc\", rtt_ms = 80 }, { cc = \"$cc\" }]\n\
             [[checks]]\ncc = \"ccpd\"\nagainst = \"cubic\"\nmix = [\"rtt\"]\n\
             long_rtt_share_ratio_min = 1.0\nwhy = \"rtt\"\n",
        );
        s.validate().unwrap();
        let case = &s.cases()[0];
        // base 20 ms (10 each way); 80 ms is class 1 (+30), 40 ms class 2 (+10)
        assert_eq!(case.link.delay_ms, 10.0);
        assert_eq!(case.link.extra_delay_ms, [30.0, 10.0]);
        let f = &case.flows;
        let classes: Vec<usize> = f.iter().map(|x| delay_class(f, x, 40.0)).collect();
        assert_eq!(classes, [0, 1, 2]);
        // the buffer is the case's RTT's BDP (333 packets at 40 ms)
        assert_eq!(case.link.buffer_pkts, 333);
        let run = |cc: &str, g: [f64; 3]| RunSummary {
            case: case.label.clone(),
            cc: cc.into(),
            flows: [20.0, 80.0, 40.0]
                .iter()
                .zip(g)
                .map(|(&r, g)| FlowSummary {
                    cc: cc.into(),
                    goodput_mbit: g,
                    path_rtt_ms: Some(r),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let judge = |a: [f64; 3]| {
            let runs = [run("ccpd", a), run("cubic", [60.0, 10.0, 26.0])];
            let o = s.evaluate(&runs);
            let o: Vec<_> = o.iter().filter(|o| o.metric == "long_rtt_share").collect();
            assert_eq!(o.len(), 1);
            (o[0].value, o[0].pass)
        };
        // cubic's 80-ms flow keeps 10 of 96; ccpd's 20 of 96 passes ...
        let (v, pass) = judge([40.0, 20.0, 36.0]);
        assert!(pass && (v - 20.0 / 96.0).abs() < 1e-9, "{v}");
        // ... and 5 of 96 fails
        assert!(!judge([60.0, 5.0, 31.0]).1);
        // without own RTTs there is nothing to judge
        let mut r = run("ccpd", [1.0, 1.0, 1.0]);
        r.flows.iter_mut().for_each(|f| f.path_rtt_ms = None);
        assert_eq!(r.long_rtt_share(), None);
    }

    /// `late_fair_ratio_max` holds the late flow's time to its share to the
    /// reference CC's in the same case, plus `late_fair_slack_s`; a late
    /// flow that never gets its share fails.
    #[test]
    fn a_late_joiner_is_held_to_the_reference_ccs() {
        let s = scenario(
            r#"["ub_reno", "reno"]"#,
            1,
            "[grid]\nrate_mbit = 100\nrtt_ms = [40]\nbuffer_bdp = [0.5]\n[quick]\n\
             [[mixes]]\nname = \"late\"\nflows = [{ cc = \"$cc\" }, \
             { cc = \"$cc\", start_s = 5 }]\n\
             [[checks]]\ncc = \"ub_reno\"\nagainst = \"reno\"\nmix = [\"late\"]\n\
             late_fair_ratio_max = 1.0\nlate_fair_slack_s = 2\nwhy = \"as reno\"\n",
        );
        s.validate().unwrap();
        let label = s.cases()[0].label.clone();
        let run = |cc: &str, rep: u32, late: Option<f64>| RunSummary {
            case: label.clone(),
            cc: cc.into(),
            rep,
            late_fair_s: late,
            ..Default::default()
        };
        let judge = |runs: &[RunSummary]| {
            let o = s.evaluate(runs);
            assert_eq!(o.len(), 1, "{o:?}");
            assert_eq!(o[0].metric, "late_fair_s");
            (o[0].value, o[0].pass)
        };
        // reno's late flow took 12 s: 13 s passes, 15 s does not
        assert_eq!(
            judge(&[run("ub_reno", 0, Some(13.0)), run("reno", 0, Some(12.0))]),
            (13.0, true)
        );
        assert!(!judge(&[run("ub_reno", 0, Some(15.0)), run("reno", 0, Some(12.0))]).1);
        // never fair: fails
        assert!(!judge(&[run("ub_reno", 0, None), run("reno", 0, Some(12.0))]).1);
        // on repetitions, the paired test: 0/0, 11/10, 13/12 s pass
        let reps = [
            run("ub_reno", 0, Some(0.0)),
            run("reno", 0, Some(0.0)),
            run("ub_reno", 1, Some(11.0)),
            run("reno", 1, Some(10.0)),
            run("ub_reno", 2, Some(13.0)),
            run("reno", 2, Some(12.0)),
        ];
        assert!(judge(&reps).1);
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
    fn a_case_can_ask_for_more_confirming_runs() {
        let s = scenario(
            r#"["ub_reno", "reno"]"#,
            1,
            r#"[grid]
rate_mbit = 20
rates_mbit = [20, 100]
rtt_ms = [10]
buffer_bdp = [0.125]
[quick]
[[checks]]
cc = "ub_reno"
against = "reno"
goodput_ratio_min = 0.95
confirm_reps = 3
confirm_reps_in = [{ rate_mbit = [20], buffer_bdp = [0.125], confirm_reps = 9 }]
why = "no harm"
"#,
        );
        let runs: Vec<RunSummary> = s
            .cases()
            .iter()
            .flat_map(|c| {
                [("ub_reno", 3.4), ("reno", 3.7)].map(|(cc, g)| RunSummary {
                    case: c.label.clone(),
                    cc: cc.into(),
                    goodput_mbit: g,
                    ..Default::default()
                })
            })
            .collect();
        let o = s.evaluate(&runs);
        let reps: Vec<(&str, u32)> = o.iter().map(|o| (&o.case[..4], o.confirm_reps)).collect();
        // The 20-Mbit/s case matches the entry; the 100-Mbit/s one keeps
        // the check's own three.
        assert_eq!(reps, [("20M_", 9), ("100M", 3)], "{o:?}");
        assert!(o.iter().all(|o| !o.pass));
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
}
