//! Privileged tests of the HE-TCP controller through an emulated bottleneck.

use std::time::Duration;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

#[test]
fn hetcp_transfer_and_gtsw_converges_to_the_link_rate() {
    let _s = privileged!();
    let _g = Attached::new("hetcp", &[]);
    let cfg = LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 60,
        ..Default::default()
    };
    let link = Bottleneck::new(cfg);
    let w = Watch::start(&["--algo", "hetcp"]);
    std::thread::sleep(Duration::from_millis(300));
    let t = link
        .transfer("hetcp", 30 * MB)
        .expect("transfer with hetcp");
    assert_eq!(t.bytes, 30 * MB);
    assert_eq!(
        (t.sender_cc.as_str(), t.receiver_cc.as_str()),
        ("hetcp", "hetcp")
    );
    let mut recs = Vec::new();
    while let Ok(r) = w.rx.recv_timeout(Duration::from_millis(500)) {
        recs.push(r);
    }
    w.stop();
    // Only the data sender's samples (its receiver sends no data).
    let sender: Vec<_> = recs
        .iter()
        .filter(|r| r["remote"].as_str().unwrap().starts_with("10.77.2.2:"))
        .collect();
    assert!(sender.len() >= 50, "{} GTSW samples", sender.len());
    // Payload rate of a 20 Mbit/s link carrying 1500-byte packets (MSS 1448).
    let mss = i(sender[0], "mss") as f64;
    let payload_mbit = 20.0 * mss / 1500.0;
    let tail = &sender[sender.len() * 3 / 4..];
    let mut est: Vec<f64> = tail
        .iter()
        .map(|r| i(r, "bw_q8") as f64 / 256.0 * mss * 8.0 / 1e6)
        .collect();
    est.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = est[est.len() / 2];
    eprintln!("hetcp GTSW median estimate {median:.2} Mbit/s, payload rate {payload_mbit:.2}, goodput {:.2}", t.mbps());
    assert!(
        (median - payload_mbit).abs() / payload_mbit <= 0.15,
        "estimate {median:.2} Mbit/s vs link {payload_mbit:.2}"
    );
    // Drop-tail overflow in slow start: a loss, then RI/CA with ssthresh = BW*BaseRTT.
    let st = status_json();
    let stats = &st["attached"][0]["stats"];
    assert!(stats["loss_events"].as_u64().unwrap() >= 1, "{stats}");
    assert!(stats["est_samples"].as_u64().unwrap() >= sender.len() as u64);
    assert!(tail.iter().all(|r| i(r, "losses") >= 1));
    assert!(link.queue_drops() >= 1, "the bottleneck dropped");
}

/// Mean seconds from each window reduction (cwnd below 70 % of its peak
/// since the previous episode; PRR spreads the halving over a round) until
/// cwnd is back at `target` segments; and the number of episodes.  The first
/// episode ends slow start (its overshoot can cost an RTO) and is not an RI
/// episode: it is left out.
fn recovery_secs(samples: &[ccload_lab::summary::FlowSample], target: u32) -> (f64, usize) {
    let mut times = Vec::new();
    let mut peak = 0u32;
    let mut i = 0;
    while i < samples.len() {
        let s = &samples[i];
        peak = peak.max(s.cwnd);
        if peak > 20 && (s.cwnd as f64) < 0.7 * peak as f64 {
            let Some(j) = samples[i..].iter().position(|x| x.cwnd >= target) else {
                break;
            };
            times.push(samples[i + j].t - s.t);
            i += j;
            peak = 0;
        }
        i += 1;
    }
    let times = times.get(1..).unwrap_or(&[]);
    let n = times.len();
    (times.iter().sum::<f64>() / n.max(1) as f64, n)
}

#[test]
fn after_a_loss_hetcp_regains_the_bdp_through_ri_faster_than_reno() {
    let _s = privileged!();
    let _g = Attached::new("hetcp", &[]);
    let sc: ccload_lab::scenario::Scenario = toml::from_str(
        r#"
title = "ri"
paper = "2.7"
description = "one flow, BDP/4 buffer: repeated drop-tail losses"
ccs = ["hetcp", "reno"]
flows = [{ cc = "$cc" }]
duration_s = 16
repetitions = 1
[grid]
rate_mbit = 50
rtt_ms = [40]
buffer_bdp = [0.25]
[quick]
"#,
    )
    .unwrap();
    let case = &sc.cases()[0];
    let (he, reno, recs) = measured_on_a_valid_link("hetcp and reno", || {
        let w = Watch::start(&["--algo", "hetcp"]);
        let he = ccload_lab::run::run_case(&sc, case, "hetcp", 0, &mut |_| {}).expect("hetcp run");
        let mut recs = Vec::new();
        while let Ok(r) = w.rx.recv_timeout(Duration::from_millis(300)) {
            recs.push(r);
        }
        w.stop();
        let reno = ccload_lab::run::run_case(&sc, case, "reno", 0, &mut |_| {}).expect("reno run");
        let late = he.summary.lateness_p99_us.max(reno.summary.lateness_p99_us);
        ((he, reno, recs), late)
    });
    // Back toward the path's BDP (167 packets; 90 % of it in segments).
    let target = (0.9 * case.link.bdp_pkts()) as u32;
    let (th, nh) = recovery_secs(&he.samples, target);
    let (tr, nr) = recovery_secs(&reno.samples, target);
    eprintln!(
        "recovery to {target} segments (0.9 BDP): hetcp {th:.2} s over {nh} losses, reno {tr:.2} s over {nr}; \
         goodput hetcp {:.2} reno {:.2} Mbit/s",
        he.summary.goodput_mbit, reno.summary.goodput_mbit
    );
    let ri = recs
        .iter()
        .filter(|r| r["remote"].as_str().unwrap().starts_with("10.77.2.2:"))
        .filter(|r| r["phase"] == "RI")
        .count();
    assert!(ri >= 3, "{ri} GTSW samples in the RI phase");
    assert!(nh >= 2 && nr >= 1, "losses: hetcp {nh}, reno {nr}");
    assert!(th < 0.6 * tr, "hetcp {th:.2} s vs reno {tr:.2} s");
    assert!(he.summary.goodput_mbit >= reno.summary.goodput_mbit * 0.98);
}
