//! Pods chosen by label (`[[pods]]` of a `serve` config): which of the
//! node's pods an entry selects, and the cgroup the kubelet made for each.
//!
//! The daemon watches the pods of its node through the Kubernetes API
//! (serve/pods.rs); this module is the part that needs no API: label
//! selectors as `kubectl -l` writes them, and the kubelet's cgroup layout.
//! A pod's cgroup holds its containers' cgroups, and a cgroup's sock_ops
//! program also sees its descendants' sockets, so binding the pod's cgroup
//! gives every container of it the controller.
//!
//! The kubelet's layout (cgroup v2, both drivers, the three QoS classes),
//! under the cgroup root, pod uid `U` (`U_` with `-` as `_`):
//!
//! | driver | Guaranteed | Burstable | BestEffort |
//! |---|---|---|---|
//! | systemd | `kubepods.slice/kubepods-podU_.slice` | `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podU_.slice` | `kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podU_.slice` |
//! | cgroupfs | `kubepods/podU` | `kubepods/burstable/podU` | `kubepods/besteffort/podU` |

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::bind::cgroup_rules::CgroupRule;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Req {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A label selector: `app=web`, `tier in (front,api),!canary`, `env!=dev`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    text: String,
    reqs: Vec<Req>,
}

fn valid_key(k: &str) -> bool {
    // [prefix/]name: DNS subdomain prefix, name of alphanumerics, -, _, .
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
    });
    name_ok && prefix_ok
}

fn valid_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// Split on the commas outside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, String> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    out.push(&s[start..]);
    Ok(out)
}

fn parse_req(r: &str) -> Result<Req, String> {
    let r = r.trim();
    let key = |k: &str| -> Result<String, String> {
        let k = k.trim();
        if valid_key(k) {
            Ok(k.to_string())
        } else {
            Err(format!("`{k}` is not a label key"))
        }
    };
    let value = |v: &str| -> Result<String, String> {
        let v = v.trim();
        if valid_value(v) {
            Ok(v.to_string())
        } else {
            Err(format!("`{v}` is not a label value"))
        }
    };
    if let Some(k) = r.strip_prefix('!') {
        return Ok(Req::NotExists(key(k)?));
    }
    if let Some((k, v)) = r.split_once("!=") {
        return Ok(Req::NotIn(key(k)?, vec![value(v)?]));
    }
    if let Some((k, v)) = r.split_once("==").or_else(|| r.split_once('=')) {
        return Ok(Req::In(key(k)?, vec![value(v)?]));
    }
    for (word, notin) in [(" notin ", true), (" in ", false)] {
        if let Some((k, set)) = r.split_once(word) {
            let set = set.trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("`{set}`: want (v1, v2, ...)"))?;
            let vals: Vec<String> = inner.split(',').map(value).collect::<Result<_, _>>()?;
            return Ok(if notin {
                Req::NotIn(key(k)?, vals)
            } else {
                Req::In(key(k)?, vals)
            });
        }
    }
    Ok(Req::Exists(key(r)?))
}

impl std::str::FromStr for Selector {
    type Err = String;
    fn from_str(s: &str) -> Result<Selector, String> {
        if s.trim().is_empty() {
            return Err("an empty selector would take every pod of the node; \
                        say so with a label every pod has"
                .into());
        }
        let reqs = split_top(s)?
            .into_iter()
            .map(|r| parse_req(r).map_err(|e| format!("selector `{s}`: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Selector {
            text: s.trim().to_string(),
            reqs,
        })
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Selector {
    /// Do these labels satisfy every requirement?
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.reqs.iter().all(|r| match r {
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
            Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

/// A pod's QoS class (`status.qosClass`), which places its cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl std::str::FromStr for Qos {
    type Err = String;
    fn from_str(s: &str) -> Result<Qos, String> {
        match s {
            "Guaranteed" => Ok(Qos::Guaranteed),
            "Burstable" => Ok(Qos::Burstable),
            "BestEffort" => Ok(Qos::BestEffort),
            o => Err(format!("unknown QoS class `{o}`")),
        }
    }
}

/// The kubelet's cgroup driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    Systemd,
    Cgroupfs,
}

/// The driver the node's kubelet uses, from the tree it made: a
/// `kubepods.slice` (systemd) or a `kubepods` directory (cgroupfs); None
/// before the kubelet made either.
pub fn detect_driver(root: &Path) -> Option<Driver> {
    if root.join("kubepods.slice").is_dir() {
        Some(Driver::Systemd)
    } else if root.join("kubepods").is_dir() {
        Some(Driver::Cgroupfs)
    } else {
        None
    }
}

/// The cgroup the kubelet makes for a pod.
pub fn pod_cgroup(root: &Path, driver: Driver, uid: &str, qos: Qos) -> PathBuf {
    match driver {
        Driver::Systemd => {
            let u = uid.replace('-', "_");
            let top = root.join("kubepods.slice");
            match qos {
                Qos::Guaranteed => top.join(format!("kubepods-pod{u}.slice")),
                Qos::Burstable => top
                    .join("kubepods-burstable.slice")
                    .join(format!("kubepods-burstable-pod{u}.slice")),
                Qos::BestEffort => top
                    .join("kubepods-besteffort.slice")
                    .join(format!("kubepods-besteffort-pod{u}.slice")),
            }
        }
        Driver::Cgroupfs => {
            let top = root.join("kubepods");
            match qos {
                Qos::Guaranteed => top.join(format!("pod{uid}")),
                Qos::Burstable => top.join("burstable").join(format!("pod{uid}")),
                Qos::BestEffort => top.join("besteffort").join(format!("pod{uid}")),
            }
        }
    }
}

/// One `[[pods]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRule {
    pub selector: Selector,
    /// Only pods of this namespace (None: any).
    pub namespace: Option<String>,
    pub cc: String,
    pub profile: u32,
    /// Path rules of the pods' bindings (path_rules.rs).
    pub path_rules: Vec<crate::bind::path_rules::PathRule>,
}

/// A `[[rollouts]]` entry with `pods`: an A/B rollout (`opts`, its canary
/// and control left empty) in each pod the selector chooses.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRollout {
    pub selector: Selector,
    pub namespace: Option<String>,
    pub opts: crate::bind::rollout::Opts,
}

/// The A/B rollouts of the node's pods now: for each pod the first
/// matching entry chooses and whose cgroup exists, the entry's rollout
/// with the pod's cgroup as both arms' (in uid order).  A pod whose cgroup
/// is not there yet gets its rollout once it is (the daemon syncs the
/// rollouts after each reconcile).
pub fn rollouts_for(
    pods: &[PodInfo],
    rollouts: &[PodRollout],
    root: &Path,
    driver: Driver,
) -> Vec<crate::bind::rollout::Opts> {
    selected(pods, rollouts, |r| (&r.namespace, &r.selector))
        .filter_map(|(p, qos, r)| {
            let cg = pod_cgroup(root, driver, &p.uid, qos);
            if !cg.is_dir() {
                return None;
            }
            let mut o = r.opts.clone();
            o.canary = cg.clone();
            o.control = cg;
            Some(o)
        })
        .collect()
}

/// Each pod (in uid order) whose QoS class is known, with the first of
/// `entries` whose namespace (`of(e).0`, None: any) and selector choose it.
fn selected<'a, T>(
    pods: &'a [PodInfo],
    entries: &'a [T],
    of: impl Fn(&T) -> (&Option<String>, &Selector) + 'a,
) -> impl Iterator<Item = (&'a PodInfo, Qos, &'a T)> + 'a {
    let mut v: Vec<&PodInfo> = pods.iter().collect();
    v.sort_by(|a, b| a.uid.cmp(&b.uid));
    v.into_iter().filter_map(move |p| {
        let qos = p.qos?;
        let e = entries.iter().find(|e| {
            let (ns, sel) = of(e);
            ns.as_ref().is_none_or(|n| *n == p.namespace) && sel.matches(&p.labels)
        })?;
        Some((p, qos, e))
    })
}

/// What the daemon knows of one pod of its node.
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    pub uid: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    /// None until the API server has set it.
    pub qos: Option<Qos>,
}

/// The cgroup rules of the node's pods now: each pod the first matching
/// entry selects, at its cgroup, in uid order.
pub fn rules_for(
    pods: &[PodInfo],
    rules: &[PodRule],
    root: &Path,
    driver: Driver,
) -> Vec<CgroupRule> {
    selected(pods, rules, |r| (&r.namespace, &r.selector))
        .map(|(p, qos, r)| CgroupRule {
            pattern: pod_cgroup(root, driver, &p.uid, qos),
            cc: r.cc.clone(),
            profile: r.profile,
            path_rules: r.path_rules.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_parse_and_match_as_kubectl_does() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let api = labels(&[("app", "api"), ("canary", "")]);
        let cases: &[(&str, bool, bool)] = &[
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("app in (web, api)", true, true),
            ("app notin (web)", false, true),
            ("tier", true, false),
            ("!canary", true, false),
            ("app=web,tier=front", true, false),
            ("app in (web,api),!canary", true, false),
            ("example.com/team=x", false, false),
        ];
        for (s, w, a) in cases {
            let sel: Selector = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!((sel.matches(&web), sel.matches(&api)), (*w, *a), "{s}");
        }
        for bad in [
            "",
            "app=we b",
            "app in web",
            "app in (web",
            "-app=x",
            "app=(x)",
            "a,,b",
        ] {
            assert!(bad.parse::<Selector>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn pod_cgroups_follow_the_kubelets_layout() {
        let r = Path::new("/sys/fs/cgroup");
        let uid = "0b9a-11";
        for (d, q, want) in [
            (
                Driver::Systemd,
                Qos::Guaranteed,
                "kubepods.slice/kubepods-pod0b9a_11.slice",
            ),
            (
                Driver::Systemd,
                Qos::Burstable,
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9a_11.slice",
            ),
            (
                Driver::Systemd,
                Qos::BestEffort,
                "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0b9a_11.slice",
            ),
            (Driver::Cgroupfs, Qos::Guaranteed, "kubepods/pod0b9a-11"),
            (
                Driver::Cgroupfs,
                Qos::Burstable,
                "kubepods/burstable/pod0b9a-11",
            ),
            (
                Driver::Cgroupfs,
                Qos::BestEffort,
                "kubepods/besteffort/pod0b9a-11",
            ),
        ] {
            assert_eq!(pod_cgroup(r, d, uid, q), r.join(want), "{d:?} {q:?}");
        }
        let d = std::env::temp_dir().join(format!("ccl-drv-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(detect_driver(&d), None);
        std::fs::create_dir(d.join("kubepods")).unwrap();
        assert_eq!(detect_driver(&d), Some(Driver::Cgroupfs));
        std::fs::create_dir(d.join("kubepods.slice")).unwrap();
        assert_eq!(detect_driver(&d), Some(Driver::Systemd));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_first_matching_entry_takes_a_pod() {
        let rule = |s: &str, ns: Option<&str>, cc: &str, profile| PodRule {
            selector: s.parse().unwrap(),
            namespace: ns.map(str::to_string),
            cc: cc.into(),
            profile,
            path_rules: Vec::new(),
        };
        let rules = [
            rule("app=web", Some("prod"), "ccpd", 1),
            rule("app", None, "cubic", 0),
        ];
        let pod = |uid: &str, ns: &str, app: Option<&str>, qos| PodInfo {
            uid: uid.into(),
            namespace: ns.into(),
            labels: app.map(|a| labels(&[("app", a)])).unwrap_or_default(),
            qos,
        };
        let pods = [
            pod("c", "prod", Some("web"), Some(Qos::Burstable)),
            pod("a", "dev", Some("web"), Some(Qos::Guaranteed)),
            pod("b", "prod", None, Some(Qos::BestEffort)),
            pod("d", "prod", Some("web"), None),
        ];
        let got = rules_for(&pods, &rules, Path::new("/cg"), Driver::Cgroupfs);
        let got: Vec<(String, &str, u32)> = got
            .iter()
            .map(|r| (r.pattern.display().to_string(), r.cc.as_str(), r.profile))
            .collect();
        assert_eq!(
            got,
            [
                ("/cg/kubepods/poda".to_string(), "cubic", 0),
                ("/cg/kubepods/burstable/podc".to_string(), "ccpd", 1),
            ]
        );
    }
}
