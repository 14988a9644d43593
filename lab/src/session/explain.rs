//! Where a failing retransmission threshold's retransmissions came from:
//! each run's host lateness and guard repairs, each flow's largest burst,
//! and our controller's telemetry in it.

use super::*;

/// " (mean of N)" after a value judged on the mean of N runs, and the
/// paired test's margin and bound when one judged it.
/// Where the retransmissions of `case`'s runs of `cc` came from, for a
/// failing threshold: each flow's largest burst (RunSummary's
/// `retrans_peak`) and, for our controllers, what their telemetry said in
/// it (phase, law mode, loss class, window, RTTs).  CI keeps only the log's
/// end, so this is printed after the FAILED lines.
pub(super) fn explain_retransmissions(
    dir: &Path,
    runs: &[RunSummary],
    case: &str,
    cc: &str,
) -> String {
    let mut out = String::new();
    for r in runs.iter().filter(|r| r.case == case && r.cc == cc) {
        // What the host did in the run: the delay line's largest lateness
        // (a stall bursts a path's ACKs), and the guard's repairs (hooks
        // the kernel skipped; each costs a burst, docs/known-issues.md).
        let _ = write!(
            out,
            "  {case} {cc} rep {}: delay line late by up to {:.1} ms",
            r.rep + 1,
            r.lateness_max_us as f64 / 1e3
        );
        if let Some([ssth, cwnd]) = r.repairs {
            let _ = write!(
                out,
                "; the guard repaired ssthresh {ssth} and cwnd {cwnd} time(s)"
            );
        }
        out.push('\n');
        for f in &r.flows {
            let _ = write!(
                out,
                "  {case} {cc} rep {}: flow {} {}: {} retransmitted",
                r.rep + 1,
                f.flow,
                f.cc,
                f.retransmits
            );
            if let Some(p) = f.retrans_peak {
                let _ = write!(
                    out,
                    ", {} of them in {} s from {:.2} s (cwnd {}, up to {}; ca_state {})",
                    p.n,
                    crate::summary::RETRANS_PEAK_S,
                    p.t_s,
                    p.cwnd,
                    p.cwnd_max,
                    p.ca_state
                );
            }
            out.push('\n');
        }
        // the telemetry of the run's attempt kept in this directory or in
        // the re-measuring ones (the kept run may be either), each file
        // read once for all our flows' bursts
        let name = telemetry_name(case, cc, r.rep);
        let peaks: Vec<(f64, f64)> = r
            .flows
            .iter()
            .filter(|f| f.cc == parse_cc(cc).0)
            .filter_map(|f| f.retrans_peak.map(|p| (f.start_s, p.t_s)))
            .collect();
        for sub in ["", "again", "confirm"] {
            let path = dir.join(sub).join("telemetry").join(&name);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let recs: Vec<serde_json::Value> = text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            for &(start_s, t_s) in &peaks {
                if let Some(line) = telemetry_at(&recs, start_s, t_s - 0.2, t_s + 0.5) {
                    let _ = writeln!(out, "    {}: {line}", path.display());
                }
            }
        }
    }
    out
}

/// The telemetry file of `case`'s run `rep` of `cc` (one of our
/// controllers) in a results directory's telemetry/.
pub(super) fn telemetry_name(case: &str, cc: &str, rep: u32) -> String {
    format!(
        "{}_{}_rep{rep}.jsonl",
        crate::plot::safe(case),
        crate::plot::safe(cc)
    )
}

/// A summary of a telemetry file's records `recs` from `from` to `to` s of
/// run time (the first record is taken at the flow's start, `start_s`):
/// per flow, the phases, law modes and loss classes seen, and the window
/// and RTT ranges.  None without a record there.
pub(super) fn telemetry_at(
    recs: &[serde_json::Value],
    start_s: f64,
    from: f64,
    to: f64,
) -> Option<String> {
    use std::collections::BTreeMap;
    let t0 = recs.first()?.get("t_us")?.as_f64()?;
    let num = |r: &serde_json::Value, k: &str| r.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let mut by_flow: BTreeMap<String, Vec<&serde_json::Value>> = BTreeMap::new();
    for r in recs {
        let t = start_s + (num(r, "t_us") - t0) / 1e6;
        if (from..=to).contains(&t) {
            let local = r.get("local").and_then(|v| v.as_str()).unwrap_or("?");
            by_flow.entry(local.to_string()).or_default().push(r);
        }
    }
    if by_flow.is_empty() {
        return None;
    }
    let mut out = String::new();
    for (local, v) in by_flow {
        let set = |k: &str| {
            let mut seen: Vec<String> = Vec::new();
            for r in &v {
                let x = r
                    .get(k)
                    .map(|x| x.to_string().trim_matches('"').to_string());
                if let Some(x) = x.filter(|x| !seen.contains(x)) {
                    seen.push(x);
                }
            }
            seen.join("/")
        };
        let range = |k: &str, div: f64| {
            let xs = v.iter().map(|r| num(r, k) / div);
            let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
            format!("{lo:.0}-{hi:.0}")
        };
        let _ = write!(
            out,
            "{local} from {from:.2} s: {} records, phase {}, mode {}, loss_class {}, cwnd {}, \
             rtts {} ms, rtt_min {} ms, rtt_max {} ms; ",
            v.len(),
            set("phase"),
            set("mode"),
            set("loss_class"),
            range("cwnd", 1.0),
            range("rtts_us", 1e3),
            range("rtt_min_us", 1e3),
            range("rtt_max_us", 1e3),
        );
    }
    Some(out.trim_end_matches("; ").to_string())
}
