//! One case of a scenario's grid (a link, its flows), which checks apply
//! to it, and `name:key=value` CC specs.

use super::*;

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
