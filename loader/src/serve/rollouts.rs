//! The rollouts of a `serve` config (`[[rollouts]]`): each runs on its own
//! thread through crate::bind::rollout, exactly as `ccload rollout` would, and
//! reports into a shared table that `/metrics` renders.  A reload starts
//! the rollouts that are new and aborts (rolls back) those the config no
//! longer lists; one still listed keeps running across the reload.  On a
//! daemon stop every running rollout is aborted and rolled back.
//! `ccload rollout status|abort|promote` reach these rollouts through
//! their records in /run/ccload, as a `ccload rollout`'s; one ended so
//! stays ended until the config changes it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::bind::rollout::{self, End, Opts};

/// The states a rollout is in: `Status::state`.
const STATES: [&str; 6] = [
    "running",
    "done",
    "rolled_back",
    "aborted",
    "promoted",
    "failed",
];

/// What `/metrics` shows of one rollout.
#[derive(Clone, Debug, Default)]
pub(super) struct Status {
    pub algo: String,
    /// One of `STATES`.
    pub state: &'static str,
    pub intervals: u32,
    pub failing: u32,
    /// (guard, last value)
    pub ratios: Vec<(String, f64)>,
    /// The sequential test's evidence of harm (`Interval::harm_evidence`).
    pub harm_evidence: Option<f64>,
}

struct Running {
    opts: Opts,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The daemon's rollouts, keyed by canary path.
#[derive(Default)]
pub(super) struct Rollouts {
    running: BTreeMap<PathBuf, Running>,
    pub status: Arc<Mutex<BTreeMap<PathBuf, Status>>>,
}

impl Rollouts {
    /// Abort (roll back) the running rollouts `want` no longer lists, or
    /// lists changed.
    pub fn retire(&mut self, want: &[Opts]) {
        let keep: Vec<PathBuf> = want.iter().map(|o| o.canary.clone()).collect();
        let gone: Vec<PathBuf> = self
            .running
            .iter()
            .filter(|(k, r)| !keep.contains(k) || !want.contains(&r.opts))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            if let Some(r) = self.running.remove(&k) {
                stop(r);
            }
        }
    }

    /// Bring the running set to `want`: abort removed or changed ones,
    /// start new ones.
    pub fn sync(&mut self, want: &[Opts]) {
        self.retire(want);
        for o in want {
            if self.running.contains_key(&o.canary) {
                continue;
            }
            // A finished rollout stays finished until the config changes it.
            if let Some(s) = self.status.lock().unwrap().get(&o.canary) {
                if s.state != "running" && s.algo == o.algo {
                    continue;
                }
            }
            let stop = Arc::new(AtomicBool::new(false));
            let (opts, st, flag) = (o.clone(), self.status.clone(), stop.clone());
            let thread = std::thread::spawn(move || run_one(opts, st, flag));
            self.running.insert(
                o.canary.clone(),
                Running {
                    opts: o.clone(),
                    stop,
                    thread: Some(thread),
                },
            );
        }
    }

    /// Abort every running rollout (rolled back) and wait for them.
    pub fn stop_all(&mut self) {
        for (_, r) in std::mem::take(&mut self.running) {
            stop(r);
        }
    }

    pub fn render(&self, o: &mut super::metrics::Exposition) {
        use prometheus::proto::MetricType::GAUGE;
        let st = self.status.lock().unwrap();
        let lbl = |c: &PathBuf, s: &Status| (c.display().to_string(), s.algo.clone());
        o.family(
            "ccload_rollout_state",
            GAUGE,
            "1 for the state each rollout of the config is in, 0 for the others.",
        );
        // Every state, as a state set: `{state="rolled_back"} == 1` then
        // has a series to compare on a rollout that is still running.
        for (c, s) in st.iter() {
            let (canary, algo) = lbl(c, s);
            for state in STATES {
                o.sample(
                    &[
                        ("canary", canary.as_str()),
                        ("algo", algo.as_str()),
                        ("state", state),
                    ],
                    f64::from(u8::from(s.state == state)),
                );
            }
        }
        for (name, help, v) in [
            (
                "ccload_rollout_intervals",
                "Intervals judged or reported so far.",
                (|s: &Status| s.intervals as f64) as fn(&Status) -> f64,
            ),
            (
                "ccload_rollout_failing_intervals",
                "Consecutive failing intervals (rollback at fail_after).",
                |s: &Status| s.failing as f64,
            ),
        ] {
            o.family(name, GAUGE, help);
            for (c, s) in st.iter() {
                let (canary, algo) = lbl(c, s);
                o.sample(
                    &[("canary", canary.as_str()), ("algo", algo.as_str())],
                    v(s),
                );
            }
        }
        o.family(
            "ccload_rollout_harm_evidence",
            GAUGE,
            "The sequential test's evidence of retransmission harm beyond the guard's bound \
             (an mSPRT likelihood ratio; harm at 20); an A/B rollout rolls back there.",
        );
        for (c, s) in st.iter() {
            if let Some(v) = s.harm_evidence {
                let (canary, algo) = lbl(c, s);
                o.sample(&[("canary", canary.as_str()), ("algo", algo.as_str())], v);
            }
        }
        o.family(
            "ccload_rollout_ratio",
            GAUGE,
            "Canary/control ratio of each guard's metric in the last judged interval.",
        );
        for (c, s) in st.iter() {
            let (canary, algo) = lbl(c, s);
            for (g, v) in &s.ratios {
                o.sample(
                    &[
                        ("canary", canary.as_str()),
                        ("algo", algo.as_str()),
                        ("guard", g.as_str()),
                    ],
                    *v,
                );
            }
        }
    }
}

fn stop(mut r: Running) {
    r.stop.store(true, Ordering::SeqCst);
    if let Some(t) = r.thread.take() {
        let _ = t.join();
    }
}

fn run_one(o: Opts, status: Arc<Mutex<BTreeMap<PathBuf, Status>>>, stop: Arc<AtomicBool>) {
    let set = |f: &dyn Fn(&mut Status)| {
        let mut m = status.lock().unwrap();
        let s = m.entry(o.canary.clone()).or_default();
        s.algo = o.algo.clone();
        f(s);
    };
    set(&|s| {
        *s = Status {
            algo: o.algo.clone(),
            state: "running",
            ..Default::default()
        }
    });
    let st = match rollout::start(&o) {
        Ok(st) => st,
        Err(e) => {
            tracing::error!(canary = %o.canary.display(), error = %format!("{e:#}"),
                "rollout on {}: {e:#}", o.canary.display());
            set(&|s| s.state = "failed");
            return;
        }
    };
    tracing::info!(algo = %o.algo, canary = %o.canary.display(),
        "rollout of {} on {} started", o.algo, o.canary.display());
    let end = rollout::run(
        &o,
        &st,
        |i| {
            let ratios: Vec<(String, f64)> = i
                .checks
                .iter()
                .filter_map(|c| c.value.map(|v| (c.guard.clone(), v)))
                .collect();
            tracing::info!(canary = %o.canary.display(), interval = i.n, verdict = %i.verdict,
                "rollout on {}: interval {}: {}", o.canary.display(), i.n, i.verdict);
            set(&|s| {
                s.intervals = i.n;
                s.failing = i.failing_in_a_row;
                if !ratios.is_empty() {
                    s.ratios = ratios.clone();
                }
                if i.harm_evidence.is_some() {
                    s.harm_evidence = i.harm_evidence;
                }
            });
        },
        &|| stop.load(Ordering::SeqCst),
    );
    let state = match end {
        Ok(End::Done) => "done",
        Ok(End::RolledBack) => "rolled_back",
        Ok(End::Aborted) => "aborted",
        Ok(End::Promoted) => "promoted",
        Err(e) => {
            tracing::error!(canary = %o.canary.display(), error = %format!("{e:#}"),
                "rollout on {}: {e:#}", o.canary.display());
            let _ = rollout::rollback(&st);
            "failed"
        }
    };
    if state == "done" {
        tracing::info!(canary = %o.canary.display(), state, "rollout on {}: {state}", o.canary.display());
    } else {
        tracing::warn!(canary = %o.canary.display(), state, "rollout on {}: {state}", o.canary.display());
    }
    set(&|s| s.state = state);
}
