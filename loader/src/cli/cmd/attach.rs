//! `ccload attach` and `ccload detach`.

use anyhow::Result;

use crate::bpf::algos::Algo;
use crate::bpf::{self, AttachOpts, AttachOutcome};
use crate::cli::output::Out;
use serde_json::json;

pub(super) fn attach(
    algo: Algo,
    sets: Vec<(String, String)>,
    default: bool,
    replace: bool,
    allow: bool,
    verbose: bool,
    out: Out,
) -> Result<i32> {
    if replace && bpf::is_attached(algo) {
        // In place: the new ops keep the old ones' --allow unless asked for.
        let allow = allow || bpf::is_allowed(algo.name());
        let r = crate::bpf::upgrade::upgrade(
            algo,
            &sets,
            allow,
            verbose,
            &crate::bind::leftovers::sweep,
        )?;
        if out.json {
            out.emit(&json!({
                "algo": algo.name(),
                "outcome": "replaced",
                "pin_dir": bpf::pin_dir(algo),
                "default": false,
                "allowed": bpf::is_allowed(algo.name()),
                "upgrade": serde_json::to_value(&r)?,
            }))?;
        } else {
            for l in r.lines(algo) {
                println!("{l}");
            }
        }
        return Ok(0);
    }
    let has_sets = !sets.is_empty();
    let opts = AttachOpts {
        algo,
        sets,
        make_default: default,
        allow,
        verbose,
    };
    let outcome = bpf::attach(&opts, &crate::bind::leftovers::sweep)?;
    if out.json {
        out.emit(&json!({
            "algo": algo.name(),
            "outcome": match outcome {
                AttachOutcome::Attached => "attached",
                AttachOutcome::AlreadyAttached => "already_attached",
            },
            "pin_dir": bpf::pin_dir(algo),
            "default": default && matches!(outcome, AttachOutcome::Attached),
            "allowed": bpf::is_allowed(algo.name()),
        }))?;
        return Ok(0);
    }
    match outcome {
        AttachOutcome::Attached => {
            println!(
                "attached {algo}: registered as `{algo}`, pinned at {}",
                bpf::pin_dir(algo).display()
            );
            if default {
                println!("net.ipv4.tcp_congestion_control = {algo}");
            }
            if allow {
                println!("any process may select {algo} (it is in net.ipv4.tcp_allowed_congestion_control until detach)");
            }
        }
        AttachOutcome::AlreadyAttached => {
            println!("{algo} is already attached; nothing changed");
            if allow && !bpf::is_allowed(algo.name()) {
                println!("hint: `ccload attach --algo {algo} --replace --allow` makes it selectable by any process");
            }
            if has_sets {
                println!("hint: use `ccload tune --algo {algo} --set ...` to change tunables");
            }
        }
    }
    Ok(0)
}

pub(super) fn detach(algo: Option<Algo>, all: bool, out: Out) -> Result<i32> {
    let say = |s: String| {
        if !out.json {
            println!("{s}");
        }
    };
    if !all {
        let a = algo.expect("clap requires --algo or --all");
        bpf::detach(a)?;
        say(format!("detached {a}"));
        if out.json {
            out.emit(&json!({ "detached": [a.name()] }))?;
        }
        return Ok(0);
    }
    bpf::require_root()?;
    let mut removed = Vec::new();
    for l in crate::bind::leftovers::remove()?.1 {
        say(format!("removed leftover {}: {}", l.path.display(), l.what));
        removed.push(json!({ "path": l.path, "what": l.what }));
    }
    let n = crate::bind::cgroup::unset_all();
    if n > 0 {
        say(format!("removed {n} cgroup binding(s)"));
    }
    let list = bpf::attached();
    if list.is_empty() {
        say("nothing attached".into());
    }
    let mut detached = Vec::new();
    for a in list {
        bpf::detach(a)?;
        say(format!("detached {a}"));
        detached.push(a.name());
    }
    if out.json {
        out.emit(&json!({
            "detached": detached,
            "cgroup_bindings_removed": n,
            "leftovers_removed": removed,
        }))?;
    }
    Ok(0)
}
