//! CCPD in the kernel against a stall of the path.
//!
//! A path that stops for tens of milliseconds (a router or a host
//! descheduled, a link-layer retry burst; here the lab's delay line) returns
//! a burst of ACKs whose RTT samples are longer than any queue the window
//! could have built.  CCPD's rtt_max only grows, so before the samples were
//! bounded by what was in flight (`ccpd_rtt_sample`), one 20-ms stall of the
//! lab's delay line lifted B from 166 to 375 packets on a 20-ms path and the
//! law filled the buffer every few rounds for the rest of the flow: 4,457
//! retransmissions and 61 % of the time in Recovery in 20 s.

use std::time::{Duration, Instant};

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

#[test]
fn a_path_stall_is_not_taken_for_buffer() {
    let _s = privileged!();
    let mut link = Bottleneck::new(LinkCfg {
        rate_mbit: 100.0,
        buffer_pkts: 166, // 1 BDP at 20 ms
        delay_ms: 10.0,
        ..Default::default()
    });
    let buffer = link.cfg.buffer_pkts as i64;
    let _g = Attached::new("ccpd", &[]);
    let mut w = Watch::start(&["--algo", "ccpd"]);
    assert!(w.wait_holding("ccpd"), "watch did not start");
    let (out0, re0) = (link.sender_tcp("OutSegs"), link.sender_tcp("RetransSegs"));
    let stall_at = Duration::from_secs(3);
    let t0 = Instant::now();
    let t = std::thread::scope(|sc| {
        let h = sc.spawn(|| link.transfer("ccpd", 100 * MB)); // ~9 s
        std::thread::sleep(stall_at);
        link.stall(Duration::from_millis(40));
        h.join().expect("transfer thread")
    })
    .unwrap_or_else(|e| panic!("ccpd: {e}"));
    let secs = t0.elapsed().as_secs_f64();
    let (out, re) = (
        link.sender_tcp("OutSegs") - out0,
        link.sender_tcp("RetransSegs") - re0,
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut recs = Vec::new();
    while let Ok(r) = w.rx.try_recv() {
        recs.push(r);
    }
    w.stop();
    let late = link.stop_delay().expect("delay line").combined();
    let sender: Vec<&serde_json::Value> = recs
        .iter()
        .filter(|r| r["remote"].as_str().unwrap_or("").starts_with("10.77.2.2:"))
        .collect();
    assert!(sender.len() > 100, "{} sender records", sender.len());
    // Records by time since the flow's first one, relative to the stall (us).
    let t_first = i(sender[0], "t_us");
    let stall_us = stall_at.as_micros() as i64;
    let within = |from: i64, to: i64| {
        sender.iter().filter(move |r| {
            let t = i(r, "t_us") - t_first - stall_us;
            (from..to).contains(&t)
        })
    };
    let after: Vec<&&serde_json::Value> = within(1_000_000, i64::MAX).collect();
    // The window in force in the second before the stall: what can be in
    // flight ahead of any packet the stall held.
    let cwnd_before = within(-1_000_000, 0)
        .map(|r| i(r, "cwnd").max(i(r, "in_flight")))
        .max()
        .unwrap_or(0);
    // The smallest capacity estimate around the stall (segments/s).
    let c_min = within(-1_000_000, 500_001)
        .map(|r| i(r, "c_sps"))
        .min()
        .unwrap_or(0);
    let rtt_min = sender.last().map(|r| i(r, "rtt_min_us")).unwrap_or(0);
    let b_max = after.iter().map(|r| i(r, "b_q10") >> 10).max().unwrap_or(0);
    // rtt_max as the forced stall left it: its samples arrive within ~60 ms
    // and the smoothed RTT that feeds rtt_max peaks within a few rounds.
    // Later in the run a natural stall of the delay line (about one run in
    // ten of this length on a busy 2-core VM) may lift it again, bounded by
    // the window of that moment, which the law may have grown since: a local
    // repetition read 42.7 ms at +0.3 s, then 51.4 ms at +2 s (window 245
    // then); the CI run that failed on the end-of-run value read 51.8 ms.
    let rtt_max = within(0, 400_000)
        .map(|r| i(r, "rtt_max_us"))
        .max()
        .unwrap_or(0);
    let rtt_max_end = sender.last().map(|r| i(r, "rtt_max_us")).unwrap_or(0);
    let law = after
        .iter()
        .filter(|r| r["phase"] == "CA" && i(r, "ca_state") == 0)
        .count();
    eprintln!(
        "ccpd, 100 Mbit/s, 20 ms, {buffer}-packet buffer, 40-ms stall at {} s: {:.1} Mbit/s, \
         {re} of {out} segments retransmitted, B max {b_max} after the stall (rtt_max {rtt_max} us at +0.4 s, {rtt_max_end} at the end; m + window {cwnd_before} / C {c_min} = {} us), \
         law in {law} of {} records, delay-line lateness max {} us, {secs:.1} s",
        stall_at.as_secs(),
        t.mbps(),
        rtt_min + cwnd_before * 1_000_000 / c_min.max(1),
        after.len(),
        late.lateness_us(1.0),
    );
    assert_eq!(t.bytes, 100 * MB);
    // The stall happened (the histogram saturates at 20 ms).
    assert!(
        late.lateness_us(1.0) >= 20_000,
        "no stall seen by the delay line: max lateness {} us",
        late.lateness_us(1.0)
    );
    assert!(after.len() > 50, "{} records after the stall", after.len());
    // The bound's promise: a sample reads no more queueing delay than the
    // packets ahead of it take at C, so rtt_max - m <= window / C with the
    // window before the stall (~210 packets, 25 ms at C here).  Unbounded,
    // the stall's samples lifted rtt_max to 57-60 ms (B 388-421 packets for
    // this 166-packet buffer).  The bound is loose by the pipe (20 ms), so
    // rtt_max may exceed m + the buffer's delay, never m + window / C.
    assert!(cwnd_before > 0 && c_min > 0, "no records before the stall");
    let allowed = rtt_min + cwnd_before * 1_000_000 / c_min;
    assert!(
        rtt_max <= allowed + 1_000,
        "rtt_max {rtt_max} us after a 40-ms stall, m + window / C = {allowed} us \
         (window {cwnd_before}, C {c_min}/s, B {b_max} packets for a {buffer}-packet buffer)"
    );
    // No overflow cycle: the slow-start exit and the stall's burst cost a
    // few segments; the lock-in cost thousands.
    assert!(re <= 150, "{re} of {out} segments retransmitted");
    assert!(
        law * 10 >= after.len() * 8,
        "the law ran in {law} of {} records after the stall",
        after.len()
    );
}
