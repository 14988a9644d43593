//! Which scenario a name means (configs/lab/*.toml), the list of them,
//! and a dry run of one.

use super::*;

pub fn scenarios_dir(root: &Path) -> PathBuf {
    root.join("configs/lab")
}

/// A scenario by path, or by name in `configs/lab/`; an unknown name is an
/// error that lists the known ones.
pub fn scenario_path(root: &Path, name: &str) -> Result<PathBuf> {
    let p = Path::new(name);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    let by_name = scenarios_dir(root).join(format!("{name}.toml"));
    if by_name.is_file() {
        return Ok(by_name);
    }
    let mut known: Vec<String> = std::fs::read_dir(scenarios_dir(root))
        .map(|d| {
            d.filter_map(|e| {
                e.ok()?
                    .path()
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
            })
            .collect()
        })
        .unwrap_or_default();
    known.sort();
    bail!(
        "no scenario {name:?}: not a file and not in {} (known: {})",
        scenarios_dir(root).display(),
        known.join(", ")
    )
}

/// `lab list [--json]`: every scenario with its size.
pub fn list(root: &Path, json: bool) -> Result<()> {
    let mut v: Vec<_> = std::fs::read_dir(scenarios_dir(root))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    let mut docs = Vec::new();
    for p in v {
        let s = Scenario::load(&p)?;
        let runs = |s: &Scenario| s.cases().len() * s.ccs.len() * s.repetitions as usize;
        let q = s.quick();
        if json {
            docs.push(serde_json::json!({
                "name": p.file_stem().unwrap().to_string_lossy(),
                "path": p,
                "title": s.title,
                "paper": s.paper,
                "ccs": s.ccs,
                "runs": runs(&s),
                "duration_s": s.duration_s,
                "quick_runs": runs(&q),
                "quick_duration_s": q.duration_s,
            }));
            continue;
        }
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
    if json {
        println!("{}", serde_json::to_string(&docs)?);
    }
    Ok(())
}

/// `lab run --dry-run`: the runs a scenario would make and how long they
/// would take; nothing is attached or created (no root needed).
pub fn dry_run(root: &Path, name: &str, quick: bool) -> Result<()> {
    let path = scenario_path(root, name)?;
    let full = Scenario::load(&path)?;
    let sc = if quick { full.quick() } else { full };
    let mut n = 0usize;
    let mut secs = 0.0;
    for case in sc.cases() {
        let ccs: Vec<&String> = sc
            .ccs
            .iter()
            .filter(|cc| sc.wants(&case.label, cc))
            .collect();
        if ccs.is_empty() {
            continue;
        }
        let d = sc.for_case(&case.label).duration_s;
        println!(
            "{:<28} {} Mbit/s, {} ms, {} pkts, loss {:e}, {} flow(s): {} x {} rep(s) x {d} s",
            case.label,
            case.link.rate_mbit,
            case.rtt_ms,
            case.link.buffer_pkts,
            case.link.loss,
            case.n_flows,
            ccs.iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            sc.reps_for(&case.label)
        );
        let runs = ccs.len() * sc.reps_for(&case.label) as usize;
        n += runs;
        secs += runs as f64 * (d + 2.0);
    }
    println!(
        "{n} runs, about {:.1} min (each run's duration plus ~2 s of link setup); nothing was run",
        secs / 60.0
    );
    Ok(())
}
