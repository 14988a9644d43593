//! Compound TCP+ against plain Compound (plus=0) with four flows sharing a
//! shallow drop-tail bottleneck: the early reduction
//! must anticipate losses, so CTCP+ sees fewer loss events at equal or
//! better aggregate goodput, in the same run.

use std::time::Duration;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;
use ccload_lab::run::run_case;
use ccload_lab::scenario::Scenario;

/// The path's round trip (60 ms): drops closer than this are one episode.
const RTT_S: f64 = 0.06;

fn loss_events() -> u64 {
    stat_of("ctcp_plus", "loss_events")
}

#[test]
fn ctcp_plus_has_fewer_loss_events_than_compound_at_equal_goodput() {
    let _s = privileged!();
    let _g = Attached::new("ctcp_plus", &[]);
    let sc: Scenario = toml::from_str(
        r#"
title = "ctcp+ vs ctcp"
paper = "3.8"
description = "4 flows, 30 Mbit/s, 60 ms, 50-packet drop-tail buffer"
ccs = ["ctcp_plus"]
flows = [{ cc = "$cc" }]
duration_s = 14
warmup_s = 4
repetitions = 1
[grid]
rate_mbit = 30
rtt_ms = [60]
buffer_pkts = [50]
n_flows = [4]
[quick]
"#,
    )
    .unwrap();
    let case = &sc.cases()[0];
    let mut res = Vec::new();
    // Four flows share a 50-packet buffer (~12 packets each), so gamma is
    // set below that share and the delay component is enabled from 10
    // segments; both variants run with the same settings, only `plus` differs.
    // Compound's own law (fixed gamma, round-minimum RTT, zeta 1, no plateau,
    // every loss halves) and the seed's episodes (any number between two
    // losses, no probes: plain Compound has none): the test is about rules
    // (2)-(4), not about the defaults' shallow-buffer, random-loss and
    // sharing options.
    // ABBA: drift over the four runs cancels in the sums.  Runs of 14 s
    // (10 measured); three runs of this test summed, per variant, 65-67
    // loss events for Compound against 11-15 for CTCP+, queue drops
    // 503-560 against 304-430, goodput 55.7-56.1 against 57.5-57.7 Mbit/s.
    for plus in ["1", "0", "0", "1"] {
        ccload_ok(&[
            "tune",
            "--algo",
            "ctcp_plus",
            "--set",
            &format!("plus={plus}"),
            "--set",
            "gamma=5",
            "--set",
            "low_wnd=10",
            "--set",
            "gamma_tune=0",
            "--set",
            "rtt_mode=0",
            "--set",
            "zeta=1",
            "--set",
            "plateau=0",
            "--set",
            "rand_keep=0",
            "--set",
            "ep_per_loss=0",
            "--set",
            "ep_rounds=0",
            "--set",
            "probe_ms=0",
        ]);
        let before = loss_events();
        let r = run_case(&sc, case, "ctcp_plus", 0, &mut |_| {}).expect("run");
        let losses = loss_events() - before;
        let s = &r.summary;
        // The drops after the warm-up, where the early reduction acts: the
        // four slow starts' overshoot into a 50-packet buffer is the same
        // rule for both and a few hundred drops either way (a CI run read
        // 814 drops for CTCP+ against 578 over the whole runs with 32
        // against 68 loss events).  Counted as episodes at the bottleneck
        // (10-ms queue samples whose drop counter rose, one episode until
        // a round trip passes without a drop), not as packets: one burst
        // into the full buffer (a stall's ACKs releasing a window at once)
        // dropped 103 packets in a CTCP+ run whose other rounds dropped
        // none, where Compound's 27-32 drops were one or two per loss.
        let after: Vec<&ccload_lab::summary::QueueSample> =
            r.queue.iter().filter(|q| q.t >= sc.warmup_s).collect();
        let drops = after
            .last()
            .zip(after.first())
            .map_or(0, |(b, a)| b.drops - a.drops);
        let mut episodes = 0u64;
        let mut last_drop = f64::NEG_INFINITY;
        for w in after.windows(2) {
            if w[1].drops > w[0].drops {
                if w[1].t - last_drop > RTT_S {
                    episodes += 1;
                }
                last_drop = w[1].t;
            }
        }
        eprintln!(
            "plus={plus}: {losses} loss events, {} retransmits, {} queue drops ({drops} in \
             {episodes} episodes after the warm-up), goodput {:.2} Mbit/s, jain {:.3}, queue \
             {:.1} pkts, delay line p99 late {} us",
            s.retransmits,
            s.queue_drops,
            s.goodput_mbit,
            s.jain_bins,
            s.queue_mean_pkts,
            s.lateness_p99_us
        );
        assert_eq!(s.flows.len(), 4);
        assert!(s.flows.iter().all(|f| f.cc == "ctcp_plus"));
        res.push((plus, losses, s.goodput_mbit, episodes));
    }
    ccload_ok(&["tune", "--algo", "ctcp_plus", "--reset"]);
    let sum = |p: &str| {
        res.iter()
            .filter(|r| r.0 == p)
            .fold((0, 0.0, 0), |a, r| (a.0 + r.1, a.1 + r.2, a.2 + r.3))
    };
    let ((lp, gp, dp), (lc, gc, dc)) = (sum("1"), sum("0"));
    assert!(
        lc >= 8,
        "plain Compound must see losses here ({lc} in two runs)"
    );
    assert!(lp < lc, "CTCP+ {lp} loss events vs Compound {lc}");
    assert!(
        dp < dc,
        "CTCP+ {dp} drop episodes at the bottleneck after the warm-up vs Compound {dc}"
    );
    // Goodput parity is not reliable run to run (measured 0.93-1.04 x over
    // single 20-s runs, once 0.86 x); summed over two alternated runs each,
    // the test holds CTCP+ to within 10 % while its loss-event reduction
    // (~4x) is far outside the noise.
    assert!(gp >= 0.90 * gc, "CTCP+ goodput {gp:.2} vs Compound {gc:.2}");
}

/// rand_keep (docs/ctcp_plus.md, "Random loss with a short queue"): with
/// random loss on a 1-BDP buffer the delay brake holds the queue short, so a
/// random loss comes with a queue far below the one slow start showed; the
/// loss is classified random and the cut keeps the pipe instead of halving.
/// 100 Mbit/s, 80 ms, 1 BDP; slow start runs without loss (so it shows the
/// buffer in every run: with loss from the start, one slow start in four or
/// five ends on a random drop before it, and the flow then halves as
/// before), random loss 1e-4 from 4 s on.  rand_keep 1 against 0: only 1
/// classifies losses as random, it carries clearly more after the loss
/// starts (measured 88 against 49 Mbit/s), and it does not buy that with
/// loss events.
///
/// The loss is seeded and drawn from the onset ([`Bottleneck::set_seeded_loss`]):
/// both transfers lose the same packets counted from the onset (seed 1: 7
/// in the first 75,000).  With iptables draws the two settings saw
/// different losses (rand_keep=0 had 3 drops in one run and 7 in the
/// other, and carried 75 and 57 Mbit/s), so the ratio measured where the
/// loss fell more than the classifier.
#[test]
fn ctcp_plus_keeps_the_pipe_on_random_losses() {
    let _s = privileged!();
    let _g = Attached::new("ctcp_plus", &[]);
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 100.0,
        buffer_pkts: 667,
        delay_ms: 40.0,
        ..Default::default()
    });
    const ONSET_S: f64 = 4.0;
    let mut res = Vec::new();
    for (keep, seed) in [("1", 1), ("0", 1)] {
        ccload_ok(&[
            "tune",
            "--algo",
            "ctcp_plus",
            "--set",
            &format!("rand_keep={keep}"),
        ]);
        link.set_seeded_loss(0.0, seed);
        let (l0, r0, d0) = (
            loss_events(),
            stat_of("ctcp_plus", "loss_random"),
            link.random_drops(),
        );
        let t = std::thread::scope(|sc| {
            let h = sc.spawn(|| link.transfer("ctcp_plus", 150 << 20));
            std::thread::sleep(Duration::from_secs_f64(ONSET_S));
            link.set_seeded_loss(1e-4, seed);
            h.join().expect("transfer thread")
        })
        .expect("transfer");
        let (losses, random) = (loss_events() - l0, stat_of("ctcp_plus", "loss_random") - r0);
        let drops = link.random_drops().saturating_sub(d0);
        // Goodput from a second after the onset to the end.
        let at = |s: f64| t.timeline.iter().find(|p| p.0 >= s).map_or(0, |p| p.1);
        let from = ONSET_S + 1.0;
        let mbit = (t.bytes - at(from)) as f64 * 8.0 / (t.secs - from) / 1e6;
        eprintln!(
            "rand_keep={keep}, seed {seed}: {losses} loss events ({random} random), {drops} random drops, \
             {:.1} s, {mbit:.1} Mbit/s after the onset",
            t.secs
        );
        assert_eq!(t.bytes, 150 << 20, "transfer incomplete");
        res.push((keep, losses, random, mbit));
    }
    ccload_ok(&["tune", "--algo", "ctcp_plus", "--reset"]);
    let sum = |k: &str| {
        res.iter()
            .filter(|r| r.0 == k)
            .fold((0, 0, 0.0), |a, r| (a.0 + r.1, a.1 + r.2, a.2 + r.3))
    };
    let ((lk, rk, gk), (lo, ro, go)) = (sum("1"), sum("0"));
    assert!(
        lk >= 3 && lo >= 3,
        "the random loss must be seen ({lk}, {lo} loss events)"
    );
    assert_eq!(ro, 0, "rand_keep=0 never keeps the pipe");
    assert!(
        rk * 2 >= lk,
        "most losses here are random: {rk} of {lk} classified so"
    );
    assert!(gk >= 1.4 * go, "rand_keep=1 {gk:.1} Mbit/s vs 0 {go:.1}");
    assert!(lk <= 2 * lo + 2, "loss events {lk} vs {lo}");
}
