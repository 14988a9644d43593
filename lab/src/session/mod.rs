//! A whole scenario: attach what it needs, run every (case, cc, rep),
//! write samples/summary/plots/report, and for `lab check` enforce its
//! thresholds.  `cargo xtask lab` is a thin front end to this module.
//!
//! - this file: the run loop ([`run`], [`run_or_resume`]);
//! - `scenarios`: which file a scenario's name means, `lab list`, dry runs;
//! - `kernel`: our controllers attached and tuned through the CLI;
//! - `measure`: one run, made again while the host was measured;
//! - `output`: the results directory, progress, runs.jsonl, the report;
//! - `check`: `lab check`'s verdicts, re-measuring and confirmations;
//! - `explain`: where a failing retransmission threshold's losses came from.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use anyhow::{bail, Context, Result};
use ccload_testbed::{ccload_run as ccload, privileged_skip_reason};

use crate::plot::plots;
use crate::report::report;
use crate::run::{run_case, STOP};
use crate::scenario::{parse_cc, Scenario, KERNEL_CCS};
use crate::summary::{aggregate, RunResult, RunSummary};

mod check;
mod explain;
mod kernel;
mod measure;
mod output;
mod scenarios;
#[cfg(test)]
mod tests;

use explain::*;
use measure::*;
use output::*;

pub use check::check;
pub(crate) use kernel::KernelState;
pub use scenarios::{dry_run, list, scenario_path, scenarios_dir};

pub fn run(
    root: &Path,
    name: &str,
    quick: bool,
    out: Option<PathBuf>,
) -> Result<(PathBuf, Scenario, Vec<RunSummary>)> {
    run_or_resume(root, name, quick, out, None)
}

/// `lab run`, or with `resume = Some(DIR)` the rest of an interrupted run
/// into DIR: the runs DIR finished (runs.jsonl) are kept with their samples
/// and skipped; a half-written run is dropped and made again.
pub fn run_or_resume(
    root: &Path,
    name: &str,
    quick: bool,
    out: Option<PathBuf>,
    resume: Option<PathBuf>,
) -> Result<(PathBuf, Scenario, Vec<RunSummary>)> {
    let s = run_with(root, name, quick, out, resume, Remeasure::Invalid, None)?;
    if s.interrupted {
        bail!("interrupted; partial results in {}", s.dir.display());
    }
    Ok((s.dir, s.scenario, s.runs))
}

/// What one session of runs left: its directory, the scenario as run, the
/// finished runs, and whether Ctrl-C stopped it before the last one.
struct Session {
    dir: PathBuf,
    scenario: Scenario,
    runs: Vec<RunSummary>,
    /// Runs the scenario asks for (all repetitions).
    planned: usize,
    interrupted: bool,
}

/// The session behind `lab run` and `lab check`: each run measured again
/// as `remeasure` says, and `only`, when given, in place of the scenario's
/// cells (a re-measurement; each cell's `repetitions`, else the
/// scenario's).
fn run_with(
    root: &Path,
    name: &str,
    quick: bool,
    out: Option<PathBuf>,
    resume: Option<PathBuf>,
    remeasure: Remeasure,
    only: Option<Vec<crate::scenario::Cell>>,
) -> Result<Session> {
    let path = scenario_path(root, name)?;
    let full = Scenario::load(&path)?;
    let mut sc = if quick { full.quick() } else { full };
    if let Some(cells) = only {
        sc.cells = cells;
    }
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    if let Some(why) = privileged_skip_reason() {
        bail!("the lab needs root, BTF and bpffs: {why}");
    }
    let dir = results_dir(root, &path, &stem, quick, out, resume.as_deref())?;
    let _ = ctrlc::set_handler(|| {
        eprintln!(
            "\nlab: stopping (Ctrl-C); the run in progress is not kept, --resume makes it again"
        );
        STOP.store(true, Ordering::SeqCst);
    });
    let kstate = KernelState::prepare(&sc.ccs)?;
    let cases = sc.cases();
    // Each cell's runs per CC (a confirmation asks each for its own).
    let total: usize = cases
        .iter()
        .map(|c| {
            sc.ccs.iter().filter(|cc| sc.wants(&c.label, cc)).count()
                * sc.reps_for(&c.label) as usize
        })
        .sum();
    let max_reps = cases
        .iter()
        .map(|c| sc.reps_for(&c.label))
        .max()
        .unwrap_or(0);
    let bar = progress_bar(total);
    // Finished runs of an interrupted session: kept, their CSV rows
    // rewritten without the half-written run's, then appended to.
    let mut results: Vec<RunResult> = match &resume {
        Some(d) => crate::stored::load_finished(d, sc.warmup_s)?,
        None => Vec::new(),
    };
    let done: std::collections::HashSet<(String, String, u32)> = results
        .iter()
        .map(|r| (r.summary.case.clone(), r.summary.cc.clone(), r.summary.rep))
        .collect();
    if resume.is_some() {
        println!(
            "resuming {}: {} run(s) already done",
            dir.display(),
            done.len()
        );
    }
    let mut log = RunLog::create(&dir, &results)?;
    let budget = remeasure_budget(quick, remeasure, total);
    let mut measure = Measure {
        dir: &dir,
        bar: &bar,
        remeasure,
        remeasured: 0,
        budget,
    };
    let mut k = done.len();
    'outer: for rep in 0..max_reps {
        for case in cases.iter().filter(|c| rep < sc.reps_for(&c.label)) {
            for cc in sc.ccs.iter().filter(|cc| sc.wants(&case.label, cc)) {
                if STOP.load(Ordering::Relaxed) {
                    break 'outer;
                }
                if done.contains(&(case.label.clone(), cc.clone(), rep)) {
                    continue;
                }
                bar.set_message(format!("{} {cc} rep {}", case.label, rep + 1));
                let r = measure.run(&sc, case, cc, rep, (k * 1000) as u64)?;
                // A run that Ctrl-C cut short measured part of its duration
                // (a 40-s run ended at 5.5 s read 19.1 Mbit/s and 68
                // retransmissions, and was kept as finished): not kept.
                if STOP.load(Ordering::Relaxed) {
                    break 'outer;
                }
                say(&bar, run_line(&r.summary));
                log.append(&r)?;
                results.push(r);
                k += 1;
            }
        }
    }
    bar.finish_and_clear();
    drop(kstate);
    if measure.remeasured > 0 {
        println!(
            "{} run(s) made again after an invalid delay line",
            measure.remeasured
        );
    }
    log.finish()?;
    let runs = write_outputs(&dir, &stem, &sc, quick, &results)?;
    let interrupted = STOP.load(Ordering::Relaxed);
    if !interrupted {
        println!("results in {}", dir.display());
    }
    Ok(Session {
        dir,
        scenario: sc,
        runs,
        planned: total,
        interrupted,
    })
}
