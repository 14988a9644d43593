//! `cargo xtask lab list|run`: paper-style experiments on the emulated link
//! (runner in ccload-itests' `lab` module), with CSV/JSON results, PNG+SVG
//! plots and a report.md that puts the paper's numbers beside ours.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;

use anyhow::{bail, Context, Result};
use ccload_itests::lab::{self, parse_cc, RunResult, RunSummary, Scenario};
use plotters::coord::Shift;
use plotters::prelude::*;

const KERNEL_CCS: [&str; 3] = ["reno", "cubic", "bbr"];

pub fn scenarios_dir(root: &Path) -> PathBuf {
    root.join("configs/lab")
}

fn scenario_path(root: &Path, name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.exists() {
        return p.to_path_buf();
    }
    scenarios_dir(root).join(format!("{name}.toml"))
}

pub fn list(root: &Path) -> Result<()> {
    let mut v: Vec<_> = std::fs::read_dir(scenarios_dir(root))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    for p in v {
        let s = Scenario::load(&p)?;
        let runs = |s: &Scenario| s.cases().len() * s.ccs.len() * s.repetitions as usize;
        let q = s.quick();
        println!(
            "{:<16} {}\n{:<16} {} | {} runs x {} s (quick: {} x {} s) | {}",
            p.file_stem().unwrap().to_string_lossy(),
            s.title,
            "",
            s.paper,
            runs(&s),
            s.duration_s,
            runs(&q),
            q.duration_s,
            s.ccs.join(", ")
        );
    }
    Ok(())
}

/// ccload, built next to this xtask binary.
fn ccload_bin() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("ccload")
}

fn ccload(args: &[&str]) -> Result<String> {
    let o = Command::new(ccload_bin())
        .args(args)
        .output()
        .context("run ccload")?;
    if !o.status.success() {
        bail!(
            "ccload {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Our controllers this run attached (detached again on drop) and the
/// tunables it changed (reset on drop).
struct KernelState {
    attached: Vec<String>,
}

impl KernelState {
    fn prepare(ccs: &[String]) -> Result<KernelState> {
        let mut st = KernelState { attached: vec![] };
        for spec in ccs {
            let (name, _) = parse_cc(spec);
            if KERNEL_CCS.contains(&name.as_str()) || st.attached.contains(&name) {
                continue;
            }
            if !ccload_itests::registered(&name) {
                ccload(&["attach", "--algo", &name])?;
                st.attached.push(name);
            }
        }
        Ok(st)
    }

    fn tune(spec: &str) -> Result<()> {
        let (name, sets) = parse_cc(spec);
        if sets.is_empty() {
            return Ok(());
        }
        let mut args = vec!["tune".to_string(), "--algo".into(), name];
        for (k, v) in sets {
            args.push("--set".into());
            args.push(format!("{k}={v}"));
        }
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        ccload(&a).map(|_| ())
    }

    fn untune(spec: &str) {
        let (name, sets) = parse_cc(spec);
        if !sets.is_empty() {
            let _ = ccload(&["tune", "--algo", &name, "--reset"]);
        }
    }
}

impl Drop for KernelState {
    fn drop(&mut self) {
        for a in &self.attached {
            let _ = ccload(&["detach", "--algo", a]);
        }
    }
}

pub fn run(
    root: &Path,
    name: &str,
    quick: bool,
    out: Option<PathBuf>,
) -> Result<(PathBuf, Scenario, Vec<RunSummary>)> {
    let path = scenario_path(root, name);
    let full = Scenario::load(&path)?;
    let sc = if quick { full.quick() } else { full };
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    if let Some(why) = ccload_itests::privileged_skip_reason() {
        bail!("the lab needs root, BTF and bpffs: {why}");
    }
    let stamp = Command::new("date").arg("+%Y%m%d-%H%M%S").output()?;
    let stamp = String::from_utf8_lossy(&stamp.stdout).trim().to_string();
    let dir = out.unwrap_or_else(|| {
        root.join("lab-results").join(format!(
            "{stem}-{stamp}{}",
            if quick { "-quick" } else { "" }
        ))
    });
    std::fs::create_dir_all(dir.join("plots"))?;
    let _ = ctrlc::set_handler(|| {
        eprintln!("\nlab: stopping after the current run (Ctrl-C)");
        lab::STOP.store(true, Ordering::SeqCst);
    });
    let kstate = KernelState::prepare(&sc.ccs)?;
    let cases = sc.cases();
    let pairs = cases
        .iter()
        .flat_map(|c| sc.ccs.iter().filter(|cc| sc.wants(&c.label, cc)))
        .count();
    let total = pairs * sc.repetitions as usize;
    let bar = indicatif::ProgressBar::new((total * 1000) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {percent:>3}% (eta {eta}) {msg}",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    let mut results: Vec<RunResult> = Vec::new();
    let mut samples = std::io::BufWriter::new(std::fs::File::create(dir.join("samples.csv"))?);
    writeln!(samples, "case,cc,rep,t,flow,cwnd,srtt_us,min_rtt_us,delivered,total_retrans,pacing_rate,delivery_rate,rx_bytes")?;
    let mut queue = std::io::BufWriter::new(std::fs::File::create(dir.join("queue.csv"))?);
    writeln!(queue, "case,cc,rep,t,qlen,backlog,drops")?;
    let mut k = 0;
    'outer: for rep in 0..sc.repetitions {
        for case in &cases {
            for cc in sc.ccs.iter().filter(|cc| sc.wants(&case.label, cc)) {
                if lab::STOP.load(Ordering::Relaxed) {
                    break 'outer;
                }
                bar.set_message(format!("{} {cc} rep {}", case.label, rep + 1));
                KernelState::tune(cc)?;
                let base = (k * 1000) as u64;
                let r = lab::run_case(&sc.for_case(&case.label), case, cc, rep, &mut |f| {
                    bar.set_position(base + (f * 1000.0) as u64)
                });
                KernelState::untune(cc);
                let r = r?;
                for s in &r.samples {
                    writeln!(
                        samples,
                        "{},{},{},{:.3},{},{},{},{},{},{},{},{},{}",
                        case.label,
                        cc,
                        rep,
                        s.t,
                        s.flow,
                        s.cwnd,
                        s.srtt_us,
                        s.min_rtt_us,
                        s.delivered,
                        s.total_retrans,
                        s.pacing_rate,
                        s.delivery_rate,
                        s.rx_bytes
                    )?;
                }
                for q in &r.queue {
                    writeln!(
                        queue,
                        "{},{},{},{:.3},{},{},{}",
                        case.label, cc, rep, q.t, q.qlen, q.backlog, q.drops
                    )?;
                }
                let s = &r.summary;
                let line = format!(
                    "{:<28} {:<18} rep {}: {:7.2} Mbit/s util {:.3} rtt {:6.1} p95 {:6.1} ms q {:5.1} retx {:5} ({:.5}/seg) rec {:.3} jain {:.3}{}",
                    s.case,
                    s.cc,
                    rep + 1,
                    s.goodput_mbit,
                    s.utilisation,
                    s.rtt_mean_ms,
                    s.rtt_p95_ms,
                    s.queue_mean_pkts,
                    s.retransmits,
                    s.retrans_per_seg,
                    s.recovery_share,
                    s.jain_bins,
                    if s.valid { String::new() } else { format!("  INVALID (delay line p99 {} us)", s.lateness_p99_us) }
                );
                // A hidden bar (not a terminal: CI, logs) prints nothing.
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
                results.push(r);
                k += 1;
            }
        }
    }
    bar.finish_and_clear();
    drop(kstate);
    samples.flush()?;
    queue.flush()?;
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
    plots(&dir, &sc, &results, &agg)?;
    std::fs::write(
        dir.join("report.md"),
        report(&stem, &sc, quick, &runs, &agg),
    )?;
    if lab::STOP.load(Ordering::Relaxed) {
        bail!("interrupted; partial results in {}", dir.display());
    }
    println!("results in {}", dir.display());
    let runs = runs.into_iter().cloned().collect();
    Ok((dir, sc, runs))
}

/// `lab check`: run the scenario, evaluate its `[[checks]]`, print every
/// threshold with the failing ones marked, append them to report.md and
/// checks.json, and fail when any threshold fails.
pub fn check(root: &Path, name: &str, quick: bool, out: Option<PathBuf>) -> Result<()> {
    let (dir, sc, runs) = run(root, name, quick, out)?;
    anyhow::ensure!(
        !sc.checks.is_empty(),
        "{name}: the scenario has no [[checks]]"
    );
    let outcomes = sc.evaluate(&runs);
    anyhow::ensure!(
        !outcomes.is_empty(),
        "{name}: no check matched a case that ran"
    );
    let invalid: Vec<&RunSummary> = runs.iter().filter(|r| !r.valid).collect();
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| case | cc | against | metric | value | bound | |\n|---|---|---|---|---|---|---|"
    );
    for o in &outcomes {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {:.4} | {} | {} |",
            o.case,
            o.cc,
            o.against,
            o.metric,
            o.value,
            o.bound,
            if o.pass { "ok" } else { "**FAIL**" }
        );
    }
    print!("{table}");
    let failed = outcomes.iter().filter(|o| !o.pass).count();
    let mut report = std::fs::read_to_string(dir.join("report.md")).unwrap_or_default();
    let _ = writeln!(report, "\n## Acceptance checks\n\n{table}");
    if !invalid.is_empty() {
        let _ = writeln!(
            report,
            "\n{} run(s) had delay-line lateness above the limit: {}",
            invalid.len(),
            invalid
                .iter()
                .map(|r| format!("{} {}", r.case, r.cc))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    std::fs::write(dir.join("report.md"), report)?;
    std::fs::write(
        dir.join("checks.json"),
        serde_json::to_string_pretty(&outcomes)?,
    )?;
    println!(
        "checks: {} passed, {failed} failed ({} runs, {} with an invalid delay line); report {}",
        outcomes.len() - failed,
        runs.len(),
        invalid.len(),
        dir.join("report.md").display()
    );
    if failed > 0 {
        bail!("{failed} acceptance threshold(s) failed");
    }
    if !invalid.is_empty() {
        bail!(
            "{} run(s) measured through an invalid delay line",
            invalid.len()
        );
    }
    Ok(())
}

/// Mean / min / max of a metric over repetitions, per (case, cc).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Agg {
    pub case: String,
    pub cc: String,
    pub reps: usize,
    pub goodput: [f64; 3],
    pub utilisation: [f64; 3],
    pub rtt_mean_ms: f64,
    pub rtt_p95_ms: f64,
    pub queue_mean_pkts: f64,
    pub retransmits: f64,
    pub jain_bins: f64,
    pub completion_s: Option<f64>,
    pub all_valid: bool,
}

fn mmm(v: &[f64]) -> [f64; 3] {
    let n = v.len().max(1) as f64;
    [
        v.iter().sum::<f64>() / n,
        v.iter().copied().fold(f64::MAX, f64::min),
        v.iter().copied().fold(f64::MIN, f64::max),
    ]
}

fn aggregate(runs: &[&RunSummary]) -> Vec<Agg> {
    let mut m: BTreeMap<(String, String), Vec<&RunSummary>> = BTreeMap::new();
    let mut order = Vec::new();
    for r in runs {
        let key = (r.case.clone(), r.cc.clone());
        if !m.contains_key(&key) {
            order.push(key.clone());
        }
        m.entry(key).or_default().push(r);
    }
    order
        .into_iter()
        .map(|key| {
            let v = &m[&key];
            let f = |g: &dyn Fn(&RunSummary) -> f64| v.iter().map(|r| g(r)).collect::<Vec<_>>();
            let mean = |g: &dyn Fn(&RunSummary) -> f64| mmm(&f(g))[0];
            let comp: Vec<f64> = v
                .iter()
                .filter_map(|r| {
                    let c: Vec<f64> = r.flows.iter().filter_map(|f| f.completion_s).collect();
                    (c.len() == r.flows.len()).then(|| c.iter().copied().fold(0.0, f64::max))
                })
                .collect();
            Agg {
                case: key.0.clone(),
                cc: key.1.clone(),
                reps: v.len(),
                goodput: mmm(&f(&|r| r.goodput_mbit)),
                utilisation: mmm(&f(&|r| r.utilisation)),
                rtt_mean_ms: mean(&|r| r.rtt_mean_ms),
                rtt_p95_ms: mean(&|r| r.rtt_p95_ms),
                queue_mean_pkts: mean(&|r| r.queue_mean_pkts),
                retransmits: mean(&|r| r.retransmits as f64),
                jain_bins: mean(&|r| r.jain_bins),
                completion_s: (comp.len() == v.len() && !comp.is_empty()).then(|| mmm(&comp)[0]),
                all_valid: v.iter().all(|r| r.valid),
            }
        })
        .collect()
}

fn report(stem: &str, sc: &Scenario, quick: bool, runs: &[&RunSummary], agg: &[Agg]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {}\n", sc.title);
    let _ = writeln!(
        o,
        "Scenario `{stem}`{} — {}.\n\n{}\n",
        if quick { " (quick variant)" } else { "" },
        sc.paper,
        sc.description.trim()
    );
    if !sc.scaling.is_empty() {
        let _ = writeln!(o, "**Scaling.** {}\n", sc.scaling.trim());
    }
    let _ = writeln!(
        o,
        "Link {} Mbit/s, MTU {}; {} s per run, measured after {} s; {} repetition(s). \
         Goodput is payload; utilisation = goodput / payload capacity (rate x (MTU-52)/MTU).\n",
        sc.grid.rate_mbit, sc.grid.mtu, sc.duration_s, sc.warmup_s, sc.repetitions
    );
    let invalid = runs.iter().filter(|r| !r.valid).count();
    let worst = runs.iter().map(|r| r.lateness_p99_us).max().unwrap_or(0);
    let _ = writeln!(
        o,
        "Delay line: worst p99 release lateness {worst} us over {} runs (limit {} us); {} \
         run(s) invalid{}.\n",
        runs.len(),
        ccload_itests::delay::LATENESS_P99_LIMIT_US,
        invalid,
        if invalid > 0 {
            " — their numbers are marked and must not be quoted"
        } else {
            ""
        }
    );
    let _ = writeln!(o, "## Measured (mean, min–max over repetitions)\n");
    let _ = writeln!(o, "| case | cc | goodput Mbit/s | utilisation | vs kernel CC | RTT mean / p95 ms | queue pkts | retransmits | Jain (1-s bins) | completion s | valid |");
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|");
    for a in agg {
        // The ratio against the first kernel CC of the same case, same run.
        let reference = sc
            .ccs
            .iter()
            .find(|c| KERNEL_CCS.contains(&c.as_str()) && **c != a.cc)
            .and_then(|c| agg.iter().find(|b| b.case == a.case && &b.cc == c));
        let ratio = reference
            .filter(|b| b.goodput[0] > 0.0)
            .map(|b| format!("{:.3} x {}", a.goodput[0] / b.goodput[0], b.cc))
            .unwrap_or_else(|| "—".into());
        let _ = writeln!(
            o,
            "| {} | {} | {:.2} ({:.2}–{:.2}) | {:.3} ({:.3}–{:.3}) | {} | {:.1} / {:.1} | {:.1} | {:.0} | {:.3} | {} | {} |",
            a.case,
            a.cc,
            a.goodput[0],
            a.goodput[1],
            a.goodput[2],
            a.utilisation[0],
            a.utilisation[1],
            a.utilisation[2],
            ratio,
            a.rtt_mean_ms,
            a.rtt_p95_ms,
            a.queue_mean_pkts,
            a.retransmits,
            a.jain_bins,
            a.completion_s.map(|c| format!("{c:.2}")).unwrap_or_else(|| "—".into()),
            if a.all_valid { "yes" } else { "**no**" }
        );
    }
    if !sc.paper_numbers.is_empty() {
        let _ = writeln!(o, "\n## Paper beside measured\n");
        let _ = writeln!(o, "| case | cc | metric | paper | measured |");
        let _ = writeln!(o, "|---|---|---|---|---|");
        for p in &sc.paper_numbers {
            let m = agg.iter().find(|a| a.case == p.case && a.cc == p.cc);
            let v = m.map(|a| match p.metric.as_str() {
                "utilisation" => format!("{:.3}", a.utilisation[0]),
                "goodput_mbit" => format!("{:.1}", a.goodput[0]),
                // 100 MB at the measured goodput.
                "completion_100MB_s" if a.goodput[0] > 0.0 => {
                    format!("{:.2} (from goodput)", 800.0 / a.goodput[0])
                }
                _ => "—".into(),
            });
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                p.case,
                p.cc,
                p.metric,
                p.value,
                v.unwrap_or_else(|| "not run".into())
            );
        }
    }
    let _ = writeln!(o, "\nPlots: `plots/` (PNG and SVG). Raw samples: `samples.csv`, `queue.csv`; summaries: `summary.json`.");
    o
}

// ---------------------------------------------------------------------------
// Plots.

fn register_font() -> Result<()> {
    static DONE: std::sync::Once = std::sync::Once::new();
    let mut err = None;
    DONE.call_once(|| {
        let p = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
        match std::fs::read(p) {
            Ok(b) => {
                let b: &'static [u8] = Box::leak(b.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, b).is_err() {
                    err = Some(format!("{p}: not a usable font"));
                }
            }
            Err(e) => err = Some(format!("{p}: {e} (apt-get install fonts-dejavu-core)")),
        }
    });
    match err {
        Some(e) => bail!(e),
        None => Ok(()),
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

type Series = Vec<(String, Vec<(f64, f64)>)>;

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    series: &Series,
    t_max: f64,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let y_max = series
        .iter()
        .flat_map(|(_, v)| v.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let mut ch = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(6)
        .x_label_area_size(24)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    ch.configure_mesh()
        .x_desc("s")
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        ch.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(1)))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c));
    }
    if series.len() > 1 {
        ch.configure_series_labels()
            .label_font(("sans-serif", 11))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}

fn timeseries<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, r: &RunResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let title = format!("{} — {}", r.summary.case, r.summary.cc);
    let root = root
        .titled(&title, ("sans-serif", 20))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let areas = root.split_evenly((4, 1));
    let nflows = r.summary.flows.len();
    let t_max = r.samples.last().map(|s| s.t).unwrap_or(1.0).max(1.0);
    let per_flow = |f: &dyn Fn(&lab::FlowSample) -> f64| -> Series {
        (0..nflows)
            .map(|i| {
                (
                    format!("flow {i}"),
                    r.samples
                        .iter()
                        .filter(|s| s.flow == i)
                        .map(|s| (s.t, f(s)))
                        .collect(),
                )
            })
            .collect()
    };
    // Throughput from received bytes over 200-ms steps.
    let thr: Series = (0..nflows)
        .map(|i| {
            let v: Vec<_> = r.samples.iter().filter(|s| s.flow == i).collect();
            let mut pts = Vec::new();
            let mut j = 0;
            for k in 0..v.len() {
                if v[k].t - v[j].t >= 0.2 {
                    let mb = (v[k].rx_bytes - v[j].rx_bytes) as f64 * 8.0 / (v[k].t - v[j].t) / 1e6;
                    pts.push((v[k].t, mb));
                    j = k;
                }
            }
            (format!("flow {i}"), pts)
        })
        .collect();
    panel(
        &areas[0],
        "cwnd (segments)",
        &per_flow(&|s| s.cwnd as f64),
        t_max,
    )?;
    panel(&areas[1], "goodput (Mbit/s, 200 ms)", &thr, t_max)?;
    panel(
        &areas[2],
        "smoothed RTT (ms)",
        &per_flow(&|s| s.srtt_us as f64 / 1e3),
        t_max,
    )?;
    let q: Series = vec![(
        "queue".into(),
        r.queue.iter().map(|q| (q.t, q.qlen as f64)).collect(),
    )];
    panel(&areas[3], "bottleneck queue (packets)", &q, t_max)?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

fn bars<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    agg: &[Agg],
    ccs: &[String],
    pick: &dyn Fn(&Agg) -> [f64; 3],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut cases: Vec<String> = Vec::new();
    for a in agg {
        if !cases.contains(&a.case) {
            cases.push(a.case.clone());
        }
    }
    let y_max = agg
        .iter()
        .map(|a| pick(a)[2])
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let n = ccs.len() as f64;
    let mut ch = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..cases.len() as f64, 0.0..y_max)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let cs = cases.clone();
    ch.configure_mesh()
        .disable_x_mesh()
        .x_labels(cases.len() * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < cs.len() {
                cs[i].clone()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (ci, cc) in ccs.iter().enumerate() {
        let c = COLORS[ci % COLORS.len()];
        let mut rects = Vec::new();
        let mut whisk = Vec::new();
        for (xi, case) in cases.iter().enumerate() {
            let Some(a) = agg.iter().find(|a| &a.case == case && &a.cc == cc) else {
                continue;
            };
            let v = pick(a);
            let x0 = xi as f64 + 0.1 + 0.8 * ci as f64 / n;
            let x1 = x0 + 0.8 / n * 0.9;
            rects.push(Rectangle::new([(x0, 0.0), (x1, v[0])], c.filled()));
            let xm = (x0 + x1) / 2.0;
            whisk.push(PathElement::new(
                vec![(xm, v[1]), (xm, v[2])],
                BLACK.stroke_width(1),
            ));
        }
        ch.draw_series(rects)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(cc.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        ch.draw_series(whisk).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    ch.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn plots(dir: &Path, sc: &Scenario, results: &[RunResult], agg: &[Agg]) -> Result<()> {
    register_font()?;
    let pd = dir.join("plots");
    for r in results.iter().filter(|r| r.summary.rep == 0) {
        // Names carry dots (0.125bdp): append the extension, never replace.
        let base = format!("ts_{}_{}", safe(&r.summary.case), safe(&r.summary.cc));
        let png = pd.join(format!("{base}.png"));
        let svg = pd.join(format!("{base}.svg"));
        timeseries(
            BitMapBackend::new(&png, (1000, 1000)).into_drawing_area(),
            r,
        )?;
        timeseries(SVGBackend::new(&svg, (1000, 1000)).into_drawing_area(), r)?;
    }
    type Pick = fn(&Agg) -> [f64; 3];
    let metrics: [(&str, &str, Pick); 2] = [
        (
            "bars_goodput",
            "goodput (Mbit/s), min–max over repetitions",
            |a| a.goodput,
        ),
        (
            "bars_utilisation",
            "link utilisation, min–max over repetitions",
            |a| a.utilisation,
        ),
    ];
    for (name, title, pick) in metrics {
        let png = pd.join(format!("{name}.png"));
        let svg = pd.join(format!("{name}.svg"));
        bars(
            BitMapBackend::new(&png, (1100, 600)).into_drawing_area(),
            title,
            agg,
            &sc.ccs,
            &pick,
        )?;
        bars(
            SVGBackend::new(&svg, (1100, 600)).into_drawing_area(),
            title,
            agg,
            &sc.ccs,
            &pick,
        )?;
    }
    Ok(())
}
