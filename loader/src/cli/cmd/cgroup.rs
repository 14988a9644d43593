//! `ccload cgroup set|unset|list`: per-cgroup controller choice.

use std::path::Path;

use anyhow::Result;

use crate::bind::cgroup;
use crate::cli::args::CgroupCmd;
use crate::cli::output::Out;
use serde_json::json;

pub(super) fn run(cmd: CgroupCmd, out: Out) -> Result<i32> {
    match cmd {
        CgroupCmd::Set {
            path,
            algo,
            profile,
            rules,
        } => set(&path, &algo, &profile, &rules, out),
        CgroupCmd::Watch { path } => watch(&path, out),
        CgroupCmd::Unset { path } => unset(&path, out),
        CgroupCmd::Export { path } => export(&path),
        CgroupCmd::List => list(out),
    }
}

/// `cgroup set`: bind the cgroup (and its path rules).
fn set(path: &Path, algo: &str, profile: &str, rules: &[String], out: Out) -> Result<i32> {
    let profile = crate::bind::profiles::resolve(algo, profile)?;
    let rules = rules
        .iter()
        .map(|r| resolve_rule(r))
        .collect::<Result<Vec<_>>>()?;
    let b = cgroup::set_with_rules(path, algo, profile, &rules, &crate::bind::leftovers::sweep)?;
    if out.json {
        out.emit(&json!({
            "cgroup": path,
            "cgroup_id": b.cgroup_id,
            "algo": b.algo,
            "profile": b.profile,
            "rules": b.rules,
            "auto_attached": b.auto_attached,
        }))?;
        return Ok(0);
    }
    if b.auto_attached {
        println!("attached {algo} (first use; `ccload detach --algo {algo}` removes it)");
    }
    println!(
        "bound cgroup {} (id {}) to {} profile {}{}",
        path.display(),
        b.cgroup_id,
        b.algo,
        b.profile,
        if b.rules.is_empty() {
            ""
        } else {
            " where no path rule matches"
        }
    );
    for (i, r) in b.rules.iter().enumerate() {
        println!("  rule {}: {}", i + 1, r.text);
    }
    Ok(0)
}

/// `cgroup watch`: aggregates only; sockets keep their CC.
fn watch(path: &Path, out: Out) -> Result<i32> {
    let b = cgroup::watch(path, &crate::bind::leftovers::sweep)?;
    if out.json {
        out.emit(&json!({ "cgroup": path, "cgroup_id": b.cgroup_id, "watch": true }))?;
        return Ok(0);
    }
    println!(
        "watching cgroup {} (id {}): `ccload stats` shows its connections; they keep their congestion control",
        path.display(),
        b.cgroup_id
    );
    Ok(0)
}

/// `cgroup unset`: exit 1 when the cgroup was not bound.
fn unset(path: &Path, out: Out) -> Result<i32> {
    let unbound = cgroup::unset(path)?;
    if out.json {
        let mut v = json!({ "cgroup": path, "unbound": unbound });
        if !unbound {
            v["error"] = json!(format!("cgroup {} is not bound", path.display()));
            v["exit_code"] = json!(1);
        }
        out.emit(&v)?;
    } else if unbound {
        println!("unbound cgroup {}", path.display());
    } else {
        eprintln!("ccload: cgroup {} is not bound", path.display());
    }
    Ok(if unbound { 0 } else { 1 })
}

/// `cgroup export`: a lab scenario from what the cgroup measured.
fn export(path: &Path) -> Result<i32> {
    let id = cgroup::cgroup_id(path)?;
    let Some(b) = cgroup::list()?.into_iter().find(|b| b.cgroup_id == id) else {
        anyhow::bail!(
            "cgroup {} is not bound or watched: nothing was measured there",
            path.display()
        );
    };
    let slots = crate::bind::agg::read_pinned_slots(&cgroup::agg_pin(id))?;
    let mut paths = Vec::new();
    for (i, a) in slots.iter().enumerate() {
        let label = match i {
            0 if b.rules.is_empty() => "its connections".to_string(),
            0 => "the connections no rule chose".to_string(),
            i => match b.rules.get(i - 1) {
                Some(r) => format!("rule `{}`", r.text),
                None => continue,
            },
        };
        paths.push((label, a.summary()));
    }
    let text = export_scenario(&path.display().to_string(), &paths)?;
    print!("{text}");
    Ok(0)
}

/// `cgroup list`: every binding, per rule.
fn list(out: Out) -> Result<i32> {
    let mut l = cgroup::list()?;
    crate::bind::agg::fill_rule_counts(&mut l);
    if out.json {
        out.emit(&l)?;
    } else if l.is_empty() {
        println!("no cgroup bindings");
    } else {
        for b in &l {
            let name = b
                .cgroup
                .as_ref()
                .map_or_else(|| "?".into(), |p| p.display().to_string());
            if b.algo.is_empty() {
                println!(
                    "{name} (id {})  watch (aggregates only; sockets keep their CC)",
                    b.cgroup_id
                );
                continue;
            }
            println!(
                "{name} (id {})  algo={} profile={}  connections: active={} passive={} errors={}",
                b.cgroup_id, b.algo, b.profile, b.active, b.passive, b.errors
            );
            for (i, r) in b.rules.iter().enumerate() {
                println!(
                    "  rule {}: {}  connections={} acked={} retransmitted={}",
                    i + 1,
                    r.text,
                    r.counts.connections,
                    r.counts.bytes_acked,
                    r.counts.retrans_segs
                );
            }
            if let Some(u) = &b.unmatched {
                println!(
                    "  no rule ({}): connections={} acked={} retransmitted={}",
                    b.algo, u.connections, u.bytes_acked, u.retrans_segs
                );
            }
        }
    }
    Ok(0)
}

/// A rule as the command line gives it, its profile resolved (an id, or a
/// name of the last applied config: profiles.rs).
fn resolve_rule(text: &str) -> Result<crate::bind::path_rules::PathRule> {
    use anyhow::Context;
    let r: crate::bind::path_rules::RuleSpec = text.parse()?;
    let profile = match &r.profile {
        None => 0,
        Some(p) => {
            crate::bind::profiles::resolve(&r.cc, p).with_context(|| format!("rule `{text}`"))?
        }
    };
    Ok(crate::bind::path_rules::PathRule {
        when: r.when,
        cc: r.cc,
        profile,
    })
}

/// A lab scenario of a binding's paths: each slot that saw a connection
/// with an RTT sample becomes a path (its median smoothed RTT, 1-BDP
/// buffer), its median delivery rate a rate and its retransmitted share a
/// random loss, all run against every controller and the kernel's CCs.
/// The delay line carries 1..300 Mbit/s and RTTs from 0.05 ms; values
/// outside are clamped, and the scenario says so.
fn export_scenario(cgroup: &str, slots: &[(String, crate::bind::agg::Summary)]) -> Result<String> {
    use std::fmt::Write;
    let mut rtts: Vec<f64> = Vec::new();
    let mut rates: Vec<f64> = Vec::new();
    let mut losses: Vec<f64> = Vec::new();
    let mut notes = String::new();
    for (label, s) in slots {
        let (Some(rtt), true) = (s.srtt_ms_p50, s.flows_started > 0) else {
            continue;
        };
        let rtt = (rtt.max(0.05) * 100.0).round() / 100.0;
        let rate = s.rate_mbps_p50.unwrap_or(100.0).clamp(1.0, 300.0).round();
        let loss = match (s.retrans_segs, s.segs_out) {
            (r, n) if n > 0 && r > 0 => {
                let p = (r as f64 / n as f64).min(0.05);
                // one significant digit: 2e-4, not 0.000213
                let e = p.log10().floor();
                ((p / 10f64.powf(e)).round() * 10f64.powf(e) * 1e9).round() / 1e9
            }
            _ => 0.0,
        };
        writeln!(
            notes,
            "# {label}: {} connections, median srtt {rtt} ms, delivery rate {rate} Mbit/s, \
             retransmitted {loss}",
            s.flows_started
        )?;
        for (v, list) in [(rtt, &mut rtts), (rate, &mut rates), (loss, &mut losses)] {
            if !list.iter().any(|x| (x - v).abs() < 1e-12) {
                list.push(v);
            }
        }
    }
    if rtts.is_empty() {
        anyhow::bail!("cgroup {cgroup}: no connection with an RTT sample yet; nothing to export");
    }
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut o = String::new();
    writeln!(
        o,
        "# Made by `ccload cgroup export {cgroup}` from its in-kernel aggregates."
    )?;
    o.push_str(&notes);
    writeln!(o, "title = \"The paths of {cgroup}\"")?;
    writeln!(
        o,
        "paper = \"an operator's own paths (ccload cgroup export)\""
    )?;
    writeln!(
        o,
        "description = \"\"\"\nOne bulk flow per run on each path the connections of {cgroup} took \
         (median smoothed RTT, 1-BDP buffer), at their median delivery rates, with their \
         retransmitted share as random loss: every controller beside the kernel's.\"\"\""
    )?;
    writeln!(
        o,
        "ccs = [\"ccpd\", \"hetcp\", \"ctcp_plus\", \"ub_reno\", \"reno\", \"cubic\", \"bbr\"]"
    )?;
    writeln!(o, "flows = [{{ cc = \"$cc\" }}]")?;
    writeln!(o, "duration_s = 30\nwarmup_s = 5\nrepetitions = 1\n")?;
    writeln!(
        o,
        "[grid]\nrate_mbit = {}\nrates_mbit = [{}]\nloss = [{}]",
        rates[0],
        list(&rates),
        list(&losses)
    )?;
    for r in &rtts {
        writeln!(o, "\n[[grid.paths]]\nrtt_ms = {r}\nbuffer_bdp = 1.0")?;
    }
    writeln!(o, "\n[quick]\nduration_s = 10\nwarmup_s = 2")?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(
        n: u64,
        rtt: Option<f64>,
        rate: Option<f64>,
        segs: u64,
        retr: u64,
    ) -> crate::bind::agg::Summary {
        let mut s = crate::bind::agg::Agg::default().summary();
        s.flows_started = n;
        s.srtt_ms_p50 = rtt;
        s.rate_mbps_p50 = rate;
        s.segs_out = segs;
        s.retrans_segs = retr;
        s
    }

    /// Two paths with traffic become two [[grid.paths]], their rates and
    /// losses the grid's (rounded, clamped to what the delay line runs); a
    /// slot without connections or RTT samples adds nothing; none at all
    /// is an error.
    #[test]
    fn a_bindings_paths_become_lab_cells() {
        let t = export_scenario(
            "/cg",
            &[
                (
                    "far".into(),
                    summary(10, Some(41.234), Some(48.6), 10_000, 21),
                ),
                (
                    "near".into(),
                    summary(5, Some(0.012), Some(900.0), 5_000, 0),
                ),
                ("idle".into(), summary(0, None, None, 0, 0)),
            ],
        )
        .unwrap();
        assert!(t.contains("rtt_ms = 41.23\nbuffer_bdp = 1.0"), "{t}");
        assert!(t.contains("rtt_ms = 0.05\n"), "{t}");
        assert!(t.contains("rates_mbit = [49, 300]"), "{t}");
        assert!(t.contains("loss = [0.002, 0]"), "{t}");
        assert_eq!(t.matches("[[grid.paths]]").count(), 2);
        let v: toml::Value = toml::from_str(&t).unwrap();
        assert_eq!(v["ccs"].as_array().unwrap().len(), 7);
        let e = export_scenario("/cg", &[("idle".into(), summary(0, None, None, 0, 0))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("nothing to export"), "{e}");
    }
}
