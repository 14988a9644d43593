//! The command line: clap types only.  Each command is implemented in
//! `crate::cli::cmd::<name>`.

use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::bpf::algos::{parse_assignment, Algo};
use crate::units::parse_duration;
use crate::units::{parse_every, Every};

/// Deploy, tune and observe eBPF TCP congestion controllers.
#[derive(Debug, Parser)]
#[command(name = "ccload", version, about)]
pub struct Cli {
    /// Show the full error chain and the whole verifier log.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// JSON output (compact, one document per line); errors as
    /// {"error": ..., "exit_code": N} on stdout.
    #[arg(short = 'j', long, global = true)]
    pub json: bool,
    /// Indented JSON output (implies --json).
    #[arg(short = 'p', long, global = true)]
    pub pretty: bool,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Load a controller, register it with the kernel and pin it (stays after exit).
    #[command(
        after_help = "Examples:\n  ccload attach --algo ccpd\n  ccload attach --algo ccpd --set kp=4 --set kd=100 --default\n  ccload attach --algo hetcp --allow      # unprivileged processes may select it\n  ccload attach --algo ccpd --replace     # swap in a fresh object, sockets keep theirs"
    )]
    Attach {
        /// The controller.
        #[arg(long, value_enum)]
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
        /// Let any process select it with setsockopt(TCP_CONGESTION), as
        /// the names in net.ipv4.tcp_allowed_congestion_control (without
        /// it, that needs CAP_NET_ADMIN).  Ends with `detach`.
        #[arg(long)]
        allow: bool,
    },
    /// Unregister and unpin a controller.
    #[command(
        after_help = "Examples:\n  ccload detach --algo ccpd\n  ccload detach --all      # also cgroup bindings and leftovers of a killed ccload"
    )]
    Detach {
        /// The controller to detach.
        #[arg(long, value_enum, required_unless_present = "all")]
        algo: Option<Algo>,
        /// Detach every controller ccload attached.
        #[arg(long, conflicts_with = "algo")]
        all: bool,
    },
    /// Attached controllers: ids, pins, tunables, counters, sockets using them.
    Status {
        /// Describe every counter in `stats`, and exit (no root needed).
        #[arg(long)]
        help_stats: bool,
    },
    /// The controllers this build carries: tunables (unit, default, range,
    /// help) and telemetry fields.  No root needed.
    Algos,
    /// Check kernel features and permissions, with fixes.
    Doctor,
    /// Change tunables of an attached controller live (one map update).
    #[command(
        after_help = "Examples:\n  ccload tune --algo ccpd --set kp=4 --set kd=50\n  ccload tune --algo ccpd --show\n  ccload tune --algo ccpd --profile web --set kp=2\n  ccload tune --algo ccpd --reset\n`ccload algos` lists every tunable with its unit, range and default."
    )]
    Tune {
        /// The attached controller.
        #[arg(long, value_enum)]
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
    #[command(
        after_help = "Examples:\n  ccload watch --algo ccpd\n  ccload watch --algo ccpd --flow 10.0.0.2:443 --wide\n  ccload watch --every 10ms --format csv > trace.csv   # many flows: one record per flow per 10 ms\n  ccload -j watch --count 100 | jq .cwnd"
    )]
    Watch(WatchArgs),
    /// Full-screen live view: busiest flows with cwnd/srtt/rate sparklines,
    /// per-profile totals, ring drops (keys: s sort, f freeze, q quit).
    Top {
        /// Only this algorithm (default: every attached one).
        #[arg(long, value_enum)]
        algo: Option<Algo>,
    },
    /// TCP sockets that use ccload's controllers, with state, cwnd, srtt,
    /// delivery rate and retransmissions (INET_DIAG_INFO, as `ss -ti`).
    #[command(
        after_help = "Examples:\n  ccload flows\n  ccload flows -N blue --all-cc      # another netns, every CC\n  ccload -j flows | jq '.[].info.cwnd'"
    )]
    Flows {
        /// Network namespace: a name under /run/netns or a path such as
        /// /proc/PID/ns/net (default: this process's).
        #[arg(short = 'N', long)]
        netns: Option<String>,
        /// Every TCP socket, whatever its congestion control.
        #[arg(long)]
        all_cc: bool,
    },
    /// Reconcile the kernel to a config file (attach/detach/tune/bind/unbind)
    /// and print the difference.
    #[command(
        after_help = "Examples:\n  ccload apply configs/web-server.toml --dry-run\n  ccload -j apply /etc/ccload/config.toml\n  ccload apply /etc/ccload/fleet.toml /etc/ccload/pool.toml"
    )]
    Apply {
        /// The config (TOML; configs/*.toml are examples); several files
        /// are one config, later ones adding tables and entries to earlier
        /// ones (a table lives in one file).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<std::path::PathBuf>,
        /// Print what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Daemon: apply a config (again on SIGHUP), serve Prometheus metrics,
    /// fan telemetry out to `ccload watch` clients.
    Serve {
        /// The config to apply and serve (its [serve] section: metrics
        /// address, telemetry socket, on_exit, limits).  Given more than
        /// once: one config of several files, later ones adding to earlier
        /// ones (e.g. the fleet's controllers, then this pool's [serve]).
        #[arg(long, required = true)]
        config: Vec<std::path::PathBuf>,
    },
    /// In-kernel aggregates per controller profile and per bound or watched
    /// cgroup: flows, retransmissions, loss events, RTOs, time in
    /// Recovery, srtt/cwnd/rate quantiles.  Exact whatever `watch` drops.
    Stats {
        /// Describe every counter and histogram, and exit (no root needed).
        #[arg(long)]
        help_fields: bool,
    },
    /// Canary rollout: bind a canary cgroup to a controller, compare it
    /// with a control cgroup every interval (in-kernel aggregates), roll
    /// back by itself when a guard fails twice in a row.  `rollout status`,
    /// `abort` and `promote` act on rollouts in progress or interrupted.
    #[command(
        after_help = "Examples:\n  ccload rollout --algo ccpd --canary /sys/fs/cgroup/web-a.slice --control /sys/fs/cgroup/web-b.slice \\\n      --guard 'retrans_ratio <= 1.5' --interval 30s --for 10m --promote\n  ccload rollout status\n  ccload rollout promote /sys/fs/cgroup/web-a.slice\n  ccload rollout abort --interrupted      # at boot: roll back what a crash left",
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    Rollout(RolloutArgs),
    /// Per-cgroup controller choice (cgroup v2 sock_ops).
    Cgroup {
        #[command(subcommand)]
        cmd: CgroupCmd,
    },
    /// Print a shell completion script, e.g.
    /// `ccload completions bash > /usr/share/bash-completion/completions/ccload`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `ccload man | man -l -`; with
    /// `--dir`, write ccload.8 and a ccload-COMMAND.8 per command there.
    Man {
        /// Write every page under this man directory (DIR/man8/ccload.8,
        /// ccload-COMMAND.8, DIR/man5/ccload.toml.5) instead of printing
        /// ccload(8).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum CgroupCmd {
    /// Give the TCP connections (active and passive) of processes in a cgroup
    /// this congestion control and tunable profile.
    #[command(
        after_help = "Examples:\n  ccload cgroup set /sys/fs/cgroup/system.slice/nginx.service --algo ccpd\n  ccload cgroup set /sys/fs/cgroup/backup.slice --algo cubic\nOne of ccload's controllers is attached with its defaults if it is not."
    )]
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
        /// A path rule, `MATCH -> CC[/PROFILE]`: `dst 10.0.0.0/8,fd00::/8
        /// -> cubic` (the peer's address) or `rtt >= 5ms -> ccpd` (`rtt <
        /// ...`: the handshake's RTT).  Repeat for more (at most 15); the
        /// first that matches a connection chooses its CC, --algo is for
        /// the rest.
        #[arg(long = "rule", value_name = "RULE")]
        rules: Vec<String>,
    },
    /// Keep in-kernel aggregates of a cgroup's TCP connections (`ccload
    /// stats`) without changing their congestion control: the control
    /// group of a comparison.
    Watch {
        /// cgroup v2 directory
        path: std::path::PathBuf,
    },
    /// Remove a cgroup's binding or watch (its sockets keep their current CC).
    Unset {
        /// cgroup v2 directory
        path: std::path::PathBuf,
    },
    /// Bound cgroups with their algorithm, profile and counters.
    List,
    /// Print a lab scenario (configs/lab/*.toml) of the paths a binding's
    /// connections took, one path per path rule (and one for the rest):
    /// their median smoothed RTT and delivery rate, and their
    /// retransmitted share as random loss, so `cargo xtask lab run`
    /// compares every controller with the kernel's on them.
    #[command(
        after_help = "Example:\n  ccload cgroup export /sys/fs/cgroup/web.slice > web.toml\n  cargo xtask lab run ./web.toml --quick"
    )]
    Export {
        /// A bound or watched cgroup v2 directory
        path: std::path::PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every flag and argument of every command says what it is for.
    #[test]
    fn every_argument_has_help() {
        fn walk(c: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for s in c.get_subcommands() {
                if s.get_about().is_none() && s.get_name() != "help" {
                    missing.push(format!("{path} {} (no about)", s.get_name()));
                }
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut c = Cli::command();
        c.build();
        let mut missing = Vec::new();
        walk(&c, "ccload", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
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
                allow,
            } => {
                assert!(!allow);
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
            e.contains("'vegas'")
                && e.contains("[possible values: ccpd, hetcp, ctcp_plus, ub_reno]"),
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

/// `ccload rollout` options.
#[derive(clap::Args, Debug, Clone)]
pub struct RolloutArgs {
    #[command(subcommand)]
    pub verb: Option<RolloutVerb>,
    /// The controller to try: one of ours or a registered kernel CC.
    #[arg(long, required_unless_present = "resume")]
    pub algo: Option<String>,
    /// Its tunable profile (id or name from the last applied config).
    #[arg(long, default_value = "0")]
    pub profile: String,
    /// The canary cgroup (gets the controller).
    #[arg(long, required_unless_present_any = ["resume", "ab"], conflicts_with = "ab")]
    pub canary: Option<std::path::PathBuf>,
    /// The control cgroup (keeps its CC; a sibling of the canary).
    #[arg(long, required_unless_present_any = ["resume", "ab"], conflicts_with = "ab")]
    pub control: Option<std::path::PathBuf>,
    /// A/B inside one cgroup instead of canary and control: a share of
    /// its new connections (--share, by a keyed hash) gets the controller,
    /// the rest keep the cgroup's CC; the arms are compared every
    /// interval, and harm beyond the retrans_ratio guard (an always-valid
    /// sequential test) rolls back: new connections all go to the
    /// control, open ones keep their CC.
    #[arg(long, value_name = "CGROUP")]
    pub ab: Option<std::path::PathBuf>,
    /// With --ab: the candidate's share of the connections, 0..1.
    #[arg(long, default_value_t = 0.1, requires = "ab")]
    pub share: f64,
    /// METRIC OP NUMBER on canary/control ratios, repeatable: retrans_ratio,
    /// srtt_p50_ratio, srtt_p95_ratio, goodput_ratio, rto_ratio,
    /// fct_p50_ratio (short flows' completion time) (default:
    /// retrans_ratio <= 1.5, srtt_p95_ratio <= 1.2, goodput_ratio >= 0.9).
    #[arg(long = "guard")]
    pub guards: Vec<String>,
    /// How often canary and control are compared (30s, 500ms, 10m, ...).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub interval: Duration,
    /// How long the rollout runs.
    #[arg(long = "for", default_value = "10m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Consecutive failing intervals that roll back.
    #[arg(long, default_value_t = 2)]
    pub fail_after: u32,
    /// Segments each side must send in an interval for it to be judged.
    #[arg(long, default_value_t = 200)]
    pub min_segments: u64,
    /// After a clean run, bind the control cgroup too.
    #[arg(long)]
    pub promote: bool,
    /// Replaced by `ccload rollout abort --interrupted` (it rolled back).
    #[arg(long, hide = true)]
    pub resume: bool,
}

/// What can be done to rollouts in progress or interrupted (a rollout's
/// process gone: killed, or its `serve` stopped uncleanly).
#[derive(Debug, Clone, Subcommand)]
pub enum RolloutVerb {
    /// The recorded rollouts: running or interrupted, progress, last verdict.
    Status {
        /// Only the rollout on this canary cgroup.
        canary: Option<std::path::PathBuf>,
    },
    /// Roll back now: the canary's previous binding restored, what the
    /// rollout added removed.
    #[command(group = clap::ArgGroup::new("which").required(true).args(["canary", "all", "interrupted"]))]
    Abort {
        /// The rollout on this canary cgroup.
        canary: Option<std::path::PathBuf>,
        /// Every recorded rollout.
        #[arg(long)]
        all: bool,
        /// Every rollout whose process is gone (what a crash or a kill left).
        #[arg(long)]
        interrupted: bool,
    },
    /// End now as a clean run with `--promote` would: the canary keeps the
    /// controller and the control gets it too.
    Promote {
        /// The rollout on this canary cgroup.
        canary: std::path::PathBuf,
    },
}

/// `ccload watch`'s output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchFormat {
    Table,
    Json,
    Csv,
}

/// `ccload watch` options, passed whole to the watch loop.
#[derive(clap::Args, Debug, Clone)]
pub struct WatchArgs {
    /// Only this algorithm (default: every attached one).
    #[arg(long, value_enum)]
    pub algo: Option<Algo>,
    /// Only the flow with this local or remote ADDR:PORT (0.0.0.0:PORT = any address).
    #[arg(long)]
    pub flow: Option<std::net::SocketAddr>,
    /// Only the socket with this cookie.
    #[arg(long)]
    pub cookie: Option<u64>,
    /// Output format (default: table on a terminal, JSON lines otherwise).
    #[arg(long, value_enum)]
    pub format: Option<WatchFormat>,
    /// Per-flow sampling, set in the kernel for the watch's duration: N
    /// rounds per record (0 = off), or `10ms` / `1s` for at most one record
    /// per flow per interval (for servers with many flows).
    #[arg(long, value_parser = parse_every)]
    pub every: Option<Every>,
    /// Stop after N records.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long: `30s`, `5m`, `1h 30m`, or plain seconds.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Describe every telemetry field with its unit, and exit (no root needed).
    #[arg(long)]
    pub help_fields: bool,
    /// Table: every field, raw (the default is a compact view in human units).
    #[arg(long, conflicts_with = "columns")]
    pub wide: bool,
    /// Table: these fields, raw, by the names of `--help-fields` or the
    /// record header (cwnd, srtt_us, round, ...), comma-separated.
    #[arg(long)]
    pub columns: Option<String>,
    /// The daemon's telemetry socket, read when `ccload serve` owns the ring
    /// buffers (its config's `[serve] socket`).
    #[arg(long, default_value = crate::bind::config::DEFAULT_SOCKET)]
    pub socket: std::path::PathBuf,
}
