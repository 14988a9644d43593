//! `ccload watch`: which algorithms to read, then `crate::watch`.

use anyhow::{bail, Result};

use crate::algos::Algo;
use crate::bpf;
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
pub(super) fn help_fields(algo: Option<Algo>) -> Result<i32> {
    let algos = algo.map(|a| vec![a]).unwrap_or_else(|| Algo::ALL.to_vec());
    println!(
        "every record: {}, profile",
        crate::telemetry::Event::HEADER.join(", ")
    );
    for a in algos {
        println!("\n{a}:");
        for f in crate::telemetry::fields(a) {
            let unit = if f.unit.is_empty() { "-" } else { f.unit };
            println!("  {:<14} {:<10} {}", f.name, unit, f.help);
        }
    }
    Ok(0)
}

pub(super) fn run(o: crate::watch::WatchOpts) -> Result<i32> {
    crate::watch::run(o)?;
    Ok(0)
}
