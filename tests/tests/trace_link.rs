//! Trace-driven links (testbed/src/trace.rs through the delay line): the
//! replay carries the trace's rate, and ccpd's window follows a capacity
//! that steps.

use std::sync::Arc;

use ccload_itests::link::{Bottleneck, LinkCfg, TraceLink};
use ccload_itests::trace::{Limit, Trace};
use ccload_itests::*;

const MB: u64 = 1 << 20;

fn trace_link(down: Trace, delay_ms: f64, buffer: u32) -> Bottleneck {
    Bottleneck::new(LinkCfg {
        delay_ms,
        trace: Some(TraceLink {
            down: Arc::new(down),
            up: None,
            offset_ms: 0,
            buffer: Limit::Packets(buffer),
        }),
        ..Default::default()
    })
}

/// Goodput of the receiver's timeline between `a` and `b` s, Mbit/s.
fn goodput(t: &Transfer, a: f64, b: f64) -> f64 {
    let at = |s: f64| {
        t.timeline
            .iter()
            .take_while(|(x, _)| *x <= s)
            .last()
            .map_or(0, |p| p.1)
    };
    (at(b) - at(a)) as f64 * 8.0 / 1e6 / (b - a)
}

/// One 1500-byte opportunity a millisecond is 12 Mbit/s of IP packets:
/// a bulk flow's goodput (TCP payload, 1448 of 1500 bytes) is 11-12 Mbit/s,
/// and the emulator's own accounting says the trace offered 12.
#[test]
fn a_fixed_trace_carries_twelve_megabit() {
    let _s = privileged!();
    let mut link = trace_link(Trace::fixed(1, 1000), 10.0, 100);
    let t = link.transfer("cubic", 8 * MB).expect("transfer");
    let whole = t.bytes as f64 * 8.0 / 1e6 / t.secs;
    let settled = goodput(&t, 1.0, t.secs - 0.2);
    let rep = link.stop_delay().expect("a delay line");
    let tr = rep
        .forward
        .trace
        .expect("the forward direction is trace-driven");
    eprintln!(
        "fixed trace: {whole:.2} Mbit/s over {:.1} s, {settled:.2} after the first second; \
         offered {:.2} Mbit/s, {} packets, {} tail drops, queueing p50 {:.1} p95 {:.1} ms",
        t.secs,
        tr.offered_mbit(),
        tr.packets,
        tr.drops,
        tr.qdelay_ms(0.5),
        tr.qdelay_ms(0.95)
    );
    assert_eq!(t.bytes, 8 * MB);
    assert!((11.0..=12.0).contains(&settled), "{settled:.2} Mbit/s");
    assert!(
        (11.8..=12.2).contains(&tr.offered_mbit()),
        "offered {:.2}",
        tr.offered_mbit()
    );
    // 100 packets of buffer drained at 1 a ms: at most ~100 ms of queue.
    assert!(tr.qdelay_ms(0.95) <= 102.0, "{:.1} ms", tr.qdelay_ms(0.95));
}

/// When a new rate is first reached: the first time s >= `from`
/// at which a 250-ms window of the receiver's timeline carries `frac` of
/// `mbit`.
fn reached(t: &Transfer, from: f64, mbit: f64, frac: f64) -> Option<f64> {
    let mut s = from;
    while s + 0.25 <= t.secs {
        if goodput(t, s, s + 0.25) >= frac * mbit {
            return Some(s + 0.25);
        }
        s += 0.05;
    }
    None
}

/// A capacity that triples (12 to 36 Mbit/s, 40-ms RTT): ccpd's window
/// follows the new rate, reaching 0.8 of it within 100 RTTs of the step (a
/// generous bound that a controller which never grows past its old window
/// fails; cubic takes about 6 RTTs, ccpd about 60 now, docs/ccpd.md), and
/// its queue stays short.
#[test]
fn ccpd_follows_a_capacity_step() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &[]);
    let mut link = trace_link(Trace::steps(&[(4000, 1), (4000, 3)]), 20.0, 200);
    let t = link.transfer("ccpd", 24 * MB).expect("transfer");
    let tr = link.stop_delay().unwrap().forward.trace.unwrap();
    let new_rate = 36.0 * 1448.0 / 1500.0;
    let at = reached(&t, 4.0, new_rate, 0.8);
    eprintln!(
        "ccpd, 12 -> 36 Mbit/s at 4 s: {:.2} Mbit/s before, {:.2} in 6-8 s, 0.8 x new rate at {at:?} s; \
         queueing p50 {:.1} p95 {:.1} ms, {} drops",
        goodput(&t, 2.0, 4.0),
        goodput(&t, 6.0, 8.0_f64.min(t.secs)),
        tr.qdelay_ms(0.5),
        tr.qdelay_ms(0.95),
        tr.drops
    );
    let at = at.unwrap_or_else(|| panic!("ccpd never reached 0.8 x {new_rate:.1} Mbit/s"));
    assert!(
        at <= 4.0 + 100.0 * 0.040,
        "0.8 x the new rate only at {at:.2} s"
    );
    assert!(tr.qdelay_ms(0.95) < 100.0, "{:.1} ms", tr.qdelay_ms(0.95));
}
