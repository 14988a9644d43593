//! An emulated bottleneck: `sender -veth- router -veth- receiver`, three
//! network namespaces, with a drop-tail TBF + pfifo queue of N packets on the
//! router's egress toward the receiver and optional random loss (iptables
//! statistic) in the router.  No propagation delay is added here (the base
//! RTT is the veth round trip, ~0.1 ms); queueing delay dominates.
//!
//! Facts from the lab issue: offloads are turned off on every veth (else a
//! "100-packet" queue holds far more), the bottleneck sits in the router (on
//! the sender's device TCP small queues would keep it empty), and per-netns
//! sysctls set tcp_no_metrics_save and 64 MB socket buffers.

use std::net::{Ipv4Addr, SocketAddr};

use crate::{run_ok, NetNs};

pub struct LinkCfg {
    pub rate_mbit: u32,
    pub buffer_pkts: u32,
    pub loss: f64,
    pub mtu: u32,
}

impl Default for LinkCfg {
    fn default() -> Self {
        LinkCfg {
            rate_mbit: 20,
            buffer_pkts: 50,
            loss: 0.0,
            mtu: 1500,
        }
    }
}

pub struct Bottleneck {
    pub sender: NetNs,
    pub router: NetNs,
    pub receiver: NetNs,
    pub receiver_ip: Ipv4Addr,
    pub cfg: LinkCfg,
}

/// Run a whitespace-separated command line inside `ns`; it must succeed.
fn in_ns(ns: &NetNs, cmdline: &str) {
    let mut args = vec!["netns", "exec", &ns.name];
    args.extend(cmdline.split_whitespace());
    run_ok("ip", &args);
}

fn ns_sysctl(ns: &NetNs, key: &str, val: &str) {
    run_ok(
        "ip",
        &[
            "netns",
            "exec",
            &ns.name,
            "sysctl",
            "-qw",
            &format!("{key}={val}"),
        ],
    );
}

fn offloads_off(ns: &NetNs, dev: &str) {
    // Not every offload is settable on every kernel; ignore the exit code.
    let _ = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name, "ethtool", "-K", dev])
        .args(["tso", "off", "gso", "off", "gro", "off"])
        .output();
}

impl Bottleneck {
    pub fn new(cfg: LinkCfg) -> Bottleneck {
        let (s, r, d) = (NetNs::new(), NetNs::new(), NetNs::new());
        let mtu = cfg.mtu.to_string();
        run_ok(
            "ip",
            &[
                "-n", &s.name, "link", "add", "s0", "type", "veth", "peer", "name", "r0", "netns",
                &r.name,
            ],
        );
        run_ok(
            "ip",
            &[
                "-n", &r.name, "link", "add", "r1", "type", "veth", "peer", "name", "d0", "netns",
                &d.name,
            ],
        );
        for (ns, dev, addr) in [
            (&s, "s0", "10.77.1.1/24"),
            (&r, "r0", "10.77.1.2/24"),
            (&r, "r1", "10.77.2.1/24"),
            (&d, "d0", "10.77.2.2/24"),
        ] {
            run_ok("ip", &["-n", &ns.name, "addr", "add", addr, "dev", dev]);
            run_ok(
                "ip",
                &["-n", &ns.name, "link", "set", dev, "mtu", &mtu, "up"],
            );
            offloads_off(ns, dev);
        }
        run_ok(
            "ip",
            &["-n", &s.name, "route", "add", "default", "via", "10.77.1.2"],
        );
        run_ok(
            "ip",
            &["-n", &d.name, "route", "add", "default", "via", "10.77.2.1"],
        );
        ns_sysctl(&r, "net.ipv4.ip_forward", "1");
        for ns in [&s, &d] {
            ns_sysctl(ns, "net.ipv4.tcp_no_metrics_save", "1");
            ns_sysctl(ns, "net.ipv4.tcp_rmem", "4096 131072 67108864");
            ns_sysctl(ns, "net.ipv4.tcp_wmem", "4096 131072 67108864");
        }
        // Drop-tail bottleneck: TBF shapes, its pfifo child holds N packets.
        in_ns(
            &r,
            &format!(
                "tc qdisc add dev r1 root handle 1: tbf rate {}mbit burst 3028 latency 10s",
                cfg.rate_mbit
            ),
        );
        in_ns(
            &r,
            &format!(
                "tc qdisc add dev r1 parent 1:1 handle 10: pfifo limit {}",
                cfg.buffer_pkts
            ),
        );
        if cfg.loss > 0.0 {
            in_ns(
                &r,
                &format!(
                    "iptables -A FORWARD -m statistic --mode random --probability {} -j DROP",
                    cfg.loss
                ),
            );
        }
        Bottleneck {
            sender: s,
            router: r,
            receiver: d,
            receiver_ip: Ipv4Addr::new(10, 77, 2, 2),
            cfg,
        }
    }

    /// Packets the bottleneck's pfifo dropped so far (`tc -s qdisc`).
    pub fn queue_drops(&self) -> u64 {
        let o = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.router.name,
                "tc",
                "-s",
                "qdisc",
                "show",
                "dev",
                "r1",
            ])
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&o.stdout);
        let mut lines = s.lines().skip_while(|l| !l.starts_with("qdisc pfifo"));
        lines.next();
        lines
            .next()
            .and_then(|l| l.split("dropped ").nth(1))
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Send `bytes` from sender to receiver with `cc` on both ends.
    pub fn transfer(&self, cc: &str, bytes: u64) -> std::io::Result<crate::Transfer> {
        let listen: SocketAddr = (self.receiver_ip, 0).into();
        crate::transfer_across(&self.sender, &self.receiver, cc, bytes, listen)
    }
}
