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
