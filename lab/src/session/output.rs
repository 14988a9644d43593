//! A session's results directory: its name, the progress bar and run
//! lines, runs.jsonl, and the summary, plots and report at the end.

use super::*;

/// The local time as `YYYYmmdd-HHMMSS`, for directory and file names.
pub(super) fn local_stamp() -> String {
    // SAFETY: time(NULL), and localtime_r and strftime into buffers of
    // their stated sizes.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        let mut buf = [0u8; 32];
        let n = libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%Y%m%d-%H%M%S".as_ptr(),
            &tm,
        );
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// The results directory of a session: a new one (`out`, or
/// lab-results/<scenario>-<time>) with the scenario file and what produced
/// it (provenance.json), or `resume`, checked to have been made by the same
/// runs, with this sitting's provenance (and scenario file, when its checks
/// or prose differ) added beside the first.
pub(super) fn results_dir(
    root: &Path,
    path: &Path,
    stem: &str,
    quick: bool,
    out: Option<PathBuf>,
    resume: Option<&Path>,
) -> Result<PathBuf> {
    let stamp = local_stamp();
    // The scenario file a resumption used when it differs from the recorded
    // one only in checks or prose (kept beside it).
    let mut resumed_with = None;
    if let Some(r) = resume {
        let recorded = std::fs::read_to_string(r.join("scenario.toml")).with_context(|| {
            format!(
                "--resume {}: not a lab results directory (no scenario.toml)",
                r.display()
            )
        })?;
        if recorded != std::fs::read_to_string(path)? {
            // Thresholds and prose may change between sittings; the runs
            // may not (the finished ones would not be the scenario's).
            // Compared as they run: a full check's runs do not change with
            // the quick variant, nor a quick check's with the full grid.
            let as_run = |s: Scenario| if quick { s.quick() } else { s };
            let before = as_run(Scenario::load_in(&r.join("scenario.toml"), path.parent())?);
            if before.runs_identity() != as_run(Scenario::load(path)?).runs_identity() {
                bail!(
                    "--resume {}: it was made by a different scenario file than {} \
                     (its runs differ, not only its checks or prose)",
                    r.display(),
                    path.display()
                );
            }
            resumed_with = Some(path.to_path_buf());
        }
    }
    let dir = resume.map(Path::to_path_buf).or(out).unwrap_or_else(|| {
        root.join("lab-results").join(format!(
            "{stem}-{stamp}{}",
            if quick { "-quick" } else { "" }
        ))
    });
    std::fs::create_dir_all(dir.join("plots"))?;
    // What produced this directory, so runs can be compared later (a
    // resumed run keeps the first provenance and adds its own).
    let prov = crate::stored::provenance(root, path, quick);
    if resume.is_some() {
        std::fs::write(
            dir.join(format!("provenance-resume-{stamp}.json")),
            serde_json::to_string_pretty(&prov)?,
        )?;
        if let Some(p) = &resumed_with {
            std::fs::copy(p, dir.join(format!("scenario-resume-{stamp}.toml")))?;
        }
    } else {
        std::fs::write(
            dir.join("provenance.json"),
            serde_json::to_string_pretty(&prov)?,
        )?;
        std::fs::copy(path, dir.join("scenario.toml"))?;
    }
    Ok(dir)
}

pub(super) fn progress_bar(runs: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new((runs * 1000) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {percent:>3}% (eta {eta}) {msg}",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    bar
}

/// A line above the progress bar, or on stderr when the bar is hidden (not
/// a terminal: CI, logs).
pub(super) fn say(bar: &indicatif::ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// One finished run as `lab run` prints it.
pub(super) fn run_line(s: &RunSummary) -> String {
    format!(
        "{:<28} {:<18} rep {}: {:7.2} Mbit/s util {:.3} rtt {:6.1} p95 {:6.1} ms q {:5.1}{} retx {:5} ({:.5}/seg) rec {:.3} jain {:.3} bins {:.3}{}{}{}",
        s.case,
        s.cc,
        s.rep + 1,
        s.goodput_mbit,
        s.utilisation,
        s.rtt_mean_ms,
        s.rtt_p95_ms,
        s.queue_mean_pkts,
        match (s.qdelay_p50_ms, s.qdelay_p95_ms) {
            (Some(a), Some(b)) => format!(" qdelay {a:.1}/{b:.1} ms"),
            _ => String::new(),
        },
        s.retransmits,
        s.retrans_per_seg,
        s.recovery_share,
        s.jain,
        s.jain_bins,
        match (s.flows.len() > 1 && s.fct.is_empty(), s.jain_09_s) {
            (false, _) => String::new(),
            (true, Some(t)) => format!(" (>= 0.9 from {t:.0} s)"),
            (true, None) => " (never >= 0.9)".into(),
        },
        s.fct
            .iter()
            .map(|b| format!(
                " {} {}{} slowdown {:.1}/{:.1}",
                b.bin,
                b.flows,
                if b.unfinished > 0 {
                    format!(" ({} unfinished)", b.unfinished)
                } else {
                    String::new()
                },
                b.p50,
                b.p99
            ))
            .collect::<String>(),
        if s.valid {
            String::new()
        } else {
            format!("  INVALID (delay line p99 {} us)", s.lateness_p99_us)
        }
    )
}

/// The raw files a session appends to after each run: samples.csv,
/// queue.csv and runs.jsonl, durable before the next run starts (what
/// `--resume` keeps).
pub(super) struct RunLog {
    pub(super) samples: std::io::BufWriter<std::fs::File>,
    pub(super) queue: std::io::BufWriter<std::fs::File>,
    pub(super) runs: std::fs::File,
}

impl RunLog {
    /// New files holding the runs already `done` (a resumption's).
    pub(super) fn create(dir: &Path, done: &[RunResult]) -> Result<RunLog> {
        let mut log = RunLog {
            samples: std::io::BufWriter::new(std::fs::File::create(dir.join("samples.csv"))?),
            queue: std::io::BufWriter::new(std::fs::File::create(dir.join("queue.csv"))?),
            runs: std::fs::File::create(dir.join("runs.jsonl"))?,
        };
        writeln!(log.samples, "{}", crate::stored::SAMPLES_HEADER)?;
        writeln!(log.queue, "{}", crate::stored::QUEUE_HEADER)?;
        for r in done {
            crate::stored::write_rows(&mut log.samples, &mut log.queue, r)?;
            writeln!(log.runs, "{}", serde_json::to_string(&r.summary)?)?;
        }
        Ok(log)
    }

    pub(super) fn append(&mut self, r: &RunResult) -> Result<()> {
        crate::stored::write_rows(&mut self.samples, &mut self.queue, r)?;
        self.samples.flush()?;
        self.queue.flush()?;
        writeln!(self.runs, "{}", serde_json::to_string(&r.summary)?)?;
        self.runs.sync_data()?;
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<()> {
        self.samples.flush()?;
        self.queue.flush()?;
        Ok(())
    }
}

/// summary.json, the plots and report.md of a session's runs; returns the
/// runs' summaries.
pub(super) fn write_outputs(
    dir: &Path,
    stem: &str,
    sc: &Scenario,
    quick: bool,
    results: &[RunResult],
) -> Result<Vec<RunSummary>> {
    let runs: Vec<&RunSummary> = results.iter().map(|r| &r.summary).collect();
    let agg = aggregate(&runs);
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "scenario": stem,
            "title": sc.title,
            "quick": quick,
            "scenario_settings": sc,
            "runs": runs,
            "per_cc": agg,
        }))?,
    )?;
    plots(dir, sc, results, &agg)?;
    std::fs::write(dir.join("report.md"), report(stem, sc, quick, &runs, &agg))?;
    Ok(runs.into_iter().cloned().collect())
}
