//! Command-line interface: argument types and command implementations.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use serde_json::json;

use crate::algos::{parse_assignment, Algo};
use crate::bpf::{self, AttachOpts, AttachOutcome};
use crate::error::CclError;
use crate::{diag, doctor, stats, sysctl, watch};

/// `--duration`: seconds as a finite, positive number (no panic on -1, nan,
/// inf or 1e300, which `Duration::from_secs_f64` rejects by panicking).
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 1e9 {
        return Err(format!("`{s}`: seconds must be > 0 and at most 1e9"));
    }
    Ok(Duration::from_secs_f64(v))
}

fn parse_algo(s: &str) -> Result<Algo, String> {
    s.parse::<Algo>().map_err(|e| e.to_string())
}

/// Deploy, tune and observe eBPF TCP congestion controllers.
#[derive(Debug, Parser)]
#[command(name = "ccload", version, about)]
pub struct Cli {
    /// Show the full error chain and the whole verifier log.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Load a controller, register it with the kernel and pin it (stays after exit).
    Attach {
        /// Algorithm: ccpd, hetcp, ctcp_plus, ub_reno.
        #[arg(long, value_parser = parse_algo)]
        algo: Algo,
        /// Tunable NAME=VALUE in user units (e.g. kp=4, kd=100); repeatable.
        #[arg(long = "set", value_parser = parse_assignment)]
        sets: Vec<(String, String)>,
        /// Also make it net.ipv4.tcp_congestion_control (restored by detach).
        #[arg(long)]
        default: bool,
        /// If attached, atomically swap in a freshly loaded object (link update).
        #[arg(long)]
        replace: bool,
    },
    /// Unregister and unpin a controller.
    Detach {
        #[arg(long, value_parser = parse_algo, required_unless_present = "all")]
        algo: Option<Algo>,
        /// Detach every controller ccload attached.
        #[arg(long, conflicts_with = "algo")]
        all: bool,
    },
    /// Attached controllers: ids, pins, tunables, counters, sockets using them.
    Status {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check kernel features and permissions, with fixes.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Change tunables of an attached controller live (one map update).
    Tune {
        #[arg(long, value_parser = parse_algo)]
        algo: Algo,
        /// Tunable NAME=VALUE in user units; repeatable.
        #[arg(long = "set", value_parser = parse_assignment)]
        sets: Vec<(String, String)>,
        /// Params profile: id 0..15 (0 = the default profile) or a name
        /// from the last `ccload apply` / `serve` config.
        #[arg(long, default_value = "0")]
        profile: String,
        /// Print current values with units, ranges and defaults.
        #[arg(long, conflicts_with_all = ["sets", "reset"])]
        show: bool,
        /// Restore the defaults.
        #[arg(long, conflicts_with = "sets")]
        reset: bool,
    },
    /// Stream per-round estimator telemetry (table on a terminal, JSON lines when piped).
    Watch {
        /// Only this algorithm (default: every attached one).
        #[arg(long, value_parser = parse_algo)]
        algo: Option<Algo>,
        /// Only the flow with this local or remote ADDR:PORT (0.0.0.0:PORT = any address).
        #[arg(long)]
        flow: Option<std::net::SocketAddr>,
        /// Only the socket with this cookie.
        #[arg(long)]
        cookie: Option<u64>,
        #[arg(long, value_enum)]
        format: Option<watch::Format>,
        /// Rounds per record, set in the kernel for the watch's duration (0 = off).
        #[arg(long)]
        every: Option<u32>,
        /// Stop after N records.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds (a finite number > 0).
        #[arg(long, value_parser = parse_seconds)]
        duration: Option<Duration>,
    },
    /// TCP sockets of this network namespace that use ccload's controllers.
    Flows {
        #[arg(long)]
        json: bool,
    },
    /// Reconcile the kernel to a config file (attach/detach/tune/bind/unbind)
    /// and print the difference.
    Apply {
        file: std::path::PathBuf,
        /// Print what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Daemon: apply a config (again on SIGHUP), serve Prometheus metrics,
    /// fan telemetry out to `ccload watch` clients.
    Serve {
        #[arg(long)]
        config: std::path::PathBuf,
    },
    /// Per-cgroup controller choice (cgroup v2 sock_ops).
    Cgroup {
        #[command(subcommand)]
        cmd: CgroupCmd,
    },
}

#[derive(Debug, Subcommand)]
pub enum CgroupCmd {
    /// Give the TCP connections (active and passive) of processes in a cgroup
    /// this congestion control and tunable profile.
    Set {
        /// cgroup v2 directory, e.g. /sys/fs/cgroup/web.slice
        path: std::path::PathBuf,
        /// A registered congestion control: one of ours (attached) or the
        /// kernel's (reno, cubic, bbr, ...).
        #[arg(long)]
        algo: String,
        /// Tunable profile: id 0..15 (0 = the algorithm's defaults; see
        /// `tune --profile`) or a name from the last applied config.
        #[arg(long, default_value = "0")]
        profile: String,
    },
    /// Remove a cgroup's binding (its sockets keep their current CC).
    Unset { path: std::path::PathBuf },
    /// Bound cgroups with their algorithm, profile and counters.
    List {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cli: Cli) -> Result<i32> {
    match cli.cmd {
        Cmd::Attach {
            algo,
            sets,
            default,
            replace,
        } => {
            let opts = AttachOpts {
                algo,
                sets: sets.clone(),
                make_default: default,
                replace,
                verbose: cli.verbose,
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
                    if !sets.is_empty() {
                        println!(
                            "hint: use `ccload tune --algo {algo} --set ...` to change tunables"
                        );
                    }
                }
                AttachOutcome::Replaced => println!("replaced {algo} with a freshly loaded object"),
            }
            Ok(0)
        }
        Cmd::Detach { algo, all } => {
            if all {
                bpf::require_root()?;
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
            } else {
                let a = algo.expect("clap requires --algo or --all");
                bpf::detach(a)?;
                println!("detached {a}");
            }
            Ok(0)
        }
        Cmd::Status { json } => status(json),
        Cmd::Cgroup { cmd } => cgroup_cmd(cmd),
        Cmd::Serve { config } => {
            crate::serve::run(&config, cli.verbose)?;
            Ok(0)
        }
        Cmd::Apply { file, dry_run } => {
            let d = crate::config::load(&file)?;
            if !dry_run {
                bpf::require_root()?;
            }
            let plan = crate::config::plan(&d)?;
            if plan.is_empty() {
                println!("{}: no changes", file.display());
                return Ok(0);
            }
            for c in &plan {
                println!("{c}");
            }
            if dry_run {
                println!("(dry run: nothing changed)");
            } else {
                crate::config::execute(&plan, cli.verbose)?;
                crate::config::save_profile_names(&d)?;
                println!("{}: applied {} change(s)", file.display(), plan.len());
            }
            Ok(0)
        }
        Cmd::Doctor { json } => {
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
        Cmd::Tune {
            algo,
            sets,
            profile,
            show,
            reset,
        } => {
            let profile = crate::config::resolve_profile(algo.name(), &profile)?;
            tune(algo, &sets, profile, show, reset)
        }
        Cmd::Watch {
            algo,
            flow,
            cookie,
            format,
            every,
            count,
            duration,
        } => {
            let algos = match algo {
                Some(a) => {
                    if !bpf::is_attached(a) {
                        bail!(CclError::NotAttached { algo: a.name() });
                    }
                    vec![a]
                }
                None => bpf::attached(),
            };
            watch::run(watch::WatchOpts {
                algos,
                flow,
                cookie,
                format,
                every,
                count,
                duration,
            })?;
            Ok(0)
        }
        Cmd::Flows { json } => flows(json),
    }
}

fn tune(
    algo: Algo,
    sets: &[(String, String)],
    profile: u32,
    show: bool,
    reset: bool,
) -> Result<i32> {
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
    let diff = old.diff(&new);
    if diff.is_empty() {
        println!("{algo}: no change");
    }
    for (name, o, n) in diff {
        println!("{algo}.{name}: {o} -> {n}");
    }
    Ok(0)
}

fn status(as_json: bool) -> Result<i32> {
    bpf::require_root()?;
    let default = sysctl::default_cc().unwrap_or_default();
    let socks = diag::tcp_sockets().unwrap_or_default();
    let mut out = Vec::new();
    for algo in bpf::attached() {
        let ids = bpf::ids(algo)?;
        let params = bpf::read_params(algo, 0)?;
        let st = bpf::read_stats(algo)?;
        let meta = bpf::read_meta(algo)?;
        let nsock = socks.iter().filter(|s| s.cong == algo.name()).count();
        let tun: serde_json::Map<String, serde_json::Value> = algo
            .params()
            .iter()
            .zip(&params.raw)
            .map(|(d, v)| (d.name.to_string(), json!(d.display(*v))))
            .collect();
        let counters: serde_json::Map<String, serde_json::Value> = st
            .iter()
            .enumerate()
            .map(|(i, v)| (stats::name(i).to_string(), json!(v)))
            .collect();
        out.push(json!({
            "algo": algo.name(),
            "kernel_name": algo.name(),
            "registered": bpf::is_registered(algo.name()),
            "default": default == algo.name(),
            "pin_path": bpf::pin_dir(algo),
            "link_id": ids.link_id,
            "struct_ops_map_id": ids.struct_ops_map_id,
            "map_ids": ids.map_ids.iter().map(|(n, i)| (n.clone(), json!(i))).collect::<serde_json::Map<_,_>>(),
            "sockets": nsock,
            "attached_unix_s": meta.attached_unix_s,
            "restores_default": if meta.default_set == 1 { json!(bpf::c_name(&meta.prev_default)) } else { json!(null) },
            "tunables": tun,
            "stats": counters,
        }));
    }
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "default_cc": default, "attached": out }))?
        );
        return Ok(0);
    }
    let mut w = std::io::stdout().lock();
    writeln!(w, "default congestion control: {default}")?;
    if out.is_empty() {
        writeln!(w, "no controller attached (ccload attach --algo ccpd)")?;
    }
    for a in &out {
        writeln!(
            w,
            "\n{}  registered={} default={} sockets={}",
            a["algo"].as_str().unwrap(),
            a["registered"],
            a["default"],
            a["sockets"]
        )?;
        writeln!(
            w,
            "  link id {}  struct_ops map id {}  pinned at {}",
            a["link_id"],
            a["struct_ops_map_id"],
            a["pin_path"].as_str().unwrap_or("")
        )?;
        let maps: Vec<String> = a["map_ids"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(w, "  map ids: {}", maps.join(" "))?;
        let tun: Vec<String> = a["tunables"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        writeln!(w, "  tunables: {}", tun.join(" "))?;
        let st: Vec<String> = a["stats"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| v.as_u64() != Some(0))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(
            w,
            "  stats: {}",
            if st.is_empty() {
                "all zero".into()
            } else {
                st.join(" ")
            }
        )?;
    }
    Ok(0)
}

fn flows(as_json: bool) -> Result<i32> {
    let names: Vec<&str> = Algo::ALL.iter().map(|a| a.name()).collect();
    let socks: Vec<diag::TcpSock> = diag::tcp_sockets()?
        .into_iter()
        .filter(|s| names.contains(&s.cong.as_str()))
        .collect();
    if as_json {
        println!("{}", serde_json::to_string_pretty(&socks)?);
    } else {
        println!(
            "{:<10} {:<24} {:<24} {:>6} {:>20}",
            "cc", "local", "remote", "state", "cookie"
        );
        for s in &socks {
            println!(
                "{:<10} {:<24} {:<24} {:>6} {:>20}",
                s.cong,
                s.local.to_string(),
                s.remote.to_string(),
                s.state,
                s.cookie
            );
        }
    }
    Ok(0)
}

fn cgroup_cmd(cmd: CgroupCmd) -> Result<i32> {
    use crate::cgroup;
    match cmd {
        CgroupCmd::Set {
            path,
            algo,
            profile,
        } => {
            let profile = crate::config::resolve_profile(&algo, &profile)?;
            let b = cgroup::set(&path, &algo, profile)?;
            println!(
                "bound cgroup {} (id {}) to {} profile {}",
                path.display(),
                b.cgroup_id,
                b.algo,
                b.profile
            );
            Ok(0)
        }
        CgroupCmd::Unset { path } => {
            if cgroup::unset(&path)? {
                println!("unbound cgroup {}", path.display());
                Ok(0)
            } else {
                eprintln!("ccload: cgroup {} is not bound", path.display());
                Ok(1)
            }
        }
        CgroupCmd::List { json } => {
            let l = cgroup::list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&l)?);
            } else if l.is_empty() {
                println!("no cgroup bindings");
            } else {
                for b in &l {
                    println!(
                        "{} (id {})  algo={} profile={}  connections: active={} passive={} errors={}",
                        b.cgroup
                            .as_ref()
                            .map(|p| p.display().to_string())
                            .unwrap_or_else(|| "?".into()),
                        b.cgroup_id,
                        b.algo,
                        b.profile,
                        b.active,
                        b.passive,
                        b.errors
                    );
                }
            }
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_attach() {
        let c = Cli::try_parse_from([
            "ccload",
            "attach",
            "--algo",
            "ccpd",
            "--set",
            "kp=4",
            "--set",
            "kd=100",
            "--default",
        ])
        .unwrap();
        match c.cmd {
            Cmd::Attach {
                algo,
                sets,
                default,
                replace,
            } => {
                assert_eq!(algo, Algo::Ccpd);
                assert_eq!(
                    sets,
                    vec![("kp".into(), "4".into()), ("kd".into(), "100".into())]
                );
                assert!(default && !replace);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_unknown_algo_and_bad_set() {
        let e = Cli::try_parse_from(["ccload", "attach", "--algo", "vegas"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown algorithm `vegas`") && e.contains("ccpd"),
            "{e}"
        );
        assert!(
            Cli::try_parse_from(["ccload", "attach", "--algo", "ccpd", "--set", "kp"]).is_err()
        );
        assert!(Cli::try_parse_from(["ccload", "detach"]).is_err());
        assert!(Cli::try_parse_from(["ccload", "detach", "--all", "--algo", "ccpd"]).is_err());
        for bad in ["-1", "nan", "inf", "0", "1e300", "x"] {
            let arg = format!("--duration={bad}");
            let e = Cli::try_parse_from(["ccload", "watch", arg.as_str()])
                .err()
                .unwrap_or_else(|| panic!("--duration {bad} accepted"))
                .to_string();
            assert!(e.contains("--duration"), "{bad}: {e}");
        }
        assert!(Cli::try_parse_from(["ccload", "watch", "--duration", "2.5"]).is_ok());
    }
}
