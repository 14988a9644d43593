//! An emulated bottleneck link, as the papers' dumbbells:
//!
//! ```text
//!   sender s0 -veth- r0 router tr =TUN= delay line =TUN= td receiver
//!   10.77.1.1         10.77.1.2  10.77.2.1                 10.77.2.2
//! ```
//!
//! Three network namespaces.  The router's egress toward the receiver (`tr`)
//! is the bottleneck: TBF at the link rate with a `pfifo limit N` child, an
//! exact drop-tail buffer of N packets.  [`LinkCfg::veth`] replaces the TUN
//! pair and the delay line with a veth pair `tr`/`td`: a LAN, whose RTT is
//! the hosts' own, at rates the delay line cannot carry; a rate of 0 then
//! leaves out the TBF (the pfifo alone, as `10:`, the root).  Random loss
//! is iptables `statistic` on the data direction in the router, or, given a
//! seed, drawn by the delay
//! line (`LinkCfg::loss_seed`, reproducible across runs).  Propagation delay is the userspace
//! [`DelayLine`] between the two TUN devices (the kernel has no netem), one
//! delay per direction, plus a delay class per longer path for the flows put
//! in it ([`LinkCfg::extra_delay_ms`]).
//!
//! Facts from the lab issue: offloads are turned off on every device (else a
//! "100-packet" queue holds far more), the bottleneck sits in the router (on
//! the sender's device TCP small queues would keep it empty), `tc qdisc
//! change` on TBF resets the child's limit (so settings are made once), and
//! per-netns sysctls set tcp_no_metrics_save and 64 MB socket buffers.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::delay::{tun_create, DelayLine, DelayReport, SeededLoss, Shaper};
use crate::netns::NetNs;
use crate::nl::{ifindex, QdiscProbe, QdiscStats};
use crate::trace::{Limit, Trace};

#[derive(Clone, Debug)]
pub struct LinkCfg {
    /// Bottleneck rate, Mbit/s (IP bytes).
    pub rate_mbit: f64,
    /// Drop-tail buffer, packets.
    pub buffer_pkts: u32,
    /// Random loss probability on the data direction.
    pub loss: f64,
    /// Draw that loss in the delay line from this seed ([`SeededLoss`]:
    /// common random numbers across runs) instead of the iptables rule.
    pub loss_seed: Option<u64>,
    pub mtu: u32,
    /// One-way propagation delay sender -> receiver, ms.
    pub delay_ms: f64,
    /// One-way delay receiver -> sender; `None` = same as `delay_ms`.
    pub rev_delay_ms: Option<f64>,
    /// Delay classes for flows with a longer path: class `k` (from 1) adds
    /// `extra_delay_ms[k - 1]` to each direction of the flows whose
    /// receiver port is put in it ([`Bottleneck::set_port_class`]).
    pub extra_delay_ms: Vec<f64>,
    /// No delay line: the router reaches the receiver over a veth pair
    /// (the delays, the seeded loss and the delay classes must be unset).
    pub veth: bool,
    /// TSO, GSO and GRO on at every device (off by default: a
    /// "100-packet" queue of 64-KiB GSO packets holds far more).
    pub offloads: bool,
    /// A trace-driven bottleneck instead of the TBF: the delay line drains
    /// a drop-tail queue at the trace's opportunities (crate::trace);
    /// `rate_mbit` and `buffer_pkts` are then unused.
    pub trace: Option<TraceLink>,
}

/// The capacity traces of a link, one per direction.
#[derive(Clone, Debug)]
pub struct TraceLink {
    /// The data direction (sender to receiver).
    pub down: Arc<Trace>,
    /// The ACK direction; `None` = not shaped.
    pub up: Option<Arc<Trace>>,
    /// Where in the traces the run starts, ms.
    pub offset_ms: u64,
    /// Each direction's drop-tail buffer.
    pub buffer: Limit,
}

impl Default for LinkCfg {
    fn default() -> Self {
        LinkCfg {
            rate_mbit: 20.0,
            buffer_pkts: 50,
            loss: 0.0,
            loss_seed: None,
            mtu: 1500,
            delay_ms: 0.0,
            rev_delay_ms: None,
            extra_delay_ms: Vec::new(),
            veth: false,
            offloads: false,
            trace: None,
        }
    }
}

impl LinkCfg {
    /// Base round-trip time, ms.
    pub fn rtt_ms(&self) -> f64 {
        self.delay_ms + self.rev_delay_ms.unwrap_or(self.delay_ms)
    }

    /// Bandwidth-delay product in MTU-sized packets.
    pub fn bdp_pkts(&self) -> f64 {
        self.rate_mbit * 1e6 / 8.0 * self.rtt_ms() / 1e3 / self.mtu as f64
    }
}

/// How late the TBF's watchdog timer may let a packet leave without the
/// link losing rate, us: the bucket holds one packet plus this much of the
/// rate (at 100 Mbit/s and under, less than its quarter-packet minimum).
const TBF_TIMER_SLACK_US: f64 = 30.0;

/// Handle of the bottleneck's pfifo, `10:`.
pub const PFIFO: u32 = 0x0010_0000;

pub struct Bottleneck {
    // Declared first so it is dropped first: the delay line's TUN fds hold
    // references on the namespaces, which must go before they are deleted.
    delay: Option<DelayLine>,
    pub sender: NetNs,
    pub router: NetNs,
    pub receiver: NetNs,
    pub receiver_ip: Ipv4Addr,
    pub sender_ip: Ipv4Addr,
    pub cfg: LinkCfg,
    /// The delay line's seeded-loss count (kept past `stop_delay`).
    seeded_drops: Arc<AtomicU64>,
    /// Idle CPUs poll while the link exists (crate::awake).
    _awake: crate::awake::Awake,
}

/// TSO, GSO and GRO of `dev` in `ns` on or off.
pub(crate) fn set_offloads(ns: &NetNs, dev: &str, on: bool) {
    let v = if on { "on" } else { "off" };
    // Not every offload is settable on every device; ignore the exit code.
    let _ = ns.exec("ethtool", &["-K", dev, "tso", v, "gso", v, "gro", v]);
}

/// TUN device `name` created in `ns`.
fn tun_in(ns: &NetNs, name: &'static str) -> std::os::fd::OwnedFd {
    ns.run(move || tun_create(name))
        .unwrap_or_else(|e| panic!("TUN {name}: {e} (is /dev/net/tun there?)"))
}

/// The link's devices, addresses, routes and sysctls in the sender's
/// (`s`), router's (`r`) and receiver's (`d`) namespaces: a veth pair from
/// sender to router, and from router to receiver another veth pair, or
/// the delay line's two TUN devices (returned).  One `ip -b` per
/// namespace and the sysctls written in-process: a link took 4 s to set up
/// in a TCG guest with a process (two, through `ip netns exec`) per
/// command, where each exec costs ~70 ms.
fn wire(
    cfg: &LinkCfg,
    s: &NetNs,
    r: &NetNs,
    d: &NetNs,
) -> Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    // No IPv6 chatter (router solicitations, MLD) through the link.
    let no_v6 = [
        ("net.ipv6.conf.all.disable_ipv6", "1"),
        ("net.ipv6.conf.default.disable_ipv6", "1"),
    ];
    let tcp = [
        ("net.ipv4.tcp_no_metrics_save", "1"),
        ("net.ipv4.tcp_rmem", "4096 131072 67108864"),
        ("net.ipv4.tcp_wmem", "4096 131072 67108864"),
    ];
    s.sysctls(&[&no_v6[..], &tcp[..]].concat());
    r.sysctls(&[&no_v6[..], &[("net.ipv4.ip_forward", "1")][..]].concat());
    d.sysctls(&[&no_v6[..], &tcp[..]].concat());
    let up = |dev: &str, addr: &str| {
        format!(
            "addr add {addr} dev {dev}\nlink set {dev} mtu {} txqueuelen 1000 up\n",
            cfg.mtu
        )
    };
    s.exec_ok_with(
        "ip",
        &["-b", "-"],
        &format!(
            "link add s0 type veth peer name r0 netns {}\n{}route add default via 10.77.1.2\n",
            r.name,
            up("s0", "10.77.1.1/24")
        ),
    );
    let (tuns, r_veth, gw) = if cfg.veth {
        let add = format!("link add tr type veth peer name td netns {}\n", d.name);
        (None, add, "via 10.77.2.1")
    } else {
        let t = (tun_in(r, "tr"), tun_in(d, "td"));
        (Some(t), String::new(), "dev td")
    };
    r.exec_ok_with(
        "ip",
        &["-b", "-"],
        &format!(
            "{r_veth}{}{}",
            up("r0", "10.77.1.2/24"),
            up("tr", "10.77.2.1/24")
        ),
    );
    d.exec_ok_with(
        "ip",
        &["-b", "-"],
        &format!("{}route add default {gw}\n", up("td", "10.77.2.2/24")),
    );
    for (ns, dev) in [(s, "s0"), (r, "r0"), (r, "tr"), (d, "td")] {
        set_offloads(ns, dev, cfg.offloads);
    }
    tuns
}

/// The router's bottleneck on `tr`: TBF at the rate (none on an unlimited
/// veth or a trace-driven link, whose delay line shapes) over a drop-tail
/// pfifo of the buffer's packets.
fn bottleneck_qdiscs(cfg: &LinkCfg, r: &NetNs) {
    // Drop-tail bottleneck: TBF shapes, its pfifo child holds N packets.
    // The bucket holds one packet (plus slack for the timer): with the
    // usual 2-MTU burst, two packets reaching an idle link leave back to
    // back, which a real serialising link never does and which turns
    // packet-pair capacity probes (CCPD) into 10x overestimates.  The
    // slack is what a late watchdog timer may cost: a packet that waits
    // for it leaves that late, and the tokens of any lateness beyond the
    // slack are lost.  A quarter packet is 30 us at 100 Mbit/s; over 100
    // Mbit/s the slack is TBF_TIMER_SLACK_US of the rate.  At 500 Mbit/s
    // a 16-us slack carried 0.92 of the rate in the median 10-ms
    // interval (0.68 over a whole CI run), 30 us carries 0.99
    // (tests/tests/link.rs, a_veth_link_runs_at_lan_rates_and_rtts).
    let burst =
        cfg.mtu + (cfg.mtu / 4).max((cfg.rate_mbit * TBF_TIMER_SLACK_US / 8.0).round() as u32);
    let mut tc = String::new();
    let pfifo_parent = if (cfg.veth && cfg.rate_mbit == 0.0) || cfg.trace.is_some() {
        "root"
    } else {
        tc += &format!(
            "qdisc add dev tr root handle 1: tbf rate {}kbit burst {burst} latency 10s\n",
            (cfg.rate_mbit * 1000.0).round() as u64,
        );
        "parent 1:1"
    };
    // A trace's buffer is the delay line's queue: the router passes
    // everything on at once.
    let limit = if cfg.trace.is_some() {
        100_000
    } else {
        cfg.buffer_pkts
    };
    tc += &format!("qdisc add dev tr {pfifo_parent} handle 10: pfifo limit {limit}\n");
    r.exec_ok_with("tc", &["-b", "-"], &tc);
}

impl Bottleneck {
    pub fn new(cfg: LinkCfg) -> Bottleneck {
        assert!(
            !cfg.veth
                || (cfg.delay_ms == 0.0
                    && cfg.rev_delay_ms.unwrap_or(0.0) == 0.0
                    && cfg.loss_seed.is_none()
                    && cfg.extra_delay_ms.is_empty()),
            "a veth link has no delay line: no delay, seeded loss or delay classes ({cfg:?})"
        );
        assert!(
            !(cfg.veth && cfg.trace.is_some()),
            "a trace-driven link needs the delay line, not a veth pair"
        );
        let awake = crate::awake::Awake::hold();
        let (s, r, d) = (NetNs::new(), NetNs::new(), NetNs::new());
        let tuns = wire(&cfg, &s, &r, &d);
        bottleneck_qdiscs(&cfg, &r);
        let ms = |x: f64| Duration::from_nanos((x * 1e6).round() as u64);
        let seeded = cfg
            .loss_seed
            .filter(|_| cfg.loss > 0.0)
            .map(|seed| SeededLoss { p: cfg.loss, seed });
        let extra: Vec<Duration> = cfg.extra_delay_ms.iter().map(|&x| ms(x)).collect();
        let shapers = match &cfg.trace {
            Some(t) => {
                let sh = |tr: &Arc<Trace>| Shaper {
                    trace: tr.clone(),
                    offset_ms: t.offset_ms,
                    limit: t.buffer,
                };
                [Some(sh(&t.down)), t.up.as_ref().map(sh)]
            }
            None => [None, None],
        };
        let delay = tuns.map(|(tr, td)| {
            DelayLine::start_shaped(
                tr,
                td,
                ms(cfg.delay_ms),
                ms(cfg.rev_delay_ms.unwrap_or(cfg.delay_ms)),
                seeded,
                &extra,
                shapers,
            )
        });
        let b = Bottleneck {
            seeded_drops: delay
                .as_ref()
                .map_or_else(|| Arc::new(AtomicU64::new(0)), |d| d.loss_drops()),
            delay,
            sender: s,
            router: r,
            receiver: d,
            receiver_ip: Ipv4Addr::new(10, 77, 2, 2),
            sender_ip: Ipv4Addr::new(10, 77, 1, 1),
            cfg,
            _awake: awake,
        };
        // A new router has no rules to replace.
        if seeded.is_none() && b.cfg.loss > 0.0 {
            b.set_random_loss(b.cfg.loss);
        }
        b
    }

    /// Stop the delay line and return its statistics (lateness, drops);
    /// `None` on a veth link, or once stopped.  The link carries no
    /// traffic afterwards (a veth link carries on).
    pub fn stop_delay(&mut self) -> Option<DelayReport> {
        self.delay.take().map(|d| d.stop())
    }

    /// Seeded random loss of the data direction from now on, drawn by the
    /// delay line ([`DelayLine::set_loss`]): the n-th data packet after
    /// this call is lost by the n-th draw of `seed`, so runs that switch the
    /// same loss on at their own onset lose the same packets counted from
    /// it.  `p` = 0 ends the seeded loss.  The iptables rules
    /// ([`Bottleneck::set_random_loss`]) are separate.  No-op once the
    /// delay line is stopped.
    pub fn set_seeded_loss(&self, p: f64, seed: u64) {
        if let Some(dl) = &self.delay {
            dl.set_loss((p > 0.0).then_some(SeededLoss { p, seed }));
        }
    }

    /// Put the flows to the receiver's TCP port `port` in delay class
    /// `class` (0: the base delay; see [`LinkCfg::extra_delay_ms`]).
    /// No-op once the delay line is stopped.
    pub fn set_port_class(&self, port: u16, class: usize) {
        if let Some(dl) = &self.delay {
            dl.set_port_class(port, class);
        }
    }

    /// Stall the path for `d` (both directions; see [`DelayLine::stall`]).
    /// No-op once the delay line is stopped.
    pub fn stall(&self, d: Duration) {
        if let Some(dl) = &self.delay {
            dl.stall(d);
        }
    }

    /// A netlink probe of the bottleneck device's qdiscs.
    pub fn qdisc_probe(&self) -> QdiscProbe {
        self.router
            .run(|| QdiscProbe::new(ifindex("tr")?))
            .expect("rtnetlink socket in the router")
    }

    /// The bottleneck's pfifo counters.
    pub fn queue(&self) -> QdiscStats {
        self.qdisc_probe()
            .by_handle(PFIFO)
            .expect("RTM_GETQDISC")
            .expect("pfifo 10: on tr")
    }

    /// Packets the bottleneck's pfifo dropped so far.
    pub fn queue_drops(&self) -> u64 {
        self.queue().drops as u64
    }

    /// Packets the random loss dropped so far (the iptables rule's, and
    /// the delay line's seeded loss).
    pub fn random_drops(&self) -> u64 {
        self.iptables_drops() + self.seeded_drops.load(Ordering::Relaxed)
    }

    fn iptables_drops(&self) -> u64 {
        let o = self
            .router
            .exec("iptables", &["-L", "FORWARD", "-v", "-x", "-n"]);
        let s = String::from_utf8_lossy(&o.stdout);
        s.lines()
            .filter(|l| l.contains("statistic"))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }

    /// An iptables DROP rule on the data direction (router, r0 -> tr):
    /// `op` is -A, -I or -D, `extra` the match (empty: every packet).
    fn data_drop_rule(&self, op: &str, extra: &[&str]) {
        let mut a = vec![op, "FORWARD", "-i", "r0", "-o", "tr"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["-j", "DROP"]);
        let o = self.router.exec("iptables", &a);
        assert!(
            o.status.success(),
            "iptables {a:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// Random loss of the data direction from now on: `p` replaces the
    /// iptables `statistic` rules in force (0 removes them).  `new` sets
    /// the configured loss with it; a test may change it during a run (slow
    /// start without loss, random loss after it).
    pub fn set_random_loss(&self, p: f64) {
        let o = self.router.exec("iptables", &["-S", "FORWARD"]);
        let rules = String::from_utf8_lossy(&o.stdout).into_owned();
        for rule in rules.lines().filter(|l| l.contains("statistic")) {
            let mut a: Vec<&str> = rule.split_whitespace().collect();
            a[0] = "-D";
            let o = self.router.exec("iptables", &a);
            assert!(o.status.success(), "iptables {a:?}");
        }
        if p > 0.0 {
            let ps = p.to_string();
            self.data_drop_rule(
                "-A",
                &["-m", "statistic", "--mode", "random", "--probability", &ps],
            );
        }
    }

    /// A loss episode that ends in an RTO during fast recovery: drop a
    /// fraction `p` of the data for `holes` (the holes put the sender into
    /// Recovery), then every data packet for `blackout` (the retransmissions
    /// are lost and the ACK clock stops, so the retransmission timer fires
    /// while the state is still Recovery).  Rules are removed before return.
    pub fn recovery_blackout(&self, p: f64, holes: Duration, blackout: Duration) {
        let ps = p.to_string();
        let stat = ["-m", "statistic", "--mode", "random", "--probability", &ps];
        self.data_drop_rule("-I", &stat);
        std::thread::sleep(holes);
        self.data_drop_rule("-I", &[]);
        self.data_drop_rule("-D", &stat);
        std::thread::sleep(blackout);
        self.data_drop_rule("-D", &[]);
    }

    /// A TcpExt counter of the sender's namespace (/proc/net/netstat), e.g.
    /// `TCPSackRecoveryFail`: RTOs that fired in Recovery.
    pub fn sender_tcpext(&self, name: &str) -> u64 {
        self.sender_counter("/proc/net/netstat", "TcpExt:", name)
    }

    /// A Tcp counter of the sender's namespace (/proc/net/snmp), e.g.
    /// `OutSegs`, `RetransSegs`.
    pub fn sender_tcp(&self, name: &str) -> u64 {
        self.sender_counter("/proc/net/snmp", "Tcp:", name)
    }

    fn sender_counter(&self, file: &str, prefix: &str, name: &str) -> u64 {
        let o = self.sender.exec("cat", &[file]);
        let text = String::from_utf8_lossy(&o.stdout);
        let mut lines = text.lines().filter(|l| l.starts_with(prefix));
        let (Some(keys), Some(vals)) = (lines.next(), lines.next()) else {
            return 0;
        };
        keys.split_whitespace()
            .zip(vals.split_whitespace())
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    }

    /// Send `bytes` from sender to receiver with `cc` on both ends.
    pub fn transfer(&self, cc: &str, bytes: u64) -> std::io::Result<crate::traffic::Transfer> {
        let listen: SocketAddr = (self.receiver_ip, 0).into();
        crate::traffic::transfer_across(&self.sender, &self.receiver, cc, bytes, listen)
    }
}
