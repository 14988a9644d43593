//! Privileged tests of the under-buffered-link controller (`ub_reno`)
//! through the emulated link: at a buffer of BDP/8 its extra window fills
//! the capacity Reno leaves idle after each halving; at a 1-BDP buffer the
//! extra window never matters and it moves data as Reno does.

use std::time::Duration;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

fn link_cfg() -> LinkCfg {
    LinkCfg {
        rate_mbit: 50.0,
        delay_ms: 20.0,
        ..Default::default()
    }
}

fn link(k: f64) -> Bottleneck {
    let cfg = link_cfg();
    // 50 Mbit/s x 40 ms = 167 packets of 1500 bytes: alpha = 1.02 is a
    // queue of 3.3 packets, above the noise of unpaced ACK-clocked bursts.
    let buf = (cfg.bdp_pkts() * k).round() as u32;
    Bottleneck::new(LinkCfg {
        buffer_pkts: buf,
        ..cfg
    })
}

/// ub_reno and reno through the same link in the order ub_reno, reno, reno,
/// ub_reno (so drift over the run cancels); returns the ratio of their
/// summed goodput after `skip` seconds and ub_reno's telemetry.
fn pair(k: f64, bytes: u64, skip: f64) -> (f64, Vec<serde_json::Value>) {
    let mut l = link(k);
    let (mut u, mut r) = (0.0, 0.0);
    let mut recs = Vec::new();
    for cc in ["ub_reno", "reno", "reno", "ub_reno"] {
        let w = (cc == "ub_reno").then(|| Watch::start(&["--algo", "ub_reno"]));
        let t = l.transfer(cc, bytes).expect("transfer");
        assert_eq!(t.bytes, bytes);
        assert_eq!((t.sender_cc.as_str(), t.receiver_cc.as_str()), (cc, cc));
        if let Some(w) = w {
            while let Ok(rec) = w.rx.recv_timeout(Duration::from_millis(300)) {
                recs.push(rec);
            }
            w.stop();
        }
        let m = t.mbps_after(skip);
        eprintln!(
            "k = {k}: {cc} {m:.2} Mbit/s after {skip} s ({:.2} whole transfer)",
            t.mbps()
        );
        if cc == "ub_reno" {
            u += m;
        } else {
            r += m;
        }
    }
    let rep = l.stop_delay().unwrap();
    eprintln!(
        "k = {k}: ub_reno/reno {:.3}; delay line p99 lateness {} us",
        u / r,
        rep.combined().lateness_us(0.99)
    );
    let sender = recs
        .into_iter()
        .filter(|r| r["remote"].as_str().unwrap().starts_with("10.77.2.2:"))
        .collect();
    (u / r, sender)
}

#[test]
fn ub_reno_beats_reno_under_a_small_buffer_and_matches_it_at_one_bdp() {
    let _s = privileged!();
    let _g = Attached::new("ub_reno", &[]);
    let bdp = link_cfg().bdp_pkts() as i64;
    // BDP/8: a Reno cycle is ~(BDP + B)/2 rounds, ~3.8 s here; the first two
    // cycles carry no extra window (no W_full yet), so measure after 8 s.
    let (small, sender) = pair(0.125, 128 * MB, 8.0);
    // The extra window was used (RAMP/HOLD rounds with extra > 0), and the
    // learned W_full sits near the BDP, where the RTT starts to rise.
    let extra_rounds = sender
        .iter()
        .filter(|r| i(r, "extra") > 0 && ["RAMP", "HOLD"].contains(&r["phase"].as_str().unwrap()))
        .count();
    let mut wf: Vec<i64> = sender
        .iter()
        .map(|r| i(r, "wfull_prev"))
        .filter(|&w| w > 0)
        .collect();
    wf.sort();
    assert!(
        extra_rounds >= 20,
        "{extra_rounds} rounds with an extra window"
    );
    assert!(!wf.is_empty(), "no W_full learned");
    let med = wf[wf.len() / 2];
    eprintln!(
        "ub_reno: {extra_rounds} extra-window rounds of {}; median W_full {med} (BDP {bdp})",
        sender.len()
    );
    assert!(
        med * 10 >= bdp * 8 && med * 10 <= bdp * 12,
        "W_full {med} segments for a {bdp}-packet BDP"
    );
    // Measured 1.03-1.15 over runs: how many cycles keep their extra window
    // varies (C(t) noise can end a ramp early).  A ub_reno whose extra
    // window never acts fails the extra-rounds check above and sits at
    // 1.00 +- 0.01 here (the 1-BDP case below).
    assert!(small >= 1.02, "ub_reno/reno = {small:.3} at BDP/8");
    // 1 BDP: Reno already fills the link; ub_reno must not do worse or more.
    let (big, _) = pair(1.0, 64 * MB, 3.0);
    assert!(
        (0.97..=1.03).contains(&big),
        "ub_reno/reno = {big:.3} at 1 BDP"
    );
}
