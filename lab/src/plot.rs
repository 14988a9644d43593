//! PNG + SVG plots of a scenario's results (plotters).

use std::path::Path;

use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::scenario::Scenario;
use crate::summary::{Agg, RunResult};

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
    let per_flow = |f: &dyn Fn(&crate::summary::FlowSample) -> f64| -> Series {
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

pub(crate) fn safe(s: &str) -> String {
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

fn e<E: std::fmt::Display>(x: E) -> anyhow::Error {
    anyhow::anyhow!("{x}")
}

/// Pantheon's view of a case: goodput against p95 delay, a colour per
/// CC: each run a small ring, the mean over a CC's runs a dot with bars
/// from the smallest to the largest run in each axis.  The delay is the
/// bottleneck's p95 queueing delay where the emulator measured it (every
/// run of the case), else the flows' p95 RTT.  Up and to the left is
/// better, and the corner says so.
fn scatter<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    case: &str,
    runs: &[&crate::summary::RunSummary],
    ccs: &[String],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e)?;
    let queueing = runs.iter().all(|r| r.qdelay_p95_ms.is_some());
    let x_of = |r: &crate::summary::RunSummary| {
        if queueing {
            r.qdelay_p95_ms.unwrap_or(0.0)
        } else {
            r.rtt_p95_ms
        }
    };
    let x_max = runs.iter().map(|r| x_of(r)).fold(1.0f64, f64::max) * 1.1;
    let y_max = runs.iter().map(|r| r.goodput_mbit).fold(1.0f64, f64::max) * 1.1;
    let what = if queueing {
        "p95 queueing delay"
    } else {
        "p95 RTT"
    };
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{case}: goodput vs {what} (dot: mean per CC, bars: its runs' range)"),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(e)?;
    ch.configure_mesh()
        .x_desc(format!("{what} (ms)"))
        .y_desc("goodput (Mbit/s)")
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(e)?;
    ch.draw_series(std::iter::once(Text::new(
        "better: up and to the left",
        (x_max * 0.02, y_max * 0.97),
        ("sans-serif", 12),
    )))
    .map_err(e)?;
    for (ci, cc) in ccs.iter().enumerate() {
        let c = COLORS[ci % COLORS.len()];
        let mine: Vec<(f64, f64)> = runs
            .iter()
            .filter(|r| &r.cc == cc)
            .map(|r| (x_of(r), r.goodput_mbit))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let n = mine.len() as f64;
        let mean = (
            mine.iter().map(|p| p.0).sum::<f64>() / n,
            mine.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let range = |f: fn(&(f64, f64)) -> f64| {
            mine.iter()
                .map(f)
                .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
        };
        let ((x0, x1), (y0, y1)) = (range(|p| p.0), range(|p| p.1));
        ch.draw_series(mine.iter().map(|&p| Circle::new(p, 3, c.stroke_width(1))))
            .map_err(e)?;
        ch.draw_series([
            PathElement::new(vec![(x0, mean.1), (x1, mean.1)], c.stroke_width(2)),
            PathElement::new(vec![(mean.0, y0), (mean.0, y1)], c.stroke_width(2)),
        ])
        .map_err(e)?;
        ch.draw_series(std::iter::once(Circle::new(mean, 6, c.filled())))
            .map_err(e)?
            .label(cc.clone())
            .legend(move |(x, y)| Circle::new((x + 6, y), 4, c.filled()));
    }
    ch.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// Empirical CDF of the flows' smoothed RTT (TCP_INFO samples after the
/// warm-up, every repetition), one line per CC.
fn rtt_cdf<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    case: &str,
    series: &[(String, Vec<f64>)],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e)?;
    let x_max = series
        .iter()
        .flat_map(|(_, v)| v.last().copied())
        .fold(1.0f64, f64::max)
        * 1.05;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{case}: RTT CDF (smoothed RTT samples)"),
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x_max, 0.0..1.0)
        .map_err(e)?;
    ch.configure_mesh()
        .x_desc("RTT (ms)")
        .y_desc("fraction of samples")
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(e)?;
    for (ci, (cc, v)) in series.iter().enumerate() {
        let c = COLORS[ci % COLORS.len()];
        let n = v.len().max(1) as f64;
        // At most ~500 steps: every k-th sample of the sorted list.
        let k = (v.len() / 500).max(1);
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .filter(|(i, _)| i % k == 0 || *i + 1 == v.len())
            .map(|(i, x)| (*x, (i + 1) as f64 / n))
            .collect();
        ch.draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(e)?
            .label(cc.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c));
    }
    ch.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// Quartiles (linear interpolation) of a sorted slice.
pub(crate) fn quartiles(v: &[f64]) -> [f64; 5] {
    let q = |p: f64| {
        if v.is_empty() {
            return 0.0;
        }
        let x = p * (v.len() - 1) as f64;
        let (i, f) = (x.floor() as usize, x - x.floor());
        v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * f
    };
    [q(0.0), q(0.25), q(0.5), q(0.75), q(1.0)]
}

/// Box plot per CC of one metric over every run of the scenario (all
/// cases and repetitions): min, quartiles, max.
fn boxes<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    per_cc: &[(String, Vec<f64>)],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e)?;
    let y_max = per_cc
        .iter()
        .flat_map(|(_, v)| v.last().copied())
        .fold(1e-9f64, f64::max)
        * 1.1;
    let n = per_cc.len();
    let names: Vec<String> = per_cc.iter().map(|(c, _)| c.clone()).collect();
    let mut ch = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
        .map_err(e)?;
    ch.configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < names.len() {
                names[i].clone()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(e)?;
    for (i, (_, v)) in per_cc.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let [lo, q1, med, q3, hi] = quartiles(v);
        let (x0, x1, xm) = (i as f64 + 0.25, i as f64 + 0.75, i as f64 + 0.5);
        ch.draw_series([
            Rectangle::new([(x0, q1), (x1, q3)], c.mix(0.35).filled()),
            Rectangle::new([(x0, q1), (x1, q3)], c.stroke_width(1)),
        ])
        .map_err(e)?;
        ch.draw_series([
            PathElement::new(vec![(x0, med), (x1, med)], BLACK.stroke_width(2)),
            PathElement::new(vec![(xm, q3), (xm, hi)], c.stroke_width(1)),
            PathElement::new(vec![(xm, q1), (xm, lo)], c.stroke_width(1)),
            PathElement::new(vec![(xm - 0.1, hi), (xm + 0.1, hi)], c.stroke_width(1)),
            PathElement::new(vec![(xm - 0.1, lo), (xm + 0.1, lo)], c.stroke_width(1)),
        ])
        .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

/// One case's plots: goodput against p95 RTT per run (scatter) and each
/// CC's RTT distribution after the warm-up (CDF), PNG and SVG.
fn case_plots(
    pd: &Path,
    sc: &Scenario,
    results: &[RunResult],
    runs: &[&crate::summary::RunSummary],
    case: &str,
) -> Result<()> {
    let in_case: Vec<&crate::summary::RunSummary> =
        runs.iter().copied().filter(|r| r.case == case).collect();
    let base = format!("scatter_{}", safe(case));
    scatter(
        BitMapBackend::new(&pd.join(format!("{base}.png")), (900, 650)).into_drawing_area(),
        case,
        &in_case,
        &sc.ccs,
    )?;
    scatter(
        SVGBackend::new(&pd.join(format!("{base}.svg")), (900, 650)).into_drawing_area(),
        case,
        &in_case,
        &sc.ccs,
    )?;
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for cc in &sc.ccs {
        let mut v: Vec<f64> = results
            .iter()
            .filter(|r| r.summary.case == case && &r.summary.cc == cc)
            .flat_map(|r| r.samples.iter())
            .filter(|s| s.t >= sc.warmup_s && s.srtt_us > 0)
            .map(|s| s.srtt_us as f64 / 1e3)
            .collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        series.push((cc.clone(), v));
    }
    if !series.is_empty() {
        let base = format!("cdf_rtt_{}", safe(case));
        rtt_cdf(
            BitMapBackend::new(&pd.join(format!("{base}.png")), (900, 650)).into_drawing_area(),
            case,
            &series,
        )?;
        rtt_cdf(
            SVGBackend::new(&pd.join(format!("{base}.svg")), (900, 650)).into_drawing_area(),
            case,
            &series,
        )?;
    }
    Ok(())
}

pub fn plots(dir: &Path, sc: &Scenario, results: &[RunResult], agg: &[Agg]) -> Result<()> {
    register_font()?;
    let pd = dir.join("plots");
    let runs: Vec<&crate::summary::RunSummary> = results.iter().map(|r| &r.summary).collect();
    let mut cases: Vec<&str> = Vec::new();
    for r in &runs {
        if !cases.contains(&r.case.as_str()) {
            cases.push(&r.case);
        }
    }
    for case in &cases {
        case_plots(&pd, sc, results, &runs, case)?;
    }
    type Metric = fn(&crate::summary::RunSummary) -> f64;
    let metrics: [(&str, &str, Metric); 2] = [
        (
            "box_utilisation",
            "link utilisation per run, every case and repetition",
            |r| r.utilisation,
        ),
        (
            "box_rtt_p95",
            "p95 RTT (ms) per run, every case and repetition",
            |r| r.rtt_p95_ms,
        ),
    ];
    for (name, title, f) in metrics {
        let per_cc: Vec<(String, Vec<f64>)> = sc
            .ccs
            .iter()
            .filter_map(|cc| {
                let mut v: Vec<f64> = runs.iter().filter(|r| &r.cc == cc).map(|r| f(r)).collect();
                v.sort_by(f64::total_cmp);
                (!v.is_empty()).then(|| (cc.clone(), v))
            })
            .collect();
        if per_cc.is_empty() {
            continue;
        }
        boxes(
            BitMapBackend::new(&pd.join(format!("{name}.png")), (900, 600)).into_drawing_area(),
            title,
            &per_cc,
        )?;
        boxes(
            SVGBackend::new(&pd.join(format!("{name}.svg")), (900, 600)).into_drawing_area(),
            title,
            &per_cc,
        )?;
    }
    for r in results {
        // Names carry dots (0.125bdp): append the extension, never replace.
        // Every repetition has its time series (rep 0 keeps the old name).
        let rep = match r.summary.rep {
            0 => String::new(),
            n => format!("_rep{n}"),
        };
        let base = format!("ts_{}_{}{rep}", safe(&r.summary.case), safe(&r.summary.cc));
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
