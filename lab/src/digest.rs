//! `cargo xtask lab digest DIR`: the verdict of a stored check as one
//! table per controller, from its `checks.json` and those of the
//! scenarios it checked beside it (`DIR/<also>/checks.json`).  Each row is
//! one comparison (a metric against a kernel CC, or a bound of its own)
//! over the cells a threshold reads: how many passed, and where it stands
//! (ours / theirs for comparisons, the value for bounds) at its median,
//! lowest and highest, with the cell of each extreme.  docs/results.md
//! holds the digest of the committed grid, and a test keeps the two equal.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

/// One threshold as `checks.json` stores it.
struct Outcome {
    case: String,
    cc: String,
    against: String,
    metric: String,
    value: f64,
    reference: f64,
    pass: bool,
}

fn read(path: &Path) -> Result<Vec<Outcome>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let v: Vec<Value> =
        serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
    let s = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let f = |o: &Value, k: &str| o.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
    Ok(v.iter()
        .map(|o| Outcome {
            case: s(o, "case"),
            cc: s(o, "cc"),
            against: s(o, "against"),
            metric: s(o, "metric"),
            value: f(o, "value"),
            reference: f(o, "reference"),
            pass: o.get("pass").and_then(Value::as_bool).unwrap_or(false),
        })
        .collect())
}

/// What a row shows of one outcome: ours / theirs where there is a
/// reference to divide by, the value otherwise.
fn point(o: &Outcome) -> Option<f64> {
    let v = if o.against.is_empty() {
        o.value
    } else if o.reference > 0.0 {
        o.value / o.reference
    } else {
        return None;
    };
    v.is_finite().then_some(v)
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The digest of the checks stored in `dir` and in its subdirectories that
/// hold a `checks.json` (the scenarios of `also`), one section per
/// controller.
pub fn digest(dir: &Path) -> Result<String> {
    let mut sources = vec![(String::new(), dir.join("checks.json"))];
    let mut subs: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("checks.json").is_file() && p.join("scenario.toml").is_file())
        .collect();
    subs.sort();
    for p in subs {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        sources.push((name, p.join("checks.json")));
    }
    // controller -> (scenario, metric, against) -> outcomes
    type Key = (String, String, String);
    let mut rows: BTreeMap<String, BTreeMap<Key, Vec<Outcome>>> = BTreeMap::new();
    let top = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    for (sub, path) in sources {
        let scenario = if sub.is_empty() { top.clone() } else { sub };
        for o in read(&path)? {
            let key = (scenario.clone(), o.metric.clone(), o.against.clone());
            rows.entry(o.cc.clone())
                .or_default()
                .entry(key)
                .or_default()
                .push(o);
        }
    }
    let mut out = String::new();
    for (cc, by_row) in &rows {
        let (n, passed) = by_row
            .values()
            .flatten()
            .fold((0, 0), |(n, p), o| (n + 1, p + o.pass as usize));
        let _ = writeln!(out, "### {cc}: {passed} of {n} thresholds\n");
        let _ = writeln!(
            out,
            "| scenario | metric | against | passed | median | lowest | highest |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for ((scenario, metric, against), v) in by_row {
            let mut pts: Vec<(f64, &str)> = v
                .iter()
                .filter_map(|o| point(o).map(|p| (p, o.case.as_str())))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let passed = v.iter().filter(|o| o.pass).count();
            let (med, lo, hi) = match pts.len() {
                0 => ("-".to_string(), "-".to_string(), "-".to_string()),
                k => (
                    fmt_num(if k % 2 == 1 {
                        pts[k / 2].0
                    } else {
                        (pts[k / 2 - 1].0 + pts[k / 2].0) / 2.0
                    }),
                    format!("{} ({})", fmt_num(pts[0].0), pts[0].1),
                    format!("{} ({})", fmt_num(pts[k - 1].0), pts[k - 1].1),
                ),
            };
            let against = if against.is_empty() {
                "-".to_string()
            } else {
                format!("{against} (ours / theirs)")
            };
            let _ = writeln!(
                out,
                "| {scenario} | {metric} | {against} | {passed} of {} | {med} | {lo} | {hi} |",
                v.len()
            );
        }
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/results.md carries the digest of the committed grid between
    /// its markers, exactly as `cargo xtask lab digest` writes it.
    #[test]
    fn the_results_page_holds_the_committed_grids_digest() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let page = std::fs::read_to_string(root.join("docs/results.md")).unwrap();
        let begin = "<!-- digest: cargo xtask lab digest docs/grid/acceptance4 -->\n";
        let end = "<!-- end of digest -->";
        let at = page.find(begin).expect("the digest's opening marker") + begin.len();
        let stop = page[at..].find(end).expect("the digest's closing marker") + at;
        let want = digest(&root.join("docs/grid/acceptance4")).unwrap();
        assert!(
            page[at..stop].trim() == want.trim(),
            "docs/results.md's digest differs from the grid's; regenerate it with \
             `cargo xtask lab digest docs/grid/acceptance4`"
        );
    }

    #[test]
    fn a_row_reads_ratios_against_a_cc_and_values_of_its_own() {
        let dir = std::env::temp_dir().join(format!("ccl-digest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("side")).unwrap();
        let o = |case: &str, against: &str, metric: &str, v: f64, r: f64, pass: bool| {
            serde_json::json!({"case": case, "cc": "x", "against": against, "metric": metric,
                "value": v, "reference": r, "pass": pass})
        };
        let main = serde_json::json!([
            o("a", "reno", "goodput_mbit", 9.0, 10.0, false),
            o("b", "reno", "goodput_mbit", 12.0, 10.0, true),
            o("c", "reno", "goodput_mbit", 10.0, 10.0, true),
            o("a", "", "cwnd_max", 50.0, 0.0, true),
        ]);
        std::fs::write(dir.join("checks.json"), main.to_string()).unwrap();
        std::fs::write(
            dir.join("side/checks.json"),
            serde_json::json!([o("d", "", "jain", 0.99, 0.0, true)]).to_string(),
        )
        .unwrap();
        std::fs::write(dir.join("side/scenario.toml"), "").unwrap();
        let d = digest(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(d.contains("### x: 4 of 5 thresholds"), "{d}");
        assert!(
            d.contains(
                "| goodput_mbit | reno (ours / theirs) | 2 of 3 | 1.000 | 0.900 (a) | 1.200 (b) |"
            ),
            "{d}"
        );
        assert!(
            d.contains("| cwnd_max | - | 1 of 1 | 50.0 | 50.0 (a) | 50.0 (a) |"),
            "{d}"
        );
        assert!(d.contains("| side | jain | - | 1 of 1 | 0.990 |"), "{d}");
    }
}
