//! A scenario's links: the `[grid]` of rates, paths and buffers, and the
//! trace-driven and synthetic links of `[[grid.traces]]`.

use super::*;

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
    /// Rates the link can carry, a veth link's limits, trace names, the
    /// paths' RTTs and buffers, loss probabilities.
    pub fn validate(&self) -> anyhow::Result<()> {
        let g = self;
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
        Ok(())
    }

    /// Every (RTT, buffer) of the grid, in case order: its paths, or every
    /// RTT with every buffer (validation leaves one of buffer_bdp and
    /// buffer_pkts empty).
    pub(super) fn path_list(&self) -> Vec<PathSpec> {
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

pub(super) fn is_zero(v: &f64) -> bool {
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
pub(super) const SYNTHETIC_PERIOD_MS: u64 = 300_000;

impl TraceSpec {
    /// The capacity the case is sized by, Mbit/s.
    pub fn nominal_mbit(&self) -> f64 {
        match (&self.alternate, &self.walk) {
            (Some(a), _) => (a.rates_mbit[0] + a.rates_mbit[1]) / 2.0,
            (_, Some(w)) => w.mean_mbit,
            _ => self.mean_mbit.unwrap_or(0.0),
        }
    }

    pub(super) fn validate(&self) -> anyhow::Result<()> {
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
pub(super) fn load_trace(path: &std::path::Path) -> anyhow::Result<Arc<Trace>> {
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
