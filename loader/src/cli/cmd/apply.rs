//! `ccload apply FILE... [--dry-run]`: reconcile the kernel to a config
//! (several files: later ones add to earlier ones, crate::bind::config).

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::output::Out;
use crate::{bind::config, bind::profiles, bpf};

pub(super) fn run(files: &[PathBuf], dry_run: bool, verbose: bool, out: Out) -> Result<i32> {
    let mut d = config::load_all(files)?;
    let names = files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    if !dry_run {
        bpf::require_root()?;
    }
    let ids = profiles::stabilise(&mut d)?;
    // `[[pods]]` are `serve`'s (it watches the API): their bindings stay.
    let plan = config::plan(&crate::bind::config::with_pods(&d, None))?;
    // Entries that name no cgroup yet: valid, bound by `serve` on arrival.
    let waiting: Vec<String> = crate::bind::cgroup_rules::resolve(&d.cgroups)
        .missing
        .iter()
        .map(|&i| d.cgroups[i].pattern.display().to_string())
        .collect();
    if out.json {
        if !dry_run && !plan.is_empty() {
            config::execute(&plan, verbose)?;
            profiles::save(&ids)?;
        }
        out.emit(&serde_json::json!({
            "file": files[0],
            "files": files,
            "dry_run": dry_run,
            "changes": plan.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
            "applied": if dry_run { 0 } else { plan.len() },
            "waiting": waiting,
        }))?;
        return Ok(0);
    }
    for w in &waiting {
        println!("  no cgroup {w} yet (`ccload serve` binds it when it appears)");
    }
    for p in &d.pods {
        println!(
            "  pods `{}`{}: `ccload serve` binds them (it watches this node's pods)",
            p.selector,
            p.namespace
                .as_ref()
                .map(|n| format!(" in {n}"))
                .unwrap_or_default()
        );
    }
    if plan.is_empty() {
        println!("{names}: no changes");
        return Ok(0);
    }
    for c in &plan {
        println!("{c}");
    }
    if dry_run {
        println!("(dry run: nothing changed)");
    } else {
        config::execute(&plan, verbose)?;
        profiles::save(&ids)?;
        println!("{names}: applied {} change(s)", plan.len());
    }
    Ok(0)
}
