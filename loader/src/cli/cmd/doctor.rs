//! `ccload doctor`: kernel features and permissions, each with its fix.

use anyhow::Result;

use crate::cli::doctor;
use crate::cli::output::Out;

pub(super) fn run(out: Out) -> Result<i32> {
    let checks = doctor::checks();
    if out.json {
        out.emit(&checks)?;
    } else {
        for c in &checks {
            let mark = match (c.ok, c.degraded) {
                (false, _) => "FAIL",
                (true, true) => "warn",
                (true, false) => "ok  ",
            };
            print!("{mark} {:<13} {}", c.name, c.detail);
            if let Some(f) = &c.fix {
                print!("  -> fix: {f}");
            }
            println!();
        }
    }
    Ok(if checks.iter().all(|c| c.ok) { 0 } else { 1 })
}
