//! Every controller built into ccload loads, carries a real transfer through
//! an emulated bottleneck without retransmitting much more than it must,
//! survives random loss, reports telemetry, and detaches cleanly.

use std::time::Duration;

use ccload::bpf::algos::Algo;
use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

/// A transfer with `cc` and the share of the sender's segments that were
/// retransmissions (the sender namespace's Tcp counters, whole transfer).
fn retrans_of(link: &Bottleneck, cc: &str, bytes: u64) -> (Transfer, f64) {
    let (out0, re0) = (link.sender_tcp("OutSegs"), link.sender_tcp("RetransSegs"));
    let t = link
        .transfer(cc, bytes)
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    let (out, re) = (
        link.sender_tcp("OutSegs") - out0,
        link.sender_tcp("RetransSegs") - re0,
    );
    assert!(
        out > bytes / 1500,
        "{cc}: {out} segments sent for {bytes} bytes"
    );
    (t, re as f64 / out as f64)
}

#[test]
fn every_built_controller_runs_a_bottleneck_transfer() {
    let _s = privileged!();
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 50.0,
        buffer_pkts: 50,
        ..Default::default()
    });
    // cubic through the same link: what a 50-packet buffer costs a
    // loss-based CC here (measured: a few hundred segments, < 2 %).
    let (t, cubic_frac) = retrans_of(&link, "cubic", 12 * MB);
    assert_eq!(t.bytes, 12 * MB);
    for algo in Algo::ALL {
        let name = algo.name();
        // What this kernel cannot run (ccpd before Linux 6.10) is refused
        // in one line, and nothing is left registered.
        if let Some(why) = ccload::bpf::kernel_lacks(algo) {
            let o = ccload(&["attach", "--algo", name]);
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{name}: {e}");
            assert!(e.contains(&why) && e.lines().count() == 1, "{name}: {e}");
            assert!(!registered(name), "{name}: registered after a refusal");
            eprintln!("{name}: refused on this kernel ({why})");
            continue;
        }
        let g = Attached::new(name, &[]);
        let (t, frac) = retrans_of(&link, name, 12 * MB);
        assert_eq!(t.bytes, 12 * MB, "{name}");
        assert_eq!(t.sender_cc, name);
        // 12 MB over 50 Mbit/s takes >= 2 s; a controller that stalls fails here.
        assert!(
            t.mbps() > 10.0,
            "{name}: {:.1} Mbit/s on a 50 Mbit/s link",
            t.mbps()
        );
        let st = status_json();
        let a = st["attached"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["algo"] == name)
            .unwrap();
        assert!(
            a["stats"]["flows_init"].as_u64().unwrap() >= 2,
            "{name}: {a}"
        );
        assert!(
            a["stats"]["events"].as_u64().unwrap() > 0,
            "{name}: telemetry"
        );
        eprintln!(
            "{name}: {:.1} Mbit/s through 50 Mbit/s, 50-packet buffer, {:.2} % retransmitted \
             (cubic {:.2} %)",
            t.mbps(),
            frac * 100.0,
            cubic_frac * 100.0
        );
        // An early ccpd resent about every segment once its window
        // passed the path storage (586,255 retransmits for 1.1 M segments):
        // a controller may resend at most 5 % of what it sends (cubic's
        // share is far below that here), whatever its goodput.
        assert!(
            frac < 0.05,
            "{name}: {:.1} % of segments retransmitted (cubic {:.2} %)",
            frac * 100.0,
            cubic_frac * 100.0
        );
        // Random loss (1 %, both tails of the window see it): the transfer
        // completes and keeps moving; a controller that cuts to zero or
        // stalls after a loss fails the rate bound.
        // On the same link: a new one costs more than the transfer in a
        // TCG guest (docs/testing.md, "Other kernels").
        link.set_random_loss(0.01);
        let (t, frac) = retrans_of(&link, name, 4 * MB);
        link.set_random_loss(0.0);
        assert_eq!(t.bytes, 4 * MB, "{name} with 1 % loss");
        assert!(
            t.mbps() > 2.0 && frac < 0.10,
            "{name} with 1 % loss: {:.2} Mbit/s, {:.1} % retransmitted",
            t.mbps(),
            frac * 100.0
        );
        eprintln!(
            "{name}: {:.1} Mbit/s with 1 % random loss, {:.2} % retransmitted",
            t.mbps(),
            frac * 100.0
        );
        // The guard (ccl_guard, docs/known-issues.md): after a lossy
        // bottleneck and random loss, every reduction and undo went
        // through our hooks unless the kernel skipped one, so a kernel
        // that skips none must see no repair.
        let repaired = stat_of(name, "ssth_repaired") + stat_of(name, "cwnd_repaired");
        eprintln!(
            "{name}: the guard repaired {repaired} (the kernel {} hooks on top of PID 1)",
            if kernel_skips_pid1_hooks() {
                "skips"
            } else {
                "skips no"
            }
        );
        if !kernel_skips_pid1_hooks() {
            assert_eq!(
                repaired, 0,
                "{name}: the guard repaired a kernel that skips nothing"
            );
        }
        drop(g);
        assert!(
            wait_until(Duration::from_secs(5), || !registered(name)),
            "{name} left registered"
        );
    }
    assert!(Algo::ALL.contains(&Algo::CtcpPlus));
}
