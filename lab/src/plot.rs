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

pub fn plots(dir: &Path, sc: &Scenario, results: &[RunResult], agg: &[Agg]) -> Result<()> {
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
