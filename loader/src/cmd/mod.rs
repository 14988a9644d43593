//! One module per `ccload` command; [`run`] dispatches the parsed command
//! line.  Every command returns its exit code (0 ok, 1 soft failure) or an
//! error (exit 2, printed by `main`).

mod algos;
mod apply;
mod attach;
mod cgroup;
mod doctor;
mod flows;
mod rollout;
mod stats;
mod status;
mod tune;
mod watch;

use anyhow::Result;

use crate::cli::{CgroupCmd, Cli, Cmd};
use crate::output::Out;

/// Does this command change kernel state?  Those hold the state lock
/// (`crate::lock`) for their whole run, so two never interleave.
fn changes_state(cmd: &Cmd) -> bool {
    match cmd {
        Cmd::Attach { .. } | Cmd::Detach { .. } => true,
        Cmd::Tune { show, .. } => !show,
        Cmd::Apply { dry_run, .. } => !dry_run,
        Cmd::Cgroup { cmd } => !matches!(cmd, CgroupCmd::List),
        // `watch --every` and `serve` lock around their own changes.
        _ => false,
    }
}

pub fn run(cli: Cli) -> Result<i32> {
    let verbose = cli.verbose;
    let out = Out::new(cli.json, cli.pretty);
    let _lock = if changes_state(&cli.cmd) {
        crate::lock::state()?
    } else {
        None
    };
    match cli.cmd {
        Cmd::Attach {
            algo,
            sets,
            default,
            replace,
        } => attach::attach(algo, sets, default, replace, verbose, out),
        Cmd::Detach { algo, all } => attach::detach(algo, all, out),
        Cmd::Status {
            help_stats: true, ..
        } => status::help_stats(out),
        Cmd::Status { .. } => status::run(out),
        Cmd::Doctor => doctor::run(out),
        Cmd::Algos => algos::run(out),
        Cmd::Tune {
            algo,
            sets,
            profile,
            show,
            reset,
        } => tune::run(algo, &sets, &profile, show, reset, out),
        Cmd::Watch(a) if a.help_fields => watch::help_fields(a.algo, out),
        Cmd::Watch(mut args) => {
            if out.json && args.format.is_none() {
                args.format = Some(crate::watch::Format::Json);
            }
            watch::run(crate::watch::WatchOpts {
                algos: watch::algos(args.algo)?,
                args,
            })
        }
        Cmd::Top { .. } if out.json => anyhow::bail!(
            "`top` is a full-screen view; for machine output use `ccload -j stats` \
             (aggregates) or `ccload -j watch` (per-flow records)"
        ),
        Cmd::Top { algo } => {
            crate::top::run(watch::algos(algo)?)?;
            Ok(0)
        }
        Cmd::Flows => flows::run(out),
        Cmd::Apply { file, dry_run } => apply::run(&file, dry_run, verbose, out),
        Cmd::Serve { config } => {
            crate::serve::run(&config, verbose)?;
            Ok(0)
        }
        Cmd::Stats {
            help_fields: true, ..
        } => stats::help_fields(out),
        Cmd::Stats { .. } => stats::run(out),
        Cmd::Rollout(a) => rollout::run(a, out),
        Cmd::Cgroup { cmd } => cgroup::run(cmd, out),
    }
}
