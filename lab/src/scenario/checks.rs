//! A scenario's `[[checks]]`: the thresholds `lab check` judges
//! (crate::checks judges them on finished runs).

use super::*;

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
