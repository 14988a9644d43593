//! A scenario's flows: who sends (`[[mixes]]`, `flows`), with which
//! sender, and the extra delays of flows with longer RTTs.

use super::*;

/// The base RTT of a case of `rtt` ms with `flows`: the shortest of the
/// case's and the flows' own ones (`FlowSpec::rtt_ms`); the delay line's
/// base delay is half of it.
pub(super) fn base_rtt(flows: &[FlowSpec], rtt: f64) -> f64 {
    flows.iter().filter_map(|f| f.rtt_ms).fold(rtt, f64::min)
}

/// The delay line's classes for `flows` on a case of `rtt` ms: the extra
/// one-way delay over the base of each distinct longer RTT, in first-seen
/// order (a flow without `rtt_ms` has the case's).
pub(super) fn extra_delays(flows: &[FlowSpec], rtt: f64) -> Vec<f64> {
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

pub(super) fn zero_loss() -> Vec<f64> {
    vec![0.0]
}
pub(super) fn default_mtu() -> u32 {
    1500
}
pub(super) fn one() -> Vec<u32> {
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
