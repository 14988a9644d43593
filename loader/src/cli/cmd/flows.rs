//! `ccload flows`: TCP sockets on our controllers (or on any CC), with the
//! kernel's `struct tcp_info` as `ss -ti` shows it, and for the sockets of
//! a bound cgroup the path rule that chose their CC.

use std::os::fd::AsFd;
use std::os::fd::AsRawFd;

use anyhow::Result;
use libbpf_rs::MapCore;

use crate::bind::cgroup::{self, Binding};
use crate::bpf::algos::Algo;
use crate::cli::output::Out;
use crate::host::diag;
use crate::intf;

/// Which binding chose a connection's CC, and by which of its rules.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Chosen {
    pub cgroup_id: u64,
    /// The binding's CC for what no rule matches; "" for a watch.
    pub binding_algo: String,
    /// The path rule, 0-based, in the binding's order; None: the default.
    pub rule: Option<usize>,
    /// The rule as written, or "default".
    pub rule_text: String,
}

#[derive(serde::Serialize)]
struct Flow {
    #[serde(flatten)]
    sock: diag::TcpSock,
    #[serde(skip_serializing_if = "Option::is_none")]
    chosen: Option<Chosen>,
}

/// The rule slot a binding's socket storage value (struct ccl_agg_sk)
/// records, if the value is one (sized as ours) of a started connection.
fn slot_of(value: &[u8]) -> Option<u32> {
    if value.len() != std::mem::size_of::<intf::ccl_agg_sk>() {
        return None;
    }
    // SAFETY: plain old data, size checked.
    let s: intf::ccl_agg_sk = unsafe { std::ptr::read_unaligned(value.as_ptr().cast()) };
    (s.started != 0).then_some(s.slot)
}

/// What chose a socket's CC, from its storage values: `maps` pairs the
/// storage maps' ids with the binding of each.
pub(crate) fn chosen(storages: &[(u32, Vec<u8>)], maps: &[(u32, &Binding)]) -> Option<Chosen> {
    storages.iter().find_map(|(id, v)| {
        let b = maps.iter().find(|(m, _)| m == id)?.1;
        let slot = slot_of(v)? as usize;
        let rule = slot.checked_sub(1).filter(|i| *i < b.rules.len());
        Some(Chosen {
            cgroup_id: b.cgroup_id,
            binding_algo: b.algo.clone(),
            rule,
            rule_text: rule
                .map(|i| b.rules[i].text.clone())
                .unwrap_or_else(|| "default".into()),
        })
    })
}

pub(super) fn run(netns: Option<&str>, all_cc: bool, out: Out) -> Result<i32> {
    let names: Vec<&str> = Algo::ALL.iter().map(|a| a.name()).collect();
    // The bindings' socket storages, where we may read them (root): a
    // binding's sockets are listed whatever CC its rules gave them.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let bindings = if root {
        cgroup::list_without_paths().unwrap_or_default()
    } else {
        Vec::new()
    };
    let storage = if root {
        cgroup::sk_storage_maps()
    } else {
        Vec::new()
    };
    let mut maps: Vec<(u32, &Binding)> = Vec::new();
    let mut fds = Vec::new();
    for (id, m) in &storage {
        let (Some(b), Ok(info)) = (bindings.iter().find(|b| b.cgroup_id == *id), m.info()) else {
            continue;
        };
        maps.push((info.info.id, b));
        fds.push(m.as_fd().as_raw_fd());
    }
    let socks = match netns {
        Some(ns) => diag::tcp_sockets_in(ns, &fds)?,
        None => diag::tcp_sockets_with(&fds)?,
    };
    let flows: Vec<Flow> = socks
        .into_iter()
        .map(|s| Flow {
            chosen: chosen(&s.storages, &maps),
            sock: s,
        })
        .filter(|f| {
            all_cc
                || names.contains(&f.sock.cong.as_str())
                || f.chosen
                    .as_ref()
                    .is_some_and(|c| !c.binding_algo.is_empty())
        })
        .collect();
    if out.json {
        out.emit(&flows)?;
        return Ok(0);
    }
    println!(
        "{:<9} {:<22} {:<22} {:<10} {:<8} {:>6} {:>7} {:>8} {:>9} {:>7} {:>20}  rule",
        "cc",
        "local",
        "remote",
        "state",
        "ca",
        "cwnd",
        "ssth",
        "srtt ms",
        "rate Mb/s",
        "retx",
        "cookie"
    );
    for f in &flows {
        let s = &f.sock;
        let (ca, cwnd, ssth, srtt, rate, retx) = match &s.info {
            Some(i) => (
                i.ca_state.to_string(),
                i.cwnd.to_string(),
                // The kernel's "infinite" ssthresh before the first loss.
                if i.ssthresh >= 0x7fff_ffff {
                    "-".into()
                } else {
                    i.ssthresh.to_string()
                },
                format!("{:.1}", i.srtt_us as f64 / 1000.0),
                format!("{:.1}", i.delivery_rate_bps as f64 / 1e6),
                i.total_retrans.to_string(),
            ),
            None => (
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        // A binding's socket: "cgroup ID: the rule that chose its CC".
        let rule = match &f.chosen {
            Some(c) => match c.rule {
                Some(i) => format!("cgroup {}: rule {}: {}", c.cgroup_id, i + 1, c.rule_text),
                None => format!("cgroup {}: default", c.cgroup_id),
            },
            None => "-".into(),
        };
        println!(
            "{:<9} {:<22} {:<22} {:<10} {:<8} {:>6} {:>7} {:>8} {:>9} {:>7} {:>20}  {}",
            s.cong,
            s.local.to_string(),
            s.remote.to_string(),
            s.state_name,
            ca,
            cwnd,
            ssth,
            srtt,
            rate,
            retx,
            s.cookie,
            rule
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(rules: &[&str]) -> Binding {
        Binding {
            cgroup: None,
            cgroup_id: 77,
            algo: "ccpd".into(),
            profile: 0,
            active: 0,
            passive: 0,
            errors: 0,
            rules: rules
                .iter()
                .map(|t| {
                    let r: crate::bind::path_rules::RuleSpec = t.parse().unwrap();
                    let rule = crate::bind::path_rules::PathRule {
                        when: r.when,
                        cc: r.cc,
                        profile: 0,
                    };
                    cgroup::RuleCount {
                        text: rule.to_string(),
                        rule,
                        counts: Default::default(),
                    }
                })
                .collect(),
            unmatched: None,
            auto_attached: false,
        }
    }

    fn value(slot: u32, started: u32) -> Vec<u8> {
        let s = intf::ccl_agg_sk {
            slot,
            started,
            ..Default::default()
        };
        crate::bpf::pod_bytes(&s).to_vec()
    }

    #[test]
    fn the_slot_names_the_rule_and_unknown_maps_name_nothing() {
        let b = binding(&["dst 10.0.0.0/8 -> cubic", "rtt >= 5ms -> ccpd"]);
        let maps = [(9u32, &b)];
        let c = chosen(&[(9, value(2, 1))], &maps).unwrap();
        assert_eq!(c.rule, Some(1));
        assert_eq!(c.rule_text, "rtt >= 5ms -> ccpd");
        assert_eq!(c.cgroup_id, 77);
        let d = chosen(&[(9, value(0, 1))], &maps).unwrap();
        assert_eq!((d.rule, d.rule_text.as_str()), (None, "default"));
        // Another map's value, a connection not yet counted, a value of
        // another size, a slot past the rules (a rebind with fewer).
        assert_eq!(chosen(&[(8, value(1, 1))], &maps), None);
        assert_eq!(chosen(&[(9, value(1, 0))], &maps), None);
        assert_eq!(chosen(&[(9, vec![0u8; 12])], &maps), None);
        assert_eq!(chosen(&[(9, value(7, 1))], &maps).unwrap().rule, None);
    }
}
