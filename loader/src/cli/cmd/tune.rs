//! `ccload tune`: show, set or reset an attached controller's tunables
//! (one map update; validated before the kernel is touched).

use anyhow::{bail, Result};

use crate::bpf;
use crate::bpf::algos::Algo;
use crate::cli::output::{user_value, Out};
use serde_json::json;

pub(super) fn run(
    algo: Algo,
    sets: &[(String, String)],
    profile: &str,
    show: bool,
    reset: bool,
    out: Out,
) -> Result<i32> {
    let profile = crate::bind::profiles::resolve(algo.name(), profile)?;
    if profile >= crate::intf::CCL_NR_PROFILES {
        bail!(
            "profile {profile} out of range 0..{}",
            crate::intf::CCL_NR_PROFILES - 1
        );
    }
    if !show && !reset && sets.is_empty() {
        bail!("nothing to do: give --set NAME=VALUE, --reset or --show");
    }
    // Validate before touching the kernel, so bad input changes nothing.
    let mut check = algo.defaults();
    check.apply(sets)?;
    bpf::require_root()?;
    let old = bpf::read_params(algo, profile)?;
    if show && out.json {
        let t: Vec<_> = algo
            .params()
            .iter()
            .enumerate()
            .map(|(i, d)| {
                json!({
                    "name": d.name,
                    "value": user_value(d, old.raw[i]),
                    "default": user_value(d, d.def),
                    "min": user_value(d, d.min),
                    "max": user_value(d, d.max),
                    "unit": d.unit,
                    "help": d.help,
                })
            })
            .collect();
        out.emit(&json!({ "algo": algo.name(), "profile": profile, "tunables": t }))?;
        return Ok(0);
    }
    if show {
        println!("{algo} profile {profile}:");
        println!(
            "{:<14} {:>10} {:>10} {:>16} {:<9} help",
            "name", "value", "default", "range", "unit"
        );
        for (i, d) in algo.params().iter().enumerate() {
            println!(
                "{:<14} {:>10} {:>10} {:>16} {:<9} {}",
                d.name,
                d.display(old.raw[i]),
                d.display(d.def),
                d.range(),
                d.unit,
                d.help
            );
        }
        return Ok(0);
    }
    let mut new = if reset { algo.defaults() } else { old.clone() };
    new.apply(sets)?;
    bpf::write_params(algo, &new, profile)?;
    let back = bpf::read_params(algo, profile)?;
    if back != new {
        bail!("{algo}: params read back differ from what was written (concurrent tune?)");
    }
    if out.json {
        let changes: Vec<_> = algo
            .params()
            .iter()
            .enumerate()
            .filter(|(i, _)| old.raw[*i] != new.raw[*i])
            .map(|(i, d)| {
                json!({
                    "name": d.name,
                    "old": user_value(d, old.raw[i]),
                    "new": user_value(d, new.raw[i]),
                    "unit": d.unit,
                })
            })
            .collect();
        out.emit(&json!({ "algo": algo.name(), "profile": profile, "changes": changes }))?;
        return Ok(0);
    }
    let diff = old.diff(&new);
    if diff.is_empty() {
        println!("{algo}: no change");
    }
    for (name, o, n) in diff {
        println!("{algo}.{name}: {o} -> {n}");
    }
    Ok(0)
}
