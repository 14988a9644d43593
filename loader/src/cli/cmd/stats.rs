//! `ccload stats [--json]`: the in-kernel aggregates (crate::bind::agg) of every
//! attached controller, per profile in use, and of every bound or watched
//! cgroup.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use crate::bind::agg::{self, Agg, Summary};
use crate::bpf;
use crate::cli::output::Out;

#[derive(Serialize)]
pub(crate) struct Stats {
    pub algos: Vec<AlgoSlot>,
    pub cgroups: Vec<CgroupSlot>,
}

#[derive(Serialize)]
pub(crate) struct AlgoSlot {
    pub algo: &'static str,
    pub profile: u32,
    pub summary: Summary,
    /// Raw counters, by their names in ccload_intf.h.
    pub counters: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
pub(crate) struct CgroupSlot {
    pub cgroup: Option<PathBuf>,
    pub cgroup_id: u64,
    /// The bound congestion control; "" for a watch.
    pub algo: String,
    pub profile: u32,
    pub summary: Summary,
    pub counters: serde_json::Map<String, serde_json::Value>,
    /// With path rules: each rule's connections, then the default's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSlot>,
}

/// The connections one path rule chose (`rule` null: none chose them).
#[derive(Serialize)]
pub(crate) struct RuleSlot {
    pub rule: Option<usize>,
    /// The rule as written, or "default".
    pub text: String,
    pub cc: String,
    pub summary: Summary,
    pub counters: serde_json::Map<String, serde_json::Value>,
}

/// The per-rule slots of a binding with rules: rule i from slot 1 + i,
/// then the default from slot 0.
fn rule_slots(c: &agg::CgroupAgg) -> Vec<RuleSlot> {
    let b = &c.binding;
    if b.rules.is_empty() {
        return Vec::new();
    }
    let mut v: Vec<RuleSlot> = b
        .rules
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let a = c.slots.get(1 + i)?;
            Some(RuleSlot {
                rule: Some(i),
                text: r.text.clone(),
                cc: r.rule.cc.clone(),
                summary: a.summary(),
                counters: raw(a),
            })
        })
        .collect();
    if let Some(a) = c.slots.first() {
        v.push(RuleSlot {
            rule: None,
            text: "default".into(),
            cc: b.algo.clone(),
            summary: a.summary(),
            counters: raw(a),
        });
    }
    v
}

fn raw(a: &Agg) -> serde_json::Map<String, serde_json::Value> {
    agg::counters()
        .iter()
        .zip(a.c)
        .map(|(d, v)| (d.name.to_string(), v.into()))
        .collect()
}

pub(crate) fn collect() -> Result<Stats> {
    let all = agg::collect()?;
    Ok(Stats {
        algos: all
            .algos
            .iter()
            .map(|(a, p, slot)| AlgoSlot {
                algo: a.name(),
                profile: *p,
                summary: slot.summary(),
                counters: raw(slot),
            })
            .collect(),
        cgroups: all
            .cgroups
            .into_iter()
            .map(|c| CgroupSlot {
                rules: rule_slots(&c),
                summary: c.total.summary(),
                counters: raw(&c.total),
                cgroup: c.binding.cgroup,
                cgroup_id: c.binding.cgroup_id,
                algo: c.binding.algo,
                profile: c.binding.profile,
            })
            .collect(),
    })
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

fn print_summary(w: &mut impl Write, s: &Summary) -> std::io::Result<()> {
    writeln!(
        w,
        "  flows {} started, {} open   acked {:.1} MB   segments sent {}   retransmitted {} ({})",
        s.flows_started,
        s.flows_started.saturating_sub(s.flows_ended),
        s.bytes_acked as f64 / 1e6,
        s.segs_out,
        s.retrans_segs,
        s.retrans_ratio
            .map(|r| format!("{:.3} %", r * 100.0))
            .unwrap_or_else(|| "-".into()),
    )?;
    writeln!(
        w,
        "  loss events {}   RTOs {}   time in Recovery {:.2} s",
        s.loss_events, s.rtos, s.recovery_s
    )?;
    writeln!(
        w,
        "  srtt ms p50 {} p95 {} p99 {}   cwnd p50 {} p95 {}   rate Mbit/s p50 {} mean {}   ({} samples)",
        opt(s.srtt_ms_p50, 2),
        opt(s.srtt_ms_p95, 2),
        opt(s.srtt_ms_p99, 2),
        opt(s.cwnd_p50, 0),
        opt(s.cwnd_p95, 0),
        opt(s.rate_mbps_p50, 1),
        opt(s.rate_mbps_mean, 1),
        s.samples
    )?;
    if s.short_flows > 0 {
        writeln!(
            w,
            "  short flows (<= 1 MiB each way) {}   completion ms p50 {} p95 {}",
            s.short_flows,
            opt(s.fct_ms_p50, 1),
            opt(s.fct_ms_p95, 1)
        )?;
    }
    Ok(())
}

pub(super) fn help_fields(out: Out) -> Result<i32> {
    if out.json {
        let d = |v: &[crate::bind::agg::Desc]| -> Vec<serde_json::Value> {
            v.iter()
                .map(|d| serde_json::json!({"name": d.name, "unit": d.unit, "help": d.help}))
                .collect()
        };
        out.emit(&serde_json::json!({
            "counters": d(agg::counters()),
            "histograms": d(agg::hists()),
        }))?;
        return Ok(0);
    }
    println!("counters (summed over CPUs; JSON `counters`):");
    for d in agg::counters() {
        println!("  {:<16} {:<9} {}", d.name, d.unit, d.help);
    }
    println!("histograms (one sample per flow per smoothed RTT; quantiles in `summary`):");
    for d in agg::hists() {
        println!("  {:<16} {:<9} {}", d.name, d.unit, d.help);
    }
    Ok(0)
}

pub(super) fn run(out: Out) -> Result<i32> {
    bpf::require_root()?;
    let st = collect()?;
    if out.json {
        out.emit(&st)?;
        return Ok(0);
    }
    let mut w = std::io::stdout().lock();
    if st.algos.is_empty() && st.cgroups.is_empty() {
        writeln!(
            w,
            "nothing to report: no controller attached and no cgroup bound or watched \
             (ccload attach --algo ccpd; ccload cgroup watch PATH)"
        )?;
    }
    for a in &st.algos {
        writeln!(w, "{} profile {}", a.algo, a.profile)?;
        print_summary(&mut w, &a.summary)?;
    }
    for c in &st.cgroups {
        let path = c
            .cgroup
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!("<cgroup id {}>", c.cgroup_id));
        if c.algo.is_empty() {
            writeln!(w, "cgroup {path} (watched; sockets keep their CC)")?;
        } else {
            writeln!(
                w,
                "cgroup {path} (bound to {} profile {})",
                c.algo, c.profile
            )?;
        }
        print_summary(&mut w, &c.summary)?;
        for r in &c.rules {
            match r.rule {
                Some(i) => writeln!(w, " rule {}: {}", i + 1, r.text)?,
                None => writeln!(w, " default (no rule matched): {}", r.cc)?,
            }
            print_summary(&mut w, &r.summary)?;
        }
    }
    Ok(0)
}
