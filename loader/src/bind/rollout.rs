//! `ccload rollout`: try a controller on a canary cgroup, compare it with a
//! control cgroup in the same intervals from the in-kernel per-cgroup
//! aggregates (crate::bind::agg), and back out by itself when a guard fails.
//!
//! - The canary is bound to the algorithm/profile (`cgroup set`); the
//!   control keeps its CC and is watched (`cgroup watch`) if it has no
//!   binding, so it has aggregates too.
//! - Every interval both cgroups' aggregates are read; the interval's
//!   deltas give per-side values and canary/control ratios, checked by the
//!   guards (`retrans_ratio <= 1.5`).  An interval where either side sent
//!   fewer than `min_segments` is reported as insufficient and neither
//!   passes nor fails.
//! - `fail_after` consecutive failing intervals roll back: the canary's
//!   previous binding is restored exactly (or it is unbound), a watch the
//!   rollout added is removed, a controller it attached is detached; exit 1.
//! - After `--for` without a trip: exit 0; `--promote` binds the control too.
//! - Crash safety: before changing anything the rollout writes its state to
//!   /run/ccload/rollout-<canary id>.json, and its progress after every
//!   interval; `ccload rollout status` lists it (running, or interrupted
//!   when its process is gone).
//! - Verbs: `ccload rollout abort` / `promote` write the request to
//!   /run/ccload/rollout-<canary id>.cmd, which the running rollout (a
//!   `ccload rollout` or a `serve` thread) polls with its stop flag; a
//!   rollout whose process is gone is rolled back or promoted by the verb
//!   itself.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::bind::agg::Agg;
use crate::bind::cgroup::{self, CgroupDir};
use crate::bpf::algos::Algo;

/// The ratios a guard can test, canary over control.
pub const METRICS: &[(&str, &str)] = &[
    (
        "retrans_ratio",
        "retransmitted segments per segment sent (each side +1 retransmission, so 0/0 is 1)",
    ),
    ("srtt_p50_ratio", "median smoothed RTT"),
    ("srtt_p95_ratio", "95th percentile of the smoothed RTT"),
    ("goodput_ratio", "median per-flow delivery rate"),
    (
        "rto_ratio",
        "retransmission timeouts per segment sent (each side +1)",
    ),
    (
        "fct_p50_ratio",
        "median completion time of short flows (at most 1 MiB each way)",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    Le,
    Ge,
    Lt,
    Gt,
}

/// `metric op number`, e.g. `retrans_ratio <= 1.5`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Guard {
    pub metric: String,
    pub op: Op,
    pub bound: f64,
}

impl std::fmt::Display for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = match self.op {
            Op::Le => "<=",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Gt => ">",
        };
        write!(f, "{} {op} {}", self.metric, self.bound)
    }
}

impl std::str::FromStr for Guard {
    type Err = String;
    fn from_str(s: &str) -> Result<Guard, String> {
        let ops = [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)];
        let (i, tok, op) = ops
            .iter()
            .filter_map(|(t, o)| s.find(t).map(|i| (i, *t, *o)))
            .min_by_key(|(i, t, _)| (*i, std::cmp::Reverse(t.len())))
            .ok_or_else(|| {
                format!("guard `{s}`: want METRIC OP NUMBER, e.g. 'retrans_ratio <= 1.5'")
            })?;
        let metric = s[..i].trim().to_string();
        let bound: f64 = s[i + tok.len()..].trim().parse().map_err(|_| {
            format!(
                "guard `{s}`: `{}` is not a number",
                s[i + tok.len()..].trim()
            )
        })?;
        if !METRICS.iter().any(|(m, _)| *m == metric) {
            return Err(format!(
                "guard `{s}`: unknown metric `{metric}` (known: {})",
                METRICS
                    .iter()
                    .map(|(m, _)| *m)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !bound.is_finite() || bound <= 0.0 {
            return Err(format!("guard `{s}`: the bound must be a positive number"));
        }
        Ok(Guard { metric, op, bound })
    }
}

/// The guards used when none is given (what an operator would start from).
pub fn default_guards() -> Vec<Guard> {
    [
        "retrans_ratio <= 1.5",
        "srtt_p95_ratio <= 1.2",
        "goodput_ratio >= 0.9",
    ]
    .iter()
    .map(|g| g.parse().unwrap())
    .collect()
}

/// One side of an interval.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub segs_out: u64,
    pub retrans_segs: u64,
    pub rtos: u64,
    pub flows_started: u64,
    pub srtt_ms_p50: Option<f64>,
    pub srtt_ms_p95: Option<f64>,
    pub rate_mbps_p50: Option<f64>,
    /// Short flows that ended, and their median completion time.
    pub short_flows: u64,
    pub fct_ms_p50: Option<f64>,
}

impl Side {
    fn of(a: &Agg) -> Side {
        let s = a.summary();
        Side {
            segs_out: s.segs_out,
            retrans_segs: s.retrans_segs,
            rtos: s.rtos,
            flows_started: s.flows_started,
            srtt_ms_p50: s.srtt_ms_p50,
            srtt_ms_p95: s.srtt_ms_p95,
            rate_mbps_p50: s.rate_mbps_p50,
            short_flows: s.short_flows,
            fct_ms_p50: s.fct_ms_p50,
        }
    }
}

/// The canary/control ratio of `metric`; None when a side has no samples.
pub fn ratio(metric: &str, c: &Side, k: &Side) -> Option<f64> {
    let per_seg = |n: u64, segs: u64| (n as f64 + 1.0) / (segs.max(1) as f64);
    let q = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    match metric {
        "retrans_ratio" => {
            Some(per_seg(c.retrans_segs, c.segs_out) / per_seg(k.retrans_segs, k.segs_out))
        }
        "rto_ratio" => Some(per_seg(c.rtos, c.segs_out) / per_seg(k.rtos, k.segs_out)),
        "srtt_p50_ratio" => q(c.srtt_ms_p50, k.srtt_ms_p50),
        "srtt_p95_ratio" => q(c.srtt_ms_p95, k.srtt_ms_p95),
        "goodput_ratio" => q(c.rate_mbps_p50, k.rate_mbps_p50),
        "fct_p50_ratio" => q(c.fct_ms_p50, k.fct_ms_p50),
        _ => None,
    }
}

/// The verdict of one guard in one interval.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Check {
    pub guard: String,
    pub value: Option<f64>,
    pub ok: bool,
}

/// One interval's report (a line of output, or a JSON object).
#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    pub n: u32,
    pub canary: Side,
    pub control: Side,
    /// "pass", "fail" or "insufficient traffic".
    pub verdict: String,
    pub checks: Vec<Check>,
    pub failing_in_a_row: u32,
    /// With a `retrans_ratio <= K` guard: the always-valid evidence of harm
    /// beyond K over the intervals so far (crate::bind::sequential's mSPRT
    /// Lambda, alpha 0.05: harm at 20), reported, not acted on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harm_evidence: Option<f64>,
    /// A/B: that evidence reached 1/alpha (the rollout rolls back).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub harm: bool,
}

/// The mSPRT of a rollout's `retrans_ratio <= K` (or `<`) guard.
fn sequential_for(guards: &[Guard]) -> Option<crate::bind::sequential::Msprt> {
    guards
        .iter()
        .find(|g| g.metric == "retrans_ratio" && matches!(g.op, Op::Le | Op::Lt))
        .map(|g| crate::bind::sequential::Msprt::new(g.bound, 0.05))
}

/// Judge one interval's deltas.
pub fn judge(guards: &[Guard], c: &Side, k: &Side, min_segments: u64) -> (String, Vec<Check>) {
    if c.segs_out < min_segments || k.segs_out < min_segments {
        return ("insufficient traffic".into(), Vec::new());
    }
    let checks: Vec<Check> = guards
        .iter()
        .map(|g| {
            let v = ratio(&g.metric, c, k);
            let ok = match v {
                None => true, // no samples on a side: nothing to hold against it
                Some(v) => match g.op {
                    Op::Le => v <= g.bound,
                    Op::Ge => v >= g.bound,
                    Op::Lt => v < g.bound,
                    Op::Gt => v > g.bound,
                },
            };
            Check {
                guard: g.to_string(),
                value: v,
                ok,
            }
        })
        .collect();
    let v = if checks.iter().all(|c| c.ok) {
        "pass"
    } else {
        "fail"
    };
    (v.into(), checks)
}

/// What a rollout changed, recorded before it changes anything.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub canary: PathBuf,
    pub canary_id: u64,
    pub control: PathBuf,
    #[serde(default)]
    pub control_id: u64,
    pub algo: String,
    pub profile: u32,
    /// The canary's binding before the rollout (algorithm, profile); None =
    /// unbound; algorithm "" = a watch.
    pub prev: Option<(String, u32)>,
    /// The rollout added a watch on the control cgroup.
    pub control_watch_added: bool,
    /// The rollout attached the algorithm (first use).
    pub attached: bool,
    pub pid: u32,
    /// The process's start time (clock ticks after boot, /proc/PID/stat
    /// field 22): a pid reused by another process is not this rollout's.
    #[serde(default)]
    pub pid_start: u64,
    /// `rollout` or `serve`.
    #[serde(default)]
    pub by: String,
    /// Unix time the rollout started.
    #[serde(default)]
    pub started: u64,
    #[serde(default)]
    pub guards: Vec<String>,
    #[serde(default)]
    pub fail_after: u32,
    #[serde(default)]
    pub promote: bool,
    /// Progress: intervals reported of `intervals`, the last verdict and
    /// checks, consecutive failing intervals.
    #[serde(default)]
    pub intervals: u32,
    #[serde(default)]
    pub done: u32,
    #[serde(default)]
    pub last_verdict: String,
    #[serde(default)]
    pub last_checks: Vec<Check>,
    #[serde(default)]
    pub failing_in_a_row: u32,
    /// A/B inside the canary cgroup: the candidate's share, millionths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ab_share: Option<u32>,
}

/// Start time of process `pid` (/proc/PID/stat field 22), None if gone.
fn pid_start(pid: u32) -> Option<u64> {
    crate::host::procfs::stat_fields(pid)?
        .get(22 - 3)?
        .parse()
        .ok()
}

impl State {
    /// Who runs it, `rollout` for a record from before `by` was kept.
    pub fn by_or_rollout(&self) -> &str {
        if self.by.is_empty() {
            "rollout"
        } else {
            &self.by
        }
    }

    /// Its process still runs (a rollout in progress), as opposed to
    /// interrupted (killed, or the machine's daemon restarted).
    pub fn running(&self) -> bool {
        match pid_start(self.pid) {
            None => false,
            Some(t) => self.pid_start == 0 || t == self.pid_start,
        }
    }

    /// `running` or `interrupted`, as `rollout status` and the verbs say.
    pub fn state_word(&self) -> &'static str {
        if self.running() {
            "running"
        } else {
            "interrupted"
        }
    }
}

/// What an operator asks of a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Roll back now.
    Abort,
    /// End now as a clean run would with `--promote`: bind the control.
    Promote,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Abort => "abort",
            Verb::Promote => "promote",
        }
    }
}

fn cmd_path(canary_id: u64) -> PathBuf {
    Path::new(crate::host::lock::RUN_DIR).join(format!("rollout-{canary_id}.cmd"))
}

/// The verb requested of the rollout on `canary_id`, if any.
fn requested(canary_id: u64) -> Option<Verb> {
    let text = std::fs::read_to_string(cmd_path(canary_id)).ok()?;
    [Verb::Abort, Verb::Promote]
        .into_iter()
        .find(|v| v.word() == text.trim())
}

fn forget(canary_id: u64) {
    let _ = std::fs::remove_file(state_path(canary_id));
    let _ = std::fs::remove_file(cmd_path(canary_id));
}

/// Carry out `verb` on the recorded rollout `st`: a running one is asked
/// (and waited for, up to `wait`); an interrupted one is rolled back or
/// promoted here.  Returns how it ended.
pub fn act(st: &State, verb: Verb, wait: Duration) -> Result<End> {
    crate::bpf::require_root()?;
    if st.running() {
        std::fs::write(cmd_path(st.canary_id), verb.word())
            .context("writing the request to the rollout")?;
        let t0 = Instant::now();
        while state_path(st.canary_id).exists() {
            if !st.running() {
                // Killed while asked: it left the record; act on it here.
                let _ = std::fs::remove_file(cmd_path(st.canary_id));
                return act_here(st, verb);
            }
            if t0.elapsed() > wait {
                let _ = std::fs::remove_file(cmd_path(st.canary_id));
                bail!(
                    "the rollout on {} (pid {}) did not answer within {wait:?}",
                    st.canary.display(),
                    st.pid
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(cmd_path(st.canary_id));
        return Ok(match verb {
            Verb::Abort => End::Aborted,
            Verb::Promote => End::Promoted,
        });
    }
    act_here(st, verb)
}

fn act_here(st: &State, verb: Verb) -> Result<End> {
    match verb {
        Verb::Abort => {
            rollback(st)?;
            Ok(End::Aborted)
        }
        Verb::Promote => {
            promote(st)?;
            Ok(End::Promoted)
        }
    }
}

/// Bind the control as the canary is (the end of a promoted rollout).
fn promote(st: &State) -> Result<()> {
    {
        let _lock = crate::host::lock::state()?;
        cgroup::set(
            &st.control,
            &st.algo,
            st.profile,
            &crate::bind::leftovers::sweep,
        )
        .with_context(|| format!("promoting: binding {}", st.control.display()))?;
    }
    forget(st.canary_id);
    Ok(())
}

fn state_path(canary_id: u64) -> PathBuf {
    Path::new(crate::host::lock::RUN_DIR).join(format!("rollout-{canary_id}.json"))
}

/// Rollouts recorded in /run/ccload (in progress, or interrupted).
pub fn recorded() -> Vec<State> {
    let Ok(rd) = std::fs::read_dir(crate::host::lock::RUN_DIR) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("rollout-") && n.ends_with(".json")
        })
        .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
        .collect()
}

fn save(st: &State) -> Result<()> {
    std::fs::create_dir_all(crate::host::lock::RUN_DIR)?;
    let p = state_path(st.canary_id);
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(st)?)?;
    std::fs::rename(&tmp, &p)?;
    Ok(())
}

/// Undo a rollout: the canary's previous binding back (or unbound), the
/// control's added watch removed, an algorithm it attached detached.
pub fn rollback(st: &State) -> Result<()> {
    let _lock = crate::host::lock::state()?;
    // A cgroup removed meanwhile has no sockets to restore: only its
    // binding's pins (if any) are removed, by id.
    let alive = |p: &Path, id: u64| CgroupDir::open(p).is_ok_and(|c| c.id == id);
    if !alive(&st.canary, st.canary_id) {
        cgroup::unset_id(st.canary_id);
    } else {
        match &st.prev {
            Some((a, _)) if a.is_empty() => {
                cgroup::watch(&st.canary, &crate::bind::leftovers::sweep)?;
            }
            Some((a, p)) => {
                cgroup::set(&st.canary, a, *p, &crate::bind::leftovers::sweep)?;
            }
            None => {
                cgroup::unset(&st.canary)?;
            }
        }
    }
    if st.control_watch_added {
        if alive(&st.control, st.control_id) {
            let _ = cgroup::unset(&st.control);
        } else if st.control_id != 0 {
            cgroup::unset_id(st.control_id);
        }
    }
    if st.attached {
        if let Ok(a) = st.algo.parse::<Algo>() {
            let in_use = cgroup::list()?.iter().any(|b| b.algo == st.algo);
            if !in_use && crate::host::sysctl::default_cc().unwrap_or_default() != st.algo {
                let _ = crate::bpf::detach(a);
            }
        }
    }
    forget(st.canary_id);
    Ok(())
}

/// The options of one rollout (from the command line or a `[[rollouts]]`
/// entry of a `serve` config).
#[derive(Clone, Debug, PartialEq)]
pub struct Opts {
    pub algo: String,
    pub profile: u32,
    pub canary: PathBuf,
    pub control: PathBuf,
    pub guards: Vec<Guard>,
    pub interval: Duration,
    pub duration: Duration,
    pub fail_after: u32,
    pub min_segments: u64,
    pub promote: bool,
    /// Who runs it (`rollout` or `serve`), as `rollout status` reports it.
    pub by: &'static str,
    /// A/B inside one cgroup (canary = control): the candidate's share of
    /// the connections, in millionths ([`crate::bind::path_rules::Match::Share`]).
    pub ab_share: Option<u32>,
}

/// How a rollout ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// Ran its course (and promoted, if asked).
    Done,
    /// A guard failed `fail_after` intervals in a row: rolled back.
    RolledBack,
    /// SIGINT/SIGTERM, a stop of `serve`, or `ccload rollout abort`:
    /// rolled back.
    Aborted,
    /// `ccload rollout promote`: ended early, the control bound too.
    Promoted,
}

/// The rollout's two cgroups, checked: siblings (a cgroup's program also
/// sees its descendants' sockets), or one cgroup for an A/B rollout whose
/// share leaves both arms connections; guards and intervals that can
/// decide.
fn arms(o: &Opts) -> Result<(CgroupDir, CgroupDir)> {
    let can = CgroupDir::open(&o.canary)?;
    let ctl = CgroupDir::open(&o.control)?;
    if let Some(ppm) = o.ab_share {
        if can.id != ctl.id {
            bail!("an A/B rollout compares arms inside one cgroup");
        }
        if ppm == 0 || ppm >= 1_000_000 {
            bail!("--share must be inside 0..1 (both arms need connections)");
        }
    } else if can.id == ctl.id {
        bail!("the canary and the control are the same cgroup");
    }
    if o.ab_share.is_none() && (can.path.starts_with(&ctl.path) || ctl.path.starts_with(&can.path))
    {
        bail!(
            "{} and {} are nested: a cgroup's program also sees its descendants' sockets, \
             so the comparison would count one side in the other; use sibling cgroups",
            can.path.display(),
            ctl.path.display()
        );
    }
    if o.guards.is_empty() || o.fail_after == 0 || o.interval.is_zero() || o.duration < o.interval {
        bail!("a rollout needs guards, --fail-after >= 1, and --for at least one --interval");
    }
    Ok((can, ctl))
}

/// Set up the rollout: checks, state record, canary binding, control watch.
pub fn start(o: &Opts) -> Result<State> {
    crate::bpf::require_root()?;
    let (can, ctl) = arms(o)?;
    if let Some(s) = recorded().into_iter().find(|s| s.canary_id == can.id) {
        bail!(
            "a rollout of {} is recorded (pid {}): in progress, or interrupted \
             (`ccload rollout status` tells which; `ccload rollout abort` rolls it back)",
            s.canary.display(),
            s.pid
        );
    }
    let _lock = crate::host::lock::state()?;
    let bindings = cgroup::list()?;
    let bound = bindings.iter().find(|b| b.cgroup_id == can.id);
    if o.ab_share.is_some() && bound.is_some_and(|b| !b.rules.is_empty()) {
        bail!(
            "{} has path rules: an A/B rollout binds it with its own share rule \
             (unset or simplify the binding first)",
            can.path.display()
        );
    }
    let prev = bound.map(|b| (b.algo.clone(), b.profile));
    // A/B: the one cgroup is both sides, its binding holds both arms.
    let control_watched = o.ab_share.is_some() || bindings.iter().any(|b| b.cgroup_id == ctl.id);
    let mut st = State {
        canary: can.path.clone(),
        canary_id: can.id,
        control: ctl.path.clone(),
        control_id: ctl.id,
        algo: o.algo.clone(),
        profile: o.profile,
        prev,
        control_watch_added: !control_watched,
        attached: o
            .algo
            .parse::<Algo>()
            .is_ok_and(|a| !crate::bpf::is_attached(a)),
        pid: std::process::id(),
        pid_start: pid_start(std::process::id()).unwrap_or(0),
        by: o.by.to_string(),
        started: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        guards: o.guards.iter().map(|g| g.to_string()).collect(),
        fail_after: o.fail_after,
        promote: o.promote,
        intervals: intervals_in(o.duration, o.interval),
        done: 0,
        last_verdict: String::new(),
        last_checks: Vec::new(),
        failing_in_a_row: 0,
        ab_share: o.ab_share,
    };
    // A request left by an earlier rollout on this cgroup is not for this one.
    let _ = std::fs::remove_file(cmd_path(can.id));
    // Recorded first: a kill from here on leaves something `abort` undoes.
    save(&st)?;
    let setup = (|| -> Result<()> {
        match o.ab_share {
            // the control arm: the cgroup's CC and profile as they are (a
            // watched or unbound cgroup's: the namespace's default CC)
            Some(ppm) => {
                let (cc, p) = match &st.prev {
                    Some((a, p)) if !a.is_empty() => (a.clone(), *p),
                    _ => (crate::host::sysctl::default_cc()?, 0),
                };
                let arm = crate::bind::path_rules::PathRule {
                    when: crate::bind::path_rules::Match::Share(ppm),
                    cc: o.algo.clone(),
                    profile: o.profile,
                };
                st.attached = false;
                if !crate::bpf::is_registered(&o.algo) {
                    if let Ok(a) = o.algo.parse::<Algo>() {
                        cgroup::attach_first_use(a, &crate::bind::leftovers::sweep)?;
                        st.attached = true;
                        save(&st)?;
                    }
                }
                cgroup::set_with_rules(&can.path, &cc, p, &[arm], &crate::bind::leftovers::sweep)?;
            }
            None => {
                let b = cgroup::set(
                    &can.path,
                    &o.algo,
                    o.profile,
                    &crate::bind::leftovers::sweep,
                )?;
                st.attached = b.auto_attached;
            }
        }
        save(&st)?;
        if st.control_watch_added {
            cgroup::watch(&ctl.path, &crate::bind::leftovers::sweep)?;
        }
        Ok(())
    })();
    if let Err(e) = setup {
        drop(_lock);
        let _ = rollback(&st);
        return Err(e.context("starting the rollout; nothing was left changed"));
    }
    Ok(st)
}

fn read(id: u64) -> Result<Agg> {
    crate::bind::agg::read_pinned(&cgroup::agg_pin(id))
        .context("reading a cgroup's aggregates (was its binding removed?)")
}

/// How many whole intervals `--for` holds (at least one: a rollout with
/// `--for` shorter than `--interval` is refused before it starts).
fn intervals_in(duration: Duration, interval: Duration) -> u32 {
    let n = duration.as_nanos() / interval.as_nanos().max(1);
    u32::try_from(n).unwrap_or(u32::MAX).max(1)
}

/// Run the intervals; `report` gets each interval; `stop` is polled for
/// SIGINT/SIGTERM, and the record's request file for `ccload rollout
/// abort|promote`.
pub fn run(
    o: &Opts,
    st: &State,
    mut report: impl FnMut(&Interval),
    stop: &dyn Fn() -> bool,
) -> Result<End> {
    let mut st = st.clone();
    let ctl_id = CgroupDir::open(&o.control)?.id;
    // The intervals end on a fixed grid (start + n * interval), so `--for`
    // always yields floor(for / interval) of them: time spent reading the
    // aggregates and reporting is not added to each interval (added, it
    // accumulates until a loaded machine loses the last interval).
    let count = intervals_in(o.duration, o.interval);
    let start = Instant::now();
    let mut failing = 0u32;
    let mut seq = sequential_for(&o.guards);
    // A/B: both arms in the one cgroup's aggregate, the candidate's share
    // rule in slot 1, the rest (the control) in slot 0.
    let ab = st.ab_share.is_some();
    let sides = || -> Result<(Agg, Agg)> {
        if ab {
            let s = crate::bind::agg::read_pinned_slots(&cgroup::agg_pin(st.canary_id))
                .context("reading the A/B cgroup's aggregates (was its binding removed?)")?;
            let slot = |i: usize| s.get(i).cloned().unwrap_or_default();
            Ok((slot(1), slot(0)))
        } else {
            Ok((read(st.canary_id)?, read(ctl_id)?))
        }
    };
    let (mut c0, mut k0) = sides()?;
    for n in 1..=count {
        let end = start + o.interval * n;
        loop {
            let asked = requested(st.canary_id);
            if stop() || asked == Some(Verb::Abort) {
                rollback(&st)?;
                return Ok(End::Aborted);
            }
            if asked == Some(Verb::Promote) {
                promote(&st)?;
                return Ok(End::Promoted);
            }
            let now = Instant::now();
            if now >= end {
                break;
            }
            std::thread::sleep((end - now).min(Duration::from_millis(50)));
        }
        let (c1, k1) = sides()?;
        let (c, k) = (Side::of(&c1.since(&c0)), Side::of(&k1.since(&k0)));
        (c0, k0) = (c1, k1);
        let (verdict, checks) = judge(&o.guards, &c, &k, o.min_segments);
        // A/B: the retransmission guard is the sequential test's to
        // decide; the others count failing intervals as ever.
        let counted = |ch: &Check| !(ab && seq.is_some() && ch.guard.starts_with("retrans_ratio"));
        match verdict.as_str() {
            "fail" if checks.iter().any(|ch| !ch.ok && counted(ch)) => failing += 1,
            "fail" | "pass" => failing = 0,
            _ => {}
        }
        let mut harm = false;
        if let Some(s) = seq.as_mut().filter(|_| verdict != "insufficient traffic") {
            let frac = |x: &Side| x.retrans_segs as f64 / x.segs_out.max(1) as f64;
            let v = s.look(frac(&c), frac(&k));
            harm = ab && v == crate::bind::sequential::Verdict::Harm;
        }
        let i = Interval {
            n,
            canary: c,
            control: k,
            verdict,
            checks,
            failing_in_a_row: failing,
            harm_evidence: seq.as_ref().filter(|s| s.looks() > 0).map(|s| s.lambda()),
            harm,
        };
        (st.done, st.failing_in_a_row) = (n, failing);
        st.last_verdict.clone_from(&i.verdict);
        st.last_checks.clone_from(&i.checks);
        // Progress for `rollout status`; a failed write loses only that.
        let _ = save(&st);
        report(&i);
        if failing >= o.fail_after || harm {
            rollback(&st)?;
            return Ok(End::RolledBack);
        }
    }
    if o.promote {
        promote(&st)?;
    } else {
        if st.control_watch_added {
            let _lock = crate::host::lock::state()?;
            let _ = cgroup::unset(&o.control);
        }
        forget(st.canary_id);
    }
    Ok(End::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(segs: u64, retr: u64, p95: f64, rate: f64) -> Side {
        Side {
            segs_out: segs,
            retrans_segs: retr,
            rtos: 0,
            flows_started: 1,
            srtt_ms_p50: Some(p95 * 0.9),
            srtt_ms_p95: Some(p95),
            rate_mbps_p50: Some(rate),
            short_flows: 0,
            fct_ms_p50: None,
        }
    }

    #[test]
    fn for_holds_a_fixed_number_of_intervals() {
        let s = Duration::from_secs;
        assert_eq!(intervals_in(s(6), s(2)), 3);
        assert_eq!(intervals_in(s(7), s(2)), 3);
        assert_eq!(intervals_in(s(30), s(2)), 15);
        assert_eq!(intervals_in(Duration::from_millis(1999), s(2)), 1);
        assert_eq!(intervals_in(s(1), Duration::ZERO), 1_000_000_000);
    }

    #[test]
    fn guards_parse_and_reject_bad_input() {
        let g: Guard = "retrans_ratio <= 1.5".parse().unwrap();
        assert_eq!(
            (g.metric.as_str(), g.op, g.bound),
            ("retrans_ratio", Op::Le, 1.5)
        );
        let g: Guard = "goodput_ratio>=0.9".parse().unwrap();
        assert_eq!(g.op, Op::Ge);
        assert_eq!(g.to_string(), "goodput_ratio >= 0.9");
        for bad in [
            "",
            "retrans_ratio",
            "foo <= 1",
            "retrans_ratio <= x",
            "srtt_p95_ratio <= -1",
            "srtt_p95_ratio <= inf",
        ] {
            assert!(bad.parse::<Guard>().is_err(), "{bad}");
        }
        assert_eq!(default_guards().len(), 3);
    }

    #[test]
    fn intervals_are_judged_on_ratios_with_a_traffic_floor() {
        let g = default_guards();
        // The same behaviour on both sides passes.
        let (v, c) = judge(
            &g,
            &side(10_000, 10, 25.0, 10.0),
            &side(10_000, 10, 25.0, 10.0),
            100,
        );
        assert_eq!(v, "pass");
        assert!(c.iter().all(|c| (c.value.unwrap() - 1.0).abs() < 1e-9));
        // 10x the retransmissions fails retrans_ratio only.
        let (v, c) = judge(
            &g,
            &side(10_000, 100, 25.0, 10.0),
            &side(10_000, 10, 25.0, 10.0),
            100,
        );
        assert_eq!(v, "fail");
        assert_eq!(c.iter().filter(|c| !c.ok).count(), 1);
        assert!(!c[0].ok && c[0].value.unwrap() > 9.0);
        // 0 retransmissions on both sides is a ratio of 1, not NaN.
        let (v, _) = judge(
            &g,
            &side(5_000, 0, 25.0, 10.0),
            &side(5_000, 0, 25.0, 10.0),
            100,
        );
        assert_eq!(v, "pass");
        // Too little traffic on a side: neither pass nor fail.
        let (v, c) = judge(
            &g,
            &side(50, 40, 90.0, 1.0),
            &side(10_000, 1, 25.0, 10.0),
            100,
        );
        assert_eq!(v, "insufficient traffic");
        assert!(c.is_empty());
        // Short flows' completion: judged where both arms have some.
        let g: Vec<Guard> = vec!["fct_p50_ratio <= 1.2".parse().unwrap()];
        let fct = |ms: Option<f64>| Side {
            short_flows: u64::from(ms.is_some()),
            fct_ms_p50: ms,
            ..side(10_000, 10, 25.0, 10.0)
        };
        let (v, c) = judge(&g, &fct(Some(300.0)), &fct(Some(100.0)), 100);
        assert_eq!((v.as_str(), c[0].value), ("fail", Some(3.0)));
        let (v, c) = judge(&g, &fct(Some(110.0)), &fct(Some(100.0)), 100);
        assert_eq!(v, "pass", "{c:?}");
        let (v, c) = judge(&g, &fct(None), &fct(Some(100.0)), 100);
        assert_eq!((v.as_str(), c[0].value), ("pass", None));
    }
}
