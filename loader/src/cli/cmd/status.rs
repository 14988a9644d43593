//! `ccload status [--json]`: what is attached, with ids, pins, tunables,
//! counters and the sockets using it.  One typed [`Status`], printed as
//! text or serialised as JSON.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use crate::bpf::algos::Algo;
use crate::cli::output::Out;
use crate::{bpf, bpf::stats, host::diag, host::sysctl};

/// Name -> value, in table order (serialised as a JSON object).
type Ordered<V> = serde_json::Map<String, V>;

#[derive(Serialize)]
struct Status {
    default_cc: String,
    attached: Vec<AlgoStatus>,
    /// State a killed ccload left behind (crate::bind::leftovers).
    leftovers: Vec<crate::bind::leftovers::Leftover>,
    /// Rollouts in progress, or interrupted (`rollout abort --interrupted` undoes them).
    rollouts: Vec<crate::bind::rollout::State>,
}

#[derive(Serialize)]
struct AlgoStatus {
    algo: &'static str,
    kernel_name: &'static str,
    registered: bool,
    default: bool,
    /// Selectable by any process (`attach --allow`).
    allowed: bool,
    pin_path: PathBuf,
    /// What keeps it registered: `link` (a pinned struct_ops link) or
    /// `map` (its pinned struct_ops map, on kernels without struct_ops
    /// links; `link_id` is 0 then).
    held_by: Option<bpf::Holder>,
    link_id: u32,
    struct_ops_map_id: u32,
    map_ids: Ordered<serde_json::Value>,
    sockets: usize,
    attached_unix_s: u64,
    /// Who loaded the attached object: release, layout and object identity.
    loaded_by: crate::bpf::layout::Identity,
    /// Whether that is this ccload's object; when not, `attach --replace`
    /// (or `serve`, at start) upgrades it in place.
    current: bool,
    /// The default CC `detach` restores, when `attach --default` set it.
    restores_default: Option<String>,
    /// Tunables in user units (numbers; `tune --show` has the units).
    tunables: Ordered<serde_json::Value>,
    stats: Ordered<serde_json::Value>,
    /// The in-kernel aggregates over every profile (`ccload stats` has them
    /// per profile).
    aggregates: Option<crate::bind::agg::Summary>,
}

fn algo_status(algo: Algo, default: &str, socks: &[diag::TcpSock]) -> Result<AlgoStatus> {
    let ids = bpf::ids(algo)?;
    let params = bpf::read_params(algo, 0)?;
    let st = bpf::read_stats(algo)?;
    let meta = bpf::read_meta(algo)?;
    let loaded_by = crate::bpf::upgrade::attached_identity(algo)?;
    Ok(AlgoStatus {
        current: loaded_by.is_ours(algo),
        loaded_by,
        algo: algo.name(),
        kernel_name: algo.name(),
        registered: bpf::is_registered(algo.name()),
        default: default == algo.name(),
        allowed: bpf::is_allowed(algo.name()),
        pin_path: bpf::pin_dir(algo),
        held_by: ids.holder,
        link_id: ids.link_id,
        struct_ops_map_id: ids.struct_ops_map_id,
        map_ids: ids
            .map_ids
            .iter()
            .map(|(n, i)| (n.clone(), (*i).into()))
            .collect(),
        sockets: socks.iter().filter(|s| s.cong == algo.name()).count(),
        attached_unix_s: meta.attached_unix_s,
        restores_default: (meta.default_set == 1).then(|| bpf::c_name(&meta.prev_default)),
        tunables: algo
            .params()
            .iter()
            .zip(&params.raw)
            .map(|(d, v)| (d.name.to_string(), crate::cli::output::user_value(d, *v)))
            .collect(),
        stats: st
            .iter()
            .enumerate()
            .map(|(i, v)| (stats::name(i).to_string(), (*v).into()))
            .collect(),
        // An object attached by an older ccload has no `agg` map.
        aggregates: crate::bind::agg::read_algo(algo).ok().map(|slots| {
            let mut all = crate::bind::agg::Agg::default();
            for s in &slots {
                all.add(s);
            }
            all.summary()
        }),
    })
}

fn print_text(s: &Status) -> std::io::Result<()> {
    let mut w = std::io::stdout().lock();
    writeln!(w, "default congestion control: {}", s.default_cc)?;
    if s.attached.is_empty() {
        writeln!(w, "no controller attached (ccload attach --algo ccpd)")?;
    }
    let joined = |m: &Ordered<serde_json::Value>, skip_zero: bool| -> Vec<String> {
        m.iter()
            .filter(|(_, v)| !(skip_zero && v.as_u64() == Some(0)))
            .map(|(k, v)| match (v.as_str(), v.as_f64()) {
                (Some(s), _) => format!("{k}={s}"),
                // 2.0 -> "2", as `tune --show` prints it.
                (None, Some(f)) if v.is_f64() && f.fract() == 0.0 => format!("{k}={f:.0}"),
                _ => format!("{k}={v}"),
            })
            .collect()
    };
    for a in &s.attached {
        writeln!(
            w,
            "\n{}  registered={} default={} allowed={} sockets={}",
            a.algo, a.registered, a.default, a.allowed, a.sockets
        )?;
        match a.held_by {
            Some(bpf::Holder::Map) => writeln!(
                w,
                "  held by {}\n  struct_ops map id {}  pinned at {}",
                bpf::Holder::Map.describe(),
                a.struct_ops_map_id,
                a.pin_path.display()
            )?,
            _ => writeln!(
                w,
                "  link id {}  struct_ops map id {}  pinned at {}",
                a.link_id,
                a.struct_ops_map_id,
                a.pin_path.display()
            )?,
        }
        writeln!(w, "  map ids: {}", joined(&a.map_ids, false).join(" "))?;
        let mine =
            crate::bpf::layout::Identity::ours(a.algo.parse().map_err(std::io::Error::other)?);
        writeln!(
            w,
            "  loaded by {}{}",
            a.loaded_by.describe(),
            if a.current {
                " (this ccload's)".to_string()
            } else {
                format!(
                    "; this ccload has {}: `ccload attach --algo {} --replace` upgrades it in place",
                    mine.describe(),
                    a.algo
                )
            }
        )?;
        writeln!(w, "  tunables: {}", joined(&a.tunables, false).join(" "))?;
        let st = joined(&a.stats, true);
        let st = if st.is_empty() {
            "all zero".to_string()
        } else {
            st.join(" ")
        };
        writeln!(w, "  stats: {st}")?;
        if let Some(g) = &a.aggregates {
            writeln!(
                w,
                "  flows: {} started, {} open; retransmitted {} of {} segments; {} loss events, {} RTOs (ccload stats for more)",
                g.flows_started,
                g.flows_started.saturating_sub(g.flows_ended),
                g.retrans_segs,
                g.segs_out,
                g.loss_events,
                g.rtos
            )?;
        }
    }
    for r in &s.rollouts {
        let alive = r.running();
        writeln!(
            w,
            "\nrollout of {} profile {} on {} (against {}): {}",
            r.algo,
            r.profile,
            r.canary.display(),
            r.control.display(),
            if alive {
                format!("in progress (pid {})", r.pid)
            } else {
                "interrupted; `ccload rollout abort --interrupted` rolls it back".to_string()
            }
        )?;
    }
    if !s.leftovers.is_empty() {
        writeln!(w, "\nleftovers of an interrupted ccload:")?;
        for l in &s.leftovers {
            let fix = if l.removable {
                "`ccload detach --all` removes it"
            } else {
                "not ccload's to remove"
            };
            writeln!(w, "  {}: {} ({fix})", l.path.display(), l.what)?;
        }
    }
    Ok(())
}

/// `status --help-stats`: what each counter of `stats` counts.
pub(super) fn help_stats(out: Out) -> Result<i32> {
    if out.json {
        let v: Vec<_> = stats::STATS
            .iter()
            .map(|(_, name, help)| serde_json::json!({"name": name, "help": help}))
            .collect();
        out.emit(&v)?;
        return Ok(0);
    }
    for (_, name, help) in stats::STATS {
        println!("{name:<20} {help}");
    }
    Ok(0)
}

pub(super) fn run(out: Out) -> Result<i32> {
    bpf::require_root()?;
    let default_cc = sysctl::default_cc().unwrap_or_default();
    let socks = diag::tcp_sockets().unwrap_or_default();
    let attached = bpf::attached()
        .into_iter()
        .map(|a| algo_status(a, &default_cc, &socks))
        .collect::<Result<Vec<_>>>()?;
    let s = Status {
        default_cc,
        attached,
        leftovers: crate::bind::leftovers::find(),
        rollouts: crate::bind::rollout::recorded(),
    };
    if out.json {
        out.emit(&s)?;
    } else {
        print_text(&s)?;
    }
    Ok(0)
}
