//! `ccload algos [--json]`: the controllers this build carries, with every
//! tunable (unit, default, range, help) and telemetry field, from the same
//! tables the kernel side is built from.  Offline: no root, no BPF.

use anyhow::Result;
use serde_json::json;

use crate::bpf::algos::Algo;
use crate::cli::output::{user_value, Out};

pub(super) fn run(out: Out) -> Result<i32> {
    if out.json {
        let v: Vec<serde_json::Value> = Algo::ALL
            .iter()
            .map(|a| {
                json!({
                    "algo": a.name(),
                    "purpose": a.purpose(),
                    // What this build loads: the identities an attachment
                    // records (crate::bpf::upgrade), the same in every build.
                    "layout_id": format!("{:016x}", crate::bpf::layout::layout_id(*a)),
                    "obj_id": format!("{:016x}", a.obj_id()),
                    "tunables": a.params().iter().map(|d| json!({
                        "name": d.name,
                        "unit": d.unit,
                        "default": user_value(d, d.def),
                        "min": user_value(d, d.min),
                        "max": user_value(d, d.max),
                        "help": d.help,
                    })).collect::<Vec<_>>(),
                    "telemetry": crate::bpf::telemetry::fields(*a).iter().map(|f| json!({
                        "name": f.name, "unit": f.unit, "help": f.help,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        out.emit(&v)?;
        return Ok(0);
    }
    for a in Algo::ALL {
        println!(
            "{a}: {}  ({} tunables, {} telemetry fields)",
            a.purpose(),
            a.params().len(),
            crate::bpf::telemetry::fields(a).len()
        );
        for d in a.params() {
            println!(
                "  {:<14} {:>8} {:<9} [{}..{}]  {}",
                d.name,
                d.display(d.def),
                d.unit,
                d.display(d.min),
                d.display(d.max),
                d.help
            );
        }
    }
    Ok(0)
}
