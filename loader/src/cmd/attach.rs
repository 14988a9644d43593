//! `ccload attach` and `ccload detach`.

use anyhow::Result;

use crate::algos::Algo;
use crate::bpf::{self, AttachOpts, AttachOutcome};

pub(super) fn attach(
    algo: Algo,
    sets: Vec<(String, String)>,
    default: bool,
    replace: bool,
    verbose: bool,
) -> Result<i32> {
    let has_sets = !sets.is_empty();
    let opts = AttachOpts {
        algo,
        sets,
        make_default: default,
        replace,
        verbose,
    };
    match bpf::attach(&opts)? {
        AttachOutcome::Attached => {
            println!(
                "attached {algo}: registered as `{algo}`, pinned at {}",
                bpf::pin_dir(algo).display()
            );
            if default {
                println!("net.ipv4.tcp_congestion_control = {algo}");
            }
        }
        AttachOutcome::AlreadyAttached => {
            println!("{algo} is already attached; nothing changed");
            if has_sets {
                println!("hint: use `ccload tune --algo {algo} --set ...` to change tunables");
            }
        }
        AttachOutcome::Replaced => println!("replaced {algo} with a freshly loaded object"),
    }
    Ok(0)
}

pub(super) fn detach(algo: Option<Algo>, all: bool) -> Result<i32> {
    if !all {
        let a = algo.expect("clap requires --algo or --all");
        bpf::detach(a)?;
        println!("detached {a}");
        return Ok(0);
    }
    bpf::require_root()?;
    for l in crate::leftovers::remove()? {
        println!("removed leftover {}: {}", l.path.display(), l.what);
    }
    let n = crate::cgroup::unset_all();
    if n > 0 {
        println!("removed {n} cgroup binding(s)");
    }
    let list = bpf::attached();
    if list.is_empty() {
        println!("nothing attached");
    }
    for a in list {
        bpf::detach(a)?;
        println!("detached {a}");
    }
    Ok(0)
}
