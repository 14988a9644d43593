//! `ccload cgroup set|unset|list`: per-cgroup controller choice.

use anyhow::Result;

use crate::cgroup;
use crate::cli::CgroupCmd;
use crate::output::Out;
use serde_json::json;

pub(super) fn run(cmd: CgroupCmd, out: Out) -> Result<i32> {
    match cmd {
        CgroupCmd::Set {
            path,
            algo,
            profile,
            rules,
        } => {
            let profile = crate::profiles::resolve(&algo, &profile)?;
            let rules = rules
                .iter()
                .map(|r| resolve_rule(r))
                .collect::<Result<Vec<_>>>()?;
            let b =
                cgroup::set_with_rules(&path, &algo, profile, &rules, &crate::leftovers::sweep)?;
            if out.json {
                out.emit(&json!({
                    "cgroup": path,
                    "cgroup_id": b.cgroup_id,
                    "algo": b.algo,
                    "profile": b.profile,
                    "rules": b.rules,
                    "auto_attached": b.auto_attached,
                }))?;
                return Ok(0);
            }
            if b.auto_attached {
                println!("attached {algo} (first use; `ccload detach --algo {algo}` removes it)");
            }
            println!(
                "bound cgroup {} (id {}) to {} profile {}{}",
                path.display(),
                b.cgroup_id,
                b.algo,
                b.profile,
                if b.rules.is_empty() {
                    ""
                } else {
                    " where no path rule matches"
                }
            );
            for (i, r) in b.rules.iter().enumerate() {
                println!("  rule {}: {}", i + 1, r.text);
            }
            Ok(0)
        }
        CgroupCmd::Watch { path } => {
            let b = cgroup::watch(&path, &crate::leftovers::sweep)?;
            if out.json {
                out.emit(&json!({ "cgroup": path, "cgroup_id": b.cgroup_id, "watch": true }))?;
                return Ok(0);
            }
            println!(
                "watching cgroup {} (id {}): `ccload stats` shows its connections; they keep their congestion control",
                path.display(),
                b.cgroup_id
            );
            Ok(0)
        }
        CgroupCmd::Unset { path } => {
            let unbound = cgroup::unset(&path)?;
            if out.json {
                let mut v = json!({ "cgroup": path, "unbound": unbound });
                if !unbound {
                    v["error"] = json!(format!("cgroup {} is not bound", path.display()));
                    v["exit_code"] = json!(1);
                }
                out.emit(&v)?;
            } else if unbound {
                println!("unbound cgroup {}", path.display());
            } else {
                eprintln!("ccload: cgroup {} is not bound", path.display());
            }
            Ok(if unbound { 0 } else { 1 })
        }
        CgroupCmd::List => {
            let mut l = cgroup::list()?;
            crate::agg::fill_rule_counts(&mut l);
            if out.json {
                out.emit(&l)?;
            } else if l.is_empty() {
                println!("no cgroup bindings");
            } else {
                for b in &l {
                    if b.algo.is_empty() {
                        println!(
                            "{} (id {})  watch (aggregates only; sockets keep their CC)",
                            b.cgroup
                                .as_ref()
                                .map(|p| p.display().to_string())
                                .unwrap_or_else(|| "?".into()),
                            b.cgroup_id
                        );
                        continue;
                    }
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
                    for (i, r) in b.rules.iter().enumerate() {
                        println!(
                            "  rule {}: {}  connections={} acked={} retransmitted={}",
                            i + 1,
                            r.text,
                            r.counts.connections,
                            r.counts.bytes_acked,
                            r.counts.retrans_segs
                        );
                    }
                    if let Some(u) = &b.unmatched {
                        println!(
                            "  no rule ({}): connections={} acked={} retransmitted={}",
                            b.algo, u.connections, u.bytes_acked, u.retrans_segs
                        );
                    }
                }
            }
            Ok(0)
        }
    }
}

/// A rule as the command line gives it, its profile resolved (an id, or a
/// name of the last applied config: profiles.rs).
fn resolve_rule(text: &str) -> Result<crate::path_rules::PathRule> {
    use anyhow::Context;
    let r: crate::path_rules::RuleSpec = text.parse()?;
    let profile = match &r.profile {
        None => 0,
        Some(p) => crate::profiles::resolve(&r.cc, p).with_context(|| format!("rule `{text}`"))?,
    };
    Ok(crate::path_rules::PathRule {
        when: r.when,
        cc: r.cc,
        profile,
    })
}
