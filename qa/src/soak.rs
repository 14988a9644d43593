//! `cargo xtask soak [--minutes N]`: ccload under a hostile operator.
//!
//! Eight bulk flows run through the testbed link for the whole soak, each
//! transfer on one of our controllers or a kernel CC, while
//! - two workers issue random state-changing commands at once (attach,
//!   attach --replace, detach, cgroup set/unset, apply of two alternating
//!   configs, tune), and SIGKILL a random command mid-flight now and then;
//! - a tuner runs `ccload tune` back to back, as fast as it can;
//! - a daemon (`ccload serve`) is scraped, sent SIGHUP with the config
//!   rewritten between the two configs, SIGKILLed and restarted.
//!
//! It ends with a verdict: every transfer that started must complete with
//! all its bytes; no command may fail for a reason other than the state
//! lock (exit 75) or a precondition another worker just changed ("is not
//! attached"); no daemon may die unless we killed it; no daemon may gain
//! fds across its reloads; after a final `apply`, `apply --dry-run` must
//! plan nothing and `status` report no leftovers; after `detach --all` no
//! ccload pin, struct_ops map or link may remain.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ccload_testbed::link::{Bottleneck, LinkCfg};

const OURS: [&str; 4] = ["ccpd", "hetcp", "ctcp_plus", "ub_reno"];
const FLOW_CCS: [&str; 6] = ["ccpd", "hetcp", "ctcp_plus", "ub_reno", "cubic", "reno"];
const FLOW_BYTES: u64 = 4 << 20;

/// A small deterministic generator (xorshift64*): a soak is replayable
/// from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// What the soak counted.
#[derive(Default, Debug, serde::Serialize)]
pub struct Report {
    pub minutes: f64,
    pub seed: u64,
    pub transfers_completed: u64,
    pub transfers_lost: u64,
    /// setsockopt(TCP_CONGESTION) refused: the CC was detached just then.
    pub transfers_not_started: u64,
    pub commands_ok: u64,
    pub commands_refused_by_lock: u64,
    pub commands_precondition: u64,
    pub commands_killed: u64,
    pub commands_failed: u64,
    pub failure_samples: Vec<String>,
    pub tunes: u64,
    pub daemon_starts: u64,
    pub daemon_reloads: u64,
    pub daemon_kills: u64,
    pub daemon_unexpected_exits: u64,
    /// fds of the daemon that lived through the chaos minus those of a
    /// fresh daemon in the same kernel state (both after one reload).
    pub daemon_fd_growth: i64,
    pub daemon_fds_checked: bool,
    pub scrapes_ok: u64,
    pub scrapes_failed: u64,
    pub final_plan_empty: bool,
    pub leftovers_after_final_apply: u64,
    pub leaked_pins: u64,
    pub leaked_struct_ops_maps: u64,
    pub leaked_links: u64,
}

impl Report {
    /// The reasons this soak failed (empty: passed).
    pub fn failures(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut need = |ok: bool, what: String| {
            if !ok {
                v.push(what)
            }
        };
        need(
            self.transfers_lost == 0,
            format!("{} transfers lost", self.transfers_lost),
        );
        need(self.transfers_completed > 0, "no transfer completed".into());
        need(
            self.commands_failed == 0,
            format!("{} commands failed", self.commands_failed),
        );
        need(
            self.daemon_unexpected_exits == 0,
            format!(
                "{} daemon exits we did not cause",
                self.daemon_unexpected_exits
            ),
        );
        need(
            self.daemon_fds_checked,
            "the daemon's fds were not compared".into(),
        );
        need(
            self.daemon_fd_growth <= 0,
            format!(
                "daemon fds grew by {} across reloads",
                self.daemon_fd_growth
            ),
        );
        need(
            self.final_plan_empty,
            "kernel state differs from the last applied config".into(),
        );
        need(
            self.leftovers_after_final_apply == 0,
            format!(
                "{} leftovers after the final apply",
                self.leftovers_after_final_apply
            ),
        );
        need(
            self.leaked_pins + self.leaked_struct_ops_maps + self.leaked_links == 0,
            format!(
                "leaked: {} pins, {} struct_ops maps, {} links",
                self.leaked_pins, self.leaked_struct_ops_maps, self.leaked_links
            ),
        );
        v
    }
}

#[derive(Default)]
struct Counters {
    ok: AtomicU64,
    lock: AtomicU64,
    pre: AtomicU64,
    killed: AtomicU64,
    failed: AtomicU64,
    tunes: AtomicU64,
    samples: Mutex<Vec<String>>,
}

impl Counters {
    /// The commands' counts and failure samples, into the report.
    fn count_into(self, r: &mut Report) {
        r.commands_ok = self.ok.into_inner();
        r.commands_refused_by_lock = self.lock.into_inner();
        r.commands_precondition = self.pre.into_inner();
        r.commands_killed = self.killed.into_inner();
        r.commands_failed = self.failed.into_inner();
        r.tunes = self.tunes.into_inner();
        r.failure_samples
            .extend(self.samples.into_inner().unwrap_or_default());
    }

    /// Classify one finished command.
    fn record(&self, args: &[String], out: &std::process::Output, killed_by_us: bool) {
        use std::os::unix::process::ExitStatusExt;
        let err = String::from_utf8_lossy(&out.stderr);
        let c = if out.status.success() {
            &self.ok
        } else if killed_by_us && out.status.signal() == Some(libc::SIGKILL) {
            &self.killed
        } else if out.status.code() == Some(75) {
            &self.lock
        } else if err.contains("is not attached") || err.contains("is not bound") {
            &self.pre
        } else {
            let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
            if s.len() < 20 {
                s.push(format!(
                    "ccload {}: {} {}",
                    args.join(" "),
                    out.status,
                    err.trim()
                ));
            }
            &self.failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

fn ccload_cmd(args: &[String]) -> Result<Command> {
    let mut c = Command::new(ccload_testbed::ccload_bin()?);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    Ok(c)
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The two configs the workers and the daemon alternate between.
fn configs(dir: &Path, cg: &Path, metrics_sock: &Path) -> Result<[PathBuf; 2]> {
    let serve = format!(
        "[serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"keep\"\nsocket = \"{}\"\n",
        metrics_sock.display()
    );
    let a = format!(
        "[algos.ccpd]\nset = {{ kp = 4 }}\n[algos.hetcp]\n[profiles.p1]\nalgo = \"ccpd\"\nset = {{ kd = 50 }}\n[[cgroups]]\npath = \"{}\"\nalgo = \"ccpd\"\nprofile = \"p1\"\n{serve}",
        cg.display()
    );
    let b = format!(
        "[algos.ccpd]\nset = {{ kp = 2 }}\n[algos.ctcp_plus]\n[algos.ub_reno]\n[[cgroups]]\npath = \"{}\"\nalgo = \"ub_reno\"\n{serve}",
        cg.display()
    );
    let pa = dir.join("a.toml");
    let pb = dir.join("b.toml");
    std::fs::write(&pa, a)?;
    std::fs::write(&pb, b)?;
    Ok([pa, pb])
}

/// One random state-changing command.
fn random_command(r: &mut Rng, cfgs: &[PathBuf; 2], cg2: &Path) -> Vec<String> {
    let algo = r.pick(&OURS).to_string();
    match r.below(10) {
        0 | 1 => s(&["attach", "--algo", &algo]),
        2 => s(&["attach", "--algo", &algo, "--replace"]),
        3 | 4 => s(&["detach", "--algo", &algo]),
        5 => {
            let cc = if r.below(2) == 0 { "cubic" } else { "ccpd" };
            s(&["cgroup", "set", cg2.to_str().unwrap_or(""), "--algo", cc])
        }
        6 => s(&["cgroup", "unset", cg2.to_str().unwrap_or("")]),
        7 | 8 => {
            let c = &cfgs[r.below(2) as usize];
            s(&["apply", c.to_str().unwrap_or("")])
        }
        _ => {
            let n = 1 + r.below(8);
            s(&[
                "tune",
                "--algo",
                &algo,
                "--set",
                &format!("trace_every={n}"),
            ])
        }
    }
}

fn worker(seed: u64, stop: &AtomicBool, c: &Counters, cfgs: &[PathBuf; 2], cg2: &Path) {
    // xorshift needs a non-zero state.
    let mut r = Rng(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        let args = random_command(&mut r, cfgs, cg2);
        let Ok(mut cmd) = ccload_cmd(&args) else {
            return;
        };
        let Ok(mut child) = cmd.spawn() else {
            continue;
        };
        // One command in six is killed at a random point.
        let kill = r.below(6) == 0;
        if kill {
            std::thread::sleep(Duration::from_millis(r.below(120)));
            // SAFETY: signalling our own child (it may have exited: ESRCH).
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        }
        let out = wait_output(&mut child);
        c.record(&args, &out, kill);
    }
}

fn wait_output(child: &mut Child) -> std::process::Output {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut stdout);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_end(&mut stderr);
    }
    let status = child.wait().expect("wait for ccload");
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

fn tuner(stop: &AtomicBool, c: &Counters) {
    let mut r = Rng(0x7e57);
    while !stop.load(Ordering::Relaxed) {
        let algo = r.pick(&OURS).to_string();
        let args = s(&[
            "tune",
            "--algo",
            &algo,
            "--set",
            &format!("trace_every={}", 1 + r.below(4)),
        ]);
        let Ok(out) = ccload_cmd(&args).and_then(|mut c| Ok(c.output()?)) else {
            return;
        };
        c.record(&args, &out, false);
        c.tunes.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running `ccload serve` and what its log said.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(cfg: &Path, log: &Path) -> Result<Daemon> {
        let child = Command::new(ccload_testbed::ccload_bin()?)
            .args(["serve", "--config"])
            .arg(cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()?;
        Ok(Daemon {
            child,
            log: log.to_path_buf(),
        })
    }
    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn addr(&self) -> Option<String> {
        self.text().lines().find_map(|l| {
            Some(
                l.split_once("metrics on http://")?
                    .1
                    .strip_suffix("/metrics")?
                    .to_string(),
            )
        })
    }
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }
    /// The daemon's open fds by kind (the link target without its inode or
    /// id: `anon_inode:bpf-map`, `socket:`, a path), with counts.
    fn fd_kinds(&self) -> std::collections::BTreeMap<String, i64> {
        let mut m = std::collections::BTreeMap::new();
        let dir = format!("/proc/{}/fd", self.child.id());
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if let Ok(t) = std::fs::read_link(e.path()) {
                let t = t.to_string_lossy().into_owned();
                let kind = t.split('[').next().unwrap_or(&t).to_string();
                *m.entry(kind).or_insert(0) += 1;
            }
        }
        m
    }
    fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }
}

fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    r.starts_with("HTTP/1.1 200").then_some(r)
}

fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// The daemon's life: start, scrape, reload with the config flipped,
/// kill, restart, until `stop`.
fn daemon_loop(
    stop: &AtomicBool,
    quiet: &AtomicBool,
    cfgs: &[PathBuf; 2],
    dir: &Path,
    rep: &Mutex<Report>,
) -> Result<()> {
    let live = dir.join("serve.toml");
    let mut flip = 0usize;
    std::fs::copy(&cfgs[0], &live)?;
    let mut r = Rng(0xda3);
    loop {
        let log = dir.join("serve.log");
        let mut d = Daemon::start(&live, &log)?;
        lock(rep).daemon_starts += 1;
        if !wait_for(Duration::from_secs(30), || d.addr().is_some()) {
            // It could not start (a config it cannot apply right now is
            // reported and it exits 1): that is an exit we did not cause.
            let _ = d.child.kill();
            let st = d.child.wait()?;
            let mut rp = lock(rep);
            rp.daemon_unexpected_exits += 1;
            if rp.failure_samples.len() < 20 {
                rp.failure_samples
                    .push(format!("daemon start: {st}: {}", d.text()));
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            continue;
        }
        let addr = d.addr().unwrap_or_default();
        let life = Instant::now() + Duration::from_secs(10 + r.below(15));
        let mut applied_seen = reloads_logged(&d);
        while Instant::now() < life && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(500 + r.below(1500)));
            if let Ok(Some(st)) = d.child.try_wait() {
                let mut rp = lock(rep);
                rp.daemon_unexpected_exits += 1;
                if rp.failure_samples.len() < 20 {
                    rp.failure_samples
                        .push(format!("daemon exited: {st}: {}", d.text()));
                }
                break;
            }
            let ok = get(&addr, "/metrics").is_some();
            let mut rp = lock(rep);
            if ok {
                rp.scrapes_ok += 1;
            } else {
                rp.scrapes_failed += 1;
            }
            drop(rp);
            if r.below(3) == 0 {
                flip ^= 1;
                std::fs::copy(&cfgs[flip], &live)?;
                // One SIGHUP, and the outcome of this reload: applied, or
                // refused because the kernel changed under it.
                if reload(&d, &mut applied_seen) {
                    lock(rep).daemon_reloads += 1;
                }
            }
        }
        if d.child.try_wait()?.is_none() {
            if stop.load(Ordering::Relaxed) {
                // The workers are stopping; once they are done, this daemon,
                // which lived through reloads during the chaos, must hold no
                // more fds than a fresh daemon in the same kernel state.
                while !quiet.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                // Counted afresh: a reload that outlived its 30-s wait may
                // have logged since, and the fds must be read after this
                // reload, not during it.
                applied_seen = reloads_logged(&d);
                let _ = reload(&d, &mut applied_seen);
                let aged = settled_fds(&d);
                let aged_kinds = d.fd_kinds();
                d.signal(libc::SIGTERM);
                let st = d.child.wait()?;
                if !st.success() {
                    lock(rep).daemon_unexpected_exits += 1;
                }
                let mut fresh = Daemon::start(&live, &dir.join("serve-fresh.log"))?;
                let up = wait_for(Duration::from_secs(30), || fresh.addr().is_some());
                let mut seen = reloads_logged(&fresh);
                let ok = up && reload(&fresh, &mut seen);
                let base = settled_fds(&fresh);
                let mut diff = aged_kinds;
                for (k, n) in fresh.fd_kinds() {
                    *diff.entry(k).or_insert(0) -= n;
                }
                diff.retain(|_, n| *n != 0);
                fresh.signal(libc::SIGTERM);
                let _ = fresh.child.wait();
                let mut rp = lock(rep);
                if ok {
                    rp.daemon_fd_growth = aged as i64 - base as i64;
                    rp.daemon_fds_checked = true;
                    if rp.daemon_fd_growth > 0 {
                        // What the aged daemon holds that a fresh one does
                        // not (positive) and the reverse, by kind.
                        rp.failure_samples
                            .push(format!("daemon fds, aged - fresh: {diff:?}"));
                    }
                } else {
                    rp.failure_samples
                        .push(format!("fresh daemon: {}", fresh.text()));
                    rp.daemon_unexpected_exits += 1;
                }
                return Ok(());
            } else {
                d.signal(libc::SIGKILL);
                let _ = d.child.wait();
                lock(rep).daemon_kills += 1;
            }
        }
    }
}

fn reloads_logged(d: &Daemon) -> usize {
    let t = d.text();
    t.matches("reload applied").count() + t.matches("reload failed").count()
}

/// SIGHUP and wait for the daemon to log the outcome.
fn reload(d: &Daemon, seen: &mut usize) -> bool {
    d.signal(libc::SIGHUP);
    let done = wait_for(Duration::from_secs(30), || reloads_logged(d) > *seen);
    *seen += 1;
    done
}

/// The daemon's fd count once connections of the last scrape are closed.
fn settled_fds(d: &Daemon) -> usize {
    (0..10)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            d.fds()
        })
        .min()
        .unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A cgroup v2 directory for the soak, removed on drop.
struct SoakCgroup(PathBuf);

impl SoakCgroup {
    fn new(tag: &str) -> Result<SoakCgroup> {
        let root = ccload::host::system::cgroup2_mount().context("no cgroup2 mount")?;
        let p = root.join(format!("ccl-soak-{}-{tag}", std::process::id()));
        std::fs::create_dir(&p).with_context(|| format!("create {}", p.display()))?;
        Ok(SoakCgroup(p))
    }
}

impl Drop for SoakCgroup {
    fn drop(&mut self) {
        if let Ok(mut c) = ccload_cmd(&s(&["cgroup", "unset", self.0.to_str().unwrap_or("")])) {
            let _ = c.output();
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Struct_ops maps and links of ours the kernel still has.
fn kernel_leftovers() -> (u64, u64) {
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        Command::new("bpftool")
            .args(args)
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or_default()
    };
    let maps = json(&["-j", "struct_ops", "list"])
        .iter()
        .filter(|m| {
            OURS.iter()
                .any(|n| m["name"].as_str().is_some_and(|x| x.starts_with(n)))
        })
        .count() as u64;
    let links = json(&["-j", "link", "list"])
        .iter()
        .filter(|l| {
            let t = l["type"].as_str().unwrap_or("");
            (t == "struct_ops")
                || (t == "cgroup"
                    && l["cgroup_id"].is_u64()
                    && l["attach_type"].as_str() == Some("sock_ops"))
        })
        .count() as u64;
    (maps, links)
}

/// The soak starts from a machine with no ccload state: returns the
/// struct_ops links already there (other tools' links are not ours: the
/// soak counts the change).  A previous run's last sockets may hold a
/// detached controller's map for a while.
fn clean_start() -> Result<u64> {
    if let Some(why) = ccload_testbed::privileged_skip_reason() {
        bail!("the soak needs root and a BTF kernel: {why}");
    }
    if Path::new(ccload::bpf::PIN_ROOT).exists() {
        bail!(
            "{} exists: the soak needs a machine with no ccload state (ccload detach --all)",
            ccload::bpf::PIN_ROOT
        );
    }
    wait_for(Duration::from_secs(60), || kernel_leftovers().0 == 0);
    let (maps0, links0) = kernel_leftovers();
    if maps0 != 0 {
        bail!("struct_ops maps named like ours exist before the soak: it could not tell its own leaks");
    }
    Ok(links0)
}

pub fn run(minutes: f64, seed: u64, out: &Path) -> Result<Report> {
    let links0 = clean_start()?;
    std::fs::create_dir_all(out)?;
    let dir = out.to_path_buf();
    let cg1 = SoakCgroup::new("a")?;
    let cg2 = SoakCgroup::new("b")?;
    let cfgs = configs(&dir, &cg1.0, &dir.join("telemetry.sock"))?;
    let rep = Mutex::new(Report {
        minutes,
        seed,
        ..Default::default()
    });
    let c = Counters::default();
    let stop = AtomicBool::new(false);
    let flows_stop = AtomicBool::new(false);
    let quiet = AtomicBool::new(false);
    let (done, lost, not_started) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 50.0,
        buffer_pkts: 120,
        delay_ms: 5.0,
        ..Default::default()
    });
    // Controllers for the flows from the first moment.
    let first = ccload_cmd(&s(&["apply", cfgs[0].to_str().unwrap_or("")]))?.output()?;
    if !first.status.success() {
        bail!("initial apply: {}", String::from_utf8_lossy(&first.stderr));
    }
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(minutes * 60.0);
    eprintln!(
        "soak: {minutes} min, seed {seed}, results in {}",
        out.display()
    );
    let lost_samples = Mutex::new(Vec::<String>::new());
    std::thread::scope(|sc| -> Result<()> {
        for f in 0..8u64 {
            let (link, flows_stop, done, lost, not_started, lost_samples) = (
                &link,
                &flows_stop,
                &done,
                &lost,
                &not_started,
                &lost_samples,
            );
            sc.spawn(move || {
                flow_loop(f, link, flows_stop, [done, lost, not_started], lost_samples)
            });
        }
        let (stop_r, quiet_r, c_r, cfgs_r, cg2_r) = (&stop, &quiet, &c, &cfgs, &cg2.0);
        let mut workers = Vec::new();
        for w in 0..2u64 {
            workers.push(
                sc.spawn(move || {
                    worker(seed ^ ((w + 1) * 0x9e37_79b9), stop_r, c_r, cfgs_r, cg2_r)
                }),
            );
        }
        workers.push(sc.spawn(move || tuner(stop_r, c_r)));
        let (rep_r, dir_r) = (&rep, &dir);
        let dmn = sc.spawn(move || daemon_loop(stop_r, quiet_r, cfgs_r, dir_r, rep_r));
        while Instant::now() < end {
            std::thread::sleep(Duration::from_secs(1));
            let el = t0.elapsed().as_secs();
            if el.is_multiple_of(30) {
                eprintln!(
                    "soak: {el:>5} s  transfers {} ok / {} lost  commands {} ok / {} lock / {} failed",
                    done.load(Ordering::Relaxed),
                    lost.load(Ordering::Relaxed),
                    c.ok.load(Ordering::Relaxed),
                    c.lock.load(Ordering::Relaxed),
                    c.failed.load(Ordering::Relaxed)
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            let _ = w.join();
        }
        quiet.store(true, Ordering::Relaxed);
        dmn.join()
            .map_err(|_| anyhow::anyhow!("daemon thread panicked"))??;
        // The flows finish the transfers in progress, on whatever is
        // attached now.
        flows_stop.store(true, Ordering::Relaxed);
        Ok(())
    })?;
    drop(link);
    let mut r = rep.into_inner().unwrap_or_else(|e| e.into_inner());
    r.transfers_completed = done.into_inner();
    r.transfers_lost = lost.into_inner();
    r.transfers_not_started = not_started.into_inner();
    c.count_into(&mut r);
    r.failure_samples
        .extend(lost_samples.into_inner().unwrap_or_default());

    final_apply(&mut r, &cfgs[1])?;
    // Then everything away, and nothing of ours may remain.
    drop(cg2);
    drop(cg1);
    check_leftovers(&mut r, links0)?;
    std::fs::write(out.join("soak.json"), serde_json::to_string_pretty(&r)?)?;
    Ok(r)
}

/// One of the soak's flows: transfers on the controllers in turn until
/// `stop`, counted as [done, lost, not started] (the CC was not registered
/// when its socket was set up).
fn flow_loop(
    f: u64,
    link: &Bottleneck,
    stop: &AtomicBool,
    [done, lost, not_started]: [&AtomicU64; 3],
    lost_samples: &Mutex<Vec<String>>,
) {
    let mut k = f;
    while !stop.load(Ordering::Relaxed) {
        let cc = FLOW_CCS[(k % FLOW_CCS.len() as u64) as usize];
        k += 1;
        match link.transfer(cc, FLOW_BYTES) {
            Ok(t) if t.bytes == FLOW_BYTES => {
                done.fetch_add(1, Ordering::Relaxed);
            }
            // The CC was not registered when the socket was set up.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                not_started.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
            other => {
                lost.fetch_add(1, Ordering::Relaxed);
                lock(lost_samples).push(format!("flow {f} on {cc}: {other:?}"));
            }
        }
    }
}

/// The last word: apply `cfg`, which must then be what the kernel has (an
/// empty plan, no leftovers in `status`).
fn final_apply(r: &mut Report, cfg: &Path) -> Result<()> {
    let fin = ccload_cmd(&s(&["apply", cfg.to_str().unwrap_or("")]))?.output()?;
    if !fin.status.success() {
        r.failure_samples.push(format!(
            "final apply: {}",
            String::from_utf8_lossy(&fin.stderr)
        ));
    }
    let dry = ccload_cmd(&s(&["apply", "--dry-run", cfg.to_str().unwrap_or("")]))?.output()?;
    let plan =
        String::from_utf8_lossy(&dry.stdout).to_string() + &String::from_utf8_lossy(&dry.stderr);
    r.final_plan_empty = dry.status.success()
        && !plan
            .lines()
            .any(|l| l.trim_start().starts_with(['+', '-', '~']));
    if !r.final_plan_empty {
        r.failure_samples
            .push(format!("plan after the final apply:\n{plan}"));
    }
    let st = ccload_cmd(&s(&["status", "--json"]))?.output()?;
    let sj: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap_or_default();
    r.leftovers_after_final_apply = sj["leftovers"].as_array().map_or(0, |a| a.len() as u64);
    Ok(())
}

/// After `detach --all`: no struct_ops map or pin of ours, and no link
/// more than the `links0` other tools had at the start.
fn check_leftovers(r: &mut Report, links0: u64) -> Result<()> {
    let _ = ccload_cmd(&s(&["detach", "--all"]))?.output()?;
    let clean = wait_for(Duration::from_secs(60), || {
        kernel_leftovers() == (0, links0)
    });
    let (maps, links) = kernel_leftovers();
    r.leaked_struct_ops_maps = maps;
    r.leaked_links = links.saturating_sub(links0);
    r.leaked_pins = if Path::new(ccload::bpf::PIN_ROOT).exists() {
        walk_count(Path::new(ccload::bpf::PIN_ROOT)).max(1)
    } else {
        0
    };
    if !clean {
        r.failure_samples
            .push("struct_ops maps or links still present 60 s after detach --all".into());
    }
    Ok(())
}

fn walk_count(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    if e.path().is_dir() {
                        walk_count(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}
