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

use crate::cli::args::{CgroupCmd, Cli, Cmd};
use crate::cli::output::Out;

/// Does this command change kernel state?  Those hold the state lock
/// (`crate::host::lock`) for their whole run, so two never interleave.
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
        crate::host::lock::state()?
    } else {
        None
    };
    match cli.cmd {
        Cmd::Attach {
            algo,
            sets,
            default,
            replace,
            allow,
        } => attach::attach(algo, sets, default, replace, allow, verbose, out),
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
                args.format = Some(crate::cli::args::WatchFormat::Json);
            }
            watch::run(crate::cli::watch::WatchOpts {
                algos: watch::algos(args.algo)?,
                args,
            })
        }
        Cmd::Top { .. } if out.json => anyhow::bail!(
            "`top` is a full-screen view; for machine output use `ccload -j stats` \
             (aggregates) or `ccload -j watch` (per-flow records)"
        ),
        Cmd::Top { algo } => {
            crate::cli::top::run(watch::algos(algo)?)?;
            Ok(0)
        }
        Cmd::Flows { netns, all_cc } => flows::run(netns.as_deref(), all_cc, out),
        Cmd::Apply { files, dry_run } => apply::run(&files, dry_run, verbose, out),
        Cmd::Serve { config } => {
            crate::serve::run(&config, verbose, out.json)?;
            Ok(0)
        }
        Cmd::Stats {
            help_fields: true, ..
        } => stats::help_fields(out),
        Cmd::Stats { .. } => stats::run(out),
        Cmd::Rollout(a) => rollout::run(a, out),
        Cmd::Cgroup { cmd } => cgroup::run(cmd, out),
        Cmd::Completions { shell } => {
            let mut c = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut c, "ccload", &mut std::io::stdout());
            Ok(0)
        }
        Cmd::Man { dir: None } => {
            let mut c = crate::cli::manpage::without_help(<Cli as clap::CommandFactory>::command());
            c.build();
            print!("{}", crate::cli::manpage::command_page(c, "ccload")?);
            Ok(0)
        }
        Cmd::Man { dir: Some(dir) } => {
            let pages = man_pages(&dir)?;
            if out.json {
                out.emit(&pages)?;
            } else {
                for p in pages {
                    println!("{}", p.display());
                }
            }
            Ok(0)
        }
    }
}

/// man8/ccload.8 and man8/ccload-COMMAND.8 (ccload-cgroup-set.8, ...), as
/// git and cargo name theirs, and man5/ccload.toml.5, under `man`.
fn man_pages(man: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    let sec = crate::cli::manpage::SECTION;
    let dir = &man.join(format!("man{sec}"));
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let five = man.join("man5");
    std::fs::create_dir_all(&five).with_context(|| format!("create {}", five.display()))?;
    let mut c = crate::cli::manpage::without_help(<Cli as clap::CommandFactory>::command());
    c.build();
    let mut out = Vec::new();
    fn walk(
        c: &clap::Command,
        name: String,
        dir: &std::path::Path,
        out: &mut Vec<std::path::PathBuf>,
    ) -> Result<()> {
        let path = dir.join(format!("{name}.{}", crate::cli::manpage::SECTION));
        let page = crate::cli::manpage::command_page(c.clone(), &name)?;
        std::fs::write(&path, page)
            .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
        out.push(path);
        for sub in c.get_subcommands() {
            walk(sub, format!("{name}-{}", sub.get_name()), dir, out)?;
        }
        Ok(())
    }
    walk(&c, "ccload".into(), dir, &mut out)?;
    let path = five.join("ccload.toml.5");
    std::fs::write(
        &path,
        crate::cli::manpage::config_page(env!("CARGO_PKG_VERSION")),
    )
    .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
    out.push(path);
    Ok(out)
}
