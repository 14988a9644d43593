//! `ccload watch`: which algorithms to read, then `crate::cli::watch`.

use anyhow::{bail, Result};

use crate::bpf;
use crate::bpf::algos::Algo;
use crate::cli::output::Out;
use crate::error::CclError;

/// `--algo A` (must be attached) or every attached algorithm.
pub(super) fn algos(algo: Option<Algo>) -> Result<Vec<Algo>> {
    match algo {
        Some(a) if !bpf::is_attached(a) => bail!(CclError::NotAttached { algo: a.name() }),
        Some(a) => Ok(vec![a]),
        None => Ok(bpf::attached()),
    }
}

/// `watch --help-fields`: each algorithm's telemetry fields, from the same
/// descriptor tables that decode the records.
pub(super) fn help_fields(algo: Option<Algo>, out: Out) -> Result<i32> {
    let algos = algo.map(|a| vec![a]).unwrap_or_else(|| Algo::ALL.to_vec());
    if out.json {
        let per: serde_json::Map<String, serde_json::Value> = algos
            .iter()
            .map(|a| {
                let f: Vec<_> = crate::bpf::telemetry::fields(*a)
                    .iter()
                    .map(|f| serde_json::json!({"name": f.name, "unit": f.unit, "help": f.help}))
                    .collect();
                (a.name().to_string(), serde_json::json!(f))
            })
            .collect();
        out.emit(&serde_json::json!({
            "header": crate::bpf::telemetry::Event::HEADER.iter().chain(["profile"].iter()).collect::<Vec<_>>(),
            "fields": per,
        }))?;
        return Ok(0);
    }
    println!(
        "every record: {}, profile",
        crate::bpf::telemetry::Event::HEADER.join(", ")
    );
    for a in algos {
        println!("\n{a}:");
        for f in crate::bpf::telemetry::fields(a) {
            let unit = if f.unit.is_empty() { "-" } else { f.unit };
            println!("  {:<14} {:<10} {}", f.name, unit, f.help);
        }
    }
    Ok(0)
}

pub(super) fn run(o: crate::cli::watch::WatchOpts) -> Result<i32> {
    crate::cli::watch::run(o)?;
    Ok(0)
}
