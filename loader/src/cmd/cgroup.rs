//! `ccload cgroup set|unset|list`: per-cgroup controller choice.

use anyhow::Result;

use crate::cgroup;
use crate::cli::CgroupCmd;

pub(super) fn run(cmd: CgroupCmd) -> Result<i32> {
    match cmd {
        CgroupCmd::Set {
            path,
            algo,
            profile,
        } => {
            let profile = crate::config::resolve_profile(&algo, &profile)?;
            let b = cgroup::set(&path, &algo, profile)?;
            if b.auto_attached {
                println!("attached {algo} (first use; `ccload detach --algo {algo}` removes it)");
            }
            println!(
                "bound cgroup {} (id {}) to {} profile {}",
                path.display(),
                b.cgroup_id,
                b.algo,
                b.profile
            );
            Ok(0)
        }
        CgroupCmd::Watch { path } => {
            let b = cgroup::watch(&path)?;
            println!(
                "watching cgroup {} (id {}): `ccload stats` shows its connections; they keep their congestion control",
                path.display(),
                b.cgroup_id
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
                }
            }
            Ok(0)
        }
    }
}
