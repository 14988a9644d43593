//! report.md: the run's table per case, the paper's numbers beside ours.

use std::fmt::Write as _;

use crate::scenario::{Scenario, KERNEL_CCS};
use crate::summary::{Agg, RunSummary};

pub fn report(stem: &str, sc: &Scenario, quick: bool, runs: &[&RunSummary], agg: &[Agg]) -> String {
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
        ccload_testbed::delay::LATENESS_P99_LIMIT_US,
        invalid,
        if invalid > 0 {
            " — their numbers are marked and must not be quoted"
        } else {
            ""
        }
    );
    let _ = writeln!(o, "## Measured (mean, min–max over repetitions)\n");
    let _ = writeln!(o, "| case | cc | goodput Mbit/s | utilisation | vs kernel CC | RTT mean / p95 ms | queue pkts | retransmits | Jain (half / 1-s bins) | completion s | valid |");
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
            "| {} | {} | {:.2} ({:.2}–{:.2}) | {:.3} ({:.3}–{:.3}) | {} | {:.1} / {:.1} | {:.1} | {:.0} | {:.3} / {:.3} | {} | {} |",
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
            a.jain,
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
