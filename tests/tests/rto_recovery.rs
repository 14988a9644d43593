//! An RTO while the flow is in fast recovery.  The kernel then skips
//! `ssthresh()` and `CA_EVENT_LOSS` and calls only `set_state(TCP_CA_Loss)`
//! (tcp_enter_loss): a controller that computes its target only in
//! `ssthresh()` slow-starts towards 0 there, and one that resets its state
//! on `CA_EVENT_LOSS` only keeps the recovery's state through the RTO.
//! Every controller must handle each such RTO (its `rtos` counter, which
//! counts the RTOs its hooks acted on, grows by at least the kernel's count
//! of RTOs in Recovery), keep a window above 0 in every telemetry record,
//! carry the link again after the episode and finish its transfer.

use std::time::{Duration, Instant};

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

#[test]
fn every_controller_survives_an_rto_during_recovery() {
    let _s = privileged!();
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 50,
        delay_ms: 10.0,
        ..Default::default()
    });
    for algo in ccload::bpf::algos::Algo::ALL {
        let name = algo.name();
        let _g = Attached::new(name, &[]);
        let mut w = Watch::start(&["--algo", name]);
        assert!(w.wait_holding(name), "watch did not start");
        let before = link.sender_tcpext("TCPSackRecoveryFail");
        let rtos0 = stat_of(name, "rtos");
        let bytes = 16 * MB; // ~7 s at 20 Mbit/s without the episodes
        let t0 = Instant::now();
        let (t, episodes, last_end) = std::thread::scope(|sc| {
            let h = sc.spawn(|| link.transfer(name, bytes));
            // Episodes until one RTO fired in Recovery (TcpExt
            // TCPSackRecoveryFail counts exactly those), at most four.
            std::thread::sleep(Duration::from_millis(1500));
            let (mut episodes, mut last_end) = (0, 0.0);
            while episodes < 4 && link.sender_tcpext("TCPSackRecoveryFail") == before {
                link.recovery_blackout(0.9, Duration::from_millis(800), Duration::from_millis(300));
                last_end = t0.elapsed().as_secs_f64();
                episodes += 1;
                std::thread::sleep(Duration::from_millis(1200));
            }
            (h.join().expect("transfer thread"), episodes, last_end)
        });
        let t = t.unwrap_or_else(|e| panic!("{name}: {e}"));
        let secs = t0.elapsed().as_secs_f64();
        let rtos_in_recovery = link.sender_tcpext("TCPSackRecoveryFail") - before;
        let handled = stat_of(name, "rtos") - rtos0;
        std::thread::sleep(Duration::from_millis(300));
        let mut recs = Vec::new();
        while let Ok(r) = w.rx.try_recv() {
            recs.push(r);
        }
        w.stop();
        let sender: Vec<&serde_json::Value> = recs
            .iter()
            .filter(|r| r["remote"].as_str().unwrap_or("").starts_with("10.77.2.2:"))
            .collect();
        eprintln!(
            "{name}: {episodes} episode(s), {rtos_in_recovery} RTO(s) in Recovery, {handled} RTO(s) \
             handled by the controller, {} MB in {secs:.1} s, {} sender records, min cwnd {:?}",
            t.bytes / MB,
            sender.len(),
            sender.iter().map(|r| i(r, "cwnd")).min()
        );
        assert!(
            rtos_in_recovery >= 1,
            "{name}: no RTO fired during Recovery in {episodes} episodes"
        );
        assert!(
            handled >= rtos_in_recovery,
            "{name}: {rtos_in_recovery} RTO(s) in Recovery, but the controller acted on {handled}"
        );
        assert_eq!(t.bytes, bytes, "{name}: transfer incomplete");
        assert!(
            sender.len() >= 10,
            "{name}: {} sender records",
            sender.len()
        );
        assert!(
            sender.iter().all(|r| i(r, "cwnd") > 0),
            "{name}: a record with cwnd 0"
        );
        // The window recovers: from 2 s after the last episode, or 1 s
        // after the flow resumed if that is later, for 2 s or to the end,
        // the flow carries at least 40 % of the link.  It has resumed at
        // the first quarter second after the episode that carries 2 Mbit/s:
        // a flow stuck at cwnd 0 sends one segment per backed-off RTO (well
        // under 0.1 Mbit/s), and never resumes.  The kernel's retransmission
        // timer backs off while the episode's losses last: one RTO in
        // Recovery is behind the flow within 1 s of the episode, but with
        // two in one episode (about one in 20 episodes: 90 % loss lets a
        // retransmission through, the flow leaves Loss and meets the
        // blackout in Recovery again) a transfer took 11.1 s where the
        // others took 8.3-9.3.  A transfer that ended within that time has
        // recovered.
        let end = t.timeline.last().map_or(0.0, |s| s.0);
        let at = |x: f64| {
            t.timeline
                .iter()
                .take_while(|s| s.0 <= x)
                .last()
                .copied()
                .unwrap_or((0.0, 0))
        };
        let rate = |x: f64, y: f64| {
            let (p, q) = (at(x), at(y));
            (q.0 > p.0).then(|| (q.1 - p.1) as f64 * 8.0 / (q.0 - p.0) / 1e6)
        };
        let resumed = (0..)
            .map(|k| last_end + 0.25 * k as f64)
            .take_while(|&x| x < end)
            .find(|&x| rate(x, x + 0.25).is_some_and(|r| r >= 2.0));
        let from = resumed.map_or(last_end + 2.0, |r| (last_end + 2.0).max(r + 1.0));
        eprintln!(
            "{name}: resumed {} s after the episode",
            resumed.map_or("never".into(), |r| format!("{:.2}", r - last_end))
        );
        assert!(
            resumed.is_some(),
            "{name}: never carried 2 Mbit/s in a quarter second after the episode"
        );
        if end > from + 0.5 {
            let to = (from + 2.0).min(end);
            let mbit = rate(from, to).unwrap_or(0.0);
            eprintln!("{name}: {mbit:.1} Mbit/s from {from:.1} s to {to:.1} s");
            if mbit < 8.0 {
                // What a failure needs to say: the goodput per 0.25 s from
                // the episode on, and the sender's window and state then.
                let mut x = last_end - 1.5;
                let mut line = String::new();
                while x < end {
                    if let Some(r) = rate(x, x + 0.25) {
                        line += &format!(" {x:.2}s:{r:.1}");
                    }
                    x += 0.25;
                }
                eprintln!("{name}: Mbit/s per 0.25 s:{line}");
                // (t_us is the sender's clock: from its first record, which
                // comes within a round trip of the transfer's start)
                let t_first = sender.first().map_or(0, |r| i(r, "t_us"));
                let near: Vec<_> = sender
                    .iter()
                    .filter(|r| {
                        let s = (i(r, "t_us") - t_first) as f64 / 1e6;
                        s >= last_end - 1.5 && s <= from + 2.0
                    })
                    .collect();
                for r in near.iter().step_by(near.len().div_ceil(80).max(1)) {
                    eprintln!(
                        "  +{:.3}s {} ca_state {} cwnd {} ssthresh {} srtt {} us in_flight {}",
                        (i(r, "t_us") - t_first) as f64 / 1e6,
                        r["phase"].as_str().unwrap_or("?"),
                        i(r, "ca_state"),
                        i(r, "cwnd"),
                        i(r, "ssthresh"),
                        i(r, "srtt_us"),
                        i(r, "in_flight")
                    );
                }
            }
            assert!(
                mbit >= 8.0,
                "{name}: {mbit:.1} Mbit/s of 20 from {from:.1} s (the episode ended at \
                 {last_end:.1} s)"
            );
        }
    }
}
