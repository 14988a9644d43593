//! `ccload apply`'s reconciliation: the changes that take the kernel from
//! what it holds to a [`Desired`] (`plan`), and making them (`execute`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;

use super::Desired;
use crate::bind::cgroup_rules::{self, CgroupRule};
use crate::bind::pods::{self, PodInfo};
use crate::bpf::algos::{Algo, Params};
use crate::{bind::cgroup, bpf, host::sysctl};

/// One change `apply` makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Attach(Algo),
    Detach(Algo),
    Tune {
        algo: Algo,
        profile: u32,
        diff: Vec<(String, String, String)>,
        params: Params,
    },
    Bind {
        path: PathBuf,
        algo: String,
        profile: u32,
        rules: Vec<crate::bind::path_rules::PathRule>,
    },
    /// Unbind a cgroup by id; `path` when the binding recorded one.
    Unbind {
        id: u64,
        path: Option<PathBuf>,
    },
    DefaultCc {
        from: String,
        to: String,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Attach(a) => write!(f, "+ attach {a}"),
            Change::Detach(a) => write!(f, "- detach {a}"),
            Change::Tune {
                algo,
                profile,
                diff,
                ..
            } => {
                write!(f, "~ tune {algo} profile {profile}:")?;
                for (n, o, v) in diff {
                    write!(f, " {n} {o} -> {v}")?;
                }
                Ok(())
            }
            Change::Bind {
                path,
                algo,
                profile,
                rules,
            } => {
                write!(f, "+ bind {} -> {algo} profile {profile}", path.display())?;
                for r in rules {
                    write!(f, "; {r}")?;
                }
                Ok(())
            }
            Change::Unbind { path: Some(p), .. } => write!(f, "- unbind {}", p.display()),
            Change::Unbind { id, path: None } => write!(f, "- unbind <cgroup id {id}>"),
            Change::DefaultCc { from, to } => write!(f, "~ default_cc {from} -> {to}"),
        }
    }
}

impl Change {
    /// The change as a JSON object (`apply -j`): `op` plus its operands,
    /// tunable values as numbers in user units.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let num = |s: &str| -> serde_json::Value {
            match s.parse::<u64>() {
                Ok(v) => json!(v),
                Err(_) => s.parse::<f64>().map(|v| json!(v)).unwrap_or(json!(s)),
            }
        };
        match self {
            Change::Attach(a) => json!({ "op": "attach", "algo": a.name() }),
            Change::Detach(a) => json!({ "op": "detach", "algo": a.name() }),
            Change::Tune {
                algo,
                profile,
                diff,
                ..
            } => json!({
                "op": "tune",
                "algo": algo.name(),
                "profile": profile,
                "changes": diff.iter().map(|(n, o, v)| json!({
                    "name": n, "old": num(o), "new": num(v),
                })).collect::<Vec<_>>(),
            }),
            Change::Bind {
                path,
                algo,
                profile,
                rules,
            } => json!({
                "op": "bind",
                "cgroup": path,
                "algo": algo,
                "profile": profile,
                "rules": rules.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            }),
            Change::Unbind { id, path } => {
                json!({ "op": "unbind", "cgroup": path, "cgroup_id": id })
            }
            Change::DefaultCc { from, to } => {
                json!({ "op": "default_cc", "from": from, "to": to })
            }
        }
    }
}

/// The changes that take the kernel from its current state to `d`.
pub fn plan(d: &Desired) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    let attached = bpf::attached();
    for (&algo, profiles) in &d.algos {
        let is = attached.contains(&algo);
        if !is {
            out.push(Change::Attach(algo));
        }
        // Only the config's profiles (id 0 and the named ones): an id no
        // profile names is left as it is, so a removed profile's flows keep
        // its tunables, and the result of an apply does not depend on when
        // those flows end (profiles.rs).
        for (&id, want) in profiles {
            let want = want.clone();
            let have = if is {
                bpf::read_params(algo, id)?
            } else {
                algo.defaults()
            };
            let diff = have.diff(&want);
            if !diff.is_empty() {
                out.push(Change::Tune {
                    algo,
                    profile: id,
                    diff,
                    params: want,
                });
            }
        }
    }
    for a in attached {
        if !d.algos.contains_key(&a) {
            out.push(Change::Detach(a));
        }
    }
    out.extend(plan_cgroups(d)?);
    if let Some(to) = &d.default_cc {
        let from = sysctl::default_cc()?;
        if &from != to {
            sysctl::check_can_default(to)?;
            out.push(Change::DefaultCc {
                from,
                to: to.clone(),
            });
        }
    }
    Ok(out)
}

/// The binds and unbinds that take the cgroup bindings to `d`'s entries as
/// they resolve now (cgroup_rules.rs).  `serve` runs this alone when the
/// cgroup tree changes.
pub fn plan_cgroups(d: &Desired) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    // The cgroups of a rollout in progress are the rollout's, not the
    // config's: neither bound nor unbound here.
    let mut in_rollout: Vec<u64> = Vec::new();
    for r in crate::bind::rollout::recorded() {
        in_rollout.push(r.canary_id);
        if let Ok(c) = cgroup::cgroup_id(&r.control) {
            in_rollout.push(c);
        }
    }
    let have: BTreeMap<u64, cgroup::Binding> = cgroup::list()?
        .into_iter()
        .filter(|b| !in_rollout.contains(&b.cgroup_id))
        .map(|b| (b.cgroup_id, b))
        .collect();
    let mut wanted_ids = Vec::new();
    for (path, id, i) in cgroup_rules::resolve(&d.cgroups).bound {
        let r = &d.cgroups[i];
        wanted_ids.push(id);
        if in_rollout.contains(&id) {
            continue;
        }
        match have.get(&id) {
            Some(b)
                if b.algo == r.cc
                    && b.profile == r.profile
                    && crate::bind::path_rules::same(
                        &b.rules.iter().map(|x| x.rule.clone()).collect::<Vec<_>>(),
                        &r.path_rules,
                    ) => {}
            _ => out.push(Change::Bind {
                path,
                algo: r.cc.clone(),
                profile: r.profile,
                rules: r.path_rules.clone(),
            }),
        }
    }
    for (id, b) in &have {
        // Watches (`cgroup watch`, rollouts) are not the config's to remove.
        if !wanted_ids.contains(id) && !b.algo.is_empty() {
            out.push(Change::Unbind {
                id: *id,
                path: b.cgroup.clone(),
            });
        }
    }
    Ok(out)
}

/// Carry out `changes` in an order that keeps every step valid: attach,
/// tune, bind, default; then unbind and detach.
pub fn execute(changes: &[Change], verbose: bool) -> Result<()> {
    let rank = |c: &Change| match c {
        Change::Attach(_) => 0,
        Change::Tune { .. } => 1,
        Change::Bind { .. } => 2,
        Change::DefaultCc { .. } => 3,
        Change::Unbind { .. } => 4,
        Change::Detach(_) => 5,
    };
    let mut v: Vec<&Change> = changes.iter().collect();
    v.sort_by_key(|c| rank(c));
    for c in v {
        match c {
            Change::Attach(a) => {
                bpf::attach(
                    &bpf::AttachOpts {
                        algo: *a,
                        sets: vec![],
                        make_default: false,
                        allow: false,
                        verbose,
                    },
                    &crate::bind::leftovers::sweep,
                )?;
            }
            Change::Tune {
                algo,
                profile,
                params,
                ..
            } => bpf::write_params(*algo, params, *profile)?,
            Change::Bind {
                path,
                algo,
                profile,
                rules,
            } => {
                cgroup::set_with_rules(
                    path,
                    algo,
                    *profile,
                    rules,
                    &crate::bind::leftovers::sweep,
                )?;
            }
            Change::DefaultCc { to, .. } => sysctl::set_default_cc(to)?,
            // By id: the directory may be gone (the binding then only
            // holds a dead cgroup's link).
            Change::Unbind { id, .. } => cgroup::unset_id(*id),
            Change::Detach(a) => bpf::detach(*a)?,
        }
    }
    Ok(())
}

/// `d` with the cgroups of the pods its `[[pods]]` entries select, after
/// its own `[[cgroups]]`, and the A/B rollouts of the pods its
/// `[[rollouts]]` entries with `pods` choose.  Without a pod list (before `serve`'s first one,
/// or `ccload apply`, which does not watch the API) the bindings already
/// under the kubelet's tree stand in for them: neither a restart of the
/// daemon nor an apply unbinds the pods `serve` bound.
pub fn with_pods(d: &Desired, pods: Option<&[PodInfo]>) -> Desired {
    let mut e = d.clone();
    if d.pods.is_empty() && d.pod_rollouts.is_empty() {
        return e;
    }
    let root = &d.serve.cgroup_root;
    match pods {
        Some(list) => {
            let driver = d
                .serve
                .cgroup_driver
                .or_else(|| pods::detect_driver(root))
                .unwrap_or(pods::Driver::Systemd);
            e.cgroups
                .extend(pods::rules_for(list, &d.pods, root, driver));
            e.rollouts
                .extend(pods::rollouts_for(list, &d.pod_rollouts, root, driver));
        }
        None => {
            let trees = [root.join("kubepods.slice"), root.join("kubepods")];
            for b in crate::bind::cgroup::list().unwrap_or_default() {
                if let Some(p) = &b.cgroup {
                    if !b.algo.is_empty() && trees.iter().any(|t| p.starts_with(t)) {
                        e.cgroups.push(CgroupRule {
                            pattern: p.clone(),
                            cc: b.algo.clone(),
                            profile: b.profile,
                            path_rules: b.rules.iter().map(|r| r.rule.clone()).collect(),
                        });
                    }
                }
            }
        }
    }
    e
}
