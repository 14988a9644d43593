//! `lab check`: the scenario's thresholds judged on its runs, the invalid
//! or stalled runs behind a failure measured again (`again/`), failing
//! comparisons confirmed on more runs (`confirm/`), and the report's notes.

use super::*;

/// `lab check`: run the scenario, evaluate its `[[checks]]`, print every
/// threshold with the failing ones marked, append them to report.md and
/// checks.json, and fail when any threshold fails.  With `resume`, the
/// rest of an interrupted check into that directory (the full acceptance
/// grid takes longer than one sitting).  A check stopped by Ctrl-C judges
/// the runs it finished, says how many are missing, and fails: a partial
/// grid is never a pass.  It measures only the runs a threshold reads
/// ([`Scenario::judged_cells`]) unless `all_runs`.
pub fn check(
    root: &Path,
    name: &str,
    quick: bool,
    out: Option<PathBuf>,
    resume: Option<PathBuf>,
    all_runs: bool,
) -> Result<()> {
    let also = Scenario::load(&scenario_path(root, name)?)?.also;
    let (dir, mine) = check_one(root, name, quick, out, resume, all_runs)?;
    let mut failed: Vec<String> = Vec::new();
    if let Err(e) = mine {
        failed.push(format!("{name}: {e:#}"));
    }
    for other in &also {
        if STOP.load(Ordering::Relaxed) {
            break;
        }
        println!("\n{name}: also {other} (in {})", dir.join(other).display());
        let (out, resume) = sub_dir(&dir, other);
        if let Err(e) = check_one(root, other, quick, out, resume, all_runs)?.1 {
            failed.push(format!("{other}: {e:#}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("{}", failed.join("; "))
    }
}

/// `check` of one scenario: its results directory, and whether its
/// thresholds held (an error here is one that stops the check).
pub(super) fn check_one(
    root: &Path,
    name: &str,
    quick: bool,
    out: Option<PathBuf>,
    resume: Option<PathBuf>,
    all_runs: bool,
) -> Result<(PathBuf, Result<()>)> {
    let only = if all_runs {
        None
    } else {
        Some(judged_cells(root, name, quick)?)
    };
    // Every run once: on a host whose scheduling is always late (a busy
    // VM) re-measuring everything only doubles the time.
    let Session {
        dir,
        scenario: sc,
        mut runs,
        mut planned,
        mut interrupted,
    } = run_with(root, name, quick, out, resume, Remeasure::Never, only)?;
    anyhow::ensure!(
        !sc.checks.is_empty(),
        "{name}: the scenario has no [[checks]]"
    );
    let mut outcomes = sc.evaluate(&runs);
    anyhow::ensure!(
        interrupted || !outcomes.is_empty(),
        "{name}: no check matched a case that ran"
    );
    // Not in an interrupted check: its resumption measures them once the
    // grid is whole.
    let ctx = CheckCtx {
        root,
        name,
        quick,
        dir: &dir,
        sc: &sc,
    };
    if !interrupted {
        interrupted = ctx.measure_suspects_again(&mut runs, &outcomes)?;
        outcomes = sc.evaluate(&runs);
    }
    if !interrupted {
        let (more, stopped) = ctx.confirm_failing(&mut runs, &outcomes)?;
        planned += more;
        interrupted = stopped;
        outcomes = sc.evaluate(&runs);
    }
    let resume_cmd = format!(
        "cargo xtask lab check {name}{} --resume {}",
        if quick { " --quick" } else { "" },
        dir.display()
    );
    let verdict = judge(
        &dir,
        &runs,
        &outcomes,
        planned,
        interrupted.then_some(&resume_cmd),
    );
    Ok((dir, verdict))
}

/// The cells a check measures: only the (case, cc) pairs some threshold
/// reads ([`Scenario::judged_cells`]).
pub(super) fn judged_cells(
    root: &Path,
    name: &str,
    quick: bool,
) -> Result<Vec<crate::scenario::Cell>> {
    let full = Scenario::load(&scenario_path(root, name)?)?;
    let sc = if quick { full.quick() } else { full };
    let cells = sc.judged_cells();
    let n: usize = cells.iter().map(|c| c.ccs.len()).sum();
    let all: usize = sc
        .cases()
        .iter()
        .map(|c| sc.ccs.iter().filter(|cc| sc.wants(&c.label, cc)).count())
        .sum();
    if n < all {
        println!(
            "{name}: measuring the {n} of {all} (case, cc) pairs a threshold reads \
             (--all-runs: every one)"
        );
    }
    Ok(cells)
}

/// What a check's second and third steps measure with.
pub(super) struct CheckCtx<'a> {
    pub(super) root: &'a Path,
    pub(super) name: &'a str,
    pub(super) quick: bool,
    pub(super) dir: &'a Path,
    pub(super) sc: &'a Scenario,
}

impl CheckCtx<'_> {
    /// A failing threshold that rests on a run the delay line flagged
    /// (invalid, or a path stall: RunSummary::stalled): those runs once more
    /// (into `again/`), and of the two measurements of each the valid,
    /// unstalled, less late one stands (RunSummary::lateness_rank).
    /// Returns whether Ctrl-C stopped it.
    pub(super) fn measure_suspects_again(
        &self,
        runs: &mut [RunSummary],
        outcomes: &[crate::checks::CheckOutcome],
    ) -> Result<bool> {
        let again = suspect_cells(self.sc, outcomes, runs);
        if again.is_empty() {
            return Ok(false);
        }
        let n: usize = again.iter().map(|c| c.ccs.len()).sum();
        println!(
            "{n} run(s) behind failing thresholds had an invalid or stalled delay line: measuring them again"
        );
        let (out, resume) = sub_dir(self.dir, "again");
        let second = run_with(
            self.root,
            self.name,
            self.quick,
            out,
            resume,
            Remeasure::Never,
            Some(again),
        )?;
        for r2 in second.runs {
            if let Some(r) = runs
                .iter_mut()
                .find(|r| r.case == r2.case && r.cc == r2.cc && r.rep == r2.rep)
            {
                if r2.lateness_rank() < r.lateness_rank() {
                    *r = r2;
                }
            }
        }
        Ok(second.interrupted)
    }

    /// A comparison that fails on one run of each CC: confirmed on more
    /// (the check's confirm_reps, into `confirm/`), judged by the paired
    /// test on all of them (checks::Paired).  Returns the runs it planned
    /// and whether Ctrl-C stopped it.
    pub(super) fn confirm_failing(
        &self,
        runs: &mut Vec<RunSummary>,
        outcomes: &[crate::checks::CheckOutcome],
    ) -> Result<(usize, bool)> {
        let confirm = confirm_cells(self.sc, outcomes);
        if confirm.is_empty() {
            return Ok((0, false));
        }
        let extra = confirm.iter().map(|(_, n)| *n).max().unwrap_or(0);
        // The confirming runs are repetitions base.. of their case.
        let base = runs.iter().map(|r| r.rep + 1).max().unwrap_or(0);
        // Each cell as many more times as its own check asks.
        let cells: Vec<crate::scenario::Cell> = confirm
            .into_iter()
            .map(|(mut c, n)| {
                c.repetitions = Some(n as u32);
                c.rep_base = base;
                c
            })
            .collect();
        let n: usize = cells.iter().map(|c| c.ccs.len()).sum();
        let more_runs: usize = cells
            .iter()
            .map(|c| c.ccs.len() * c.repetitions.unwrap_or(0) as usize)
            .sum();
        println!(
            "{n} run(s) behind failing comparisons: measuring them again to confirm \
             ({more_runs} more runs, up to {extra} per CC and cell)"
        );
        // Each confirming run is measured again while its delay line is
        // late or its path stalled (the least late attempt stands): one
        // late run in a mean of three can fail a comparison that its valid
        // runs pass by a factor of several.  They are few.
        let (out, resume) = sub_dir(self.dir, "confirm");
        let more = run_with(
            self.root,
            self.name,
            self.quick,
            out,
            resume,
            Remeasure::InvalidOrStalled,
            Some(cells),
        )?;
        runs.extend(more.runs.into_iter().map(|mut r| {
            r.rep += base;
            r
        }));
        Ok((more.planned, more.interrupted))
    }
}

/// A check's sub-directory (`again/`, `confirm/`) as `run_with`'s (out,
/// resume): resumed when an earlier sitting was stopped in it (it has the
/// scenario file `run_with` copies there first), so `check --resume`
/// finishes a confirmation of the full grid's misses, which can take half an
/// hour, instead of starting it again.  Its finished runs are the same
/// cells' (what is confirmed follows from the grid's runs and the checks).
pub(super) fn sub_dir(dir: &Path, name: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let d = dir.join(name);
    if d.join("scenario.toml").exists() {
        (None, Some(d))
    } else {
        (Some(d), None)
    }
}

pub(super) fn mean_of(o: &crate::checks::CheckOutcome) -> String {
    match (o.runs, o.paired) {
        (0 | 1, _) => String::new(),
        // the window bound reads the largest of the runs (Scenario::evaluate)
        (n, None) if o.metric == crate::summary::WINDOW_METRIC => format!(" (largest of {n})"),
        (n, None) => format!(" (mean of {n})"),
        (n, Some(p)) => format!(
            " (mean of {n}; paired margin {:+.4}, 95 % upper bound {:+.4})",
            p.margin, p.upper
        ),
    }
}

/// The thresholds' table (printed, appended to report.md, and checks.json),
/// and the verdict: an error when one fails or, `interrupted` (then the
/// command that finishes it), when runs are missing.
pub(super) fn judge(
    dir: &Path,
    runs: &[RunSummary],
    outcomes: &[crate::checks::CheckOutcome],
    planned: usize,
    interrupted: Option<&str>,
) -> Result<()> {
    let invalid: Vec<&RunSummary> = runs.iter().filter(|r| !r.valid).collect();
    let stalled = runs.iter().filter(|r| r.valid && r.stalled()).count();
    let table = outcomes_table(outcomes);
    print!("{table}");
    let failed = outcomes.iter().filter(|o| !o.pass).count();
    let mut report = std::fs::read_to_string(dir.join("report.md")).unwrap_or_default();
    let _ = writeln!(report, "\n## Acceptance checks\n\n{table}");
    report += &report_notes(dir, runs.len(), &invalid, planned, interrupted);
    std::fs::write(dir.join("report.md"), report)?;
    std::fs::write(
        dir.join("checks.json"),
        serde_json::to_string_pretty(&outcomes)?,
    )?;
    println!(
        "checks: {} passed, {failed} failed ({} of {planned} runs, {} with an invalid delay line, \
         {stalled} valid with a path stall); report {}",
        outcomes.len() - failed,
        runs.len(),
        invalid.len(),
        dir.join("report.md").display()
    );
    // The failing lines once more, last: a CI log cut in the middle of the
    // table still shows which thresholds failed.
    for o in outcomes.iter().filter(|o| !o.pass) {
        println!(
            "FAILED: {} {} against {} {}: {:.4}{} (bound {})",
            o.case,
            o.cc,
            if o.against.is_empty() {
                "-"
            } else {
                &o.against
            },
            o.metric,
            o.value,
            mean_of(o),
            o.bound
        );
    }
    for o in outcomes
        .iter()
        .filter(|o| !o.pass && o.metric.contains("retrans"))
    {
        print!("{}", explain_retransmissions(dir, runs, &o.case, &o.cc));
    }
    if let Some(cmd) = interrupted {
        bail!(
            "interrupted after {} of {planned} runs ({failed} threshold(s) failed so far); \
             finish it with `{cmd}`",
            runs.len()
        );
    }
    if failed > 0 {
        bail!("{failed} acceptance threshold(s) failed");
    }
    Ok(())
}

/// Every threshold as a Markdown table, the failing ones marked.
pub(super) fn outcomes_table(outcomes: &[crate::checks::CheckOutcome]) -> String {
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| case | cc | against | metric | value | bound | |\n|---|---|---|---|---|---|---|"
    );
    for o in outcomes {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {:.4}{} | {} | {} |",
            o.case,
            o.cc,
            o.against,
            o.metric,
            o.value,
            mean_of(o),
            o.bound,
            if o.pass { "ok" } else { "**FAIL**" }
        );
    }
    table
}

/// What report.md says under the table: an incomplete check, how
/// confirmed comparisons and re-measured runs are judged, the runs whose
/// delay line was late.
pub(super) fn report_notes(
    dir: &Path,
    finished: usize,
    invalid: &[&RunSummary],
    planned: usize,
    interrupted: Option<&str>,
) -> String {
    let mut notes = String::new();
    if let Some(cmd) = interrupted {
        let _ = writeln!(
            notes,
            "\n**Incomplete:** {finished} of {planned} runs finished; the thresholds above \
             judge only those, and the check does not pass until `{cmd}` finishes it."
        );
    }
    if dir.join("confirm").exists() {
        let _ = writeln!(
            notes,
            "\nComparisons that failed on one run of each CC were confirmed on more \
             (confirm/): the value marked \"mean of N\" is the mean of all N runs, the \
             first included.  Such a comparison is judged per repetition run by both \
             CCs: the margin by which the controller keeps within the bound (goodput: \
             a - x b, retransmissions: x b + slack - a), and it fails only when the \
             one-sided 95 % upper confidence bound of the mean margin (Student's t) is \
             below 0, that is when the runs show it beyond the bound."
        );
    }
    if dir.join("again").exists() {
        let _ = writeln!(
            notes,
            "\nRuns behind failing thresholds whose delay line was invalid or whose \
             path stalled (a hold-up over an eighth of the base RTT, at least 2 ms) \
             were measured again (again/); of the two measurements of each, the valid, \
             unstalled, less late one is judged."
        );
    }
    if !invalid.is_empty() {
        let _ = writeln!(
            notes,
            "\n{} run(s) had delay-line lateness above the limit: {}",
            invalid.len(),
            invalid
                .iter()
                .map(|r| format!("{} {}", r.case, r.cc))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    notes
}

/// The cells (case, [cc, against]) whose failing comparison is to be
/// confirmed, each with the runs per CC still missing from what its check
/// asks for; a cell already measured that often is not measured again.
/// A comparison that passed but shares a CC with a confirmed one in its
/// case (reno, against which ctcp_plus and ub_reno are both judged) is
/// measured as often: the re-measured CC's mean moves, and a comparison
/// judged on one run of one side against the mean of three of the other
/// is neither the first verdict nor a confirmed one (ub_reno's
/// confirmation moves reno's mean, against which ctcp_plus is judged too).
pub(super) fn confirm_cells(
    sc: &Scenario,
    outcomes: &[crate::checks::CheckOutcome],
) -> Vec<(crate::scenario::Cell, usize)> {
    let (mut cells, mut more) = (Vec::new(), Vec::<usize>::new());
    let wanting = |o: &&crate::checks::CheckOutcome| o.confirm_reps as usize > o.runs;
    for o in outcomes.iter().filter(wanting).filter(|o| !o.pass) {
        let i = add_pair(&mut cells, sc, o);
        more.resize(cells.len(), 0);
        more[i] = more[i].max(o.confirm_reps as usize - o.runs);
    }
    // Until no comparison touches a re-measured CC without being in its cell.
    loop {
        let touched = outcomes.iter().filter(wanting).find(|o| {
            !o.against.is_empty()
                && cells.iter().any(|c: &crate::scenario::Cell| {
                    c.case == o.case
                        && [&o.cc, &o.against].iter().any(|x| c.ccs.contains(x))
                        && ![&o.cc, &o.against].iter().all(|x| c.ccs.contains(x))
                })
        });
        match touched {
            Some(o) => {
                add_pair(&mut cells, sc, o);
            }
            None => break,
        }
    }
    cells.into_iter().zip(more).collect()
}

/// Add an outcome's CC and its reference (none when `against` is empty) to
/// the cell of its case in `cells`, made with the scenario's duration for
/// that case when absent; returns the cell's index.
pub(super) fn add_pair(
    cells: &mut Vec<crate::scenario::Cell>,
    sc: &Scenario,
    o: &crate::checks::CheckOutcome,
) -> usize {
    let i = match cells.iter().position(|c| c.case == o.case) {
        Some(i) => i,
        None => {
            cells.push(crate::scenario::Cell {
                case: o.case.clone(),
                ccs: Vec::new(),
                duration_s: sc
                    .cells
                    .iter()
                    .find(|c| c.case == o.case)
                    .and_then(|c| c.duration_s),
                repetitions: None,
                rep_base: 0,
            });
            cells.len() - 1
        }
    };
    for cc in [&o.cc, &o.against] {
        if !cc.is_empty() && !cells[i].ccs.contains(cc) {
            cells[i].ccs.push(cc.clone());
        }
    }
    i
}

/// The cells (case and its ccs) to measure again: every failing outcome
/// whose controller or reference run had an invalid delay line or a path
/// stall ([`RunSummary::stalled`]).
pub(super) fn suspect_cells(
    sc: &Scenario,
    outcomes: &[crate::checks::CheckOutcome],
    runs: &[RunSummary],
) -> Vec<crate::scenario::Cell> {
    let mut cells: Vec<crate::scenario::Cell> = Vec::new();
    // A wild window means the controller's guard against skipped hooks
    // failed (docs/known-issues.md), whatever the host did: never measured
    // away.
    for o in outcomes
        .iter()
        .filter(|o| !o.pass && o.metric != crate::summary::WINDOW_METRIC)
    {
        let pair = [o.cc.as_str(), o.against.as_str()];
        let late = runs.iter().any(|r| {
            r.case == o.case && pair.contains(&r.cc.as_str()) && (!r.valid || r.stalled())
        });
        if !late {
            continue;
        }
        add_pair(&mut cells, sc, o);
    }
    cells
}
