//! A run directory read back: `lab plot DIR...` re-draws its plots and
//! `lab compare A B` sets two of them side by side, from what `lab run`
//! stored (summary.json, samples.csv, queue.csv), with no kernel involved.
//! Also what each run directory records about where it came from
//! (provenance.json) and the controllers' per-round telemetry.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::plot::plots;
use crate::scenario::Scenario;
use crate::summary::{aggregate, FlowSample, QueueSample, RunResult, RunSummary};

pub struct Stored {
    pub dir: PathBuf,
    pub stem: String,
    pub scenario: Scenario,
    pub results: Vec<RunResult>,
}

impl Stored {
    pub fn runs(&self) -> Vec<&RunSummary> {
        self.results.iter().map(|r| &r.summary).collect()
    }
}

fn csv_rows(path: &Path) -> Result<Vec<Vec<String>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    Ok(text
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(csv_split)
        .collect())
}

/// A field as CSV (RFC 4180): quoted when it holds a comma or a quote.  A
/// CC with two tunables, `ctcp_plus:plateau=0.9375,spread=1`, has a comma.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// One CSV line's fields, quoted fields unquoted (the inverse of csv_field).
fn csv_split(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

pub const SAMPLES_HEADER: &str = "case,cc,rep,t,flow,cwnd,srtt_us,min_rtt_us,delivered,total_retrans,pacing_rate,delivery_rate,rx_bytes,ca_state,ssthresh,unacked,sacked,lost,retrans_out";
pub const QUEUE_HEADER: &str = "case,cc,rep,t,qlen,backlog,drops";

/// One run's rows of samples.csv and queue.csv.
pub fn write_rows(
    samples: &mut impl std::io::Write,
    queue: &mut impl std::io::Write,
    r: &RunResult,
) -> Result<()> {
    let (case, cc, rep) = (
        csv_field(&r.summary.case),
        csv_field(&r.summary.cc),
        r.summary.rep,
    );
    for s in &r.samples {
        writeln!(
            samples,
            "{case},{cc},{rep},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.t,
            s.flow,
            s.cwnd,
            s.srtt_us,
            s.min_rtt_us,
            s.delivered,
            s.total_retrans,
            s.pacing_rate,
            s.delivery_rate,
            s.rx_bytes,
            s.ca_state,
            s.ssthresh,
            s.unacked,
            s.sacked,
            s.lost,
            s.retrans_out
        )?;
    }
    for q in &r.queue {
        writeln!(
            queue,
            "{case},{cc},{rep},{:.3},{},{},{}",
            q.t, q.qlen, q.backlog, q.drops
        )?;
    }
    Ok(())
}

/// The finished runs of a directory an interrupted `lab run` left: those
/// in runs.jsonl (written after each run), with their samples.  A run
/// recorded before `retrans_warm` or `cwnd_max` existed gets them from its
/// samples (the scenario's warm-up `w0`), so a resumed check judges old and
/// new runs alike.
pub fn load_finished(dir: &Path, w0: f64) -> Result<Vec<RunResult>> {
    let p = dir.join("runs.jsonl");
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        // Made before runs.jsonl existed, or nothing finished.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("read {}", p.display())),
    };
    let mut runs = Vec::new();
    for (i, l) in text.lines().enumerate() {
        match serde_json::from_str::<RunSummary>(l) {
            Ok(r) => runs.push(r),
            // A line cut by the kill: that run is made again.
            Err(_) if i + 1 == text.lines().count() => {}
            Err(e) => bail!("{}:{}: {e}", p.display(), i + 1),
        }
    }
    let mut runs = attach_samples(dir, runs)?;
    // (not from no samples: that would read as nothing retransmitted)
    for r in runs.iter_mut().filter(|r| {
        (r.summary.retrans_warm.is_none()
            || r.summary.cwnd_max.is_none()
            || r.summary.cwnd_max_at.is_empty())
            && !r.samples.is_empty()
    }) {
        crate::summary::fill_from_samples(&mut r.summary, &r.samples, w0);
    }
    Ok(runs)
}

/// Read a `lab run` directory back.
pub fn load(dir: &Path) -> Result<Stored> {
    let sp = dir.join("summary.json");
    let text = std::fs::read_to_string(&sp).with_context(|| {
        format!(
            "{}: not a lab results directory (no summary.json)",
            dir.display()
        )
    })?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", sp.display()))?;
    let scenario: Scenario = serde_json::from_value(v["scenario_settings"].clone())
        .with_context(|| format!("{}: scenario_settings", sp.display()))?;
    let runs: Vec<RunSummary> = serde_json::from_value(v["runs"].clone())
        .with_context(|| format!("{}: runs", sp.display()))?;
    let stem = v["scenario"].as_str().unwrap_or("?").to_string();
    Ok(Stored {
        dir: dir.to_path_buf(),
        stem,
        scenario,
        results: attach_samples(dir, runs)?,
    })
}

/// `runs` with their rows of samples.csv and queue.csv.
/// [`csv_rows`], with a missing file read as no rows: a results directory
/// carried to another machine as its summaries alone (scenario.toml and
/// runs.jsonl, what a check judges) resumes without the runs' samples.
fn csv_rows_if_any(path: &Path) -> Result<Vec<Vec<String>>> {
    if path.exists() {
        csv_rows(path)
    } else {
        Ok(Vec::new())
    }
}

fn attach_samples(dir: &Path, runs: Vec<RunSummary>) -> Result<Vec<RunResult>> {
    type Key = (String, String, u32);
    let mut samples: BTreeMap<Key, Vec<FlowSample>> = BTreeMap::new();
    let num = |s: &str, what: &str| -> Result<f64> {
        s.parse::<f64>()
            .with_context(|| format!("{}: bad {what} {s:?}", dir.display()))
    };
    for r in csv_rows_if_any(&dir.join("samples.csv"))? {
        if r.len() < 13 {
            bail!("{}/samples.csv: short row {r:?}", dir.display());
        }
        // Rows stored before the kernel's accounting was (13 columns)
        // read it as 0.
        let extra =
            |i: usize, what: &str| -> Result<f64> { r.get(i).map_or(Ok(0.0), |v| num(v, what)) };
        samples
            .entry((r[0].clone(), r[1].clone(), num(&r[2], "rep")? as u32))
            .or_default()
            .push(FlowSample {
                t: num(&r[3], "t")?,
                flow: num(&r[4], "flow")? as usize,
                cwnd: num(&r[5], "cwnd")? as u32,
                srtt_us: num(&r[6], "srtt")? as u32,
                min_rtt_us: num(&r[7], "min_rtt")? as u32,
                delivered: num(&r[8], "delivered")? as u32,
                total_retrans: num(&r[9], "retrans")? as u32,
                pacing_rate: num(&r[10], "pacing")? as u64,
                delivery_rate: num(&r[11], "rate")? as u64,
                rx_bytes: num(&r[12], "rx")? as u64,
                ca_state: extra(13, "ca_state")? as u8,
                ssthresh: extra(14, "ssthresh")? as u32,
                unacked: extra(15, "unacked")? as u32,
                sacked: extra(16, "sacked")? as u32,
                lost: extra(17, "lost")? as u32,
                retrans_out: extra(18, "retrans_out")? as u32,
            });
    }
    let mut queue: BTreeMap<Key, Vec<QueueSample>> = BTreeMap::new();
    for r in csv_rows_if_any(&dir.join("queue.csv"))? {
        if r.len() < 7 {
            bail!("{}/queue.csv: short row {r:?}", dir.display());
        }
        queue
            .entry((r[0].clone(), r[1].clone(), num(&r[2], "rep")? as u32))
            .or_default()
            .push(QueueSample {
                t: num(&r[3], "t")?,
                qlen: num(&r[4], "qlen")? as u32,
                backlog: num(&r[5], "backlog")? as u32,
                drops: num(&r[6], "drops")? as u32,
            });
    }
    Ok(runs
        .into_iter()
        .map(|s| {
            let k = (s.case.clone(), s.cc.clone(), s.rep);
            RunResult {
                samples: samples.remove(&k).unwrap_or_default(),
                queue: queue.remove(&k).unwrap_or_default(),
                summary: s,
            }
        })
        .collect())
}

/// `lab plot DIR`: the plots again, from the stored data.
pub fn replot(dir: &Path) -> Result<()> {
    let st = load(dir)?;
    std::fs::create_dir_all(dir.join("plots"))?;
    let runs = st.runs();
    let agg = aggregate(&runs);
    plots(dir, &st.scenario, &st.results, &agg)?;
    println!(
        "plots of {} re-drawn in {}",
        st.stem,
        dir.join("plots").display()
    );
    Ok(())
}

/// One (case, cc) of a comparison: means over repetitions.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Side {
    pub goodput_mbit: f64,
    pub rtt_p95_ms: f64,
    pub retransmits: f64,
    pub recovery_share: f64,
    pub reps: usize,
}

fn sides(st: &Stored) -> BTreeMap<(String, String), Side> {
    let mut m: BTreeMap<(String, String), Vec<&RunSummary>> = BTreeMap::new();
    for r in st.runs() {
        m.entry((r.case.clone(), r.cc.clone())).or_default().push(r);
    }
    m.into_iter()
        .map(|(k, v)| {
            let n = v.len() as f64;
            let mean = |f: fn(&RunSummary) -> f64| v.iter().map(|r| f(r)).sum::<f64>() / n;
            (
                k,
                Side {
                    goodput_mbit: mean(|r| r.goodput_mbit),
                    rtt_p95_ms: mean(|r| r.rtt_p95_ms),
                    retransmits: mean(|r| r.retransmits as f64),
                    recovery_share: mean(|r| r.recovery_share),
                    reps: v.len(),
                },
            )
        })
        .collect()
}

/// `lab compare A B`: every (case, cc) both directories ran, with B/A
/// ratios; the rows only one side has are listed as such.
pub fn compare(a: &Path, b: &Path, as_json: bool) -> Result<String> {
    let (sa, sb) = (load(a)?, load(b)?);
    let (ma, mb) = (sides(&sa), sides(&sb));
    let ratio = |x: f64, y: f64| if x > 0.0 { y / x } else { f64::NAN };
    let mut rows = Vec::new();
    let mut only = Vec::new();
    for (k, va) in &ma {
        match mb.get(k) {
            Some(vb) => rows.push((k.clone(), va.clone(), vb.clone())),
            None => only.push(format!("{} {} (only in A)", k.0, k.1)),
        }
    }
    for k in mb.keys().filter(|k| !ma.contains_key(*k)) {
        only.push(format!("{} {} (only in B)", k.0, k.1));
    }
    if rows.is_empty() {
        bail!(
            "{} and {} have no (case, cc) in common",
            a.display(),
            b.display()
        );
    }
    if as_json {
        let v = json!({
            "a": a, "b": b,
            "rows": rows.iter().map(|((case, cc), x, y)| json!({
                "case": case, "cc": cc, "a": x, "b": y,
                "goodput_ratio": ratio(x.goodput_mbit, y.goodput_mbit),
                "rtt_p95_ratio": ratio(x.rtt_p95_ms, y.rtt_p95_ms),
            })).collect::<Vec<_>>(),
            "unmatched": only,
        });
        return Ok(serde_json::to_string(&v)? + "\n");
    }
    let mut o = String::new();
    let _ = writeln!(o, "A = {}\nB = {}", a.display(), b.display());
    let _ = writeln!(
        o,
        "{:<28} {:<10} {:>15} {:>8} {:>17} {:>8} {:>15}",
        "case", "cc", "Mbit/s A -> B", "B/A", "p95 ms A -> B", "B/A", "retx A -> B"
    );
    for ((case, cc), x, y) in &rows {
        let _ = writeln!(
            o,
            "{:<28} {:<10} {:>6.1} -> {:>5.1} {:>8.3} {:>7.1} -> {:>6.1} {:>8.3} {:>6.0} -> {:>5.0}",
            case,
            cc,
            x.goodput_mbit,
            y.goodput_mbit,
            ratio(x.goodput_mbit, y.goodput_mbit),
            x.rtt_p95_ms,
            y.rtt_p95_ms,
            ratio(x.rtt_p95_ms, y.rtt_p95_ms),
            x.retransmits,
            y.retransmits
        );
    }
    for l in only {
        let _ = writeln!(o, "{l}");
    }
    Ok(o)
}

fn cmd_out(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// provenance.json: what produced a run directory.
pub fn provenance(root: &Path, scenario_file: &Path, quick: bool) -> Value {
    let git = |args: &[&str]| {
        let mut a = vec!["-C", root.to_str().unwrap_or(".")];
        a.extend_from_slice(args);
        cmd_out("git", &a)
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let sysctls: BTreeMap<&str, Option<String>> = [
        "net/ipv4/tcp_congestion_control",
        "net/ipv4/tcp_available_congestion_control",
        "net/ipv4/tcp_rmem",
        "net/ipv4/tcp_wmem",
        "net/ipv4/tcp_sack",
        "net/ipv4/tcp_ecn",
        "net/ipv4/tcp_no_metrics_save",
        "net/core/default_qdisc",
    ]
    .into_iter()
    .map(|k| (k, read_trim(&format!("/proc/sys/{k}"))))
    .collect();
    json!({
        "kernel": cmd_out("uname", &["-r"]),
        "kernel_version": read_trim("/proc/version"),
        "host": read_trim("/proc/sys/kernel/hostname"),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu_model": cpu,
        "git_revision": git(&["rev-parse", "HEAD"]),
        "git_dirty": git(&["status", "--porcelain"]).map(|s| !s.is_empty()),
        "ccload_version": env!("CARGO_PKG_VERSION"),
        "scenario_file": scenario_file,
        "quick": quick,
        "started_unix_s": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        "sysctls_root_netns": sysctls,
        "link": "3 netns (sender, router, receiver); router: TBF rate limit + pfifo drop-tail \
                 (the case's buffer), iptables statistic drops for random loss (with \
                 grid.paired_loss: drawn in the delay line from a seed per case and \
                 repetition), offloads off; \
                 propagation delay from a userspace TUN delay line (ccload-testbed)",
        "command": std::env::args().collect::<Vec<_>>(),
    })
}

/// `ccload watch --format json` of one controller into a file for one run
/// (the per-round telemetry of `lab run`).
pub struct Recorder {
    child: std::process::Child,
}

impl Recorder {
    pub fn start(algo: &str, file: &Path) -> Result<Recorder> {
        if let Some(d) = file.parent() {
            std::fs::create_dir_all(d)?;
        }
        let out =
            std::fs::File::create(file).with_context(|| format!("create {}", file.display()))?;
        let mut child = Command::new(ccload_testbed::ccload_bin()?)
            .args(["watch", "--algo", algo, "--format", "json"])
            .stdout(out)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("spawn ccload watch")?;
        // What the watch says on stderr, its first 4 KiB kept for the error
        // below; read to the end so that it never blocks on a full pipe.
        let mut err = child.stderr.take().expect("piped");
        let said = std::thread::spawn(move || {
            let (mut kept, mut buf) = (Vec::new(), [0u8; 4096]);
            while let Ok(n) = std::io::Read::read(&mut err, &mut buf) {
                if n == 0 {
                    break;
                }
                let room = 4096usize.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            String::from_utf8_lossy(&kept).trim().to_string()
        });
        if !ccload_testbed::wait_watch_holding(&mut child, algo, std::time::Duration::from_secs(10))
        {
            let _ = child.kill();
            let _ = child.wait();
            let said = said.join().unwrap_or_default();
            bail!(
                "ccload watch --algo {algo} did not start within 10 s{}",
                if said.is_empty() {
                    " (it said nothing)".to_string()
                } else {
                    format!(": {said}")
                }
            );
        }
        Ok(Recorder { child })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // SAFETY: signalling our own child; SIGINT flushes and exits.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
    }
}

/// A fresh directory under the system's temp dir for one test (`name`
/// and this process's id), created empty.
#[cfg(test)]
fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccload-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
mod csv_tests {
    use super::*;

    /// A watch that exits at once: the error carries what it said (a
    /// telemetry recorder that "did not start" once gave no reason).
    #[test]
    fn a_watch_that_does_not_start_says_why() {
        if let Err(e) = ccload_testbed::ccload_bin() {
            eprintln!("SKIPPED a_watch_that_does_not_start_says_why: {e}");
            return;
        }
        let dir = test_dir("recorder");
        let Err(e) = Recorder::start("nosuch", &dir.join("t.jsonl")) else {
            panic!("a watch of an unknown algorithm started");
        };
        let e = e.to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            e.contains("did not start") && e.contains("invalid value 'nosuch'"),
            "{e}"
        );
    }

    /// A run of a CC given two tunables (a comma in its name) is stored and
    /// read back whole: samples.csv split the name on its comma and `lab
    /// plot` failed with `bad rep "spread=1"`.
    #[test]
    fn a_cc_with_a_comma_is_stored_and_read_back() {
        let dir = test_dir("csv-test");
        let names = ["ctcp_plus:plateau=0.9375,spread=1", "reno", "odd\"name,x"];
        let (mut samples, mut queue) = (
            format!("{SAMPLES_HEADER}\n").into_bytes(),
            format!("{QUEUE_HEADER}\n").into_bytes(),
        );
        let mut runs = Vec::new();
        for (i, cc) in names.iter().enumerate() {
            let r = RunResult {
                summary: RunSummary {
                    case: "100M_10ms".into(),
                    cc: cc.to_string(),
                    rep: 1,
                    ..Default::default()
                },
                samples: vec![FlowSample {
                    t: 0.5,
                    flow: 0,
                    cwnd: 77 + i as u32,
                    srtt_us: 10_500,
                    min_rtt_us: 10_000,
                    delivered: 5,
                    total_retrans: 1,
                    pacing_rate: 2,
                    delivery_rate: 3,
                    rx_bytes: 4,
                    ca_state: 3,
                    ssthresh: 2_167_469_465,
                    unacked: 7,
                    sacked: 2,
                    lost: 1,
                    retrans_out: 1,
                }],
                queue: vec![QueueSample {
                    t: 0.5,
                    qlen: 3 + i as u32,
                    backlog: 4,
                    drops: 0,
                }],
            };
            write_rows(&mut samples, &mut queue, &r).unwrap();
            runs.push(r.summary);
        }
        std::fs::write(dir.join("samples.csv"), samples).unwrap();
        std::fs::write(dir.join("queue.csv"), queue).unwrap();
        let back = attach_samples(&dir, runs);
        std::fs::remove_dir_all(&dir).unwrap();
        let back = back.unwrap();
        for (i, r) in back.iter().enumerate() {
            assert_eq!(r.summary.cc, names[i]);
            assert_eq!(r.samples.len(), 1, "{}", names[i]);
            assert_eq!(r.samples[0].cwnd, 77 + i as u32);
            // the kernel's accounting travels too
            let s = &r.samples[0];
            assert_eq!(
                (
                    s.ca_state,
                    s.ssthresh,
                    s.unacked,
                    s.sacked,
                    s.lost,
                    s.retrans_out
                ),
                (3, 2_167_469_465, 7, 2, 1, 1)
            );
            assert_eq!(r.queue[0].qlen, 3 + i as u32);
        }
        assert_eq!(csv_split("a,\"b,c\",d"), ["a", "b,c", "d"]);
    }
}

#[cfg(test)]
mod warm_tests {
    use super::*;

    /// A fresh directory holding one runs.jsonl line of a run recorded
    /// before `retrans_warm` existed (no such keys).
    fn dir_with_old_run(name: &str, case: &str, retransmits: u32) -> std::path::PathBuf {
        let dir = test_dir(name);
        let mut old = serde_json::to_value(RunSummary {
            case: case.into(),
            cc: "reno".into(),
            retransmits,
            ..Default::default()
        })
        .unwrap();
        let o = old.as_object_mut().unwrap();
        o.remove("retrans_warm");
        o.remove("retrans_per_seg_warm");
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("warm"));
        std::fs::write(dir.join("runs.jsonl"), format!("{line}\n")).unwrap();
        dir
    }

    /// A run recorded before `retrans_warm` existed (no such key in its
    /// runs.jsonl line) is given it from its samples when a check resumes.
    #[test]
    fn an_old_run_gets_its_retransmissions_after_the_warmup() {
        let dir = dir_with_old_run("warm-test", "100M_190ms_1bdp", 3_143);
        let row = |t: f64, delivered: u32, retx: u32| {
            format!("100M_190ms_1bdp,reno,0,{t},0,10,190000,190000,{delivered},{retx},0,0,0\n")
        };
        std::fs::write(
            dir.join("samples.csv"),
            format!(
                "{SAMPLES_HEADER}\n{}{}{}",
                row(0.0, 0, 0),
                row(5.0, 30_000, 3_140),
                row(40.0, 330_000, 3_143)
            ),
        )
        .unwrap();
        std::fs::write(dir.join("queue.csv"), format!("{QUEUE_HEADER}\n")).unwrap();
        let back = load_finished(&dir, 5.0);
        std::fs::remove_dir_all(&dir).unwrap();
        let r = &back.unwrap()[0].summary;
        assert_eq!((r.retransmits, r.retrans_warm), (3_143, Some(3)));
        assert!((r.retrans_per_seg_warm.unwrap() - 1e-5).abs() < 1e-12);
    }
    /// A run recorded before `retrans_warm` existed and carried without its
    /// samples keeps it unknown (the check then fails it), not 0.
    #[test]
    fn an_old_run_without_samples_has_no_count_after_the_warmup() {
        let dir = dir_with_old_run("carried-old", "c", 7);
        let back = load_finished(&dir, 5.0);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.unwrap()[0].summary.retrans_warm, None);
    }
}

/// A check carried to a fresh machine as its summaries alone (runs.jsonl,
/// no samples.csv or queue.csv) resumes: its runs keep their summaries,
/// judged counts included, with no samples.
#[cfg(test)]
mod carried_tests {
    use super::*;

    #[test]
    fn a_directory_of_summaries_alone_resumes() {
        let dir = test_dir("carried-test");
        let run = RunSummary {
            case: "20M_80ms_1bdp_loss1e-4".into(),
            cc: "ub_reno".into(),
            retransmits: 40,
            retrans_warm: Some(12),
            retrans_per_seg_warm: Some(1e-4),
            goodput_mbit: 18.5,
            ..Default::default()
        };
        let line = serde_json::to_string(&run).unwrap();
        std::fs::write(dir.join("runs.jsonl"), format!("{line}\n")).unwrap();
        let back = load_finished(&dir, 5.0);
        // a file that is there but broken is still an error
        std::fs::write(dir.join("samples.csv"), format!("{SAMPLES_HEADER}\nx,y\n")).unwrap();
        let broken = load_finished(&dir, 5.0);
        std::fs::remove_dir_all(&dir).unwrap();
        let back = back.unwrap();
        assert_eq!(back.len(), 1);
        assert!(back[0].samples.is_empty() && back[0].queue.is_empty());
        let r = &back[0].summary;
        assert_eq!(
            (r.retransmits, r.retrans_warm, r.goodput_mbit),
            (40, Some(12), 18.5)
        );
        assert!(broken.is_err());
    }

    /// The report's plots are drawn for carried runs, which have no
    /// samples (empty time series, no RTT CDF), beside runs that have them.
    #[test]
    fn carried_runs_without_samples_are_plotted() {
        let dir = test_dir("carried-plot");
        std::fs::create_dir_all(dir.join("plots")).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let sc = Scenario::load(&root.join("configs/lab/acceptance.toml")).unwrap();
        let case = sc.cases()[0].label.clone();
        let run = |cc: &str, goodput_mbit| RunSummary {
            case: case.clone(),
            cc: cc.into(),
            goodput_mbit,
            utilisation: goodput_mbit / 20.0,
            rtt_p95_ms: 13.8,
            ..Default::default()
        };
        let lines: Vec<String> = [run("reno", 4.1), run("ub_reno", 4.0)]
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        std::fs::write(dir.join("runs.jsonl"), lines.join("\n") + "\n").unwrap();
        let results = load_finished(&dir, sc.warmup_s).unwrap();
        let summaries: Vec<&RunSummary> = results.iter().map(|r| &r.summary).collect();
        let agg = aggregate(&summaries);
        let drawn = crate::plot::plots(&dir, &sc, &results, &agg);
        let pngs = std::fs::read_dir(dir.join("plots"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "png")
            })
            .count();
        std::fs::remove_dir_all(&dir).unwrap();
        drawn.unwrap();
        assert!(pngs >= 2, "{pngs} PNG plots");
    }
}

#[cfg(test)]
mod float_tests {
    /// A stored run parses back to the very numbers it was measured with
    /// (serde_json's float_roundtrip): a resumed check compared a kept run
    /// with itself and read 19.269036911494897 against ...894.
    #[test]
    fn stored_floats_parse_back_exactly() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut vals = vec![19.269036911494897f64, 0.1 + 0.2, 1.0 / 3.0];
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // goodputs, ratios, lateness: 1e-6 .. 1e4
            vals.push((x >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((x % 11) as i32 - 6));
        }
        for v in vals {
            let s = serde_json::to_string(&v).unwrap();
            let back: f64 = serde_json::from_str(&s).unwrap();
            assert_eq!(v.to_bits(), back.to_bits(), "{v:?} -> {s} -> {back:?}");
        }
    }
}
