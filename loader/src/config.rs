//! Declarative configuration (`configs/*.toml`) and `ccload apply`: the
//! kernel is reconciled to the file — controllers attached or detached,
//! tunables of every profile written, cgroups bound or unbound, the default
//! CC set — and the difference is printed.  Applying a file twice changes
//! nothing the second time.  Everything is validated before the first
//! change; errors carry `file:line:col`.  docs/config.md is the reference
//! (a test holds it to the parser's keys and the tunables tables).
//!
//! ```toml
//! default_cc = "cubic"              # optional, initial netns only
//! [algos.ccpd]                      # attach; `set` = profile 0 tunables
//! set = { kp = 4 }
//! [profiles.latency]                # named profile: a stable id 1..15 (profiles.rs)
//! algo = "ccpd"
//! set = { kp = 2, kd = 100 }
//! [[cgroups]]                       # may not exist yet; may be a glob
//! path = "/sys/fs/cgroup/web.slice"  # (cgroup_rules.rs)
//! algo = "ccpd"
//! profile = "latency"
//! [[pods]]                          # `ccload serve`: this node's pods by label
//! selector = "app=web"              # (crate::pods, serve/pods.rs)
//! algo = "ccpd"
//! [[rollouts]]                      # `ccload serve` runs them (ccload rollout)
//! algo = "ccpd"
//! profile = "latency"
//! canary = "/sys/fs/cgroup/web-canary.slice"
//! control = "/sys/fs/cgroup/web.slice"
//! guards = ["retrans_ratio <= 1.5", "srtt_p95_ratio <= 1.2"]
//! interval = "30s"
//! for = "10m"
//! [serve]                           # for `ccload serve`
//! metrics = "127.0.0.1:9464"
//! on_exit = "keep"                  # or "remove"
//! max_connections = 64              # metrics connections served at once
//! request_timeout_ms = 10000        # whole HTTP exchange, read + write
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Deserialize;
use toml::Spanned;

use crate::algos::{Algo, Params};
use crate::cgroup_rules::{self, CgroupRule};
use crate::pods::{self, PodInfo};
use crate::{bpf, cgroup, intf, sysctl};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub default_cc: Option<Spanned<String>>,
    #[serde(default)]
    pub algos: BTreeMap<Spanned<String>, AlgoCfg>,
    #[serde(default)]
    pub profiles: BTreeMap<Spanned<String>, ProfileCfg>,
    #[serde(default)]
    pub cgroups: Vec<CgroupCfg>,
    #[serde(default)]
    pub rollouts: Vec<RolloutCfg>,
    #[serde(default)]
    pub pods: Vec<PodsCfg>,
    #[serde(default)]
    pub serve: ServeCfg,
}

/// Pods of this node chosen by label (`ccload serve` watches them through
/// the Kubernetes API; crate::pods).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodsCfg {
    pub selector: Spanned<String>,
    pub namespace: Option<Spanned<String>>,
    pub algo: Spanned<String>,
    pub profile: Option<Spanned<String>>,
}

/// A canary rollout `ccload serve` runs (crate::rollout; the fields are
/// `ccload rollout`'s options).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutCfg {
    pub algo: Spanned<String>,
    pub profile: Option<Spanned<String>>,
    pub canary: Spanned<PathBuf>,
    pub control: Spanned<PathBuf>,
    #[serde(default)]
    pub guards: Vec<Spanned<String>>,
    pub interval: Option<Spanned<String>>,
    #[serde(rename = "for")]
    pub duration: Option<Spanned<String>>,
    pub fail_after: Option<u32>,
    pub min_segments: Option<u64>,
    #[serde(default)]
    pub promote: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlgoCfg {
    #[serde(default)]
    pub set: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileCfg {
    pub algo: Spanned<String>,
    #[serde(default)]
    pub set: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupCfg {
    pub path: Spanned<PathBuf>,
    pub algo: Spanned<String>,
    pub profile: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum OnExit {
    Keep,
    Remove,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeCfg {
    #[serde(default = "default_metrics")]
    pub metrics: String,
    #[serde(default = "default_on_exit")]
    pub on_exit: OnExit,
    /// Local socket where `ccload watch` clients get telemetry.
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// Metrics connections served at once; more are closed unanswered.
    #[serde(default = "default_max_connections")]
    pub max_connections: Spanned<u32>,
    /// Deadline of one HTTP exchange (accept to last byte written), ms.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: Spanned<u32>,
    /// `[[pods]]`: this node's name (default: $NODE_NAME).
    pub node_name: Option<String>,
    /// `[[pods]]`: where the kubelet's cgroups are.
    #[serde(default = "default_cgroup_root")]
    pub cgroup_root: PathBuf,
    /// `[[pods]]`: the kubelet's cgroup driver (default: from the tree).
    pub cgroup_driver: Option<crate::pods::Driver>,
}

fn default_cgroup_root() -> PathBuf {
    "/sys/fs/cgroup".into()
}

fn default_max_connections() -> Spanned<u32> {
    Spanned::new(0..0, 64)
}
fn default_request_timeout_ms() -> Spanned<u32> {
    Spanned::new(0..0, 10_000)
}

fn default_metrics() -> String {
    "127.0.0.1:9464".into()
}
fn default_on_exit() -> OnExit {
    OnExit::Keep
}
/// Where `serve` fans telemetry out and `watch` looks for it.
pub const DEFAULT_SOCKET: &str = "/run/ccload/telemetry.sock";

fn default_socket() -> PathBuf {
    DEFAULT_SOCKET.into()
}

impl Default for ServeCfg {
    fn default() -> Self {
        ServeCfg {
            metrics: default_metrics(),
            on_exit: default_on_exit(),
            socket: default_socket(),
            max_connections: default_max_connections(),
            request_timeout_ms: default_request_timeout_ms(),
            node_name: None,
            cgroup_root: default_cgroup_root(),
            cgroup_driver: None,
        }
    }
}

/// The validated, resolved desired state.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub default_cc: Option<String>,
    /// Attached algorithms and their params per profile id (0 = base).
    pub algos: BTreeMap<Algo, BTreeMap<u32, Params>>,
    /// Profile names per (algo, id), for messages and metrics labels.
    pub profile_names: BTreeMap<(Algo, u32), String>,
    /// The `[[cgroups]]` entries, in file order (cgroup_rules.rs).
    pub cgroups: Vec<CgroupRule>,
    /// Rollouts `serve` runs, validated.
    pub rollouts: Vec<crate::rollout::Opts>,
    /// `[[pods]]` entries, in file order (`serve` binds their pods' cgroups).
    pub pods: Vec<crate::pods::PodRule>,
    pub serve: ServeCfgResolved,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServeCfgResolved {
    pub metrics: String,
    pub remove_on_exit: bool,
    pub socket: PathBuf,
    pub max_connections: usize,
    pub request_timeout: std::time::Duration,
    /// For `[[pods]]`: the node, the cgroup root, the driver (None: detect).
    pub node_name: Option<String>,
    pub cgroup_root: PathBuf,
    pub cgroup_driver: Option<crate::pods::Driver>,
}

/// `file:line:col: msg` for a byte span of `text`.
fn at(
    file: &Path,
    text: &str,
    span: std::ops::Range<usize>,
    msg: impl std::fmt::Display,
) -> anyhow::Error {
    let off = span.start.min(text.len());
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = off - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    anyhow::anyhow!("{}:{line}:{col}: {msg}", file.display())
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn params_from(
    file: &Path,
    text: &str,
    algo: Algo,
    set: &BTreeMap<Spanned<String>, Spanned<toml::Value>>,
) -> Result<Params> {
    let mut p = algo.defaults();
    for (k, v) in set {
        let one = [(k.get_ref().clone(), value_text(v.get_ref()))];
        p.apply(&one).map_err(|e| {
            let span = if algo.params().iter().any(|d| d.name == k.get_ref()) {
                v.span()
            } else {
                k.span()
            };
            at(file, text, span, e)
        })?;
    }
    Ok(p)
}

/// Parse and validate `file` (nothing in the kernel is touched).
pub fn load(file: &Path) -> Result<Desired> {
    parse(file, &read(file)?)
}

/// The text of the config file `file`.
pub fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

pub fn parse(file: &Path, text: &str) -> Result<Desired> {
    let cfg: Config = toml::from_str(text).map_err(|e| match e.span() {
        Some(s) => at(file, text, s, e.message()),
        None => anyhow::anyhow!("{}: {}", file.display(), e.message()),
    })?;
    let mut d = Desired {
        default_cc: cfg.default_cc.as_ref().map(|s| s.get_ref().clone()),
        algos: BTreeMap::new(),
        profile_names: BTreeMap::new(),
        cgroups: Vec::new(),
        rollouts: Vec::new(),
        pods: Vec::new(),
        serve: ServeCfgResolved {
            metrics: cfg.serve.metrics.clone(),
            remove_on_exit: cfg.serve.on_exit == OnExit::Remove,
            socket: cfg.serve.socket.clone(),
            max_connections: *cfg.serve.max_connections.get_ref() as usize,
            request_timeout: std::time::Duration::from_millis(
                *cfg.serve.request_timeout_ms.get_ref() as u64,
            ),
            node_name: cfg
                .serve
                .node_name
                .clone()
                .or_else(|| std::env::var("NODE_NAME").ok())
                .filter(|n| !n.is_empty()),
            cgroup_root: cfg.serve.cgroup_root.clone(),
            cgroup_driver: cfg.serve.cgroup_driver,
        },
    };
    for (key, v, range) in [
        ("max_connections", &cfg.serve.max_connections, 1..=65536),
        (
            "request_timeout_ms",
            &cfg.serve.request_timeout_ms,
            100..=600_000,
        ),
    ] {
        if !range.contains(v.get_ref()) {
            let (lo, hi) = range.into_inner();
            return Err(at(
                file,
                text,
                v.span(),
                format!("serve.{key} {} is outside {lo}..={hi}", v.get_ref()),
            ));
        }
    }
    if let Err(e) = d.serve.metrics.parse::<std::net::SocketAddr>() {
        bail!(
            "{}: serve.metrics `{}`: {e}",
            file.display(),
            d.serve.metrics
        );
    }
    for (name, a) in &cfg.algos {
        let algo: Algo = name
            .get_ref()
            .parse()
            .map_err(|e| at(file, text, name.span(), e))?;
        let p = params_from(file, text, algo, &a.set)?;
        d.algos.entry(algo).or_default().insert(0, p);
    }
    // Named profiles: ids 1.. per algorithm in name order; `apply` and
    // `serve` renumber them to their stable ids (profiles.rs).
    let mut next: BTreeMap<Algo, u32> = BTreeMap::new();
    let mut by_name: BTreeMap<String, (Algo, u32)> = BTreeMap::new();
    for (name, pc) in &cfg.profiles {
        let algo: Algo = pc
            .algo
            .get_ref()
            .parse()
            .map_err(|e| at(file, text, pc.algo.span(), e))?;
        let Some(m) = d.algos.get_mut(&algo) else {
            return Err(at(
                file,
                text,
                pc.algo.span(),
                format!(
                    "profile `{}` uses {algo}, which is not in [algos]",
                    name.get_ref()
                ),
            ));
        };
        let id = next.entry(algo).or_insert(1);
        if *id >= intf::CCL_NR_PROFILES {
            return Err(at(
                file,
                text,
                name.span(),
                format!(
                    "more than {} profiles for {algo}",
                    intf::CCL_NR_PROFILES - 1
                ),
            ));
        }
        m.insert(*id, params_from(file, text, algo, &pc.set)?);
        d.profile_names.insert((algo, *id), name.get_ref().clone());
        by_name.insert(name.get_ref().clone(), (algo, *id));
        *id += 1;
    }
    // Two spellings of one existing cgroup (a relative path, a second
    // mount) are one cgroup: keyed by id.  An entry may also name a cgroup
    // that does not exist yet, or many with wildcards (cgroup_rules.rs).
    let mut ids: BTreeMap<u64, PathBuf> = BTreeMap::new();
    let mut patterns: Vec<PathBuf> = Vec::new();
    for c in &cfg.cgroups {
        let given = c.path.get_ref();
        let pattern = if cgroup_rules::has_glob(given) || !given.exists() {
            cgroup_rules::check_pattern(given).map_err(|e| at(file, text, c.path.span(), e))?;
            cgroup::check_in_cgroup2(given)
                .map_err(|e| at(file, text, c.path.span(), format!("{e:#}")))?;
            given.clone()
        } else {
            let cg = cgroup::CgroupDir::open(given)
                .map_err(|e| at(file, text, c.path.span(), format!("{e:#}")))?;
            if let Some(first) = ids.insert(cg.id, cg.path.clone()) {
                return Err(at(
                    file,
                    text,
                    c.path.span(),
                    format!(
                        "cgroup listed twice: {} is {} (cgroup id {})",
                        given.display(),
                        first.display(),
                        cg.id
                    ),
                ));
            }
            cg.path
        };
        if patterns.contains(&pattern) {
            return Err(at(
                file,
                text,
                c.path.span(),
                format!("cgroup listed twice: {}", pattern.display()),
            ));
        }
        patterns.push(pattern.clone());
        let name = c.algo.get_ref();
        let profile = cc_and_profile(file, text, &d, &by_name, &c.algo, c.profile.as_ref())?;
        d.cgroups.push(CgroupRule {
            pattern,
            cc: name.clone(),
            profile,
        });
    }
    for pc in &cfg.pods {
        let selector: crate::pods::Selector = pc
            .selector
            .get_ref()
            .parse()
            .map_err(|e| at(file, text, pc.selector.span(), e))?;
        let profile = cc_and_profile(file, text, &d, &by_name, &pc.algo, pc.profile.as_ref())?;
        d.pods.push(crate::pods::PodRule {
            selector,
            namespace: pc.namespace.as_ref().map(|n| n.get_ref().clone()),
            cc: pc.algo.get_ref().clone(),
            profile,
        });
    }
    if let Some(first) = cfg.pods.first() {
        if d.serve.node_name.is_none() {
            return Err(at(
                file,
                text,
                first.selector.span(),
                "[[pods]] needs this node's name: [serve] node_name, or $NODE_NAME \
                 (the DaemonSet sets it from spec.nodeName)",
            ));
        }
    }
    for r in &cfg.rollouts {
        let profile = cc_and_profile(file, text, &d, &by_name, &r.algo, r.profile.as_ref())?;
        let mut guards = Vec::new();
        for g in &r.guards {
            guards.push(
                g.get_ref()
                    .parse::<crate::rollout::Guard>()
                    .map_err(|e| at(file, text, g.span(), e))?,
            );
        }
        if guards.is_empty() {
            guards = crate::rollout::default_guards();
        }
        let dur = |v: &Option<Spanned<String>>, def: &str| -> Result<std::time::Duration> {
            match v {
                Some(v) => crate::units::parse_duration(v.get_ref())
                    .map_err(|e| at(file, text, v.span(), e)),
                None => Ok(crate::units::parse_duration(def).expect("default duration")),
            }
        };
        cgroup::CgroupDir::open(r.control.get_ref())
            .map_err(|e| at(file, text, r.control.span(), format!("{e:#}")))?;
        let cg = cgroup::CgroupDir::open(r.canary.get_ref())
            .map_err(|e| at(file, text, r.canary.span(), format!("{e:#}")))?;
        if d.cgroups.iter().any(|r| r.matches(&cg.path)) {
            return Err(at(
                file,
                text,
                r.canary.span(),
                "a rollout's canary cannot also be in [[cgroups]] (the rollout binds it)",
            ));
        }
        d.rollouts.push(crate::rollout::Opts {
            algo: r.algo.get_ref().clone(),
            profile,
            canary: r.canary.get_ref().clone(),
            control: r.control.get_ref().clone(),
            guards,
            interval: dur(&r.interval, "30s")?,
            duration: dur(&r.duration, "10m")?,
            fail_after: r.fail_after.unwrap_or(2),
            min_segments: r.min_segments.unwrap_or(200),
            promote: r.promote,
            by: "serve",
        });
    }
    if let Some(dc) = &cfg.default_cc {
        let n = dc.get_ref();
        let ok = n
            .parse::<Algo>()
            .map(|a| d.algos.contains_key(&a))
            .unwrap_or(false)
            || kernel_cc_available(n);
        if !ok {
            return Err(at(
                file,
                text,
                dc.span(),
                format!("default_cc `{n}` is neither in [algos] nor a kernel CC here"),
            ));
        }
    }
    Ok(d)
}

/// A `[[cgroups]]` or `[[pods]]` entry's CC and profile: one of ours in
/// `[algos]` with one of its profiles, or a registered kernel CC without.
fn cc_and_profile(
    file: &Path,
    text: &str,
    d: &Desired,
    by_name: &BTreeMap<String, (Algo, u32)>,
    algo: &Spanned<String>,
    profile: Option<&Spanned<String>>,
) -> Result<u32> {
    let name = algo.get_ref();
    let ours = name.parse::<Algo>().ok();
    let id = match (profile, ours) {
        (None, _) => 0,
        (Some(p), Some(a)) => match by_name.get(p.get_ref()) {
            Some(&(pa, id)) if pa == a => id,
            Some(&(pa, _)) => {
                return Err(at(
                    file,
                    text,
                    p.span(),
                    format!("profile `{}` is for {pa}, not {a}", p.get_ref()),
                ))
            }
            None => {
                return Err(at(
                    file,
                    text,
                    p.span(),
                    format!("unknown profile `{}`", p.get_ref()),
                ))
            }
        },
        (Some(p), None) => {
            return Err(at(
                file,
                text,
                p.span(),
                format!("`{name}` is a kernel CC: it has no profiles"),
            ))
        }
    };
    match ours {
        Some(a) if !d.algos.contains_key(&a) => Err(at(
            file,
            text,
            algo.span(),
            format!("{a} is not in [algos]"),
        )),
        None if !kernel_cc_available(name) => Err(at(
            file,
            text,
            algo.span(),
            format!("unknown congestion control `{name}`"),
        )),
        _ => Ok(id),
    }
}

/// A registered congestion control that is not one of ours.
fn kernel_cc_available(name: &str) -> bool {
    bpf::is_registered(name) && name.parse::<Algo>().is_err()
}

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
            } => {
                write!(f, "+ bind {} -> {algo} profile {profile}", path.display())
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
            } => json!({ "op": "bind", "cgroup": path, "algo": algo, "profile": profile }),
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
    for r in crate::rollout::recorded() {
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
            Some(b) if b.algo == r.cc && b.profile == r.profile => {}
            _ => out.push(Change::Bind {
                path,
                algo: r.cc.clone(),
                profile: r.profile,
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
                        replace: false,
                        allow: false,
                        verbose,
                    },
                    &crate::leftovers::sweep,
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
            } => {
                cgroup::set(path, algo, *profile, &crate::leftovers::sweep)?;
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
/// its own `[[cgroups]]`.  Without a pod list (before `serve`'s first one,
/// or `ccload apply`, which does not watch the API) the bindings already
/// under the kubelet's tree stand in for them: neither a restart of the
/// daemon nor an apply unbinds the pods `serve` bound.
pub fn with_pods(d: &Desired, pods: Option<&[PodInfo]>) -> Desired {
    let mut e = d.clone();
    if d.pods.is_empty() {
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
        }
        None => {
            let trees = [root.join("kubepods.slice"), root.join("kubepods")];
            for b in crate::cgroup::list().unwrap_or_default() {
                if let Some(p) = &b.cgroup {
                    if !b.algo.is_empty() && trees.iter().any(|t| p.starts_with(t)) {
                        e.cgroups.push(CgroupRule {
                            pattern: p.clone(),
                            cc: b.algo.clone(),
                            profile: b.profile,
                        });
                    }
                }
            }
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ```toml blocks of docs/config.md.
    fn reference() -> (String, Vec<String>) {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/config.md"),
        )
        .unwrap();
        let blocks = doc
            .split("```toml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap().to_string())
            .collect();
        (doc, blocks)
    }

    /// docs/config.md: every example parses (the schema always; the whole
    /// validation where the cgroups it names can be checked here), every
    /// key the parser accepts is in its table, and its tunables tables are
    /// the controllers' own.
    #[test]
    fn the_config_reference_examples_parse() {
        let (doc, blocks) = reference();
        assert!(blocks.len() >= 5, "{} examples", blocks.len());
        let v2 = crate::system::cgroup2_mount().map(|p| p.display().to_string());
        for b in &blocks {
            toml::from_str::<Config>(b).unwrap_or_else(|e| panic!("{e}\n{b}"));
            // A rollout's cgroups must exist: the schema only.
            if b.contains("[[rollouts]]") {
                continue;
            }
            let Some(root) = &v2 else {
                eprintln!("no cgroup v2 mount: examples checked against the schema only");
                continue;
            };
            let t = b.replace("/sys/fs/cgroup/", &format!("{root}/"));
            if let Err(e) = parse(Path::new("example.toml"), &t) {
                panic!("{e:#}\n{t}");
            }
        }
        // Every key, from the parser's own list of expected fields.
        let doc_keys: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        for (prefix, text) in [
            ("", "bogus = 1\n"),
            ("algos.<algo>.", "[algos.ccpd]\nbogus = 1\n"),
            (
                "profiles.<name>.",
                "[profiles.x]\nalgo = \"ccpd\"\nbogus = 1\n",
            ),
            (
                "cgroups[].",
                "[[cgroups]]\npath = \"/x\"\nalgo = \"ccpd\"\nbogus = 1\n",
            ),
            (
                "rollouts[].",
                "[[rollouts]]\nalgo = \"ccpd\"\ncanary = \"/a\"\ncontrol = \"/b\"\nbogus = 1\n",
            ),
            ("serve.", "[serve]\nbogus = 1\n"),
            (
                "pods[].",
                "[[pods]]\nselector = \"a=b\"\nalgo = \"ccpd\"\nbogus = 1\n",
            ),
        ] {
            let e = toml::from_str::<Config>(text).unwrap_err().to_string();
            let expected = e.split("expected").nth(1).unwrap_or_else(|| panic!("{e}"));
            let keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
            assert!(!keys.is_empty(), "{e}");
            for k in keys {
                let full = format!("{prefix}{k}");
                assert!(
                    doc_keys
                        .iter()
                        .any(|d| *d == full || (prefix.is_empty() && d.starts_with(&full))),
                    "docs/config.md has no row for `{full}`"
                );
            }
        }
        // Tunables: name, default, range and unit as `ccload algos` shows them.
        for a in Algo::ALL {
            let sec = doc
                .split(&format!("### `{}`\n", a.name()))
                .nth(1)
                .unwrap_or_else(|| panic!("docs/config.md: no tunables of {a}"));
            let sec = sec.split("\n### ").next().unwrap();
            for pd in a.params() {
                let unit = if pd.unit.is_empty() { "-" } else { pd.unit };
                let row = format!(
                    "| `{}` | {} | {} | {unit} |",
                    pd.name,
                    pd.display(pd.def),
                    pd.range()
                );
                assert!(sec.contains(&row), "docs/config.md, {a}: want {row}");
            }
            assert_eq!(
                sec.lines().filter(|l| l.starts_with("| `")).count(),
                a.params().len(),
                "docs/config.md, {a}: a tunable it lists is gone"
            );
        }
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse(Path::new("t.toml"), text).unwrap_err())
    }

    #[test]
    fn errors_carry_file_line_col() {
        let e = err("[algos.ccpd]\nset = { kp = 4 }\nbogus = 1\n");
        assert!(e.starts_with("t.toml:3:1:") && e.contains("bogus"), "{e}");
        let e = err("[algos.ccpd]\nset = { kp = 99 }\n");
        assert!(e.starts_with("t.toml:2:14:") && e.contains("kp"), "{e}");
        let e = err("[algos.ccpd]\nset = { nope = 1 }\n");
        assert!(
            e.starts_with("t.toml:2:9:") && e.contains("unknown tunable"),
            "{e}"
        );
        let e = err("[algos.nosuch]\n");
        assert!(
            e.starts_with("t.toml:1:8:") && e.contains("unknown algorithm"),
            "{e}"
        );
        let e = err("[algos.ccpd]\n[profiles.x]\nalgo = \"hetcp\"\n");
        assert!(
            e.starts_with("t.toml:3:8:") && e.contains("not in [algos]"),
            "{e}"
        );
        // A path that does not exist yet is fine inside a cgroup v2 tree
        // (cgroup_rules.rs), not outside one; nor is a relative pattern.
        let e = err("[algos.ccpd]\n[[cgroups]]\npath = \"/nonexistent-cg\"\nalgo = \"ccpd\"\n");
        assert!(
            e.starts_with("t.toml:3:8:") && e.contains("not in a cgroup v2 hierarchy"),
            "{e}"
        );
        let e = err("[algos.ccpd]\n[[cgroups]]\npath = \"rel/*\"\nalgo = \"ccpd\"\n");
        assert!(
            e.starts_with("t.toml:3:8:") && e.contains("must be absolute"),
            "{e}"
        );
        let e = err("[serve]\non_exit = \"maybe\"\n");
        assert!(e.starts_with("t.toml:2:11:"), "{e}");
    }

    #[test]
    fn pods_entries_are_validated_and_resolved() {
        let base = "[algos.ccpd]\n[profiles.web]\nalgo = \"ccpd\"\n[serve]\nnode_name = \"n1\"\n";
        let d = parse(
            Path::new("t.toml"),
            &format!("{base}[[pods]]\nselector = \"app=web,tier in (a,b)\"\nnamespace = \"shop\"\nalgo = \"ccpd\"\nprofile = \"web\"\n"),
        )
        .unwrap();
        assert_eq!(d.pods.len(), 1);
        assert_eq!((d.pods[0].cc.as_str(), d.pods[0].profile), ("ccpd", 1));
        assert_eq!(d.pods[0].namespace.as_deref(), Some("shop"));
        assert_eq!(d.serve.node_name.as_deref(), Some("n1"));
        assert_eq!(d.serve.cgroup_root, Path::new("/sys/fs/cgroup"));
        // A bad selector, a profile of a kernel CC, a missing node name:
        // each points at its line.
        let e = err(&format!(
            "{base}[[pods]]\nselector = \"app in web\"\nalgo = \"ccpd\"\n"
        ));
        assert!(
            e.starts_with("t.toml:7:12:") && e.contains("want (v1, v2"),
            "{e}"
        );
        let e = err(&format!(
            "{base}[[pods]]\nselector = \"a=b\"\nalgo = \"cubic\"\nprofile = \"web\"\n"
        ));
        assert!(e.contains("is a kernel CC"), "{e}");
        if std::env::var_os("NODE_NAME").is_none() {
            let e = err("[algos.ccpd]\n[[pods]]\nselector = \"a=b\"\nalgo = \"ccpd\"\n");
            assert!(
                e.starts_with("t.toml:3:12:") && e.contains("NODE_NAME"),
                "{e}"
            );
        }
        let e = err("[serve]\ncgroup_driver = \"docker\"\n");
        assert!(e.contains("unknown variant `docker`"), "{e}");
        let d = parse(
            Path::new("t.toml"),
            "[serve]\ncgroup_driver = \"cgroupfs\"\n",
        )
        .unwrap();
        assert_eq!(d.serve.cgroup_driver, Some(crate::pods::Driver::Cgroupfs));
    }

    #[test]
    fn rollouts_are_validated_and_resolved() {
        let Some(root) = crate::system::cgroup2_mount() else {
            eprintln!("skipped: no cgroup2 mount to name in the config");
            return;
        };
        let r = root.display();
        let base = format!(
            "[algos.ccpd]\n[profiles.lat]\nalgo = \"ccpd\"\n[[rollouts]]\nalgo = \"ccpd\"\ncanary = \"{r}\"\ncontrol = \"{r}\"\n"
        );
        let d = parse(
            Path::new("t.toml"),
            &format!("{base}profile = \"lat\"\ninterval = \"5s\"\n"),
        )
        .unwrap();
        let o = &d.rollouts[0];
        assert_eq!(
            (o.profile, o.interval.as_secs(), o.duration.as_secs()),
            (1, 5, 600)
        );
        assert_eq!((o.fail_after, o.min_segments, o.promote), (2, 200, false));
        assert_eq!(o.guards, crate::rollout::default_guards());
        let e = err(&format!("{base}guards = [\"retrans_ratio <= x\"]\n"));
        assert!(
            e.starts_with("t.toml:8:11:") && e.contains("not a number"),
            "{e}"
        );
        let e = err(&format!("{base}profile = \"nope\"\n"));
        assert!(
            e.starts_with("t.toml:8:11:") && e.contains("unknown profile `nope`"),
            "{e}"
        );
        let e = err(&format!("{base}for = \"soon\"\n"));
        assert!(e.starts_with("t.toml:8:7:"), "{e}");
        let e = err(&base.replace(
            "[algos.ccpd]\n[profiles.lat]\nalgo = \"ccpd\"\n",
            "[algos.hetcp]\n",
        ));
        assert!(e.contains("not in [algos]"), "{e}");
    }

    #[test]
    fn profiles_get_ids_in_name_order_with_their_tunables() {
        let d = parse(
            Path::new("t.toml"),
            "[algos.ccpd]\nset = { kp = 4 }\n[profiles.zz]\nalgo = \"ccpd\"\nset = { kd = 0 }\n\
             [profiles.aa]\nalgo = \"ccpd\"\nset = { kp = 8 }\n",
        )
        .unwrap();
        let p = &d.algos[&Algo::Ccpd];
        assert_eq!(p[&0].get("kp"), Some(4 * 1024));
        assert_eq!(d.profile_names[&(Algo::Ccpd, 1)], "aa");
        assert_eq!(p[&1].get("kp"), Some(8 * 1024));
        assert_eq!(d.profile_names[&(Algo::Ccpd, 2)], "zz");
        assert_eq!(p[&2].get("kd"), Some(0));
        assert!(!d.serve.remove_on_exit);
        assert_eq!(d.serve.metrics, "127.0.0.1:9464");
    }

    #[test]
    fn shipped_example_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).unwrap();
                // cgroup paths exist only where the config is deployed: check
                // the syntax and tunables with the [[cgroups]] left out.
                let cut = text.split("[[cgroups]]").next().unwrap();
                parse(&p, cut).unwrap_or_else(|e| panic!("{e:#}"));
                n += 1;
            }
        }
        assert!(n >= 2, "web server and bulk host examples");
    }
}
