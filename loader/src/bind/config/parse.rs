//! `ccload apply`'s parser: the TOML text to a validated [`Desired`],
//! every error at its `file:line:col`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use toml::Spanned;

use super::{Config, Desired, OnExit, RolloutCfg, ServeCfgResolved};
use crate::bind::cgroup_rules::{self, CgroupRule};
use crate::bind::path_rules::{PathRule, RuleSpec};
use crate::bpf::algos::{Algo, Params};
use crate::{bind::cgroup, bpf, intf};

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

/// One file of a config: where it was read and its text.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

/// Parse and validate `file` (nothing in the kernel is touched).
pub fn load(file: &Path) -> Result<Desired> {
    parse(file, &read(file)?)
}

/// Parse and validate the config made of `files`, later ones adding to
/// earlier ones (the module's header).
pub fn load_all(files: &[PathBuf]) -> Result<Desired> {
    parse_all(&read_all(files)?)
}

/// The text of the config file `file`.
pub fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

/// The texts of `files`, in order.
pub fn read_all(files: &[PathBuf]) -> Result<Vec<Source>> {
    files
        .iter()
        .map(|f| {
            Ok(Source {
                path: f.clone(),
                text: read(f)?,
            })
        })
        .collect()
}

/// Parse and validate the text of `file` (nothing in the kernel is
/// touched): errors carry `file:line:col`.
pub fn parse(file: &Path, text: &str) -> Result<Desired> {
    parse_all(&[Source {
        path: file.to_path_buf(),
        text: text.to_string(),
    }])
}

/// Parse and validate a config of several files as one: each file's errors
/// carry its own `file:line:col`; a table set in two files is an error.
pub fn parse_all(srcs: &[Source]) -> Result<Desired> {
    let Some(first) = srcs.first() else {
        bail!("no config file given");
    };
    let mut cfgs: Vec<Config> = Vec::new();
    for s in srcs {
        let (file, text) = (s.path.as_path(), s.text.as_str());
        cfgs.push(toml::from_str(text).map_err(|e| match e.span() {
            Some(sp) => at(file, text, sp, e.message()),
            None => anyhow::anyhow!("{}: {}", file.display(), e.message()),
        })?);
    }
    // `[serve]` and `default_cc`: in one file at most.
    let mut serve_at: Option<usize> = None;
    let mut dc_at: Option<usize> = None;
    for (i, c) in cfgs.iter().enumerate() {
        for (set, seen, what) in [
            (c.serve.is_some(), &mut serve_at, "[serve]"),
            (c.default_cc.is_some(), &mut dc_at, "default_cc"),
        ] {
            if !set {
                continue;
            }
            if let Some(j) = *seen {
                bail!(
                    "{}: {what} is set in {} too: each table lives in one file",
                    srcs[i].path.display(),
                    srcs[j].path.display()
                );
            }
            *seen = Some(i);
        }
    }
    let serve = serve_at
        .and_then(|i| cfgs[i].serve.clone())
        .unwrap_or_default();
    let d = Desired {
        default_cc: dc_at.and_then(|i| cfgs[i].default_cc.as_ref().map(|s| s.get_ref().clone())),
        algos: BTreeMap::new(),
        profile_names: BTreeMap::new(),
        cgroups: Vec::new(),
        rollouts: Vec::new(),
        pods: Vec::new(),
        pod_rollouts: Vec::new(),
        serve: ServeCfgResolved {
            metrics: serve.metrics.clone(),
            remove_on_exit: serve.on_exit == OnExit::Remove,
            socket: serve.socket.clone(),
            max_connections: *serve.max_connections.get_ref() as usize,
            request_timeout: std::time::Duration::from_millis(
                *serve.request_timeout_ms.get_ref() as u64
            ),
            node_name: serve
                .node_name
                .clone()
                .or_else(|| std::env::var("NODE_NAME").ok())
                .filter(|n| !n.is_empty()),
            cgroup_root: serve.cgroup_root.clone(),
            cgroup_driver: serve.cgroup_driver,
        },
    };
    let serve_src = &srcs[serve_at.unwrap_or(0)];
    let mut p = Parser {
        file: &first.path,
        text: &first.text,
        d,
        by_name: BTreeMap::new(),
        defined_in: BTreeMap::new(),
        cgroup_ids: BTreeMap::new(),
        cgroup_patterns: Vec::new(),
    };
    p.at(serve_src);
    p.serve(&serve)?;
    // Each step over every file before the next step: a later file's
    // profile or binding may use an earlier file's algorithm, and the other
    // way round.
    for step in 0..6 {
        for (s, c) in srcs.iter().zip(&cfgs) {
            p.at(s);
            match step {
                0 => p.algos(c)?,
                1 => p.profiles(c)?,
                2 => p.cgroups(c)?,
                3 => p.pods(c)?,
                4 => p.rollouts(c)?,
                _ => p.default_cc(c)?,
            }
        }
    }
    Ok(p.d)
}

/// The file being parsed and what the config asks for so far.
struct Parser<'a> {
    file: &'a Path,
    text: &'a str,
    d: Desired,
    /// Named profiles: name -> (algorithm, id).
    by_name: BTreeMap<String, (Algo, u32)>,
    /// Which file set a table (`algos.X`, `profiles.X`).
    defined_in: BTreeMap<String, &'a Path>,
    /// `[[cgroups]]` seen so far: existing ones by id, and every pattern.
    cgroup_ids: BTreeMap<u64, PathBuf>,
    cgroup_patterns: Vec<PathBuf>,
}

impl<'a> Parser<'a> {
    /// Parse `s` from here on (errors carry its name).
    fn at(&mut self, s: &'a Source) {
        self.file = &s.path;
        self.text = &s.text;
    }

    /// Record that this file sets `table`; an error at `span` if another
    /// file set it already.
    fn define(&mut self, table: String, span: std::ops::Range<usize>) -> Result<()> {
        if let Some(other) = self.defined_in.get(&table) {
            return Err(at(
                self.file,
                self.text,
                span,
                format!(
                    "[{table}] is set in {} too: each table lives in one file",
                    other.display()
                ),
            ));
        }
        self.defined_in.insert(table, self.file);
        Ok(())
    }

    /// `[serve]`: its ranges and its metrics address.
    fn serve(&mut self, serve: &super::ServeCfg) -> Result<()> {
        for (key, v, range) in [
            ("max_connections", &serve.max_connections, 1..=65536),
            (
                "request_timeout_ms",
                &serve.request_timeout_ms,
                100..=600_000,
            ),
        ] {
            if !range.contains(v.get_ref()) {
                let (lo, hi) = range.into_inner();
                return Err(at(
                    self.file,
                    self.text,
                    v.span(),
                    format!("serve.{key} {} is outside {lo}..={hi}", v.get_ref()),
                ));
            }
        }
        if let Err(e) = self.d.serve.metrics.parse::<std::net::SocketAddr>() {
            bail!(
                "{}: serve.metrics `{}`: {e}",
                self.file.display(),
                self.d.serve.metrics
            );
        }
        Ok(())
    }

    /// `[algos]`: profile 0 of each controller.
    fn algos(&mut self, cfg: &Config) -> Result<()> {
        for (name, a) in &cfg.algos {
            let algo: Algo = name
                .get_ref()
                .parse()
                .map_err(|e| at(self.file, self.text, name.span(), e))?;
            self.define(format!("algos.{algo}"), name.span())?;
            let p = params_from(self.file, self.text, algo, &a.set)?;
            self.d.algos.entry(algo).or_default().insert(0, p);
        }
        Ok(())
    }

    /// `[profiles]`: named profiles, ids 1.. per algorithm in name order;
    /// `apply` and `serve` renumber them to their stable ids (profiles.rs).
    fn profiles(&mut self, cfg: &Config) -> Result<()> {
        for (name, pc) in &cfg.profiles {
            self.define(format!("profiles.{}", name.get_ref()), name.span())?;
            let algo: Algo = pc
                .algo
                .get_ref()
                .parse()
                .map_err(|e| at(self.file, self.text, pc.algo.span(), e))?;
            let Some(m) = self.d.algos.get_mut(&algo) else {
                return Err(at(
                    self.file,
                    self.text,
                    pc.algo.span(),
                    format!(
                        "profile `{}` uses {algo}, which is not in [algos]",
                        name.get_ref()
                    ),
                ));
            };
            // ids 1.. per algorithm, in file and then name order
            let id = m.keys().max().map_or(1, |k| k + 1);
            if id >= intf::CCL_NR_PROFILES {
                return Err(at(
                    self.file,
                    self.text,
                    name.span(),
                    format!(
                        "more than {} profiles for {algo}",
                        intf::CCL_NR_PROFILES - 1
                    ),
                ));
            }
            m.insert(id, params_from(self.file, self.text, algo, &pc.set)?);
            self.d
                .profile_names
                .insert((algo, id), name.get_ref().clone());
            self.by_name.insert(name.get_ref().clone(), (algo, id));
        }
        Ok(())
    }

    /// `[[cgroups]]`: one rule per entry, each cgroup once.
    fn cgroups(&mut self, cfg: &Config) -> Result<()> {
        // Two spellings of one existing cgroup (a relative path, a second
        // mount) are one cgroup: keyed by id.  An entry may also name a cgroup
        // that does not exist yet, or many with wildcards (cgroup_rules.rs).
        for c in &cfg.cgroups {
            let given = c.path.get_ref();
            let pattern = if cgroup_rules::has_glob(given) || !given.exists() {
                cgroup_rules::check_pattern(given)
                    .map_err(|e| at(self.file, self.text, c.path.span(), e))?;
                cgroup::check_in_cgroup2(given)
                    .map_err(|e| at(self.file, self.text, c.path.span(), format!("{e:#}")))?;
                given.clone()
            } else {
                let cg = cgroup::CgroupDir::open(given)
                    .map_err(|e| at(self.file, self.text, c.path.span(), format!("{e:#}")))?;
                if let Some(first) = self.cgroup_ids.insert(cg.id, cg.path.clone()) {
                    return Err(at(
                        self.file,
                        self.text,
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
            if self.cgroup_patterns.contains(&pattern) {
                return Err(at(
                    self.file,
                    self.text,
                    c.path.span(),
                    format!("cgroup listed twice: {}", pattern.display()),
                ));
            }
            self.cgroup_patterns.push(pattern.clone());
            let name = c.algo.get_ref();
            let profile = cc_and_profile(
                self.file,
                self.text,
                &self.d,
                &self.by_name,
                &c.algo,
                c.profile.as_ref(),
            )?;
            let path_rules = self.path_rules(&c.rules)?;
            self.d.cgroups.push(CgroupRule {
                pattern,
                cc: name.clone(),
                profile,
                path_rules,
            });
        }
        Ok(())
    }

    /// An entry's `rules`: each parsed, its CC and profile resolved as an
    /// entry's own (one of ours in `[algos]` with a profile of this config,
    /// or a kernel CC); together no more than a binding holds, no prefixes
    /// of two rules that overlap.
    fn path_rules(&self, rules: &[Spanned<String>]) -> Result<Vec<PathRule>> {
        let mut out = Vec::new();
        for r in rules {
            let spec: RuleSpec = r
                .get_ref()
                .parse()
                .map_err(|e| at(self.file, self.text, r.span(), format!("{e:#}")))?;
            let cc = Spanned::new(r.span(), spec.cc.clone());
            let prof = spec
                .profile
                .as_ref()
                .map(|p| Spanned::new(r.span(), p.clone()));
            // a profile by id is an id; by name, the config's
            let profile = match prof.as_ref().map(|p| p.get_ref().parse::<u32>()) {
                Some(Ok(id)) if id < intf::CCL_NR_PROFILES => {
                    cc_and_profile(self.file, self.text, &self.d, &self.by_name, &cc, None)?;
                    id
                }
                _ => cc_and_profile(
                    self.file,
                    self.text,
                    &self.d,
                    &self.by_name,
                    &cc,
                    prof.as_ref(),
                )
                .map_err(|e| anyhow::anyhow!("{e:#} (in rule `{}`)", r.get_ref()))?,
            };
            out.push(PathRule {
                when: spec.when,
                cc: spec.cc,
                profile,
            });
        }
        if let Err(e) = crate::bind::path_rules::check(&out) {
            let span = rules.first().map_or(0..0, |r| r.span());
            return Err(at(self.file, self.text, span, format!("{e:#}")));
        }
        Ok(out)
    }

    /// `[[pods]]`: label selectors, which need the node's name.
    fn pods(&mut self, cfg: &Config) -> Result<()> {
        for pc in &cfg.pods {
            let selector: crate::bind::pods::Selector = pc
                .selector
                .get_ref()
                .parse()
                .map_err(|e| at(self.file, self.text, pc.selector.span(), e))?;
            let profile = cc_and_profile(
                self.file,
                self.text,
                &self.d,
                &self.by_name,
                &pc.algo,
                pc.profile.as_ref(),
            )?;
            let path_rules = self.path_rules(&pc.rules)?;
            self.d.pods.push(crate::bind::pods::PodRule {
                selector,
                namespace: pc.namespace.as_ref().map(|n| n.get_ref().clone()),
                cc: pc.algo.get_ref().clone(),
                profile,
                path_rules,
            });
        }
        if let Some(first) = cfg.pods.first() {
            if self.d.serve.node_name.is_none() {
                return Err(at(
                    self.file,
                    self.text,
                    first.selector.span(),
                    "[[pods]] needs this node's name: [serve] node_name, or $NODE_NAME \
                     (the DaemonSet sets it from spec.nodeName)",
                ));
            }
        }
        Ok(())
    }

    /// `[[rollouts]]`: guards, durations, cgroups that exist.
    fn rollouts(&mut self, cfg: &Config) -> Result<()> {
        for r in &cfg.rollouts {
            let profile = cc_and_profile(
                self.file,
                self.text,
                &self.d,
                &self.by_name,
                &r.algo,
                r.profile.as_ref(),
            )?;
            let mut guards = Vec::new();
            for g in &r.guards {
                guards.push(
                    g.get_ref()
                        .parse::<crate::bind::rollout::Guard>()
                        .map_err(|e| at(self.file, self.text, g.span(), e))?,
                );
            }
            if guards.is_empty() {
                guards = crate::bind::rollout::default_guards();
            }
            let dur = |v: &Option<Spanned<String>>, def: &str| -> Result<std::time::Duration> {
                match v {
                    Some(v) => crate::units::parse_duration(v.get_ref())
                        .map_err(|e| at(self.file, self.text, v.span(), e)),
                    None => Ok(crate::units::parse_duration(def).expect("default duration")),
                }
            };
            let interval = dur(&r.interval, "30s")?;
            let duration = dur(&r.duration, "10m")?;
            let here =
                |span: std::ops::Range<usize>, msg: &str| at(self.file, self.text, span, msg);
            let ab_share = self.rollout_share(r)?;
            if let (Some(n), None) = (&r.namespace, &r.pods) {
                return Err(here(n.span(), "`namespace` goes with `pods`"));
            }
            let mut opts = crate::bind::rollout::Opts {
                algo: r.algo.get_ref().clone(),
                profile,
                canary: PathBuf::new(),
                control: PathBuf::new(),
                guards,
                interval,
                duration,
                fail_after: r.fail_after.unwrap_or(2),
                min_segments: r.min_segments.unwrap_or(200),
                promote: r.promote,
                by: "serve",
                ab_share,
            };
            if let Some(sel) = &r.pods {
                let selector: crate::bind::pods::Selector = sel
                    .get_ref()
                    .parse()
                    .map_err(|e| at(self.file, self.text, sel.span(), e))?;
                if self.d.serve.node_name.is_none() {
                    return Err(here(
                        sel.span(),
                        "a rollout in pods needs this node's name: [serve] node_name, or \
                         $NODE_NAME (the DaemonSet sets it from spec.nodeName)",
                    ));
                }
                self.d.pod_rollouts.push(crate::bind::pods::PodRollout {
                    selector,
                    namespace: r.namespace.as_ref().map(|n| n.get_ref().clone()),
                    opts,
                });
                continue;
            }
            let (canary, control) = match (&r.ab, &r.canary, &r.control) {
                (Some(ab), _, _) => (ab, ab),
                (None, Some(c), Some(k)) => (c, k),
                (None, Some(c), None) => return Err(here(c.span(), "a canary needs a `control`")),
                (None, None, Some(k)) => return Err(here(k.span(), "a control needs a `canary`")),
                (None, None, None) => unreachable!("one form is given"),
            };
            if r.ab.is_none() {
                cgroup::CgroupDir::open(control.get_ref())
                    .map_err(|e| at(self.file, self.text, control.span(), format!("{e:#}")))?;
            }
            let cg = cgroup::CgroupDir::open(canary.get_ref())
                .map_err(|e| at(self.file, self.text, canary.span(), format!("{e:#}")))?;
            if self.d.cgroups.iter().any(|r| r.matches(&cg.path)) {
                return Err(here(
                    canary.span(),
                    "a rollout's cgroup cannot also be in [[cgroups]] (the rollout binds it)",
                ));
            }
            opts.canary = canary.get_ref().clone();
            opts.control = control.get_ref().clone();
            self.d.rollouts.push(opts);
        }
        Ok(())
    }

    /// A rollout's form (exactly one: canary and control, `ab`, or `pods`)
    /// and an A/B rollout's share of connections for the new controller,
    /// in millionths (None: canary and control).
    fn rollout_share(&self, r: &RolloutCfg) -> Result<Option<u32>> {
        let here = |span: std::ops::Range<usize>, msg: &str| at(self.file, self.text, span, msg);
        // Exactly one form: canary and control, `ab`, or `pods`.
        let forms = [
            r.canary.is_some() || r.control.is_some(),
            r.ab.is_some(),
            r.pods.is_some(),
        ];
        if forms.iter().filter(|f| **f).count() != 1 {
            return Err(here(
                r.algo.span(),
                "a rollout takes `canary` and `control`, or `ab` (one cgroup), or `pods` \
                 (a label selector): exactly one of them",
            ));
        }
        match (&r.share, forms[0]) {
            (Some(s), true) => Err(here(
                s.span(),
                "`share` is for A/B rollouts (`ab` or `pods`)",
            )),
            (Some(s), false) if !(*s.get_ref() > 0.0 && *s.get_ref() < 1.0) => Err(here(
                s.span(),
                "`share` must be inside 0..1 (both arms need connections)",
            )),
            (Some(s), false) => Ok(Some((s.get_ref() * 1e6).round() as u32)),
            (None, true) => Ok(None),
            (None, false) => Ok(Some(100_000)),
        }
    }

    /// `default_cc`: one of ours in `[algos]` or a kernel CC here.
    fn default_cc(&mut self, cfg: &Config) -> Result<()> {
        if let Some(dc) = &cfg.default_cc {
            let n = dc.get_ref();
            let ok = n
                .parse::<Algo>()
                .map(|a| self.d.algos.contains_key(&a))
                .unwrap_or(false)
                || kernel_cc_available(n);
            if !ok {
                return Err(at(
                    self.file,
                    self.text,
                    dc.span(),
                    format!("default_cc `{n}` is neither in [algos] nor a kernel CC here"),
                ));
            }
        }
        Ok(())
    }
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
