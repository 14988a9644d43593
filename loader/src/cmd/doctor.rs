//! `ccload doctor`: kernel features and permissions, each with its fix.

use anyhow::Result;

use crate::doctor;

pub(super) fn run(json: bool) -> Result<i32> {
    let checks = doctor::checks();
    if json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        for c in &checks {
            let mark = if c.ok { "ok  " } else { "FAIL" };
            print!("{mark} {:<13} {}", c.name, c.detail);
            if let Some(f) = &c.fix {
                print!("  -> fix: {f}");
            }
            println!();
        }
    }
    Ok(if checks.iter().all(|c| c.ok) { 0 } else { 1 })
}
