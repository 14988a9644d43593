//! The checks of a scenario judged on its finished runs: each threshold of
//! `[[checks]]` per case, a comparison on repetitions by the paired test
//! (`Paired`, Student's t), and every checked controller's window bound.

use serde::Serialize;

use crate::scenario::{applies, in_filter, Case, Check, Scenario};
use crate::summary::RunSummary;

/// One evaluated threshold of one case.
#[derive(Clone, Debug, Serialize)]
pub struct CheckOutcome {
    pub case: String,
    pub cc: String,
    pub against: String,
    pub metric: &'static str,
    pub value: f64,
    pub reference: f64,
    pub bound: String,
    pub pass: bool,
    pub why: String,
    /// Runs of `cc` in the case whose mean `value` is.
    pub runs: usize,
    /// The check's `confirm_reps` (a failing comparison is measured again).
    #[serde(skip)]
    pub confirm_reps: u32,
    /// A comparison on two or more repetitions of both CCs: the paired
    /// test that judged it ([`Paired`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
}

/// A comparison judged on repetitions: per repetition run by both CCs (the
/// same seeded loss, minutes apart), the margin by which `cc` keeps within
/// the bound (goodput: a - x b; retransmissions: x b + slack - a; >= 0 is
/// within), and the one-sided 95 % upper confidence bound of its mean
/// (Student's t on n - 1 degrees of freedom).  The comparison fails only
/// when that bound is below 0: the runs show `cc` beyond the bound, not a
/// mean that noise put there.  A single run's goodput moves by more than
/// the bounds resolve on the shallowest buffers, and on a long path with
/// a BDP/8 buffer a run never outgrows the window its slow start (or a
/// host-made loss) left: the kernel's reno against itself under a second
/// label can read 0.87x over six repetitions, which a bound on the mean
/// would fail and this test passes (docs/lab.md).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Paired {
    /// Repetitions with a run of both CCs.
    pub n: usize,
    /// Mean margin, in the metric's units.
    pub margin: f64,
    /// Its one-sided 95 % upper bound.
    pub upper: f64,
}

/// One-sided 95 % quantile of Student's t with `df` degrees of freedom
/// (infinite at 0: no spread to judge by).
fn t95(df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match df {
        0 => f64::INFINITY,
        d => StudentsT::new(0.0, 1.0, d as f64)
            .map(|t| t.inverse_cdf(0.95))
            .unwrap_or(f64::INFINITY),
    }
}

impl Paired {
    /// The test on per-repetition margins; None below two.
    pub fn of(margins: &[f64]) -> Option<Paired> {
        let n = margins.len();
        if n < 2 {
            return None;
        }
        let mean = margins.iter().sum::<f64>() / n as f64;
        let var = margins.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Some(Paired {
            n,
            margin: mean,
            upper: mean + t95(n - 1) * (var / n as f64).sqrt(),
        })
    }

    /// Within the bound unless the runs show otherwise (a NaN margin,
    /// a run without the metric, fails).
    pub fn pass(&self) -> bool {
        self.upper >= 0.0
    }
}

/// One value read from a run, as the checks compare it.
type Metric<'a> = dyn Fn(&RunSummary) -> f64 + 'a;

impl Scenario {
    /// Evaluate `checks` on finished runs (mean over repetitions per case
    /// and cc).  Cases with no run of `cc` or `against` are skipped.  A
    /// comparison on one run of `cc` is judged on the means; on two or more
    /// repetitions of both CCs, by the paired test ([`Paired`]).
    pub fn evaluate(&self, runs: &[RunSummary]) -> Vec<CheckOutcome> {
        let mut out = Vec::new();
        for case in self.cases() {
            for c in self.checks.iter().filter(|c| applies(&case, c)) {
                Judging::new(&case, c, runs, &mut out).judge();
            }
            window_bounds(self, &case, runs, &mut out);
        }
        out
    }
}

/// The runs of `cc` in `case`.
fn runs_of<'a>(runs: &'a [RunSummary], case: &str, cc: &str) -> Vec<&'a RunSummary> {
    runs.iter()
        .filter(|r| r.case == case && r.cc == cc)
        .collect()
}

fn mean(v: &[&RunSummary], f: &Metric) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().map(|r| f(r)).sum::<f64>() / v.len() as f64)
}

/// One check judged in one case: the runs of its controller and of its
/// reference there, and where the outcomes go.
struct Judging<'a> {
    case: &'a Case,
    check: &'a Check,
    mine: Vec<&'a RunSummary>,
    theirs: Vec<&'a RunSummary>,
    /// The check's confirm_reps in this case (`confirm_reps_in`).
    confirm_reps: u32,
    /// What a miss of the outcomes pushed now is confirmed on.
    confirm: u32,
    out: &'a mut Vec<CheckOutcome>,
}

impl<'a> Judging<'a> {
    fn new(
        case: &'a Case,
        check: &'a Check,
        runs: &'a [RunSummary],
        out: &'a mut Vec<CheckOutcome>,
    ) -> Judging<'a> {
        let confirm_reps = check
            .confirm_reps_in
            .iter()
            .find(|w| in_filter(case, &w.rate_mbit, &w.rtt_ms, &w.buffer_bdp, &w.loss))
            .map_or(check.confirm_reps, |w| w.confirm_reps);
        Judging {
            case,
            check,
            mine: runs_of(runs, &case.label, &check.cc),
            theirs: check
                .against
                .as_ref()
                .map(|a| runs_of(runs, &case.label, a))
                .unwrap_or_default(),
            confirm_reps,
            confirm: 0,
            out,
        }
    }

    fn me(&self, f: &Metric) -> Option<f64> {
        mean(&self.mine, f)
    }

    fn push(
        &mut self,
        metric: &'static str,
        value: Option<f64>,
        reference: f64,
        bound: String,
        paired: Option<Paired>,
        pass: bool,
    ) {
        let Some(value) = value else { return };
        self.out.push(CheckOutcome {
            case: self.case.label.clone(),
            cc: self.check.cc.clone(),
            against: self.check.against.clone().unwrap_or_default(),
            metric,
            value,
            reference,
            bound,
            pass,
            why: self.check.why.clone(),
            runs: self.mine.len(),
            confirm_reps: self.confirm,
            paired,
        });
    }

    /// A comparison with the reference: on one run of `cc`, the means
    /// against the bound; on repetitions of both, the paired test on
    /// `margin(a, b)` (>= 0: within) per shared repetition.  Skipped where
    /// the reference has no run.
    fn compare(
        &mut self,
        metric: &'static str,
        f: &Metric,
        bound: &dyn Fn(f64) -> String,
        margin: &dyn Fn(f64, f64) -> f64,
    ) {
        let Some(b) = mean(&self.theirs, f) else {
            return;
        };
        let Some(a) = self.me(f) else {
            return;
        };
        let margins: Vec<f64> = self
            .mine
            .iter()
            .filter_map(|x| {
                let y = self.theirs.iter().find(|y| y.rep == x.rep)?;
                Some(margin(f(x), f(y)))
            })
            .collect();
        // one run of `cc` pairs at most once: Paired::of is None
        let paired = Paired::of(&margins);
        let pass = paired.map_or(margin(a, b) >= 0.0, |p| p.pass());
        self.push(metric, Some(a), b, bound(b), paired, pass);
    }

    /// A bound on one of the run's own values (the mean of `cc`'s runs).
    fn own(
        &mut self,
        metric: &'static str,
        f: &Metric,
        reference: f64,
        bound: String,
        ok: &dyn Fn(f64) -> bool,
    ) {
        let v = self.me(f);
        let pass = v.is_some_and(ok);
        self.push(metric, v, reference, bound, None, pass);
    }

    fn judge(mut self) {
        let c = self.check;
        // What a miss is confirmed on: a comparison's confirm_reps; an
        // absolute floor's only in a check without `against`, judged on the
        // mean of all the runs.
        let (compared, floors) = if c.against.is_some() {
            (self.confirm_reps, 0)
        } else {
            (0, self.confirm_reps)
        };
        self.confirm = compared;
        self.against_reference(c);
        self.confirm = floors;
        self.own_floors(c);
        self.confirm = compared;
        self.sharing(c);
        self.own_ceilings(c);
    }

    /// Goodput, retransmissions, RTT inflation, queueing delay and
    /// slowdown against the reference CC's runs.
    fn against_reference(&mut self, c: &Check) {
        let good = |r: &RunSummary| r.goodput_mbit;
        // after the warm-up: a run without the count fails (NaN)
        let warm = c.retrans_after_warmup;
        let retx = |r: &RunSummary| {
            if warm {
                r.retrans_warm.map_or(f64::NAN, f64::from)
            } else {
                r.retransmits as f64
            }
        };
        let per_seg = |r: &RunSummary| {
            if warm {
                r.retrans_per_seg_warm.unwrap_or(f64::NAN)
            } else {
                r.retrans_per_seg
            }
        };
        let (retx_name, per_seg_name) = if warm {
            ("retransmits_after_warmup", "retrans_per_seg_after_warmup")
        } else {
            ("retransmits", "retrans_per_seg")
        };
        let infl = |r: &RunSummary| (r.rtt_p95_ms - r.rtt_base_ms).max(0.0);
        if let Some(x) = c.goodput_ratio_min {
            self.compare(
                "goodput_mbit",
                &good,
                &|o| format!(">= {x} x {o:.2}"),
                &|a, b| a - x * b,
            );
        }
        if let Some(x) = c.retrans_ratio_max {
            let s = c.retrans_slack;
            self.compare(
                retx_name,
                &retx,
                &|o| format!("<= {x} x {o:.0} + {s}"),
                &|a, b| x * b + s - a,
            );
        }
        if let Some(x) = c.retrans_per_seg_ratio_max {
            let s = c.retrans_per_seg_slack;
            self.compare(
                per_seg_name,
                &per_seg,
                &|o| format!("<= {x} x {o:.5} + {s}"),
                &|a, b| x * b + s - a,
            );
        }
        if let Some(x) = c.rtt_inflation_ratio_max {
            // a reference that adds no delay leaves 1 ms of room
            self.compare(
                "rtt_p95_inflation_ms",
                &infl,
                &|o| format!("<= max({x} x {o:.1}, 1)"),
                &|a, b| (x * b).max(1.0) - a,
            );
        }
        if let Some(x) = c.qdelay_ratio_max {
            // a run without the emulator's queueing delay fails (NaN)
            let qd = |r: &RunSummary| r.qdelay_p95_ms.unwrap_or(f64::NAN);
            self.compare(
                "qdelay_p95_ms",
                &qd,
                &|o| format!("<= max({x} x {o:.1}, 1)"),
                &|a, b| (x * b).max(1.0) - a,
            );
        }
        if let (Some(x), Some(bin), Some(q)) = (
            c.slowdown_ratio_max,
            c.slowdown_bin.as_deref(),
            c.slowdown_q,
        ) {
            if let Some(metric) = crate::arrivals::slowdown_metric(bin, q) {
                // a run whose mix had no flow of the bin fails (NaN)
                let sd = |r: &RunSummary| {
                    r.fct
                        .iter()
                        .find(|b| b.bin == bin)
                        .and_then(|b| b.at(q))
                        .unwrap_or(f64::NAN)
                };
                self.compare(metric, &sd, &|o| format!("<= {x} x {o:.2}"), &|a, b| {
                    x * b - a
                });
            }
        }
    }

    /// Floors on the run's own values: utilisation, Jain, share, a late
    /// flow's time to its share, retransmissions against the peers'.
    fn own_floors(&mut self, c: &Check) {
        // the mix's `$cc` flows, by index: in reno's run of `$cc` + reno
        // both flows are reno's
        let under = self.case.under_test();
        let is_mine = |i: usize| under.get(i).copied().unwrap_or(false);
        let share = |r: &RunSummary| r.share_of_flows(is_mine);
        let mins: [(&'static str, Option<f64>, &Metric); 4] = [
            ("utilisation", c.utilisation_min, &|r| r.utilisation),
            ("jain", c.jain_min, &|r| r.jain),
            ("jain_bins", c.jain_bins_min, &|r| r.jain_bins),
            ("share", c.share_min, &share),
        ];
        for (metric, min, f) in mins {
            if let Some(x) = min {
                self.own(metric, f, 0.0, format!(">= {x}"), &|v| v >= x);
            }
        }
        // a late flow that never gets its share: infinitely slow
        let late = |r: &RunSummary| r.late_fair_s.unwrap_or(f64::INFINITY);
        if let Some(x) = c.late_fair_max_s {
            self.own("late_fair_s", &late, 0.0, format!("<= {x}"), &|v| v <= x);
        }
        if let Some(x) = c.peer_retrans_ratio_max {
            let s = c.retrans_slack;
            let split = |r: &RunSummary| {
                r.flows
                    .iter()
                    .enumerate()
                    .fold((0.0, 0.0), |(m, o), (i, f)| {
                        if is_mine(i) {
                            (m + f.retransmits as f64, o)
                        } else {
                            (m, o + f.retransmits as f64)
                        }
                    })
            };
            let o = self.me(&|r| split(r).1).unwrap_or(0.0);
            self.own(
                "retransmits_vs_peers",
                &|r| split(r).0,
                o,
                format!("<= {x} x {o:.0} + {s}"),
                &|v| v <= x * o + s,
            );
        }
    }

    /// Sharing against the reference's: share, Jain, a late flow's time, a
    /// longer RTT's share.
    fn sharing(&mut self, c: &Check) {
        let under = self.case.under_test();
        let is_mine = |i: usize| under.get(i).copied().unwrap_or(false);
        let share = |r: &RunSummary| r.share_of_flows(is_mine);
        let late = |r: &RunSummary| r.late_fair_s.unwrap_or(f64::INFINITY);
        if let Some(x) = c.share_ratio_min {
            self.compare("share", &share, &|o| format!(">= {x} x {o:.3}"), &|a, b| {
                a - x * b
            });
        }
        if let Some(x) = c.jain_ratio_min {
            self.compare(
                "jain",
                &|r| r.jain,
                &|o| format!(">= {x} x {o:.3}"),
                &|a, b| a - x * b,
            );
        }
        if let Some(x) = c.late_fair_ratio_max {
            let s = c.late_fair_slack_s;
            self.compare(
                "late_fair_s",
                &late,
                &|o| format!("<= {x} x {o:.1} + {s}"),
                &|a, b| x * b + s - a,
            );
        }
        let long = |r: &RunSummary| r.long_rtt_share().unwrap_or(f64::NAN);
        if let Some(x) = c.long_rtt_share_ratio_min {
            self.compare(
                "long_rtt_share",
                &long,
                &|o| format!(">= {x} x {o:.3}"),
                &|a, b| a - x * b,
            );
        }
    }

    /// Ceilings on the run's own values: time in Recovery, retransmissions
    /// per segment against the link's loss.
    fn own_ceilings(&mut self, c: &Check) {
        if let Some(x) = c.recovery_share_max {
            self.own(
                "recovery_share",
                &|r| r.recovery_share,
                0.0,
                format!("<= {x}"),
                &|v| v <= x,
            );
        }
        if let Some(x) = c.retrans_per_seg_loss_max {
            let loss = self.case.link.loss;
            self.own(
                "retrans_per_seg",
                &|r| r.retrans_per_seg,
                loss,
                format!("<= {x} x loss {loss:e}"),
                &|v| v <= x * loss,
            );
        }
    }
}

/// Every checked controller, in every case a check reads it: no run's
/// window beyond what any law could want (summary::window_bound).  The
/// largest of its runs, not the mean: one wild window is a fault however
/// the other runs went.
fn window_bounds(sc: &Scenario, case: &Case, runs: &[RunSummary], out: &mut Vec<CheckOutcome>) {
    use crate::summary::{window_bound, WINDOW_BOUND_MIN, WINDOW_BOUND_X, WINDOW_METRIC};
    let storage = case.link.bdp_pkts() + case.link.buffer_pkts as f64;
    let bound = window_bound(storage);
    let mut seen: Vec<&str> = Vec::new();
    for c in &sc.checks {
        if seen.contains(&c.cc.as_str()) || !applies(case, c) {
            continue;
        }
        seen.push(&c.cc);
        let mine = runs_of(runs, &case.label, &c.cc);
        let Some(w) = mine.iter().filter_map(|r| r.cwnd_max).max() else {
            continue;
        };
        out.push(CheckOutcome {
            case: case.label.clone(),
            cc: c.cc.clone(),
            against: String::new(),
            metric: WINDOW_METRIC,
            value: w as f64,
            reference: 0.0,
            bound: format!(
                "<= {bound} ({WINDOW_BOUND_X} x {storage:.0} stored, >= {WINDOW_BOUND_MIN})"
            ),
            pass: w <= bound,
            why: format!(
                "a sane window: no run beyond {WINDOW_BOUND_X} times what the path stores"
            ),
            runs: mine.len(),
            confirm_reps: 0,
            paired: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::delay_class;
    use crate::scenario::tests::scenario;

    /// `judged_cells` keeps the pairs a threshold reads, and only those: on
    /// the shipped acceptance grid every outcome is the same whether every
    /// (case, cc) ran or only the judged ones, and a skipped pair is read by
    /// no check (the verdict cannot depend on it).
    #[test]
    fn a_check_measures_only_the_runs_its_thresholds_read() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/lab");
        let s = Scenario::load(&dir.join("acceptance.toml")).unwrap();
        let judged = s.judged_cells();
        let n: usize = judged.iter().map(|c| c.ccs.len()).sum();
        let all = s.cases().len() * s.ccs.len();
        assert_eq!((all, n), (378, 219));
        assert!(judged.iter().all(|c| !c.ccs.iter().any(|x| x == "bbr")));
        // Every pair with its own made-up numbers (distinct per pair, so a
        // mixed-up lookup shows).
        let mut runs = Vec::new();
        for (i, case) in s.cases().iter().enumerate() {
            for (j, cc) in s.ccs.iter().enumerate() {
                let x = (i * 7 + j * 3) as f64;
                runs.push(RunSummary {
                    case: case.label.clone(),
                    cc: cc.clone(),
                    goodput_mbit: 10.0 + x,
                    utilisation: 0.5 + (x % 10.0) / 20.0,
                    retransmits: (x * 11.0) as u32,
                    retrans_per_seg: x / 1e4,
                    retrans_warm: Some(x as u32),
                    retrans_per_seg_warm: Some(x / 2e4),
                    rtt_p95_ms: case.rtt_ms + x,
                    rtt_base_ms: case.rtt_ms,
                    recovery_share: (x % 5.0) / 10.0,
                    ..Default::default()
                });
            }
        }
        let kept: Vec<RunSummary> = runs
            .iter()
            .filter(|r| {
                judged
                    .iter()
                    .any(|c| c.case == r.case && c.ccs.contains(&r.cc))
            })
            .cloned()
            .collect();
        assert_eq!(kept.len(), 219);
        let key = |o: &CheckOutcome| {
            format!(
                "{} {} {} {} {} {} {}",
                o.case, o.cc, o.against, o.metric, o.value, o.reference, o.pass
            )
        };
        let a: Vec<String> = s.evaluate(&runs).iter().map(key).collect();
        let b: Vec<String> = s.evaluate(&kept).iter().map(key).collect();
        assert!(!a.is_empty() && a.iter().any(|k| k.ends_with("false")));
        assert_eq!(a, b);
        // The quick variant's cells are all judged already.
        let q = s.quick();
        let qn: usize = q.judged_cells().iter().map(|c| c.ccs.len()).sum();
        let qall: usize = q.cells.iter().map(|c| c.ccs.len()).sum();
        assert_eq!(qn, qall);
        // A cell keeps its own duration.
        assert!(q
            .judged_cells()
            .iter()
            .any(|c| c.case == "100M_190ms_1bdp_loss1e-4" && c.duration_s == Some(40.0)));
    }

    /// One run each is a point comparison; a confirmed comparison is judged
    /// per repetition (`Paired`): two copies of one law whose runs scatter
    /// (the 100M/80ms/BDP8 cell's slow-start exits) pass although the mean
    /// of three is 0.91x, and a controller below the bound in every
    /// repetition fails.
    #[test]
    fn a_confirmed_comparison_fails_only_when_its_runs_show_it() {
        let s = scenario(
            r#"["ctcp_plus", "reno"]"#,
            1,
            r#"[grid]
rate_mbit = 100
rtt_ms = [80]
buffer_bdp = [0.125]
[quick]
[[checks]]
cc = "ctcp_plus"
against = "reno"
goodput_ratio_min = 0.95
retrans_ratio_max = 2.0
retrans_slack = 20
confirm_reps = 3
why = "no harm"
[[checks]]
cc = "ctcp_plus"
utilisation_min = 0.5
confirm_reps = 3
why = "absolute"
"#,
        );
        let case = s.cases()[0].label.clone();
        let run = |cc: &str, rep: u32, g: f64| RunSummary {
            case: case.clone(),
            cc: cc.into(),
            rep,
            goodput_mbit: g,
            utilisation: g / 100.0,
            retransmits: 160,
            ..Default::default()
        };
        // One run each: 66 against 70 is 0.94x, a miss to confirm; 67 passes.
        let o = s.evaluate(&[run("ctcp_plus", 0, 66.0), run("reno", 0, 70.0)]);
        assert_eq!(o.len(), 3);
        assert!(!o[0].pass && o[0].runs == 1 && o[0].confirm_reps == 3);
        assert!(o[0].paired.is_none());
        let o = s.evaluate(&[run("ctcp_plus", 0, 67.0), run("reno", 0, 70.0)]);
        assert!(o[0].pass);
        // An absolute floor of a check without `against` is confirmed too,
        // on the mean of the CC's runs (a share against one reno: a Reno
        // pair's split in one 40-s run is the luck of its first losses).
        let o = s.evaluate(&[run("ctcp_plus", 0, 40.0), run("reno", 0, 70.0)]);
        assert!(!o[2].pass && o[2].confirm_reps == 3 && o[2].metric == "utilisation");
        let o = s.evaluate(&[
            run("ctcp_plus", 0, 40.0),
            run("ctcp_plus", 1, 70.0),
            run("ctcp_plus", 2, 60.0),
        ]);
        let u = o.iter().find(|o| o.metric == "utilisation").unwrap();
        assert!(
            u.pass && u.runs == 3 && (u.value - 0.5667).abs() < 1e-3,
            "{u:?}"
        );
        let o = s.evaluate(&[
            run("ctcp_plus", 0, 40.0),
            run("ctcp_plus", 1, 50.0),
            run("ctcp_plus", 2, 55.0),
        ]);
        assert!(!o.iter().find(|o| o.metric == "utilisation").unwrap().pass);
        let judge = |a: [f64; 3], b: [f64; 3]| {
            let mut runs = Vec::new();
            for i in 0..3 {
                runs.push(run("ctcp_plus", i as u32, a[i]));
                runs.push(run("reno", i as u32, b[i]));
            }
            s.evaluate(&runs).remove(0)
        };
        // Scatter: the means are 0.907x, the margins -23.4, +23.6, -8.5.
        let o = judge([45.0, 72.0, 58.0], [72.0, 51.0, 70.0]);
        let p = o.paired.expect("three repetitions of each are paired");
        assert_eq!((p.n, o.runs), (3, 3));
        assert!(o.value < 0.95 * o.reference, "{o:?}");
        assert!(
            (p.margin - (175.0 - 0.95 * 193.0) / 3.0).abs() < 1e-9,
            "{p:?}"
        );
        assert!(p.margin < 0.0 && p.upper > 0.0 && o.pass, "{o:?}");
        // Consistent harm: 0.58x in every repetition.
        let o = judge([40.0, 42.0, 41.0], [70.0, 71.0, 72.0]);
        assert!(!o.pass && o.paired.unwrap().upper < 0.0, "{o:?}");
        // Only repetitions run by both are paired: reno's extra ones count
        // in its mean, not in the test.
        let mut runs = vec![run("ctcp_plus", 0, 40.0), run("ctcp_plus", 1, 41.0)];
        runs.extend((0..5).map(|i| run("reno", i, 70.0)));
        let o = s.evaluate(&runs);
        assert_eq!((o[0].paired.unwrap().n, o[0].runs), (2, 2));
        assert!(!o[0].pass);
        // The retransmission comparison uses the same test: margins
        // 2 x 160 + 20 - 160.
        assert_eq!(o[1].metric, "retransmits");
        assert!(o[1].pass && (o[1].paired.unwrap().margin - 180.0).abs() < 1e-9);
        // the tables' values (three decimals); above 30 df the quantile
        // keeps falling toward the normal's 1.645, not at it
        for (df, t) in [(1, 6.314), (2, 2.920), (8, 1.860), (30, 1.697), (60, 1.671)] {
            assert!((t95(df) - t).abs() < 5e-4, "t95({df}) = {}", t95(df));
        }
        assert!(t95(100) > 1.645 && t95(100) < t95(60));
        assert_eq!(t95(0), f64::INFINITY);
    }

    /// Every checked controller gets a window bound in every case a check
    /// reads it, judged on the largest window of any of its runs: the run
    /// that showed 1,896,535,746 segments fails however its goodput read.
    #[test]
    fn a_wild_window_fails_the_check() {
        let s = scenario(
            r#"["ctcp_plus", "reno"]"#,
            1,
            r#"[grid]
rate_mbit = 20
rtt_ms = [10]
buffer_bdp = [0.125]
[quick]
[[checks]]
cc = "ctcp_plus"
against = "reno"
goodput_ratio_min = 0.95
why = "no harm"
[[checks]]
cc = "ctcp_plus"
utilisation_min = 0.1
why = "absolute"
"#,
        );
        let case = s.cases()[0].label.clone();
        let run = |cc: &str, rep: u32, w: u32| RunSummary {
            case: case.clone(),
            cc: cc.into(),
            rep,
            goodput_mbit: 4.0,
            utilisation: 0.2,
            cwnd_max: Some(w),
            ..Default::default()
        };
        // 20 Mbit/s, 10 ms: a BDP of 16.7 packets, a 2-packet buffer.
        assert_eq!(crate::summary::window_bound(18.7), 1000);
        assert_eq!(crate::summary::window_bound(3_333.0), 53_328);
        let judge = |w: [u32; 2]| {
            let runs = [
                run("ctcp_plus", 0, w[0]),
                run("ctcp_plus", 1, w[1]),
                run("reno", 0, 20),
            ];
            let o = s.evaluate(&runs);
            // one window row for ctcp_plus (two checks name it), none for reno
            let rows: Vec<_> = o.into_iter().filter(|o| o.metric == "cwnd_max").collect();
            assert_eq!(rows.len(), 1, "{rows:?}");
            assert_eq!((rows[0].cc.as_str(), rows[0].runs), ("ctcp_plus", 2));
            rows[0].clone()
        };
        let o = judge([21, 1_896_535_746]);
        assert!(!o.pass && o.value == 1_896_535_746.0, "{o:?}");
        assert_eq!(o.confirm_reps, 0, "a wild window is not measured away");
        assert!(judge([21, 18]).pass);
        assert!(judge([1000, 18]).pass && !judge([1001, 18]).pass);
    }

    /// With `retrans_after_warmup` the comparison reads the counts after
    /// the warm-up: reno's slow start cut short by a random loss (2 in all)
    /// against an overshoot (3,143, of which 3 after it) no longer decides
    /// it; a run without the count fails rather than passing unjudged.
    #[test]
    fn retransmissions_can_be_compared_after_the_warmup() {
        let text = |warm: bool| {
            scenario(
                r#"["ub_reno", "reno"]"#,
                1,
                &format!(
                    "[grid]\nrate_mbit = 100\nrtt_ms = [190]\nbuffer_bdp = [1]\n[quick]\n\
                     [[checks]]\ncc = \"ub_reno\"\nagainst = \"reno\"\n\
                     retrans_ratio_max = 2.0\nretrans_slack = 20\n\
                     retrans_per_seg_ratio_max = 2.0\nretrans_per_seg_slack = 0.0001\n\
                     retrans_after_warmup = {warm}\nwhy = \"no harm\"\n"
                ),
            )
        };
        let case = text(false).cases()[0].label.clone();
        let run = |cc: &str, all: u32, warm: Option<u32>| RunSummary {
            case: case.clone(),
            cc: cc.into(),
            retransmits: all,
            retrans_per_seg: all as f64 / 100_000.0,
            retrans_warm: warm,
            retrans_per_seg_warm: warm.map(|w| w as f64 / 90_000.0),
            ..Default::default()
        };
        let runs = [run("ub_reno", 3_143, Some(3)), run("reno", 2, Some(1))];
        let whole = text(false).evaluate(&runs);
        assert_eq!(whole.len(), 2);
        assert!(whole.iter().all(|o| !o.pass), "{whole:?}");
        assert_eq!(whole[0].metric, "retransmits");
        let warm = text(true).evaluate(&runs);
        assert!(warm.iter().all(|o| o.pass), "{warm:?}");
        assert_eq!(
            (warm[0].metric, warm[0].value, warm[0].reference),
            ("retransmits_after_warmup", 3.0, 1.0)
        );
        assert_eq!(warm[1].metric, "retrans_per_seg_after_warmup");
        // more than twice reno's after the warm-up still fails
        let worse = [run("ub_reno", 3_200, Some(60)), run("reno", 2, Some(1))];
        assert!(text(true).evaluate(&worse).iter().all(|o| !o.pass));
        // a run with no count after the warm-up is not passed
        let missing = [run("ub_reno", 3, None), run("reno", 2, Some(1))];
        let o = text(true).evaluate(&missing);
        assert!(o.iter().all(|o| !o.pass && o.value.is_nan()), "{o:?}");
    }

    /// `[[mixes]]`: each flow set is a case of its own (`..._<name>`) with its
    /// flows; the sharing checks read the runs' per-flow goodput and
    /// retransmissions: Jain over 1-s bins, one controller's share of the
    /// link (absolute, or against the same mix's reference run), and its
    /// retransmissions against its competitor's in the same run.
    #[test]
    fn mixes_are_cases_and_sharing_is_checked_per_run() {
        use crate::summary::FlowSummary;
        let s = scenario(
            r#"["ccpd", "hetcp", "reno"]"#,
            1,
            "[grid]\nrate_mbit = 100\nrtt_ms = [40]\nbuffer_bdp = [1]\n[quick]\n\
             [[mixes]]\nname = \"x2\"\nflows = [{ cc = \"$cc\" }, { cc = \"$cc\" }]\n\
             [[mixes]]\nname = \"vs_cubic\"\nflows = [{ cc = \"$cc\" }, { cc = \"cubic\" }]\n\
             [[checks]]\ncc = \"ccpd\"\nmix = [\"x2\"]\njain_min = 0.95\njain_bins_min = 0.9\nwhy = \"fair\"\n\
             [[checks]]\ncc = \"ccpd\"\nmix = [\"vs_cubic\"]\nshare_min = 0.4\n\
             peer_retrans_ratio_max = 2.0\nretrans_slack = 50\nwhy = \"share\"\n\
             [[checks]]\ncc = \"hetcp\"\nagainst = \"reno\"\nmix = [\"vs_cubic\"]\n\
             share_ratio_min = 0.95\nwhy = \"as reno\"\n",
        );
        s.validate().unwrap();
        let cases = s.cases();
        let labels: Vec<&str> = cases.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["40ms_1bdp_x2", "40ms_1bdp_vs_cubic"]);
        assert_eq!(cases[1].flows[1].cc, "cubic");
        let flow = |cc: &str, g: f64, retx: u32| FlowSummary {
            cc: cc.into(),
            goodput_mbit: g,
            retransmits: retx,
            ..Default::default()
        };
        let run = |case: &str, cc: &str, jain: f64, flows: Vec<FlowSummary>| RunSummary {
            case: case.into(),
            cc: cc.into(),
            goodput_mbit: flows.iter().map(|f| f.goodput_mbit).sum(),
            utilisation: flows.iter().map(|f| f.goodput_mbit).sum::<f64>() / 96.5,
            jain,
            jain_bins: jain - 0.05,
            flows,
            ..Default::default()
        };
        let judge = |runs: &[RunSummary]| -> Vec<(&'static str, bool)> {
            s.evaluate(runs)
                .iter()
                .map(|o| (o.metric, o.pass))
                .collect()
        };
        // The same four runs each time: two ccpd flows, ccpd and hetcp
        // against cubic, and reno against cubic (hetcp's reference).
        let runs = |jain: f64, x2: [f64; 2], vs: [(f64, u32); 2], hetcp: f64| {
            [
                run(
                    "40ms_1bdp_x2",
                    "ccpd",
                    jain,
                    vec![flow("ccpd", x2[0], 0), flow("ccpd", x2[1], 0)],
                ),
                run(
                    "40ms_1bdp_vs_cubic",
                    "ccpd",
                    jain,
                    vec![
                        flow("ccpd", vs[0].0, vs[0].1),
                        flow("cubic", vs[1].0, vs[1].1),
                    ],
                ),
                run(
                    "40ms_1bdp_vs_cubic",
                    "hetcp",
                    0.9,
                    vec![flow("hetcp", hetcp, 0), flow("cubic", 96.0 - hetcp, 0)],
                ),
                run(
                    "40ms_1bdp_vs_cubic",
                    "reno",
                    0.9,
                    vec![flow("reno", 34.7, 0), flow("cubic", 61.5, 0)],
                ),
            ]
        };
        // the starving pair and the flow that yields to cubic fail ...
        let bad = runs(0.51, [94.7, 1.4], [(1.2, 300), (94.9, 40)], 30.0);
        let o = judge(&bad);
        assert!(o.contains(&("jain", false)), "{o:?}");
        assert!(o.contains(&("jain_bins", false)), "{o:?}");
        assert!(o.contains(&("share", false)), "{o:?}");
        assert!(o.contains(&("retransmits_vs_peers", false)), "{o:?}");
        assert_eq!(o.iter().filter(|(m, _)| *m == "share").count(), 2, "{o:?}");
        // ... a fair pair and a fair share pass
        let good = runs(0.99, [47.0, 46.0], [(44.9, 130), (49.0, 41)], 34.0);
        let o = judge(&good);
        assert!(
            o.iter().filter(|(m, _)| *m != "cwnd_max").all(|(_, p)| *p),
            "{o:?}"
        );
        assert!((good[1].share_of_flows(|i| i == 0) - 44.9 / 96.5).abs() < 1e-9);
    }

    /// Flows with RTTs of their own: the delay line's base is the shortest
    /// RTT, a class per longer one adds half the difference each way, and
    /// `long_rtt_share_ratio_min` compares the longest-RTT flows' fraction
    /// of the goodput with the reference CC's in the same case.
    #[test]
    fn flows_with_their_own_rtt_get_delay_classes_and_a_long_rtt_check() {
        use crate::summary::FlowSummary;
        let s = scenario(
            r#"["ccpd", "cubic"]"#,
            1,
            "[grid]\nrate_mbit = 100\nrtt_ms = [40]\nbuffer_bdp = [1]\n[quick]\n\
             [[mixes]]\nname = \"rtt\"\nflows = [{ cc = \"$cc\", rtt_ms = 20 }, \
             { cc = \"$cc\", rtt_ms = 80 }, { cc = \"$cc\" }]\n\
             [[checks]]\ncc = \"ccpd\"\nagainst = \"cubic\"\nmix = [\"rtt\"]\n\
             long_rtt_share_ratio_min = 1.0\nwhy = \"rtt\"\n",
        );
        s.validate().unwrap();
        let case = &s.cases()[0];
        // base 20 ms (10 each way); 80 ms is class 1 (+30), 40 ms class 2 (+10)
        assert_eq!(case.link.delay_ms, 10.0);
        assert_eq!(case.link.extra_delay_ms, [30.0, 10.0]);
        let f = &case.flows;
        let classes: Vec<usize> = f.iter().map(|x| delay_class(f, x, 40.0)).collect();
        assert_eq!(classes, [0, 1, 2]);
        // the buffer is the case's RTT's BDP (333 packets at 40 ms)
        assert_eq!(case.link.buffer_pkts, 333);
        let run = |cc: &str, g: [f64; 3]| RunSummary {
            case: case.label.clone(),
            cc: cc.into(),
            flows: [20.0, 80.0, 40.0]
                .iter()
                .zip(g)
                .map(|(&r, g)| FlowSummary {
                    cc: cc.into(),
                    goodput_mbit: g,
                    path_rtt_ms: Some(r),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let judge = |a: [f64; 3]| {
            let runs = [run("ccpd", a), run("cubic", [60.0, 10.0, 26.0])];
            let o = s.evaluate(&runs);
            let o: Vec<_> = o.iter().filter(|o| o.metric == "long_rtt_share").collect();
            assert_eq!(o.len(), 1);
            (o[0].value, o[0].pass)
        };
        // cubic's 80-ms flow keeps 10 of 96; ccpd's 20 of 96 passes ...
        let (v, pass) = judge([40.0, 20.0, 36.0]);
        assert!(pass && (v - 20.0 / 96.0).abs() < 1e-9, "{v}");
        // ... and 5 of 96 fails
        assert!(!judge([60.0, 5.0, 31.0]).1);
        // without own RTTs there is nothing to judge
        let mut r = run("ccpd", [1.0, 1.0, 1.0]);
        r.flows.iter_mut().for_each(|f| f.path_rtt_ms = None);
        assert_eq!(r.long_rtt_share(), None);
    }

    /// `late_fair_ratio_max` holds the late flow's time to its share to the
    /// reference CC's in the same case, plus `late_fair_slack_s`; a late
    /// flow that never gets its share fails.
    #[test]
    fn a_late_joiner_is_held_to_the_reference_ccs() {
        let s = scenario(
            r#"["ub_reno", "reno"]"#,
            1,
            "[grid]\nrate_mbit = 100\nrtt_ms = [40]\nbuffer_bdp = [0.5]\n[quick]\n\
             [[mixes]]\nname = \"late\"\nflows = [{ cc = \"$cc\" }, \
             { cc = \"$cc\", start_s = 5 }]\n\
             [[checks]]\ncc = \"ub_reno\"\nagainst = \"reno\"\nmix = [\"late\"]\n\
             late_fair_ratio_max = 1.0\nlate_fair_slack_s = 2\nwhy = \"as reno\"\n",
        );
        s.validate().unwrap();
        let label = s.cases()[0].label.clone();
        let run = |cc: &str, rep: u32, late: Option<f64>| RunSummary {
            case: label.clone(),
            cc: cc.into(),
            rep,
            late_fair_s: late,
            ..Default::default()
        };
        let judge = |runs: &[RunSummary]| {
            let o = s.evaluate(runs);
            assert_eq!(o.len(), 1, "{o:?}");
            assert_eq!(o[0].metric, "late_fair_s");
            (o[0].value, o[0].pass)
        };
        // reno's late flow took 12 s: 13 s passes, 15 s does not
        assert_eq!(
            judge(&[run("ub_reno", 0, Some(13.0)), run("reno", 0, Some(12.0))]),
            (13.0, true)
        );
        assert!(!judge(&[run("ub_reno", 0, Some(15.0)), run("reno", 0, Some(12.0))]).1);
        // never fair: fails
        assert!(!judge(&[run("ub_reno", 0, None), run("reno", 0, Some(12.0))]).1);
        // on repetitions, the paired test: 0/0, 11/10, 13/12 s pass
        let reps = [
            run("ub_reno", 0, Some(0.0)),
            run("reno", 0, Some(0.0)),
            run("ub_reno", 1, Some(11.0)),
            run("reno", 1, Some(10.0)),
            run("ub_reno", 2, Some(13.0)),
            run("reno", 2, Some(12.0)),
        ];
        assert!(judge(&reps).1);
    }

    /// A loss-based law held to reno's sharing in the same case: Jain of
    /// its N flows against N reno flows', and its share against one reno
    /// against what the first of two reno flows keeps (the mix's `$cc`
    /// flow, not every flow named reno), on repetitions by the paired test.
    #[test]
    fn a_loss_based_law_is_held_to_renos_sharing_in_the_same_case() {
        use crate::summary::FlowSummary;
        let s = scenario(
            r#"["ub_reno", "reno"]"#,
            1,
            "[grid]\nrate_mbit = 100\nrtt_ms = [40]\nbuffer_bdp = [1]\n[quick]\n\
             [[mixes]]\nname = \"x2\"\nflows = [{ cc = \"$cc\" }, { cc = \"$cc\" }]\n\
             [[mixes]]\nname = \"vs_reno\"\nflows = [{ cc = \"$cc\" }, { cc = \"reno\" }]\n\
             [[checks]]\ncc = \"ub_reno\"\nagainst = \"reno\"\nmix = [\"x2\"]\n\
             jain_ratio_min = 0.97\nconfirm_reps = 3\nwhy = \"as reno\"\n\
             [[checks]]\ncc = \"ub_reno\"\nagainst = \"reno\"\nmix = [\"vs_reno\"]\n\
             share_ratio_min = 0.9\nconfirm_reps = 3\nwhy = \"as reno\"\n",
        );
        s.validate().unwrap();
        assert_eq!(s.cases()[1].under_test(), [true, false]);
        let run = |case: &str, cc: &str, rep: u32, jain: f64, g: [f64; 2]| RunSummary {
            case: format!("40ms_1bdp_{case}"),
            cc: cc.into(),
            rep,
            goodput_mbit: g[0] + g[1],
            utilisation: (g[0] + g[1]) / 96.5,
            jain,
            flows: g
                .iter()
                .enumerate()
                .map(|(i, &g)| FlowSummary {
                    flow: i,
                    cc: if case == "vs_reno" && i == 1 {
                        "reno"
                    } else {
                        cc
                    }
                    .into(),
                    goodput_mbit: g,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let judge = |runs: &[RunSummary], metric: &str| -> (f64, f64, bool) {
            let o = s.evaluate(runs);
            let o: Vec<_> = o.iter().filter(|o| o.metric == metric).collect();
            assert_eq!(o.len(), 1, "{o:?}");
            (o[0].value, o[0].reference, o[0].pass)
        };
        // reno's first flow kept 40 of 96.5 (every flow of that run is
        // reno's): 38 passes at 0.9x, 30 does not
        let reno = run("vs_reno", "reno", 0, 0.98, [40.0, 56.0]);
        let (v, refr, pass) = judge(
            &[
                run("vs_reno", "ub_reno", 0, 0.9, [38.0, 58.0]),
                reno.clone(),
            ],
            "share",
        );
        assert!(pass && (refr - 40.0 / 96.5).abs() < 1e-9 && (v - 38.0 / 96.5).abs() < 1e-9);
        assert!(
            !judge(
                &[run("vs_reno", "ub_reno", 0, 0.9, [30.0, 66.0]), reno],
                "share"
            )
            .2
        );
        // Jain 0.93 beside reno's 0.95 passes at 0.97x; 0.85 does not
        let x2 = |cc: &str, rep: u32, j: f64| run("x2", cc, rep, j, [48.0, 48.0]);
        assert!(judge(&[x2("ub_reno", 0, 0.93), x2("reno", 0, 0.95)], "jain").2);
        assert!(!judge(&[x2("ub_reno", 0, 0.85), x2("reno", 0, 0.95)], "jain").2);
        // on repetitions: a split that scatters as reno's passes, one
        // below reno's in every repetition fails
        let reps = |mine: [f64; 3], theirs: [f64; 3]| -> Vec<RunSummary> {
            (0..3)
                .flat_map(|i| {
                    [
                        x2("ub_reno", i, mine[i as usize]),
                        x2("reno", i, theirs[i as usize]),
                    ]
                })
                .collect()
        };
        assert!(judge(&reps([0.93, 0.99, 0.96], [0.98, 0.95, 0.99]), "jain").2);
        assert!(!judge(&reps([0.80, 0.82, 0.81], [0.98, 0.97, 0.99]), "jain").2);
    }

    #[test]
    fn a_case_can_ask_for_more_confirming_runs() {
        let s = scenario(
            r#"["ub_reno", "reno"]"#,
            1,
            r#"[grid]
rate_mbit = 20
rates_mbit = [20, 100]
rtt_ms = [10]
buffer_bdp = [0.125]
[quick]
[[checks]]
cc = "ub_reno"
against = "reno"
goodput_ratio_min = 0.95
confirm_reps = 3
confirm_reps_in = [{ rate_mbit = [20], buffer_bdp = [0.125], confirm_reps = 9 }]
why = "no harm"
"#,
        );
        let runs: Vec<RunSummary> = s
            .cases()
            .iter()
            .flat_map(|c| {
                [("ub_reno", 3.4), ("reno", 3.7)].map(|(cc, g)| RunSummary {
                    case: c.label.clone(),
                    cc: cc.into(),
                    goodput_mbit: g,
                    ..Default::default()
                })
            })
            .collect();
        let o = s.evaluate(&runs);
        let reps: Vec<(&str, u32)> = o.iter().map(|o| (&o.case[..4], o.confirm_reps)).collect();
        // The 20-Mbit/s case matches the entry; the 100-Mbit/s one keeps
        // the check's own three.
        assert_eq!(reps, [("20M_", 9), ("100M", 3)], "{o:?}");
        assert!(o.iter().all(|o| !o.pass));
    }
}
