//! Every controller built into ccload loads, carries a real transfer through
//! an emulated bottleneck, reports telemetry, and detaches cleanly.

use std::time::Duration;

use ccload::algos::Algo;
use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

#[test]
fn every_built_controller_runs_a_bottleneck_transfer() {
    let _s = privileged!();
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 50.0,
        buffer_pkts: 50,
        ..Default::default()
    });
    for algo in Algo::ALL {
        let name = algo.name();
        let g = Attached::new(name, &[]);
        let t = link
            .transfer(name, 12 * MB)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
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
            "{name}: {:.1} Mbit/s through 50 Mbit/s, 50-packet buffer",
            t.mbps()
        );
        drop(g);
        assert!(
            wait_until(Duration::from_secs(5), || !registered(name)),
            "{name} left registered"
        );
    }
    assert!(Algo::ALL.contains(&Algo::CtcpPlus));
}
