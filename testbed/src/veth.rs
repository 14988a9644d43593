//! Two namespaces joined by one veth pair and nothing else: a host and
//! the next one on a LAN, at whatever rate the kernel moves packets (no
//! delay line, no qdisc limit).  The path of `cargo xtask bench`'s CPU
//! table and of the lab's cells past the delay line's rate.

use std::net::Ipv4Addr;

use crate::link::set_offloads;
use crate::netns::{run_ok, NetNs};

pub struct VethPair {
    pub a: NetNs,
    pub b: NetNs,
    pub a_ip: Ipv4Addr,
    pub b_ip: Ipv4Addr,
}

impl VethPair {
    /// MTU 1500; TSO, GSO and GRO on (`offloads`) or off at both ends.
    pub fn new(offloads: bool) -> VethPair {
        let (a, b) = (NetNs::new(), NetNs::new());
        run_ok(
            "ip",
            &[
                "-n", &a.name, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns",
                &b.name,
            ],
        );
        let (a_ip, b_ip) = (Ipv4Addr::new(10, 78, 0, 1), Ipv4Addr::new(10, 78, 0, 2));
        for (ns, dev, ip) in [(&a, "va", a_ip), (&b, "vb", b_ip)] {
            let cidr = format!("{ip}/24");
            run_ok("ip", &["-n", &ns.name, "addr", "add", &cidr, "dev", dev]);
            run_ok(
                "ip",
                &["-n", &ns.name, "link", "set", dev, "mtu", "1500", "up"],
            );
            set_offloads(ns, dev, offloads);
        }
        VethPair { a, b, a_ip, b_ip }
    }
}
