//! Path rules of a cgroup binding: which congestion control a connection
//! gets by where it goes, decided per connection in the kernel
//! (bpf/cgroup.bpf.c; the layouts in bpf/ccload_intf.h).
//!
//! A rule is written `MATCH -> CC[/PROFILE]`:
//!
//! ```text
//! dst 10.0.0.0/8,192.168.0.0/16,fd00::/8 -> cubic   # the peer's address
//! rtt >= 5ms -> ccpd/wan                            # the handshake's RTT
//! rtt < 1ms -> cubic
//! share 0.1 -> ccpd                                 # a tenth of the connections
//! ```
//!
//! A share rule takes that share of the connections by a keyed hash of
//! their peer's address and both ports (`ccl_conn_hash`, bpf/core/ccl_core.h;
//! a new random key per binding): the arms of an A/B comparison that share
//! one cgroup's processes, clients and minutes, each counted in its own
//! aggregate (`cgroup list`, `ccload_cgroup_rule_*`).
//!
//! The first rule that matches a connection wins; none matching, it gets
//! the binding's own CC.  Prefixes of two rules may not overlap (the kernel
//! finds a prefix by longest match, which would overrule the order), and a
//! binding holds at most [`MAX_RULES`].  "Everything but the datacenter" is
//! written the other way round: the datacenter's prefixes to its CC, the
//! binding's default for the rest.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ipnet::IpNet;

use crate::intf;

/// Rules one binding holds (`CCL_CG_MAX_RULES`).
pub const MAX_RULES: usize = intf::CCL_CG_MAX_RULES as usize;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// The peer's address is in one of these prefixes.
    Dst(Vec<IpNet>),
    /// The connection's smoothed RTT when established is at least this.
    RttAtLeast(#[serde(with = "micros")] Duration),
    /// ... is below this.
    RttBelow(#[serde(with = "micros")] Duration),
    /// This share of the connections, in millionths (0..=1,000,000).
    Share(u32),
}

mod micros {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_micros() as u64)
    }
}

/// One rule: a match and what a matching connection gets.  `profile` is
/// the id; `profile_name` what the user wrote, when a name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PathRule {
    #[serde(rename = "match")]
    pub when: Match,
    pub cc: String,
    pub profile: u32,
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Match::Dst(nets) => {
                let n: Vec<String> = nets.iter().map(|n| n.to_string()).collect();
                write!(f, "dst {}", n.join(","))
            }
            Match::RttAtLeast(d) => write!(f, "rtt >= {}", rtt_text(*d)),
            Match::RttBelow(d) => write!(f, "rtt < {}", rtt_text(*d)),
            Match::Share(ppm) => write!(f, "share {}", *ppm as f64 / 1e6),
        }
    }
}

fn rtt_text(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

impl fmt::Display for PathRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.when, self.cc)?;
        if self.profile != 0 {
            write!(f, "/{}", self.profile)?;
        }
        Ok(())
    }
}

/// A rule as written, its profile still a name or an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    pub when: Match,
    pub cc: String,
    pub profile: Option<String>,
}

impl FromStr for RuleSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<RuleSpec> {
        let want = "want `dst PREFIX[,PREFIX...] -> CC[/PROFILE]`, `rtt >= 5ms -> CC` \
                    (or `rtt < ...`) or `share 0.1 -> CC`";
        let Some((lhs, rhs)) = s.split_once("->") else {
            bail!("rule `{s}`: no `->`; {want}");
        };
        let (cc, profile) = match rhs.trim().split_once('/') {
            Some((c, p)) => (c.trim(), Some(p.trim().to_string())),
            None => (rhs.trim(), None),
        };
        if cc.is_empty() || cc.contains(char::is_whitespace) {
            bail!(
                "rule `{s}`: `{}` is not a congestion control name",
                rhs.trim()
            );
        }
        let lhs = lhs.trim();
        let (word, list) = lhs.split_once(char::is_whitespace).unwrap_or((lhs, ""));
        let when = if word == "dst" {
            let mut nets = Vec::new();
            for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                // A bare address is its own /32 or /128.
                let net = match p.parse::<IpNet>() {
                    Ok(n) => n,
                    Err(_) => p
                        .parse::<std::net::IpAddr>()
                        .map(IpNet::from)
                        .map_err(|_| anyhow::anyhow!("rule `{s}`: `{p}` is not a prefix"))?,
                };
                if net != net.trunc() {
                    bail!(
                        "rule `{s}`: `{p}` has host bits set (the prefix is {})",
                        net.trunc()
                    );
                }
                nets.push(net);
            }
            if nets.is_empty() {
                bail!("rule `{s}`: no prefix; {want}");
            }
            Match::Dst(nets)
        } else if word == "share" {
            let v = list.trim();
            let x: f64 = match v.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                None => v.parse::<f64>(),
            }
            .map_err(|_| anyhow::anyhow!("rule `{s}`: `{v}` is not a share (0.1, 10%)"))?;
            if !(0.0..=1.0).contains(&x) {
                bail!("rule `{s}`: the share {x} is outside 0..1");
            }
            Match::Share((x * 1e6).round() as u32)
        } else if let Some(rest) = lhs.strip_prefix("rtt") {
            let rest = rest.trim();
            let (ge, v) = if let Some(v) = rest.strip_prefix(">=") {
                (true, v)
            } else if let Some(v) = rest.strip_prefix('<') {
                (false, v)
            } else {
                bail!("rule `{s}`: an RTT rule is `rtt >= D` or `rtt < D`");
            };
            let d = humantime::parse_duration(v.trim())
                .with_context(|| format!("rule `{s}`: `{}` is not a duration", v.trim()))?;
            if d < Duration::from_micros(1) || d > Duration::from_secs(60) {
                bail!("rule `{s}`: the RTT bound must be within 1us..60s");
            }
            if ge {
                Match::RttAtLeast(d)
            } else {
                Match::RttBelow(d)
            }
        } else {
            bail!("rule `{s}`: {want}");
        };
        Ok(RuleSpec {
            when,
            cc: cc.to_string(),
            profile,
        })
    }
}

/// Whether two rule lists choose alike: the same rules in the same order,
/// a rule's prefixes in any order.
pub fn same(a: &[PathRule], b: &[PathRule]) -> bool {
    let norm = |v: &[PathRule]| -> Vec<PathRule> {
        v.iter()
            .cloned()
            .map(|mut r| {
                if let Match::Dst(n) = &mut r.when {
                    n.sort();
                    n.dedup();
                }
                r
            })
            .collect()
    };
    norm(a) == norm(b)
}

/// The rules of one binding, checked together: at most [`MAX_RULES`], no
/// prefixes of two rules that overlap.
pub fn check(rules: &[PathRule]) -> Result<()> {
    if rules.len() > MAX_RULES {
        bail!(
            "{} path rules: a binding holds at most {MAX_RULES}",
            rules.len()
        );
    }
    let nets: Vec<(usize, &IpNet)> = rules
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match &r.when {
            Match::Dst(n) => Some(n.iter().map(move |n| (i, n))),
            _ => None,
        })
        .flatten()
        .collect();
    for (k, (i, a)) in nets.iter().enumerate() {
        for (j, b) in &nets[k + 1..] {
            if i != j && (a.contains(*b) || b.contains(*a)) {
                bail!(
                    "path rules {} and {} overlap ({a} and {b}): the kernel matches \
                     prefixes by the longest one, not by the rules' order; \
                     split them so that no two rules share addresses",
                    i + 1,
                    j + 1
                );
            }
        }
    }
    Ok(())
}

/// The `prefixes` trie's entries: each prefix with its rule's index.
pub type PrefixKeys = Vec<(intf::ccl_prefix_key, u32)>;

/// The rules' kernel form: the `rules` entries and the `prefixes` keys.
pub fn to_kernel(rules: &[PathRule]) -> Result<(Vec<intf::ccl_path_rule>, PrefixKeys)> {
    check(rules)?;
    let key = random_key();
    let mut out = Vec::new();
    let mut keys = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        if r.cc.len() >= intf::CCL_NAME_MAX as usize {
            bail!("congestion control name `{}` too long", r.cc);
        }
        let mut k = intf::ccl_path_rule {
            profile: r.profile,
            ..Default::default()
        };
        for (d, s) in k.algo.iter_mut().zip(r.cc.bytes()) {
            *d = s as std::os::raw::c_char;
        }
        match &r.when {
            Match::Dst(nets) => {
                k.kind = intf::CCL_RULE_PREFIX;
                for n in nets {
                    keys.push((prefix_key(n), i as u32));
                }
            }
            Match::RttAtLeast(d) => {
                k.kind = intf::CCL_RULE_RTT_GE;
                k.arg = d.as_micros().min(u32::MAX as u128) as u32;
            }
            Match::RttBelow(d) => {
                k.kind = intf::CCL_RULE_RTT_LT;
                k.arg = d.as_micros().min(u32::MAX as u128) as u32;
            }
            Match::Share(ppm) => {
                k.kind = intf::CCL_RULE_SHARE;
                k.arg = ((u64::from(*ppm) << 32) / 1_000_000).min(u64::from(u32::MAX)) as u32;
                k.key = key;
            }
        }
        out.push(k);
    }
    Ok((out, keys))
}

/// The share rules' hash key: random per binding.
fn random_key() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 4 {
        // no entropy source: the time still differs per binding
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        return t ^ std::process::id();
    }
    u32::from_ne_bytes(b)
}

/// A prefix as the LPM trie's key: IPv4 as IPv4-mapped IPv6.
pub fn prefix_key(n: &IpNet) -> intf::ccl_prefix_key {
    match n {
        IpNet::V4(v4) => intf::ccl_prefix_key {
            prefixlen: 96 + u32::from(v4.prefix_len()),
            addr: v4.addr().to_ipv6_mapped().octets(),
        },
        IpNet::V6(v6) => intf::ccl_prefix_key {
            prefixlen: u32::from(v6.prefix_len()),
            addr: v6.addr().octets(),
        },
    }
}

/// The prefix an LPM key stands for.
pub fn from_prefix_key(k: &intf::ccl_prefix_key) -> Option<IpNet> {
    let a = std::net::Ipv6Addr::from(k.addr);
    match a.to_ipv4_mapped() {
        Some(v4) if k.prefixlen >= 96 => ipnet::Ipv4Net::new(v4, (k.prefixlen - 96) as u8)
            .ok()
            .map(IpNet::V4),
        _ => ipnet::Ipv6Net::new(a, k.prefixlen.min(128) as u8)
            .ok()
            .map(IpNet::V6),
    }
}

/// The rules back from their kernel form (`ccload cgroup list`).
pub fn from_kernel(
    rules: &[intf::ccl_path_rule],
    keys: &[(intf::ccl_prefix_key, u32)],
) -> Vec<PathRule> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let cc: String = r
                .algo
                .iter()
                .take_while(|c| **c != 0)
                .map(|c| *c as u8 as char)
                .collect();
            let when = match r.kind {
                intf::CCL_RULE_RTT_GE => Match::RttAtLeast(Duration::from_micros(r.arg.into())),
                intf::CCL_RULE_RTT_LT => Match::RttBelow(Duration::from_micros(r.arg.into())),
                intf::CCL_RULE_SHARE => Match::Share(
                    ((u64::from(r.arg) * 1_000_000 + (1 << 31)) >> 32).min(1_000_000) as u32,
                ),
                _ => {
                    let mut nets: Vec<IpNet> = keys
                        .iter()
                        .filter(|(_, v)| *v as usize == i)
                        .filter_map(|(k, _)| from_prefix_key(k))
                        .collect();
                    nets.sort();
                    Match::Dst(nets)
                }
            };
            PathRule {
                when,
                cc,
                profile: r.profile,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> PathRule {
        let r: RuleSpec = s.parse().unwrap();
        PathRule {
            when: r.when,
            cc: r.cc,
            profile: r.profile.map_or(0, |p| p.parse().unwrap()),
        }
    }

    /// What a user writes parses, prints back as written and survives the
    /// kernel form (prefixes as IPv4-mapped LPM keys, RTT bounds in us).
    #[test]
    fn rules_parse_print_and_round_trip_through_the_kernel_form() {
        let rules = [
            rule("dst 10.0.0.0/8, 192.168.0.0/16,fd00::/8 -> cubic"),
            rule("dst 203.0.113.7 -> reno/3"),
            rule("rtt >= 5ms -> ccpd/2"),
            rule("rtt < 500us -> cubic"),
            rule("share 0.1 -> ccpd"),
        ];
        assert_eq!(
            rules[0].to_string(),
            "dst 10.0.0.0/8,192.168.0.0/16,fd00::/8 -> cubic"
        );
        assert_eq!(rules[1].to_string(), "dst 203.0.113.7/32 -> reno/3");
        assert_eq!(rules[2].to_string(), "rtt >= 5ms -> ccpd/2");
        assert_eq!(rules[3].to_string(), "rtt < 500us -> cubic");
        assert_eq!(rules[4].to_string(), "share 0.1 -> ccpd");
        assert_eq!(rule("share 25% -> ccpd").when, Match::Share(250_000));
        let (k, keys) = to_kernel(&rules).unwrap();
        assert_eq!(k[2].arg, 5000);
        assert_eq!(k[4].arg, 429_496_729, "0.1 of 2^32, rounded down");
        assert_eq!(k[2].kind, intf::CCL_RULE_RTT_GE);
        assert_eq!(keys[0].0.prefixlen, 96 + 8);
        assert_eq!(&keys[0].0.addr[10..13], &[0xff, 0xff, 10]);
        assert_eq!(keys[2].0.prefixlen, 8);
        let mut back = from_kernel(&k, &keys);
        // (the kernel form keeps no order of a rule's prefixes)
        if let Match::Dst(n) = &mut back[0].when {
            let want: Vec<IpNet> = ["10.0.0.0/8", "192.168.0.0/16", "fd00::/8"]
                .iter()
                .map(|s| s.parse().unwrap())
                .collect();
            n.sort();
            let mut w = want.clone();
            w.sort();
            assert_eq!(*n, w);
        }
        assert_eq!(back[1..], rules[1..]);
    }

    /// Bad rules are one clear error each.
    #[test]
    fn bad_rules_are_refused_with_the_reason() {
        for (s, want) in [
            ("dst 10.0.0.0/8 cubic", "no `->`"),
            ("dst 10.0.0.1/8 -> cubic", "host bits"),
            ("dst 10.0.0.0/33 -> cubic", "not a prefix"),
            ("dst  -> cubic", "no prefix"),
            ("rtt > 5ms -> ccpd", "`rtt >= D` or `rtt < D`"),
            ("rtt >= soon -> ccpd", "not a duration"),
            ("rtt >= 2min -> ccpd", "1us..60s"),
            ("src 10.0.0.0/8 -> cubic", "want `dst"),
            ("dst 10.0.0.0/8 -> ", "not a congestion control"),
            ("share 1.5 -> ccpd", "outside 0..1"),
            ("share many -> ccpd", "not a share"),
        ] {
            let e = format!("{:#}", s.parse::<RuleSpec>().unwrap_err());
            assert!(e.contains(want), "{s}: {e}");
        }
        let e = check(&[
            rule("dst 10.0.0.0/8 -> cubic"),
            rule("dst 10.1.0.0/16 -> ccpd"),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("rules 1 and 2 overlap"), "{e}");
        // Overlaps inside one rule are its own business.
        check(&[rule("dst 10.0.0.0/8,10.1.0.0/16 -> cubic")]).unwrap();
        let many: Vec<PathRule> = (0..=MAX_RULES)
            .map(|i| rule(&format!("dst 10.{i}.0.0/16 -> cubic")))
            .collect();
        assert!(check(&many).unwrap_err().to_string().contains("at most 15"));
        check(&many[..MAX_RULES]).unwrap();
    }

    /// The share rules' hash (bpf/core/ccl_core.h, the kernel's own code):
    /// a share s of 20,000 connections from neighbouring ports of one
    /// client, or from neighbouring addresses on one port, falls within 4.5
    /// standard deviations of s * n, for several keys; two keys split one
    /// set of connections differently.
    #[test]
    fn a_share_takes_its_share_of_neighbouring_connections() {
        // An IPv4 peer (IPv4-mapped) and the two ports.
        fn hash(key: u32, addr: u32, ports: u32) -> u32 {
            // SAFETY: a pure function of integers (ccl_core.h).
            unsafe { intf::ccl_conn_hash(key, 0, 0, 0xffff_u32.to_be(), addr, ports) }
        }
        let n = 20_000u32;
        for key in [0u32, 1, 0xdead_beef] {
            for s in [0.01, 0.1, 0.5] {
                let arg = (s * 4_294_967_296.0) as u32;
                let by_port = (0..n)
                    .filter(|p| hash(key, 0x0a4d_0202, 443 | ((40_000 + p) << 16)) < arg)
                    .count() as f64;
                let by_addr = (0..n)
                    .filter(|a| hash(key, 0x0a00_0000 + a, 443 | (50_000 << 16)) < arg)
                    .count() as f64;
                let (mean, sd) = (s * n as f64, (s * (1.0 - s) * n as f64).sqrt());
                for (what, got) in [("ports", by_port), ("addresses", by_addr)] {
                    assert!(
                        (got - mean).abs() <= 4.5 * sd,
                        "key {key:#x}, share {s}, neighbouring {what}: {got} of {n}, \
                         want {mean} +- {:.0}",
                        4.5 * sd
                    );
                }
            }
        }
        let side = |key: u32, p: u32| hash(key, 7, p) < (1 << 31);
        let differ = (0..1000).filter(|&p| side(1, p) != side(2, p)).count();
        assert!(
            (400..=600).contains(&differ),
            "two keys agreed on {} of 1000",
            1000 - differ
        );
    }
}
