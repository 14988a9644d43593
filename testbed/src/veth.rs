//! Two namespaces joined by one veth pair and nothing else: a host and
//! the next one on a LAN, at whatever rate the kernel moves packets (no
//! delay line, no qdisc limit).  The path of `cargo xtask bench`'s CPU
//! table and of the lab's cells past the delay line's rate.

use std::net::Ipv4Addr;

use crate::link::set_offloads;
use crate::netns::NetNs;

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
        let (a_ip, b_ip) = (Ipv4Addr::new(10, 78, 0, 1), Ipv4Addr::new(10, 78, 0, 2));
        // One `ip -b` per namespace, as the link's wire() (link.rs).
        let up = |dev: &str, ip: Ipv4Addr| {
            format!("addr add {ip}/24 dev {dev}\nlink set {dev} mtu 1500 up\n")
        };
        a.exec_ok_with(
            "ip",
            &["-b", "-"],
            &format!(
                "link add va type veth peer name vb netns {}\n{}",
                b.name,
                up("va", a_ip)
            ),
        );
        b.exec_ok_with("ip", &["-b", "-"], &up("vb", b_ip));
        for (ns, dev) in [(&a, "va"), (&b, "vb")] {
            set_offloads(ns, dev, offloads);
        }
        VethPair { a, b, a_ip, b_ip }
    }
}
