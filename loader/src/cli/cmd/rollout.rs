//! `ccload rollout`: canary rollout with guards (crate::bind::rollout).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::bind::cgroup::CgroupDir;
use crate::bind::rollout::{self, End, Guard, Interval, State, Verb};
use crate::cli::args::{RolloutArgs, RolloutVerb};
use crate::cli::output::Out;

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map(|x| format!("{x:.1}{unit}"))
        .unwrap_or_else(|| "-".into())
}

fn print_interval(i: &Interval, of: u32) {
    let side = |s: &rollout::Side| {
        format!(
            "{} segs, retrans {:.2} %, srtt p95 {}, rate p50 {}",
            s.segs_out,
            if s.segs_out > 0 {
                s.retrans_segs as f64 * 100.0 / s.segs_out as f64
            } else {
                0.0
            },
            opt(s.srtt_ms_p95, " ms"),
            opt(s.rate_mbps_p50, " Mbit/s")
        )
    };
    let checks: Vec<String> = i
        .checks
        .iter()
        .map(|c| {
            format!(
                "{} [{}] {}",
                c.guard,
                c.value
                    .map(|v| format!("{v:.3}"))
                    .unwrap_or_else(|| "-".into()),
                if c.ok { "ok" } else { "FAIL" }
            )
        })
        .collect();
    println!(
        "interval {}/{of}: {}  canary: {}  control: {}  {}{}",
        i.n,
        i.verdict,
        side(&i.canary),
        side(&i.control),
        checks.join(", "),
        i.harm_evidence
            .map(|l| format!("  harm evidence {} (20 = harm, always valid)", evidence(l)))
            .unwrap_or_default()
    );
}

/// The recorded rollouts a verb's arguments name.
fn chosen(canary: Option<&Path>, all: bool, interrupted: bool) -> Result<Vec<State>> {
    let recs = rollout::recorded();
    let Some(p) = canary else {
        return Ok(recs
            .into_iter()
            .filter(|s| all || !interrupted || !s.running())
            .collect());
    };
    // By cgroup id when the cgroup exists, else by the recorded path.
    let id = CgroupDir::open(p).ok().map(|c| c.id);
    let hit: Vec<State> = recs
        .into_iter()
        .filter(|s| Some(s.canary_id) == id || s.canary == p)
        .collect();
    if hit.is_empty() {
        bail!("no rollout is recorded on {}", p.display());
    }
    Ok(hit)
}

fn describe(s: &State) -> String {
    let when = if s.running() {
        format!("running (pid {}, {})", s.pid, s.by_or_rollout())
    } else {
        "interrupted (its process is gone; `ccload rollout abort` rolls it back)".to_string()
    };
    let mut line = format!(
        "{} profile {} on {} against {}: {when}",
        s.algo,
        s.profile,
        s.canary.display(),
        s.control.display()
    );
    if s.intervals > 0 {
        line += &format!(
            "\n  interval {}/{}, {} failing in a row (rollback at {}){}",
            s.done,
            s.intervals,
            s.failing_in_a_row,
            s.fail_after,
            if s.promote { ", --promote" } else { "" }
        );
    }
    if !s.last_verdict.is_empty() {
        let checks: Vec<String> = s
            .last_checks
            .iter()
            .map(|c| {
                format!(
                    "{} [{}] {}",
                    c.guard,
                    c.value.map_or("-".into(), |v| format!("{v:.3}")),
                    if c.ok { "ok" } else { "FAIL" }
                )
            })
            .collect();
        line += &format!(
            "\n  last interval: {}  {}",
            s.last_verdict,
            checks.join(", ")
        );
    }
    line
}

fn verb(v: RolloutVerb, out: Out) -> Result<i32> {
    match v {
        RolloutVerb::Status { canary } => {
            let recs = chosen(canary.as_deref(), true, false)?;
            if out.json {
                let v: Vec<serde_json::Value> = recs
                    .iter()
                    .map(|s| {
                        let mut j = serde_json::to_value(s).unwrap_or_default();
                        j["state"] = s.state_word().into();
                        j
                    })
                    .collect();
                out.emit(&serde_json::json!({ "rollouts": v }))?;
            } else if recs.is_empty() {
                println!("no rollout in progress or interrupted");
            } else {
                for s in &recs {
                    println!("{}", describe(s));
                }
            }
            Ok(0)
        }
        RolloutVerb::Abort {
            canary,
            all,
            interrupted,
        } => each(
            chosen(canary.as_deref(), all, interrupted)?,
            Verb::Abort,
            out,
        ),
        RolloutVerb::Promote { canary } => {
            each(chosen(Some(&canary), false, false)?, Verb::Promote, out)
        }
    }
}

/// Carry out `v` on every rollout of `recs`; exit 1 if any could not be.
fn each(recs: Vec<State>, v: Verb, out: Out) -> Result<i32> {
    crate::bpf::require_root()?;
    if recs.is_empty() && !out.json {
        println!(
            "no rollout to {}",
            if v == Verb::Abort { "abort" } else { "promote" }
        );
    }
    let mut code = 0;
    let mut done = Vec::new();
    for s in recs {
        let was = s.state_word();
        let r = rollout::act(&s, v, Duration::from_secs(15));
        let (what, err) = match &r {
            Ok(End::Promoted) => (
                format!(
                    "promoted the {was} rollout of {} on {}: {} is bound to it too",
                    s.algo,
                    s.canary.display(),
                    s.control.display()
                ),
                None,
            ),
            Ok(_) => (
                format!(
                    "rolled back the {was} rollout of {} on {} (pid {})",
                    s.algo,
                    s.canary.display(),
                    s.pid
                ),
                None,
            ),
            Err(e) => {
                code = 1;
                (
                    format!("{}: {e:#}", s.canary.display()),
                    Some(format!("{e:#}")),
                )
            }
        };
        if out.json {
            done.push(serde_json::json!({
                "algo": s.algo, "canary": s.canary, "pid": s.pid, "was": was,
                "end": r.as_ref().ok().map(|e| format!("{e:?}")), "error": err,
            }));
        } else if err.is_some() {
            eprintln!("ccload: {what}");
        } else {
            println!("{what}");
        }
    }
    if out.json {
        let key = if v == Verb::Abort {
            "rolled_back"
        } else {
            "promoted"
        };
        out.emit(&serde_json::json!({ key: done }))?;
    }
    Ok(code)
}

pub(super) fn run(a: RolloutArgs, out: Out) -> Result<i32> {
    if let Some(v) = a.verb {
        return verb(v, out);
    }
    if a.resume {
        bail!(
            "`ccload rollout --resume` is now `ccload rollout abort --interrupted` \
             (it rolls back the rollouts whose process is gone); \
             `ccload rollout status` lists them"
        );
    }
    let o = opts(&a)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // Polled between intervals' sleeps: an operator's abort rolls back.
        signal_hook_flag(sig, stop.clone());
    }
    let st = rollout::start(&o)?;
    let of = (o.duration.as_secs_f64() / o.interval.as_secs_f64()).floor() as u32;
    if !out.json {
        println!(
            "rollout: {} profile {} on {} against {} (guards: {}; every {:?} for {:?}, rollback after {} failing intervals)",
            o.algo,
            o.profile,
            st.canary.display(),
            st.control.display(),
            o.guards.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(", "),
            o.interval,
            o.duration,
            o.fail_after
        );
    }
    let mut last_fail: Vec<String> = Vec::new();
    let mut by_harm = false;
    let end = rollout::run(
        &o,
        &st,
        |i| {
            by_harm |= i.harm;
            if i.harm {
                last_fail = vec![format!(
                    "{} (always-valid test: harm evidence {} >= 20)",
                    i.checks
                        .iter()
                        .find(|c| c.guard.starts_with("retrans_ratio"))
                        .map_or("retrans_ratio", |c| c.guard.as_str()),
                    evidence(i.harm_evidence.unwrap_or(0.0))
                )];
            } else if i.verdict == "fail" {
                last_fail = i
                    .checks
                    .iter()
                    .filter(|c| !c.ok)
                    .map(|c| format!("{} (was {:.3})", c.guard, c.value.unwrap_or(f64::NAN)))
                    .collect();
            }
            if out.json {
                let _ = out.emit(i);
            } else {
                print_interval(i, of);
            }
        },
        &|| stop.load(Ordering::SeqCst),
    )?;
    let (code, what) = end_message(&end, &o, &st, by_harm, &last_fail);
    if out.json {
        out.emit(&serde_json::json!({ "end": format!("{end:?}"), "message": what }))?;
    } else {
        println!("rollout {what}");
    }
    Ok(code)
}

/// The rollout's options from the command line (guards parsed, the A/B
/// share checked).
fn opts(a: &RolloutArgs) -> Result<rollout::Opts> {
    let algo = a.algo.clone().unwrap_or_default();
    let guards: Vec<Guard> = if a.guards.is_empty() {
        rollout::default_guards()
    } else {
        a.guards
            .iter()
            .map(|g| g.parse().map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?
    };
    Ok(rollout::Opts {
        profile: crate::bind::profiles::resolve(&algo, &a.profile)?,
        algo,
        canary: a
            .ab
            .clone()
            .or_else(|| a.canary.clone())
            .unwrap_or_default(),
        control: a
            .ab
            .clone()
            .or_else(|| a.control.clone())
            .unwrap_or_default(),
        guards,
        interval: a.interval,
        duration: a.duration,
        fail_after: a.fail_after,
        min_segments: a.min_segments,
        promote: a.promote,
        by: "rollout",
        ab_share: match a.ab {
            Some(_) if !(a.share > 0.0 && a.share < 1.0) => {
                bail!(
                    "--share {} must be inside 0..1 (both arms need connections)",
                    a.share
                )
            }
            Some(_) => Some((a.share * 1e6).round() as u32),
            None => None,
        },
    })
}

/// The exit code and the closing line of a rollout that ended with `end`.
fn end_message(
    end: &End,
    o: &rollout::Opts,
    st: &rollout::State,
    by_harm: bool,
    last_fail: &[String],
) -> (i32, String) {
    match end {
        End::Done if o.promote => (
            0,
            format!("done: promoted, {} now bound too", st.control.display()),
        ),
        End::Done => (
            0,
            "done: no guard tripped; the canary keeps the controller".to_string(),
        ),
        End::RolledBack if by_harm => (
            1,
            format!(
                "ROLLED BACK: {}; {} restored",
                last_fail.join(", "),
                st.canary.display()
            ),
        ),
        End::RolledBack => (
            1,
            format!(
                "ROLLED BACK: {} failed {} intervals in a row; {} restored",
                last_fail.join(", "),
                o.fail_after,
                st.canary.display()
            ),
        ),
        End::Aborted => (
            130,
            format!("aborted: rolled back; {} restored", st.canary.display()),
        ),
        End::Promoted => (
            0,
            format!(
                "promoted early (`ccload rollout promote`): {} now bound too",
                st.control.display()
            ),
        ),
    }
}

/// Set `flag` when `sig` arrives (the default action would kill the
/// rollout without rolling back).
fn signal_hook_flag(sig: i32, flag: Arc<AtomicBool>) {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    let _ = FLAG.set(flag);
    extern "C" fn on(_: i32) {
        if let Some(f) = FLAG.get() {
            f.store(true, Ordering::SeqCst);
        }
    }
    // SAFETY: installs an async-signal-safe handler (one atomic store).
    unsafe { libc::signal(sig, on as extern "C" fn(i32) as libc::sighandler_t) };
}

/// The sequential test's Lambda as a person reads it: 3.42, 1.2e9.
fn evidence(l: f64) -> String {
    if l >= 1e6 {
        format!("{l:.1e}")
    } else {
        format!("{l:.2}")
    }
}
