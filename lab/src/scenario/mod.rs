//! Scenarios: a TOML file in `configs/lab/` describing a grid of link
//! settings x congestion controls x repetitions, the paper's numbers to
//! compare with, and the `[[checks]]` thresholds `lab check` enforces.
//! `checks` judges the thresholds on finished runs.
//!
//! - this file: the scenario (loading, validation, `[quick]`, its cases);
//! - `link`: the grid of links, trace-driven and synthetic links;
//! - `flows`: the flows and mixes, their senders and extra delays;
//! - `checks`: the `[[checks]]` schema;
//! - `case`: one case of the grid, which checks apply, CC specs.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;
use std::sync::Arc;

use ccload_testbed::link::{LinkCfg, TraceLink};

use crate::arrivals::Arrivals;
use ccload_testbed::trace::{Limit, Trace, Walk};

mod case;
mod checks;
mod flows;
mod link;
#[cfg(test)]
pub(crate) mod tests;

pub use case::*;
pub use checks::*;
pub use flows::*;
pub use link::*;

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
        Self::load_in(path, path.parent())
    }

    /// A scenario whose trace paths are relative to `dir`: the copy a
    /// results directory keeps (scenario.toml) names its traces as the file
    /// in configs/lab/ it was copied from did.
    pub fn load_in(
        path: &std::path::Path,
        dir: Option<&std::path::Path>,
    ) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)?;
        let mut s: Scenario = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
        s.validate()?;
        s.dir = dir.map(std::path::Path::to_path_buf);
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
        anyhow::ensure!(
            !self.ccs.is_empty() && !self.flows.is_empty(),
            "ccs and flows must not be empty"
        );
        anyhow::ensure!(
            self.duration_s > self.warmup_s && self.repetitions >= 1,
            "duration_s > warmup_s, repetitions >= 1"
        );
        self.grid.validate()?;
        self.validate_flows()?;
        self.validate_cells()?;
        self.validate_checks()
    }

    /// Every flow, of `flows` and of the mixes: its start, its own RTT,
    /// its sender; every mix: its name, its `$cc`, its arrivals.
    fn validate_flows(&self) -> anyhow::Result<()> {
        let g = &self.grid;
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
        Ok(())
    }

    /// Every cell is a case of the grid, with listed CCs.
    fn validate_cells(&self) -> anyhow::Result<()> {
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
        Ok(())
    }

    /// Every check names listed CCs, traces and mixes that exist, and what
    /// its slowdown comparison needs.
    fn validate_checks(&self) -> anyhow::Result<()> {
        let g = &self.grid;
        for c in &self.checks {
            for n in &c.trace {
                anyhow::ensure!(
                    g.traces.iter().any(|t| &t.name == n),
                    "check on {}: no trace named {n}",
                    c.cc
                );
            }
        }
        for c in &self.checks {
            anyhow::ensure!(
                self.ccs.contains(&c.cc) && c.against.as_ref().is_none_or(|a| self.ccs.contains(a)),
                "check on `{}`: cc and against must be listed in ccs",
                c.cc
            );
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
                let mixes = self.mixes_at(rate);
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

    /// The flow mixes of a link at `rate` Mbit/s: the scenario's flows, or
    /// each mix with its arrivals drawn for that rate (the lab's own
    /// sender's short flows).
    fn mixes_at(&self, rate: f64) -> Vec<Mix> {
        if self.mixes.is_empty() {
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
        }
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
