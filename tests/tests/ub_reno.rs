//! Privileged tests of the under-buffered-link controller (`ub_reno`)
//! through the emulated link: at a buffer of BDP/8 its extra window fills
//! the capacity Reno leaves idle after each halving, with a W_full learned
//! from where the path's RTT starts to rise.  That it does no harm against
//! Reno is a performance claim, judged in the lab against reno in the same
//! run (the acceptance check: the quick cells 10M_80ms_0.25bdp and the
//! 4-BDP cellular trace; every cell of the full grid).

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

/// One ub_reno transfer of `bytes` at a buffer of `k` BDP: its sender's
/// telemetry, and the link's [`ccload_itests::stall_lateness`], so that a transfer whose
/// timing was off is measured again ([`measured_on_a_valid_link`]; seen:
/// p99 661 us, a transfer at 2/3 of the others' rate and an RTT rising
/// from 0.4 BDP; and the host stalls above).
fn ub_reno_alone(k: f64, bytes: u64) -> (Vec<serde_json::Value>, u64) {
    let mut l = link(k);
    let w = Watch::start(&["--algo", "ub_reno"]);
    let t = l.transfer("ub_reno", bytes).expect("transfer");
    assert_eq!(t.bytes, bytes);
    let mut recs = Vec::new();
    while let Ok(rec) = w.rx.recv_timeout(Duration::from_millis(300)) {
        recs.push(rec);
    }
    w.stop();
    let drops = l.queue_drops();
    let late = ccload_itests::stall_lateness(&l.stop_delay().unwrap());
    eprintln!(
        "k = {k}: ub_reno {:.2} Mbit/s, {drops} drops; delay line lateness {late} us",
        t.mbps()
    );
    let sender = recs
        .into_iter()
        .filter(|r| r["remote"].as_str().unwrap().starts_with("10.77.2.2:"))
        .collect();
    (sender, late)
}

/// The window at which the RTT has risen in each cycle while the flow runs
/// as plain Reno (ZERO phase, no extra window), observed independently of
/// the extra-window logic: (cycle, the window of the `c_rounds`-th round in
/// a row with C(t) > alpha) -- the controller's own test of congestion: one
/// round over alpha is an ACK burst as often as a queue.  One flow's records.
fn reno_onsets(sender: &[serde_json::Value]) -> Vec<(i64, i64)> {
    // The defaults from the kernel layout's table; alpha as stored (Q16,
    // the unit of c_q16).
    let d = ccload::bpf::algos::Algo::UbReno.defaults();
    let alpha = d.get("alpha").unwrap() as i64;
    let need = d.get("c_rounds").unwrap() as usize;
    let mut out = Vec::new();
    let mut cycle = -1;
    let mut seen = false;
    let mut run = 0;
    for r in sender {
        if r["phase"] == "SS" {
            continue;
        }
        if i(r, "cycle") != cycle {
            cycle = i(r, "cycle");
            (seen, run) = (false, 0);
        }
        let plain_reno = r["phase"] == "ZERO" && i(r, "extra") == 0;
        run = if plain_reno && i(r, "c_q16") > alpha {
            run + 1
        } else {
            0
        };
        if !seen && run >= need {
            out.push((cycle, i(r, "cwnd_r")));
            seen = true;
        }
    }
    out
}

/// ub_reno's records split by flow (local address and port), in order.
fn by_flow(recs: &[serde_json::Value]) -> Vec<Vec<serde_json::Value>> {
    let mut out: Vec<(String, Vec<serde_json::Value>)> = Vec::new();
    for r in recs {
        let key = r["local"].as_str().unwrap_or_default().to_string();
        match out.iter_mut().find(|f| f.0 == key) {
            Some(f) => f.1.push(r.clone()),
            None => out.push((key, vec![r.clone()])),
        }
    }
    out.into_iter().map(|f| f.1).collect()
}

fn median(v: &mut [i64]) -> i64 {
    v.sort();
    v[v.len() / 2]
}

/// At BDP/8 the extra window acts, with a W_full learned where this path's
/// RTT starts to rise and not drifting down over the cycles.  Its gain over
/// Reno, and that it does no harm on a deep buffer, are performance claims:
/// the lab measures them (acceptance matrix, `ub_reno` against `reno` at 10
/// Mbit/s, 80 ms, BDP/4 and on the 4-BDP LTE trace; ubl-table1).
#[test]
fn ub_reno_learns_w_full_from_the_path() {
    let _s = privileged!();
    let _g = Attached::new("ub_reno", &[]);
    let bdp = link_cfg().bdp_pkts() as i64;
    // BDP/8: a Reno cycle is ~(BDP + B)/2 rounds, ~3-4 s here, and the
    // first two cycles carry no extra window (no W_full yet): one transfer
    // of ~40 s holds enough cycles with one.  Not shorter: 128 MB (~25 s)
    // on a host that stalled through both attempts read 3 Reno onsets
    // where the check asks 4 (16 W_full values; a fresh CI run).
    let judge = |sender: &Vec<serde_json::Value>| -> Result<(), String> {
        let extra_rounds = sender
            .iter()
            .filter(|r| {
                i(r, "extra") > 0 && ["RAMP", "HOLD"].contains(&r["phase"].as_str().unwrap())
            })
            .count();
        if extra_rounds < 20 {
            return Err(format!("{extra_rounds} rounds with an extra window"));
        }
        // W_full per cycle (the value carried into it), in cycle order.
        let mut per_cycle: Vec<(i64, i64)> = sender
            .iter()
            .filter(|r| i(r, "wfull_prev") > 0 && r["phase"] == "RAMP")
            .map(|r| (i(r, "cycle"), i(r, "wfull_prev")))
            .collect();
        per_cycle.dedup_by_key(|c| c.0);
        let flows = by_flow(sender);
        let mut onsets: Vec<i64> = flows
            .iter()
            .flat_map(|f| reno_onsets(f))
            .map(|o| o.1)
            .collect();
        if per_cycle.len() < 4 || onsets.len() < 4 {
            return Err(format!("cycles {per_cycle:?}, onsets {onsets:?}"));
        }
        let onset = median(&mut onsets);
        let mut wf: Vec<i64> = per_cycle.iter().map(|c| c.1).collect();
        let med = median(&mut wf);
        eprintln!(
            "ub_reno: {extra_rounds} extra-window rounds of {}; RTT-rise onset (Reno's own C > alpha) \
             median {onset} of BDP {bdp}; W_full per cycle {:?} median {med}",
            sender.len(),
            per_cycle.iter().map(|c| c.1).collect::<Vec<_>>()
        );
        // C(t) tracks the path: the RTT rises within [0.6, 1.2] BDP.  (On this
        // 2-core emulation the per-packet cost of the link raises the RTT from
        // about 0.85 BDP at 50 Mbit/s; a faster host measures it at the BDP.)
        if onset * 10 < bdp * 6 || onset * 10 > bdp * 12 {
            return Err(format!("RTT-rise onset {onset} for a {bdp}-packet BDP"));
        }
        // W_full is learned from that onset: beta (0.97) below it, lowered
        // 3 % per round that C still exceeds alpha in HOLD, never above it.
        if med * 100 < onset * 75 || med * 100 > onset * 105 {
            return Err(format!("W_full {med} against an RTT-rise onset of {onset}"));
        }
        // ... and re-learned every cycle from the path, not only ever lowered
        // (the drift of the first v2, 0.68 BDP after a minute): in each flow,
        // the W_full a cycle carries is beta (0.97) times the window where
        // plain Reno's RTT rose in the cycle before.  Judged against the same
        // flow's own onsets, cycle by cycle, because the emulated path is not
        // constant on this host: a stretch of host noise lowers the onset for a
        // few cycles and a W_full that follows it is right (seen: 117 carried
        // for four cycles of the second transfer, whose medians the first
        // version of this check compared with the first transfer's).
        let mut ratios: Vec<i64> = Vec::new();
        for f in &flows {
            let carried: std::collections::HashMap<i64, i64> = f
                .iter()
                .filter(|r| i(r, "wfull_prev") > 0 && r["phase"] == "RAMP")
                .map(|r| (i(r, "cycle"), i(r, "wfull_prev")))
                .collect();
            for (cycle, o) in reno_onsets(f) {
                if let Some(w) = carried.get(&(cycle + 1)) {
                    ratios.push(w * 1000 / o);
                }
            }
        }
        eprintln!("ub_reno: carried W_full / previous onset (x1000) {ratios:?}");
        if ratios.len() < 3 {
            return Err(format!("{} cycle pairs", ratios.len()));
        }
        let r = median(&mut ratios);
        if !(900..=1000).contains(&r) {
            return Err(format!(
                "W_full carried is {r}/1000 of the onset before it (beta = 970)"
            ));
        }
        Ok(())
    };
    judged_on_a_valid_link("k = 0.125", || ub_reno_alone(0.125, 192 * MB), judge);
}

/// The guard (ccl_guard() in bpf/ccload_maps.bpf.h).  This VM's kernel
/// skips every hook of ours that runs on top of PID 1, and a skipped
/// ssthresh() leaves the trampoline's uninitialised return slot in
/// snd_ssthresh: seen twice as 0x8130f570, after which PRR set the window
/// to ~1.9e9.  With fault_skip = 1 every ssthresh() returns that value and
/// leaves no mark, as a skipped one does (the set_state() after it marks
/// nothing either); the guard must repair every such reduction on the next
/// ACK, so that no window the telemetry shows leaves the path's scale (the
/// lab's bound: 16 x (BDP + buffer), at least 1,000 segments; without the
/// guard Recovery ends at cwnd = 0x8130f570).
#[test]
fn the_guard_repairs_what_a_skipped_ssthresh_leaves() {
    let _s = privileged!();
    let _g = Attached::new("ub_reno", &[]);
    set_test_param("ub_reno", "fault_skip", 1).unwrap();
    let cfg = LinkCfg {
        rate_mbit: 20.0,
        delay_ms: 5.0,
        buffer_pkts: 4,
        loss: 0.002,
        ..Default::default()
    };
    let storage = cfg.bdp_pkts() as u64 + 4;
    let l = Bottleneck::new(cfg);
    let (loss0, fixed0, cw0) = (
        stat_of("ub_reno", "loss_events"),
        stat_of("ub_reno", "ssth_repaired"),
        stat_of("ub_reno", "cwnd_repaired"),
    );
    let retrans0 = l.sender_tcp("RetransSegs");
    let w = Watch::start(&["--algo", "ub_reno"]);
    // Telemetry comes once per round outside Recovery, and how much of a
    // transfer is outside Recovery depends on what each fault's burst
    // costs, which grows with the send buffer the connection has tuned up
    // to (one 8-MB transfer in CI: 17 rounds, 229 retransmissions a fault;
    // a 4-MB one here: 52-103 rounds, 65-130 a fault).  So 4-MB transfers
    // follow each other until 20 rounds are on record (at most six;
    // without the guard a transfer records about 2).
    let (mut recs, mut bytes, mut secs) = (Vec::new(), 0, 0.0);
    for _ in 0..6 {
        let t = l.transfer("ub_reno", 4 * MB).expect("transfer");
        (bytes, secs) = (bytes + t.bytes, secs + t.secs);
        while let Ok(rec) = w.rx.recv_timeout(Duration::from_millis(300)) {
            recs.push(rec);
        }
        if recs.len() >= 20 {
            break;
        }
    }
    w.stop();
    let retrans = l.sender_tcp("RetransSegs") - retrans0;
    let losses = stat_of("ub_reno", "loss_events") - loss0;
    let fixed = stat_of("ub_reno", "ssth_repaired") - fixed0;
    let cw_fixed = stat_of("ub_reno", "cwnd_repaired") - cw0;
    let cwnd_max = recs.iter().map(|r| i(r, "cwnd") as u64).max().unwrap_or(0);
    let segs = bytes / 1448;
    eprintln!(
        "fault_skip = 1: {losses} loss events, ssthresh repaired {fixed}, cwnd repaired \
         {cw_fixed}; largest window in {} rounds {cwnd_max} (storage {storage}); \
         {retrans} retransmissions for {segs} segments; {:.2} Mbit/s",
        recs.len(),
        bytes as f64 * 8.0 / secs / 1e6
    );
    assert!(losses >= 5, "{losses} loss events");
    // Every reduction began with the fault; RTOs while in Loss call no
    // ssthresh() and the last one may end with the transfer.
    assert!(
        fixed * 2 >= losses,
        "{fixed} repairs for {losses} loss events"
    );
    assert!(recs.len() >= 20, "{} telemetry rounds", recs.len());
    let bound = (16 * storage).max(1000);
    assert!(cwnd_max <= bound, "window {cwnd_max} above {bound}");
    // What the guard cannot prevent: the ACK a fault hits runs PRR on the
    // garbage before any hook of ours runs again, and the sender bursts its
    // send buffer (measured: ~180 retransmissions per fault on this 4-packet
    // buffer; one fault per loss here, a few in 300 lab runs for real).
    // The window and every repair are checked above; the cost is printed.
}
