//! Compound TCP+ against plain Compound (plus=0) with four flows sharing a
//! shallow drop-tail bottleneck (ALGORITHMS.md 3.8): the early reduction
//! must anticipate losses, so CTCP+ sees fewer loss events at equal or
//! better aggregate goodput, in the same run.

use ccload_itests::*;
use ccload_lab::run::run_case;
use ccload_lab::scenario::Scenario;

fn loss_events() -> u64 {
    let st = status_json();
    let a = st["attached"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["algo"] == "ctcp_plus")
        .expect("ctcp_plus attached");
    a["stats"]["loss_events"].as_u64().unwrap()
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
duration_s = 20
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
    // Compound's own law (fixed gamma, round-minimum RTT, zeta 1): the test
    // is about rules (2)-(4), not about the defaults' shallow-buffer tuning.
    // ABBA: drift over the four runs cancels in the sums.
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
        ]);
        let before = loss_events();
        let r = run_case(&sc, case, "ctcp_plus", 0, &mut |_| {}).expect("run");
        let losses = loss_events() - before;
        let s = &r.summary;
        eprintln!(
            "plus={plus}: {losses} loss events, {} retransmits, {} queue drops, goodput {:.2} Mbit/s, \
             jain {:.3}, queue {:.1} pkts",
            s.retransmits, s.queue_drops, s.goodput_mbit, s.jain_bins, s.queue_mean_pkts
        );
        assert_eq!(s.flows.len(), 4);
        assert!(s.flows.iter().all(|f| f.cc == "ctcp_plus"));
        res.push((plus, losses, s.goodput_mbit, s.queue_drops));
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
    assert!(dp < dc, "CTCP+ {dp} queue drops vs Compound {dc}");
    // Goodput parity is not reliable run to run (measured 0.93-1.04 x over
    // single 20-s runs, once 0.86 x); summed over two alternated runs each,
    // the test holds CTCP+ to within 10 % while its loss-event reduction
    // (~4x) is far outside the noise.
    assert!(gp >= 0.90 * gc, "CTCP+ goodput {gp:.2} vs Compound {gc:.2}");
}
