//! `ccload rollout`: canary rollout with guards (crate::rollout).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;

use crate::cli::RolloutArgs;
use crate::output::Out;
use crate::rollout::{self, End, Guard, Interval};

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
        "interval {}/{of}: {}  canary: {}  control: {}  {}",
        i.n,
        i.verdict,
        side(&i.canary),
        side(&i.control),
        checks.join(", ")
    );
}

pub(super) fn run(a: RolloutArgs, out: Out) -> Result<i32> {
    if a.resume {
        crate::bpf::require_root()?;
        let recs = rollout::recorded();
        if recs.is_empty() && !out.json {
            println!("no interrupted rollout");
        }
        let mut done = Vec::new();
        for st in recs {
            rollout::rollback(&st)?;
            if !out.json {
                println!(
                    "rolled back the interrupted rollout of {} on {} (pid {})",
                    st.algo,
                    st.canary.display(),
                    st.pid
                );
            }
            done.push(serde_json::json!({
                "algo": st.algo, "canary": st.canary, "pid": st.pid,
            }));
        }
        if out.json {
            out.emit(&serde_json::json!({ "rolled_back": done }))?;
        }
        return Ok(0);
    }
    let algo = a.algo.clone().unwrap_or_default();
    let guards: Vec<Guard> = if a.guards.is_empty() {
        rollout::default_guards()
    } else {
        a.guards
            .iter()
            .map(|g| g.parse().map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?
    };
    let o = rollout::Opts {
        profile: crate::profiles::resolve(&algo, &a.profile)?,
        algo,
        canary: a.canary.clone().unwrap_or_default(),
        control: a.control.clone().unwrap_or_default(),
        guards,
        interval: a.interval,
        duration: a.duration,
        fail_after: a.fail_after,
        min_segments: a.min_segments,
        promote: a.promote,
    };
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
    let end = rollout::run(
        &o,
        &st,
        |i| {
            if i.verdict == "fail" {
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
    let (code, what) = match end {
        End::Done if o.promote => (
            0,
            format!("done: promoted, {} now bound too", st.control.display()),
        ),
        End::Done => (
            0,
            "done: no guard tripped; the canary keeps the controller".to_string(),
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
    };
    if out.json {
        out.emit(&serde_json::json!({ "end": format!("{end:?}"), "message": what }))?;
    } else {
        println!("rollout {what}");
    }
    Ok(code)
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
