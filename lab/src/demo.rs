//! `cargo xtask lab demo`: the README's main job on an emulated link.
//!
//! One controller through the `demo` scenario's bottleneck (50 Mbit/s,
//! 40 ms, 1 BDP drop-tail) while `ccload watch` shows its live state in the
//! compact table, then cubic through a fresh link of the same kind, then
//! both side by side: goodput, p50/p95 RTT, retransmissions, time in
//! Recovery.  On a link the controller leaves slow start, so the rows show
//! its law (`CA`) rather than a loopback transfer that never stops growing.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ccload_testbed::{ccload_bin, privileged_skip_reason, wait_watch_holding};

use crate::run::run_case;
use crate::scenario::{Scenario, KERNEL_CCS};
use crate::session::{scenario_path, KernelState};
use crate::summary::RunSummary;

pub struct Demo {
    /// What `ccload watch` printed during the controller's run.
    pub watch: String,
    /// The controller's run, then cubic's.
    pub runs: Vec<RunSummary>,
}

/// Run the demo; `echo` copies the live table to stdout (about one
/// snapshot a second) and prints the comparison.
pub fn run(root: &Path, algo: &str, secs: Option<f64>, echo: bool) -> Result<Demo> {
    if KERNEL_CCS.contains(&algo) {
        bail!("--algo {algo}: the demo shows one of ccload's controllers (ccpd, hetcp, ctcp_plus, ub_reno) against cubic");
    }
    if let Some(why) = privileged_skip_reason() {
        bail!("the demo needs root, BTF and bpffs: {why}");
    }
    let mut sc = Scenario::load(&scenario_path(root, "demo")?)?;
    sc.ccs = vec![algo.to_string(), "cubic".into()];
    if let Some(s) = secs {
        if !(s.is_finite() && (4.0..=600.0).contains(&s)) {
            bail!("--secs {s}: want 4..600 seconds");
        }
        sc.duration_s = s;
    }
    sc.validate()?;
    let case = sc
        .cases()
        .into_iter()
        .next()
        .context("the demo scenario has no case")?;
    let _kstate = KernelState::prepare(&sc.ccs)?;
    let say = |s: String| {
        if echo {
            println!("{s}");
        }
    };
    say(format!(
        "== {algo} through a {} Mbit/s, {} ms, {:.0}-packet drop-tail link for {} s; live state from `ccload watch`:",
        case.link.rate_mbit,
        case.rtt_ms,
        case.link.buffer_pkts,
        sc.duration_s
    ));
    let watch = Watcher::start(algo, echo)?;
    let mine = run_case(&sc, &case, algo, 0, &mut |_| {});
    let text = watch.stop();
    let mine = mine?;
    say(format!(
        "== cubic through a fresh link of the same kind for {} s",
        sc.duration_s
    ));
    let cubic = run_case(&sc, &case, "cubic", 0, &mut |_| {})?;
    let runs = vec![mine.summary, cubic.summary];
    if echo {
        print!("{}", side_by_side(&runs));
    }
    Ok(Demo { watch: text, runs })
}

/// What a run's delay-line lateness means for its numbers, when it was
/// over the lab's limit.  On a virtual machine whose CPUs idle, a sleeping
/// thread is woken late by the hypervisor (1-3 ms at p99 here, where a busy
/// CPU wakes it within ~50 us: docs/lab.md, "Timing"), so a late line is
/// not an overloaded machine: the RTTs carry that much jitter.
fn late_note(r: &RunSummary) -> String {
    if r.valid {
        return String::new();
    }
    format!(
        "  (delay line p99 {:.1} ms late: RTTs carry that jitter; docs/lab.md, \"Timing\")",
        r.lateness_p99_us as f64 / 1000.0
    )
}

/// The comparison table.
pub fn side_by_side(runs: &[RunSummary]) -> String {
    let mut s = format!(
        "{:<10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
        "cc", "Mbit/s", "rtt p50", "rtt p95", "base rtt", "retx", "Recovery"
    );
    for r in runs {
        s += &format!(
            "{:<10} {:>9.1} {:>6.1} ms {:>6.1} ms {:>6.1} ms {:>8} {:>8.1}%{}\n",
            r.cc,
            r.goodput_mbit,
            r.rtt_p50_ms,
            r.rtt_p95_ms,
            r.rtt_base_ms,
            r.retransmits,
            100.0 * r.recovery_share,
            late_note(r)
        );
    }
    if let [a, b] = runs {
        if b.goodput_mbit > 0.0 {
            s += &format!(
                "{} / {}: goodput {:.2}x, p95 RTT {:.2}x\n",
                a.cc,
                b.cc,
                a.goodput_mbit / b.goodput_mbit,
                a.rtt_p95_ms / b.rtt_p95_ms.max(1e-9)
            );
        }
    }
    s
}

/// `ccload watch --format table` of one controller, its output collected
/// (and echoed about once a second).
struct Watcher {
    child: std::process::Child,
    reader: Option<std::thread::JoinHandle<String>>,
}

impl Watcher {
    fn start(algo: &str, echo: bool) -> Result<Watcher> {
        let mut child = Command::new(ccload_bin()?)
            .args(["watch", "--algo", algo, "--format", "table", "--every", "2"])
            .stdout(Stdio::piped())
            .spawn()
            .context("spawn ccload watch")?;
        let out = child.stdout.take().context("watch stdout")?;
        let head = format!("{algo}:");
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            let mut last_echo: Option<Instant> = None;
            let mut echoing = false;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                // A snapshot starts with "<algo>: N flows, ...".
                if line.starts_with(&head) {
                    echoing =
                        echo && last_echo.is_none_or(|t| t.elapsed() >= Duration::from_millis(900));
                    if echoing {
                        last_echo = Some(Instant::now());
                    }
                }
                if echoing {
                    let mut o = std::io::stdout().lock();
                    let _ = writeln!(o, "{line}");
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        // The watch must hold the ring before the flow starts, or the
        // first rounds are not shown.
        if !wait_watch_holding(&mut child, algo, Duration::from_secs(10)) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("ccload watch --algo {algo} did not start (is another watch running?)");
        }
        Ok(Watcher {
            child,
            reader: Some(reader),
        })
    }

    fn stop(mut self) -> String {
        // SAFETY: signalling our own child; SIGINT lets watch restore
        // the sampling it set.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        self.reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
