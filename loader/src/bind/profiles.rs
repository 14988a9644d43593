//! Stable profile ids.
//!
//! A socket keeps the numeric profile id its cgroup binding gave it at
//! connect (bpf/cgroup.bpf.c), and a binding holds one too, so an id must
//! keep naming the same profile for as long as either can hold it.  `parse`
//! numbers a config's profiles 1.. in name order; before a config is applied
//! (`apply`, `serve`), [`stabilise`] renumbers them from the ids recorded at
//! the last apply in [`PROFILE_IDS`]:
//!
//! - a name that had an id keeps it;
//! - a removed profile's id is *retired*: not given to another name, and its
//!   tunables left as they are (`plan` tunes the config's ids only), while a live flow of the controller or a
//!   cgroup binding still holds it (the controller's per-profile aggregate
//!   counts flows in and out); it is freed at the first apply that finds it
//!   unheld, and a name that comes back while its id is retired gets it back;
//! - a new name gets the lowest free id.
//!
//! The record lives in /run (tmpfs): it survives restarts of the daemon and
//! of `ccload`, and goes with a reboot, like the pins and the sockets.  A
//! controller that is not attached has no sockets or bindings that could
//! read its new params map, so its profiles are numbered afresh.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use crate::bind::config::Desired;
use crate::bpf::algos::Algo;
use crate::{bind::agg, bind::cgroup, bpf, intf};

/// Where `apply` and `serve` record the profile ids of the applied config;
/// `tune --profile NAME`, `cgroup set --profile NAME` and `rollout` read it.
pub const PROFILE_IDS: &str = "/run/ccload/profiles.json";

/// One controller's profile ids.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlgoIds {
    /// Name -> id of the profiles of the applied config.
    pub ids: BTreeMap<String, u32>,
    /// Id -> name of removed profiles that sockets or bindings still held.
    #[serde(default)]
    pub retired: BTreeMap<u32, String>,
}

/// Algorithm name -> its ids.
pub type Registry = BTreeMap<String, AlgoIds>;

/// The recorded ids (none if the file is missing or unreadable).
pub fn load() -> Registry {
    std::fs::read_to_string(PROFILE_IDS)
        .ok()
        .and_then(|t| parse(&t))
        .unwrap_or_default()
}

/// The file as written today, or the name -> id map of earlier versions.
fn parse(text: &str) -> Option<Registry> {
    let m: BTreeMap<String, serde_json::Value> = serde_json::from_str(text).ok()?;
    m.into_iter()
        .map(|(algo, v)| {
            let ids = if v.get("ids").is_some_and(|i| i.is_object()) {
                serde_json::from_value(v).ok()?
            } else {
                AlgoIds {
                    ids: serde_json::from_value(v).ok()?,
                    retired: BTreeMap::new(),
                }
            };
            Some((algo, ids))
        })
        .collect()
}

/// Record `r` (written aside and renamed: a reader never sees half a file).
pub fn save(r: &Registry) -> Result<()> {
    let dir = std::path::Path::new(PROFILE_IDS)
        .parent()
        .expect("PROFILE_IDS has a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".profiles.json.{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_string_pretty(r)?)?;
    std::fs::rename(&tmp, PROFILE_IDS)?;
    Ok(())
}

/// Ids for the profiles `names` of one controller, given the ids recorded
/// before (`prev`) and whether an id is still held by a flow or a binding.
pub fn assign(prev: &AlgoIds, names: &[&str], held: impl Fn(u32) -> bool) -> Result<AlgoIds> {
    let mut out = AlgoIds::default();
    let wanted: BTreeSet<&str> = names.iter().copied().collect();
    for &n in names {
        if let Some(&id) = prev.ids.get(n) {
            out.ids.insert(n.to_string(), id);
        }
    }
    // Removed now or before: retired while held; a name that comes back
    // takes its retired id again.
    let removed = prev
        .ids
        .iter()
        .filter(|(n, _)| !wanted.contains(n.as_str()))
        .map(|(n, &id)| (id, n.clone()));
    for (id, n) in prev
        .retired
        .iter()
        .map(|(&id, n)| (id, n.clone()))
        .chain(removed)
    {
        if wanted.contains(n.as_str()) && !out.ids.contains_key(&n) {
            out.ids.insert(n, id);
        } else if held(id) {
            out.retired.insert(id, n);
        }
    }
    let taken: BTreeSet<u32> = out
        .ids
        .values()
        .chain(out.retired.keys())
        .copied()
        .collect();
    let mut free = (1..intf::CCL_NR_PROFILES).filter(|id| !taken.contains(id));
    for &n in names {
        if out.ids.contains_key(n) {
            continue;
        }
        let Some(id) = free.next() else {
            bail!(
                "no free profile id for `{n}`: {} id(s) are held by flows or bindings of \
                 removed profiles ({}); they are freed when those connections close",
                out.retired.len(),
                out.retired
                    .iter()
                    .map(|(id, n)| format!("{id} = {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        out.ids.insert(n.to_string(), id);
    }
    Ok(out)
}

/// Renumber `d`'s profiles (numbered 1.. in name order by `parse`) to their
/// stable ids (`plan` tunes only the config's ids, so a retired id keeps its
/// tunables).  `attached`: the controllers attached now; `held(algo, id)`: a
/// flow or binding holds the id.  Returns the ids to record once `d` is
/// applied.
pub fn renumber(
    d: &mut Desired,
    prev: &Registry,
    attached: &[Algo],
    held: impl Fn(Algo, u32) -> bool,
) -> Result<Registry> {
    let mut next = Registry::new();
    let mut map: BTreeMap<(Algo, u32), u32> = BTreeMap::new();
    for &algo in d.algos.keys() {
        let named: Vec<(u32, &str)> = d
            .profile_names
            .iter()
            .filter(|((a, _), _)| *a == algo)
            .map(|(&(_, id), n)| (id, n.as_str()))
            .collect();
        let before = match prev.get(algo.name()) {
            Some(ids) if attached.contains(&algo) => ids.clone(),
            _ => AlgoIds::default(),
        };
        let names: Vec<&str> = named.iter().map(|&(_, n)| n).collect();
        let ids =
            assign(&before, &names, |id| held(algo, id)).map_err(|e| anyhow!("{algo}: {e}"))?;
        for &(provisional, n) in &named {
            map.insert((algo, provisional), ids.ids[n]);
        }
        next.insert(algo.name().to_string(), ids);
    }
    let stable = |algo: Algo, id: u32| if id == 0 { 0 } else { map[&(algo, id)] };
    for (&algo, profiles) in d.algos.iter_mut() {
        *profiles = std::mem::take(profiles)
            .into_iter()
            .map(|(id, p)| (stable(algo, id), p))
            .collect();
    }
    d.profile_names = std::mem::take(&mut d.profile_names)
        .into_iter()
        .map(|((algo, id), n)| ((algo, stable(algo, id)), n))
        .collect();
    for r in &mut d.cgroups {
        if let Ok(algo) = r.cc.parse::<Algo>() {
            r.profile = stable(algo, r.profile);
        }
        for p in &mut r.path_rules {
            if let Ok(algo) = p.cc.parse::<Algo>() {
                p.profile = stable(algo, p.profile);
            }
        }
    }
    for r in &mut d.rollouts {
        if let Ok(algo) = r.algo.parse::<Algo>() {
            r.profile = stable(algo, r.profile);
        }
    }
    for r in &mut d.pods {
        if let Ok(algo) = r.cc.parse::<Algo>() {
            r.profile = stable(algo, r.profile);
        }
        for p in &mut r.path_rules {
            if let Ok(algo) = p.cc.parse::<Algo>() {
                p.profile = stable(algo, p.profile);
            }
        }
    }
    Ok(next)
}

/// [`renumber`] against the kernel: the recorded ids, the attached
/// controllers, and the ids their live flows (per-profile aggregates) and
/// the cgroup bindings hold.  What cannot be read counts as held.
pub fn stabilise(d: &mut Desired) -> Result<Registry> {
    let attached = bpf::attached();
    let live: BTreeMap<Algo, Option<Vec<u64>>> = attached
        .iter()
        .map(|&a| {
            let flows = agg::read_algo(a).ok().map(|slots| {
                slots
                    .iter()
                    .map(|s| s.get("flows_started").saturating_sub(s.get("flows_ended")))
                    .collect()
            });
            (a, flows)
        })
        .collect();
    let bindings = cgroup::list().ok();
    renumber(d, &load(), &attached, |algo, id| {
        let flows = match live.get(&algo) {
            Some(Some(f)) => f.get(id as usize).copied().unwrap_or(0),
            _ => 1,
        };
        let bound = match &bindings {
            Some(b) => b.iter().any(|b| {
                (b.algo == algo.name() && b.profile == id)
                    || b.rules
                        .iter()
                        .any(|r| r.rule.cc == algo.name() && r.rule.profile == id)
            }),
            None => true,
        };
        flows > 0 || bound
    })
}

/// A profile given as an id, or as a name of the last applied config.
pub fn resolve(algo: &str, text: &str) -> Result<u32> {
    if let Ok(id) = text.parse::<u32>() {
        return Ok(id);
    }
    let known = load().remove(algo).unwrap_or_default().ids;
    match known.get(text) {
        Some(id) => Ok(*id),
        None => bail!(
            "unknown profile `{text}` for {algo} (named profiles come from `ccload apply`; known: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.keys().cloned().collect::<Vec<_>>().join(", ")
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(pairs: &[(&str, u32)]) -> AlgoIds {
        AlgoIds {
            ids: pairs.iter().map(|&(n, id)| (n.to_string(), id)).collect(),
            retired: BTreeMap::new(),
        }
    }

    #[test]
    fn names_keep_their_ids_and_new_names_take_free_ones() {
        // web had 1; `api` sorts first but must not take it.
        let a = assign(&ids(&[("web", 1), ("zz", 2)]), &["api", "web"], |_| true).unwrap();
        assert_eq!(a.ids, ids(&[("web", 1), ("api", 3)]).ids);
        // zz's id stays retired while held...
        assert_eq!(a.retired, BTreeMap::from([(2, "zz".to_string())]));
        // ...and is freed and reused once nothing holds it.
        let b = assign(&a, &["api", "new", "web"], |_| false).unwrap();
        assert_eq!(b.ids, ids(&[("web", 1), ("api", 3), ("new", 2)]).ids);
        assert!(b.retired.is_empty());
    }

    #[test]
    fn a_returning_name_gets_its_retired_id_back() {
        let a = assign(&ids(&[("web", 1), ("zz", 2)]), &["web"], |_| true).unwrap();
        let b = assign(&a, &["new", "web", "zz"], |_| true).unwrap();
        assert_eq!(b.ids, ids(&[("web", 1), ("zz", 2), ("new", 3)]).ids);
        assert!(b.retired.is_empty());
    }

    #[test]
    fn held_ids_exhausted_is_an_error_naming_them() {
        let n = intf::CCL_NR_PROFILES - 1;
        let names: Vec<String> = (0..n).map(|i| format!("p{i:02}")).collect();
        let all: Vec<&str> = names.iter().map(String::as_str).collect();
        let a = assign(&AlgoIds::default(), &all, |_| true).unwrap();
        assert_eq!(a.ids.len(), n as usize);
        let e = assign(&a, &["fresh"], |_| true).unwrap_err().to_string();
        assert!(
            e.contains("no free profile id for `fresh`") && e.contains("1 = p00"),
            "{e}"
        );
        // Unheld, they are free again.
        assert_eq!(assign(&a, &["fresh"], |_| false).unwrap().ids["fresh"], 1);
    }

    #[test]
    fn the_file_and_its_older_name_map_format_read() {
        let r = parse(r#"{"ccpd": {"web": 1}, "hetcp": {"ids": {"a": 2}, "retired": {"3": "b"}}}"#)
            .unwrap();
        assert_eq!(r["ccpd"], ids(&[("web", 1)]));
        assert_eq!(
            (r["hetcp"].ids["a"], r["hetcp"].retired[&3].as_str()),
            (2, "b")
        );
        let again = parse(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(again, r);
        assert!(parse("{\"ccpd\": [1]}").is_none());
    }

    /// A config with `names` as ccpd profiles, web's cgroup bound to `web`.
    fn desired(names: &[&str]) -> Desired {
        let mut t = String::from("[algos.ccpd]\n");
        for n in names {
            t.push_str(&format!(
                "[profiles.{n}]\nalgo = \"ccpd\"\nset = {{ kp = 3 }}\n"
            ));
        }
        crate::bind::config::parse(std::path::Path::new("<t>"), &t).unwrap()
    }

    #[test]
    fn renumber_moves_every_reference_and_keeps_retired_tunables() {
        let mut d = desired(&["api", "web"]);
        assert_eq!(d.profile_names[&(Algo::Ccpd, 2)], "web");
        d.cgroups.push(crate::bind::cgroup_rules::CgroupRule {
            pattern: "/x".into(),
            cc: "ccpd".to_string(),
            profile: 2, // web
            path_rules: Vec::new(),
        });
        let prev = Registry::from([("ccpd".to_string(), ids(&[("web", 1), ("zz", 2)]))]);
        let next = renumber(&mut d, &prev, &[Algo::Ccpd], |_, id| id == 2).unwrap();
        assert_eq!(d.profile_names[&(Algo::Ccpd, 1)], "web");
        assert_eq!(d.profile_names[&(Algo::Ccpd, 3)], "api");
        assert_eq!(d.cgroups[0].profile, 1);
        let keys: Vec<u32> = d.algos[&Algo::Ccpd].keys().copied().collect();
        assert_eq!(keys, [0, 1, 3]);
        assert!(
            !d.algos[&Algo::Ccpd].contains_key(&2),
            "zz's id is not planned"
        );
        assert_eq!(next["ccpd"].retired[&2], "zz");
        // Not attached: nothing can hold an old id, numbered afresh.
        let mut d = desired(&["api", "web"]);
        renumber(&mut d, &prev, &[], |_, _| true).unwrap();
        assert_eq!(d.profile_names[&(Algo::Ccpd, 1)], "api");
    }
}
