//! Descriptions of the per-CPU counters of `enum ccl_stat_idx`
//! (bpf/ccload_intf.h), written once, next to their serde names.

use crate::intf;

/// (index, serde name, description)
pub const STATS: &[(u32, &str, &str)] = &[
    (
        intf::CCL_STAT_FLOW_INIT,
        "flows_init",
        "flows that chose this controller (init)",
    ),
    (
        intf::CCL_STAT_FLOW_RELEASE,
        "flows_released",
        "flows released",
    ),
    (intf::CCL_STAT_ACKS, "acks", "ACK-driven hook calls"),
    (intf::CCL_STAT_ROUNDS, "rounds", "round trips completed"),
    (
        intf::CCL_STAT_LOSS_EVENTS,
        "loss_events",
        "Recovery/CWR entries and RTOs (ssthresh calls)",
    ),
    (
        intf::CCL_STAT_LOSS_HELD,
        "losses_held",
        "packets lost while the window was held",
    ),
    (intf::CCL_STAT_RTO, "rtos", "retransmission timeouts"),
    (intf::CCL_STAT_UNDO, "undos", "spurious-loss undos"),
    (
        intf::CCL_STAT_RB_RESERVE_FAIL,
        "ringbuf_drops",
        "telemetry records dropped: ring buffer full",
    ),
    (intf::CCL_STAT_EVENTS, "events", "telemetry records written"),
    (
        intf::CCL_STAT_PARAM_CLAMPED,
        "params_clamped",
        "tunable reads clamped in BPF",
    ),
    (
        intf::CCL_STAT_PROFILE_MISS,
        "profile_misses",
        "params lookups that fell back to defaults",
    ),
    (
        intf::CCL_STAT_PAIR_SAMPLES,
        "pair_samples",
        "ccpd: accepted packet-pair capacity samples",
    ),
    (
        intf::CCL_STAT_PAIR_REJECTS,
        "pair_rejects",
        "ccpd: rejected packet-pair samples",
    ),
    (
        intf::CCL_STAT_EST_SAMPLES,
        "est_samples",
        "hetcp: GTSW bandwidth samples",
    ),
    (
        intf::CCL_STAT_EARLY_CUTS,
        "early_cuts",
        "ctcp_plus: rule (2) 2/3 cuts of the loss window",
    ),
    (
        intf::CCL_STAT_EARLY_DECS,
        "early_decs",
        "ctcp_plus: rule (3) decrease steps",
    ),
    (
        intf::CCL_STAT_LOSS_CONGESTIVE,
        "loss_congestive",
        "ccpd: loss events classified congestive (window held at the law target)",
    ),
    (
        intf::CCL_STAT_LOSS_RANDOM,
        "loss_random",
        "ccpd: loss events classified random (window held); ctcp_plus with rand_keep: losses whose cut kept the pipe",
    ),
    (
        intf::CCL_STAT_WFULL_FOUND,
        "wfull_found",
        "ub_reno: rounds whose C(t) crossed alpha and set W_full",
    ),
    (
        intf::CCL_STAT_LSRTT_SHIFTS,
        "lsrtt_shifts",
        "ub_reno: RTT level shifts the LSRTT estimator detected",
    ),
    (
        intf::CCL_STAT_SSTH_REPAIRED,
        "ssth_repaired",
        "guard: a reduction's ssthresh that no hook of ours saw (a skipped ssthresh()), or one above 2^31 - 1, replaced",
    ),
    (
        intf::CCL_STAT_CWND_REPAIRED,
        "cwnd_repaired",
        "guard: a window the kernel cannot produce between our hooks (0, above 2^31 - 1, or above ssthresh + in flight, the last window and prior_cwnd by more than 16), restored",
    ),
    (
        intf::CCL_STAT_CAP_FALLS,
        "cap_falls",
        "ccpd: capacity falls read: two rounds over a standing queue that delivered under half the delivery-rate maximum (fb and C restart there)",
    ),
];

pub fn name(idx: usize) -> &'static str {
    STATS[idx].1
}

/// The description of counter `idx`, as a sentence (Prometheus HELP).
pub fn help(idx: u32) -> String {
    let d = STATS[idx as usize].2;
    let mut c = d.chars();
    match c.next() {
        Some(f) => format!("{}{}.", f.to_uppercase(), c.as_str()),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stat_described_in_order() {
        assert_eq!(STATS.len(), intf::CCL_NR_STATS as usize);
        for (i, (idx, name, desc)) in STATS.iter().enumerate() {
            assert_eq!(*idx as usize, i, "{name} out of order");
            assert!(!desc.is_empty());
        }
    }
}
