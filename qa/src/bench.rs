//! `cargo xtask bench`: what telemetry and the controllers cost, measured
//! on this machine, as a table docs/usage.md quotes.
//!
//! (a) Consumer: records/s `ccload watch` sustains with 0 drops.  A
//!     synthetic producer (bpf/bench.bpf.c) writes ccpd records into the
//!     attached ccpd's own pinned ring at a fixed rate while `watch` reads
//!     it and writes to a pipe whose reader counts lines; each rate runs
//!     `secs` seconds; a rate passes when every record written reached the
//!     reader and none was refused by a full ring.  Then real flows: 4
//!     loopback ccpd flows tracing every round, records and drops counted.
//! (b) Datapath: loopback throughput of each controller (tracing off), of
//!     ccpd tracing every round (with a consumer), and of the kernel's
//!     cubic, interleaved in rotating order, `reps` repetitions; medians,
//!     min-max, and ratios to cubic's median.
//! (c) Aggregates: cubic in a cgroup the sock_ops aggregates watch, against
//!     cubic in the same cgroup unwatched, interleaved the same way.
//!     (A controller's own aggregates are part of its (b) numbers: they
//!     cannot be switched off.)
//! (d) Cost: where a loopback transfer's CPU goes (BPF run time, consumer).
//! (e) CPU per byte: every controller and cubic at a fixed 1 Gbit/s over
//!     a veth pair (MTU 1500, no offloads), both ends' thread CPU,
//!     alternated repetitions; medians and ratios to cubic's.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ccload_testbed::netns::NetNs;

fn ccload(args: &[&str]) -> Result<String> {
    let o = Command::new(ccload_testbed::ccload_bin()?)
        .args(args)
        .output()?;
    if !o.status.success() {
        bail!(
            "ccload {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// A `ccload watch` writing into a pipe whose reader counts lines.
struct Consumer {
    child: Child,
    lines: Option<std::thread::JoinHandle<u64>>,
}

impl Consumer {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn start(format: &str) -> Result<Consumer> {
        let mut child = Command::new(ccload_testbed::ccload_bin()?)
            .args(["watch", "--algo", "ccpd", "--format", format])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let out = child.stdout.take().unwrap();
        let lines = std::thread::spawn(move || {
            let mut r = BufReader::with_capacity(1 << 20, out);
            let mut n = 0u64;
            let mut buf = Vec::new();
            while matches!(r.read_until(b'\n', &mut buf), Ok(k) if k > 0) {
                n += 1;
                buf.clear();
            }
            n
        });
        // The watch holds the ring once it has opened it: wait for that.
        let t0 = Instant::now();
        while !ring_held() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Consumer {
            child,
            lines: Some(lines),
        })
    }

    /// SIGINT, then the lines the reader counted and the records the
    /// watch says it showed (its last stderr line).
    fn stop(mut self) -> Result<u64> {
        Ok(self.stop_inner().0)
    }

    fn stop_shown(mut self) -> Result<(u64, u64)> {
        Ok(self.stop_inner())
    }

    fn stop_inner(&mut self) -> (u64, u64) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = self.child.wait();
        // "ccload: ccpd: N records shown, D dropped in the kernel ..."
        let shown = err
            .lines()
            .rev()
            .find_map(|l| l.split(": ").nth(2)?.split(' ').next()?.parse().ok())
            .unwrap_or(0);
        let lines = match self.lines.take() {
            Some(h) => h.join().unwrap_or(0),
            None => 0,
        };
        (lines, shown)
    }
}

/// A bench that fails half-way leaves no consumer behind.
impl Drop for Consumer {
    fn drop(&mut self) {
        if self.lines.is_some() {
            let _ = self.stop_inner();
        }
    }
}

/// Whether a consumer holds ccpd's ring (`ccload status --json`, meta.watchers
/// is not exposed: the watch lock file is held).
fn ring_held() -> bool {
    let p = "/run/ccload/watch-ccpd.lock";
    let Ok(f) = std::fs::File::open(p) else {
        return false;
    };
    use std::os::fd::AsRawFd;
    // SAFETY: flock on an fd we own; a non-blocking probe.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        // SAFETY: as above.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        return false;
    }
    true
}

/// One consumer measurement.
pub struct ConsumerRow {
    pub format: &'static str,
    pub rate: u64,
    pub written: u64,
    pub received: u64,
    pub ring_full: u64,
}

impl ConsumerRow {
    fn ok(&self) -> bool {
        self.ring_full == 0 && self.received == self.written
    }
}

fn consumer_rates(secs: f64) -> Result<Vec<ConsumerRow>> {
    let ring = ccload::bpf::map_pin(ccload::bpf::algos::Algo::Ccpd, "events");
    let mut rows = Vec::new();
    for format in ["json", "csv", "table"] {
        for rate in [250_000u64, 500_000, 1_000_000, 2_000_000, 4_000_000] {
            let c = Consumer::start(format)?;
            let p = ccload::bpf::bench::produce(&ring, rate, Duration::from_secs_f64(secs), 64)?;
            // Let the consumer drain what is in the ring.
            std::thread::sleep(Duration::from_millis(500));
            let (mut lines, shown) = c.stop_shown()?;
            if format == "csv" {
                lines = lines.saturating_sub(1);
            }
            // The table shows the latest record per flow: count what the
            // watch says it read; JSON and CSV: the lines that arrived.
            let received = if format == "table" { shown } else { lines };
            let row = ConsumerRow {
                format,
                rate,
                written: p.written,
                received,
                ring_full: p.dropped,
            };
            eprintln!(
                "bench: consumer {format} at {rate}/s: written {} received {} ring full {}",
                row.written, row.received, row.ring_full
            );
            let failed = !row.ok();
            rows.push(row);
            if failed {
                break;
            }
        }
    }
    Ok(rows)
}

/// Loopback throughput of one transfer in `ns`, Gbit/s.
fn loopback(ns: &NetNs, cc: &str, bytes: u64) -> Result<f64> {
    let cc = cc.to_string();
    let t = ns
        .run(move || ccload_testbed::traffic::transfer(&cc, bytes, "127.0.0.1:0".parse().unwrap()))
        .context("loopback transfer")?;
    Ok(t.bytes as f64 * 8.0 / t.secs / 1e9)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One datapath row: label, samples (Gbit/s).
pub struct PathRow {
    pub label: String,
    pub gbps: Vec<f64>,
}

/// A datapath configuration: label, what to run before each transfer, CC.
type Cfg<'a> = (&'a str, &'a dyn Fn() -> Result<()>, &'a str);

/// Run each (label, setup, cc) `reps` times, in rotating order so that no
/// configuration always runs first or last.
fn interleaved(ns: &NetNs, cfgs: &[Cfg], reps: usize, bytes: u64) -> Result<Vec<PathRow>> {
    let mut rows: Vec<PathRow> = cfgs
        .iter()
        .map(|(l, _, _)| PathRow {
            label: l.to_string(),
            gbps: Vec::new(),
        })
        .collect();
    for r in 0..reps {
        for k in 0..cfgs.len() {
            let i = (k + r) % cfgs.len();
            let (label, setup, cc) = &cfgs[i];
            setup()?;
            let g = loopback(ns, cc, bytes)?;
            eprintln!("bench: rep {r} {label}: {g:.2} Gbit/s");
            rows[i].gbps.push(g);
        }
    }
    Ok(rows)
}

/// A cgroup of our own for (c), holding this process while it runs.
struct BenchCgroup {
    path: PathBuf,
    home: String,
}

impl BenchCgroup {
    fn enter() -> Result<BenchCgroup> {
        let root = ccload::host::system::cgroup2_mount().context("cgroup2 is not mounted")?;
        let path = root.join(format!("ccl-bench-{}", std::process::id()));
        std::fs::create_dir(&path)?;
        let home = std::fs::read_to_string("/proc/self/cgroup")?
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/")
            .to_string();
        std::fs::write(path.join("cgroup.procs"), std::process::id().to_string())?;
        Ok(BenchCgroup { path, home })
    }
}

impl Drop for BenchCgroup {
    fn drop(&mut self) {
        let _ = ccload(&["cgroup", "unset", &self.path.to_string_lossy()]);
        if let Some(root) = ccload::host::system::cgroup2_mount() {
            let home = root.join(self.home.trim_start_matches('/'));
            let _ = std::fs::write(home.join("cgroup.procs"), std::process::id().to_string());
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

pub struct Report {
    pub consumer: Vec<ConsumerRow>,
    pub real_flows: (u64, u64, f64),
    pub datapath: Vec<PathRow>,
    pub aggregates: Vec<PathRow>,
    pub cost: Vec<CostRow>,
    pub cpu: Vec<CpuRow>,
}

/// (e) One CC at a fixed rate: per repetition, both ends' CPU per byte
/// (ns) and the rate reached (Gbit/s).
pub struct CpuRow {
    pub cc: String,
    pub ns_per_byte: Vec<f64>,
    pub gbps: Vec<f64>,
}

/// (e)'s rate, bit/s, and seconds per transfer.
const CPU_RATE_BIT_S: f64 = 1e9;
const CPU_SECS: f64 = 5.0;
/// Every controller within this of cubic's CPU per byte.
pub const CPU_RATIO_MAX: f64 = 1.15;

/// (e): `reps` paced transfers of each CC over a fresh veth pair, in
/// rotating order.
fn cpu_per_byte(reps: usize) -> Result<Vec<CpuRow>> {
    use ccload_testbed::{traffic, veth::VethPair};
    let pair = VethPair::new(false);
    let ccs = ["cubic", "ccpd", "hetcp", "ctcp_plus", "ub_reno"];
    let mut rows: Vec<CpuRow> = ccs
        .iter()
        .map(|c| CpuRow {
            cc: c.to_string(),
            ns_per_byte: Vec::new(),
            gbps: Vec::new(),
        })
        .collect();
    for r in 0..reps {
        for k in 0..ccs.len() {
            let i = (k + r) % ccs.len();
            let bind = std::net::SocketAddr::new(pair.b_ip.into(), 0);
            let t = traffic::paced_across(&pair.a, &pair.b, ccs[i], CPU_RATE_BIT_S, CPU_SECS, bind)
                .with_context(|| format!("paced transfer with {}", ccs[i]))?;
            anyhow::ensure!(
                t.sender_cc == ccs[i],
                "the sender ran {} instead of {}",
                t.sender_cc,
                ccs[i]
            );
            let gbps = t.bytes as f64 * 8.0 / t.secs / 1e9;
            eprintln!(
                "bench: rep {r} {}: {gbps:.2} Gbit/s, CPU sender {:.2} s receiver {:.2} s, {:.2} ns/byte",
                ccs[i],
                t.sender_cpu_s,
                t.receiver_cpu_s,
                t.ns_per_byte()
            );
            rows[i].ns_per_byte.push(t.ns_per_byte());
            rows[i].gbps.push(gbps);
        }
    }
    Ok(rows)
}

/// (d) CPU cost: where a loopback transfer's CPU time goes, from the
/// kernel's own counters rather than from throughput (whose run-to-run
/// spread on 2 cores hides 1-2 % effects).
pub struct CostRow {
    pub label: String,
    /// Busy CPU time of the whole machine during the transfers, ns.
    pub cpu_ns: u64,
    /// Run time of the BPF programs named, ns (BPF_ENABLE_STATS), and their
    /// invocations.
    pub bpf_ns: u64,
    pub bpf_runs: u64,
    /// CPU time of the `ccload watch` consumer, ns (0 without one).
    pub consumer_ns: u64,
    pub gbps: f64,
}

impl CostRow {
    fn share(&self, ns: u64) -> f64 {
        100.0 * ns as f64 / self.cpu_ns.max(1) as f64
    }

    fn ns_per_run(&self) -> f64 {
        self.bpf_ns as f64 / self.bpf_runs.max(1) as f64
    }
}

/// Clock ticks (USER_HZ, as /proc/stat and /proc/PID/stat count) in ns.
fn ticks_ns(ticks: u64) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1_000_000_000 / hz
}

/// Busy CPU time of the machine so far (all CPUs: user, nice, system, irq,
/// softirq), ns.
fn busy_ns() -> Result<u64> {
    let s = std::fs::read_to_string("/proc/stat")?;
    let l = s.lines().next().context("/proc/stat")?;
    let v: Vec<u64> = l
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    anyhow::ensure!(v.len() >= 7, "/proc/stat: {l}");
    Ok(ticks_ns(v[0] + v[1] + v[2] + v[5] + v[6]))
}

/// CPU time (user + system) of process `pid`, ns.
fn proc_ns(pid: u32) -> u64 {
    // utime and stime: stat(5) fields 14 and 15
    let f = ccload::host::procfs::stat_fields(pid).unwrap_or_default();
    let t = |n: usize| f.get(n - 3).and_then(|x| x.parse::<u64>().ok());
    t(14).zip(t(15)).map(|(u, s)| ticks_ns(u + s)).unwrap_or(0)
}

/// Summed (run_time_ns, run_cnt) of the loaded BPF programs whose name
/// starts with one of `prefixes` (the kernel counts them while a
/// BPF_ENABLE_STATS fd is open).
fn bpf_run_time(prefixes: &[&str]) -> (u64, u64) {
    use libbpf_sys as sys;
    let (mut ns, mut cnt) = (0u64, 0u64);
    let mut id = 0u32;
    loop {
        let mut next = 0u32;
        // SAFETY: plain syscall wrappers with valid out-pointers.
        if unsafe { sys::bpf_prog_get_next_id(id, &mut next) } != 0 {
            break;
        }
        id = next;
        let fd = unsafe { sys::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            continue;
        }
        let mut info = sys::bpf_prog_info::default();
        let mut len = std::mem::size_of::<sys::bpf_prog_info>() as u32;
        let rc = unsafe { sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
        unsafe { libc::close(fd) };
        if rc != 0 {
            continue;
        }
        let name: Vec<u8> = info
            .name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        let name = String::from_utf8_lossy(&name);
        if prefixes.iter().any(|p| name.starts_with(p)) {
            ns += info.run_time_ns;
            cnt += info.run_cnt;
        }
    }
    (ns, cnt)
}

/// `reps` transfers of one configuration, its CPU accounted.
fn cost_row(
    ns: &NetNs,
    label: &str,
    cc: &str,
    progs: &[&str],
    consumer: Option<u32>,
    reps: usize,
    bytes: u64,
) -> Result<CostRow> {
    let (b0, r0) = bpf_run_time(progs);
    let c0 = consumer.map(proc_ns).unwrap_or(0);
    let t0 = busy_ns()?;
    let mut g = Vec::new();
    for _ in 0..reps {
        g.push(loopback(ns, cc, bytes)?);
    }
    let t1 = busy_ns()?;
    let (b1, r1) = bpf_run_time(progs);
    let c1 = consumer.map(proc_ns).unwrap_or(0);
    let row = CostRow {
        label: label.to_string(),
        cpu_ns: t1 - t0,
        bpf_ns: b1 - b0,
        bpf_runs: r1 - r0,
        consumer_ns: c1 - c0,
        gbps: median(&mut g),
    };
    eprintln!(
        "bench: {label}: CPU {:.2} s, BPF {:.1} % ({} runs, {:.0} ns each), consumer {:.1} %",
        row.cpu_ns as f64 / 1e9,
        row.share(row.bpf_ns),
        row.bpf_runs,
        row.ns_per_run(),
        row.share(row.consumer_ns)
    );
    Ok(row)
}

/// ccpd's (records written, records refused by a full ring) so far.
fn ring_counters() -> Result<(u64, u64)> {
    let st: serde_json::Value = serde_json::from_str(&ccload(&["status", "--json"])?)?;
    let a = st["attached"]
        .as_array()
        .and_then(|v| v.iter().find(|a| a["algo"] == "ccpd"))
        .context("ccpd not in status")?;
    let n = |k: &str| a["stats"][k].as_u64().unwrap_or(0);
    Ok((n("events"), n("ringbuf_drops")))
}

fn set_trace(every: u32) -> Result<()> {
    ccload(&[
        "tune",
        "--algo",
        "ccpd",
        "--set",
        &format!("trace_every={every}"),
    ])
    .map(drop)
}

/// Run the bench; `only` = "consumer", "datapath", "aggregates", "cost"
/// or "cpu" runs one part.
pub fn run(secs: f64, reps: usize, bytes: u64, out: &Path, only: Option<&str>) -> Result<Report> {
    ccload_testbed::privileged_skip_reason().map_or(Ok(()), |r| {
        Err(anyhow::anyhow!("bench needs root and BPF: {r}"))
    })?;
    let ours = ["ccpd", "hetcp", "ctcp_plus", "ub_reno"];
    let preattached: Vec<bool> = ours
        .iter()
        .map(|a| ccload::bpf::is_attached(a.parse().unwrap()))
        .collect();
    if preattached.iter().any(|&b| b) {
        bail!("a controller is attached: the bench attaches and detaches its own (ccload detach --all first)");
    }
    for a in ours {
        ccload(&["attach", "--algo", a, "--set", "trace_every=0"])?;
    }
    let result = (|| -> Result<Report> {
        set_trace(1)?;
        let part = |p: &str| only.is_none_or(|o| o == p);
        let ns = NetNs::new();
        let mut r = Report {
            consumer: Vec::new(),
            real_flows: (0, 0, 0.0),
            datapath: Vec::new(),
            aggregates: Vec::new(),
            cost: Vec::new(),
            cpu: Vec::new(),
        };
        if part("consumer") {
            (r.consumer, r.real_flows) = consumer_part(&ns, secs)?;
        }
        if part("datapath") {
            r.datapath = datapath_part(&ns, reps, bytes)?;
        }
        if part("aggregates") {
            r.aggregates = aggregates_part(&ns, reps, bytes)?;
        }
        if part("cost") {
            r.cost = cost_part(&ns, reps, bytes)?;
        }
        if part("cpu") {
            set_trace(0)?;
            r.cpu = cpu_per_byte(reps)?;
        }
        Ok(r)
    })();
    for a in ours {
        let _ = ccload(&["detach", "--algo", a]);
    }
    let r = result?;
    std::fs::create_dir_all(out)?;
    let md = render(&r, secs, reps, bytes);
    std::fs::write(out.join("bench.md"), &md)?;
    println!("{md}");
    println!("wrote {}", out.join("bench.md").display());
    Ok(r)
}

/// (a) The consumer: synthetic record rates, then 4 loopback ccpd flows
/// tracing every round (records written, received, dropped).
fn consumer_part(ns: &NetNs, secs: f64) -> Result<(Vec<ConsumerRow>, (u64, u64, f64))> {
    let consumer = consumer_rates(secs)?;
    // What the synthetic runs left in the ring (a failed rate leaves it
    // full) is read out first: only the flows' records are counted.
    let drain = Consumer::start("json")?;
    std::thread::sleep(Duration::from_millis(1000));
    drain.stop()?;
    // Real flows: 4 loopback ccpd flows tracing every round.
    let stats0 = ring_counters()?;
    let c = Consumer::start("json")?;
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                ns.run(move || {
                    ccload_testbed::traffic::transfer(
                        "ccpd",
                        2 << 30,
                        "127.0.0.1:0".parse().unwrap(),
                    )
                    .map(|t| t.bytes)
                    .unwrap_or(0)
                })
            });
        }
    });
    let flow_secs = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let got = c.stop()?;
    let stats1 = ring_counters()?;
    let written = stats1.0 - stats0.0;
    let dropped = stats1.1 - stats0.1;
    eprintln!("bench: 4 loopback flows: {written} records written, {got} received, {dropped} ring full, {flow_secs:.1} s");
    Ok((consumer, (written, got, dropped as f64)))
}

/// (b) The datapath: cubic and our controllers, ccpd with and without
/// tracing, interleaved.
fn datapath_part(ns: &NetNs, reps: usize, bytes: u64) -> Result<Vec<PathRow>> {
    // (b) datapath.
    set_trace(0)?;
    let noop = || Ok(());
    let tr_on = || set_trace(1);
    let tr_off = || set_trace(0);
    let consumer_keep = Consumer::start("json")?;
    let cfgs: Vec<Cfg> = vec![
        ("cubic", &noop, "cubic"),
        ("ccpd", &tr_off, "ccpd"),
        ("ccpd, tracing every round", &tr_on, "ccpd"),
        ("hetcp", &noop, "hetcp"),
        ("ctcp_plus", &noop, "ctcp_plus"),
        ("ub_reno", &noop, "ub_reno"),
    ];
    let datapath = interleaved(ns, &cfgs, reps, bytes)?;
    consumer_keep.stop()?;
    set_trace(0)?;
    Ok(datapath)
}

/// (c) cubic with the sock_ops aggregates of a watched cgroup, and without.
fn aggregates_part(ns: &NetNs, reps: usize, bytes: u64) -> Result<Vec<PathRow>> {
    // (c) sock_ops aggregates on cubic.
    let cg = BenchCgroup::enter()?;
    let p = cg.path.to_string_lossy().to_string();
    let watch = || ccload(&["cgroup", "watch", &p]).map(drop);
    // `unset` of an unwatched cgroup says so and exits 1: fine here.
    let unwatch = || {
        let _ = ccload(&["cgroup", "unset", &p]);
        Ok(())
    };
    let cfgs: Vec<Cfg> = vec![
        ("cubic, cgroup not watched", &unwatch, "cubic"),
        (
            "cubic, cgroup watched (sock_ops aggregates)",
            &watch,
            "cubic",
        ),
    ];
    let aggregates = interleaved(ns, &cfgs, reps, bytes)?;
    drop(cg);
    Ok(aggregates)
}

/// (d) The hooks' run time per ACK, as the kernel counts it.
fn cost_part(ns: &NetNs, reps: usize, bytes: u64) -> Result<Vec<CostRow>> {
    let mut cost = Vec::new();
    // (d) The kernel counts BPF run time while this fd is open.
    // SAFETY: a syscall wrapper; the fd is ours and closed below.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    anyhow::ensure!(
        fd >= 0,
        "BPF_ENABLE_STATS: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: fd was just returned to us.
    let _stats = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let ccpd = ["ccpd_"];
    set_trace(0)?;
    cost.push(cost_row(ns, "cubic", "cubic", &ccpd, None, reps, bytes)?);
    cost.push(cost_row(
        ns,
        "ccpd, no tracing",
        "ccpd",
        &ccpd,
        None,
        reps,
        bytes,
    )?);
    // The other three controllers' hooks, per run (the guard and the
    // aggregates every hook calls are in these numbers too).
    for (label, cc, prefix) in [
        ("hetcp", "hetcp", "hetcp_"),
        ("ctcp_plus", "ctcp_plus", "ctcp_plus_"),
        ("ub_reno", "ub_reno", "ub_reno_"),
    ] {
        cost.push(cost_row(ns, label, cc, &[prefix], None, reps, bytes)?);
    }
    set_trace(1)?;
    let c = Consumer::start("json")?;
    let pid = c.pid();
    cost.push(cost_row(
        ns,
        "ccpd, tracing every round, `watch` consuming",
        "ccpd",
        &ccpd,
        Some(pid),
        reps,
        bytes,
    )?);
    // `watch --every 10ms`: at most one record per flow per 10 ms.
    ccload(&["tune", "--algo", "ccpd", "--set", "trace_ms=10"])?;
    cost.push(cost_row(
        ns,
        "ccpd, tracing every 10 ms, `watch` consuming",
        "ccpd",
        &ccpd,
        Some(pid),
        reps,
        bytes,
    )?);
    ccload(&["tune", "--algo", "ccpd", "--set", "trace_ms=0"])?;
    c.stop()?;
    set_trace(0)?;
    let cg = BenchCgroup::enter()?;
    let p = cg.path.to_string_lossy().to_string();
    ccload(&["cgroup", "watch", &p])?;
    cost.push(cost_row(
        ns,
        "cubic, cgroup watched (sock_ops aggregates)",
        "cubic",
        &["ccl_cgroup_soc"],
        None,
        reps,
        bytes,
    )?);
    drop(cg);
    Ok(cost)
}

fn path_table(o: &mut String, rows: &mut [PathRow], base: &str) {
    let base_med = {
        let mut b = rows
            .iter()
            .find(|r| r.label.starts_with(base))
            .map(|r| r.gbps.clone())
            .unwrap_or_default();
        median(&mut b)
    };
    let _ = writeln!(
        o,
        "| configuration | median Gbit/s | min..max | ratio to {base} |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|");
    for r in rows.iter_mut() {
        let mut v = r.gbps.clone();
        let m = median(&mut v);
        let (lo, hi) = (v[0], v[v.len() - 1]);
        let _ = writeln!(
            o,
            "| {} | {m:.2} | {lo:.2}..{hi:.2} | {:.3} |",
            r.label,
            m / base_med
        );
    }
}

/// (d) The hooks' CPU cost per configuration.
fn render_cost(o: &mut String, cost: &[CostRow], reps: usize, bytes: u64) {
    let _ = writeln!(
        o,
        "\n### (d) CPU cost, loopback, {reps} transfers of {} MiB per row (BPF_ENABLE_STATS run time and /proc/stat)\n",
        bytes >> 20
    );
    let _ = writeln!(
        o,
        "| configuration | Gbit/s (median) | machine CPU s | BPF programs, % of CPU | ns per run | consumer, % of CPU |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|");
    for c in cost {
        let _ = writeln!(
            o,
            "| {} | {:.1} | {:.2} | {:.2} | {:.0} | {:.2} |",
            c.label,
            c.gbps,
            c.cpu_ns as f64 / 1e9,
            c.share(c.bpf_ns),
            c.ns_per_run(),
            c.share(c.consumer_ns)
        );
    }
}

/// (e) CPU per byte per CC at a fixed rate, against cubic's.
fn render_cpu(o: &mut String, cpu: &[CpuRow], reps: usize) {
    let _ = writeln!(
        o,
        "\n### (e) CPU per byte at {} Gbit/s, veth pair, MTU 1500, no offloads, {reps} alternated {CPU_SECS}-s transfers (sender and receiver thread CPU)\n",
        CPU_RATE_BIT_S / 1e9
    );
    let _ = writeln!(
        o,
        "| CC | Gbit/s (median) | ns per byte (median) | min-max | vs cubic | within {CPU_RATIO_MAX}x |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---|");
    // (cc, median Gbit/s, median ns/byte, min, max): median sorts
    let rows: Vec<(&str, f64, f64, f64, f64)> = cpu
        .iter()
        .map(|c| {
            let mut v = c.ns_per_byte.clone();
            let mut g = c.gbps.clone();
            let med = median(&mut v);
            (c.cc.as_str(), median(&mut g), med, v[0], v[v.len() - 1])
        })
        .collect();
    let base = rows
        .iter()
        .find(|x| x.0 == "cubic")
        .map_or(f64::NAN, |x| x.2);
    for &(cc, g, med, lo, hi) in &rows {
        let ratio = med / base;
        let within = if cc == "cubic" {
            "-"
        } else if ratio <= CPU_RATIO_MAX {
            "yes"
        } else {
            "**no**"
        };
        let _ = writeln!(
            o,
            "| {cc} | {g:.2} | {med:.2} | {lo:.2}-{hi:.2} | {ratio:.2}x | {within} |"
        );
    }
}

pub fn render(r: &Report, secs: f64, reps: usize, bytes: u64) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## ccload bench\n");
    let _ = writeln!(
        o,
        "Machine: {} CPUs, kernel {}.\n",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    );
    if !r.consumer.is_empty() {
        let _ = writeln!(o, "### (a) telemetry consumer (`ccload watch` into a pipe), synthetic producer, {secs} s per rate\n");
        let _ = writeln!(
            o,
            "| format | offered records/s | written | received | ring full | 0 drops |"
        );
        let _ = writeln!(o, "|---|---:|---:|---:|---:|---|");
        for c in &r.consumer {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                c.format,
                c.rate,
                c.written,
                c.received,
                c.ring_full,
                if c.ok() { "yes" } else { "no" }
            );
        }
        let (w, g, d) = r.real_flows;
        let _ = writeln!(
        o,
        "\nReal flows: 4 loopback ccpd flows tracing every round: {w} records written, {g} received by `watch --format json`, {d} refused by a full ring.\n"
    );
    }
    if !r.datapath.is_empty() {
        let _ = writeln!(
            o,
            "### (b) datapath, loopback, {reps} repetitions of {} MiB, interleaved\n",
            bytes >> 20
        );
        let mut dp: Vec<PathRow> = r
            .datapath
            .iter()
            .map(|p| PathRow {
                label: p.label.clone(),
                gbps: p.gbps.clone(),
            })
            .collect();
        path_table(&mut o, &mut dp, "cubic");
    }
    if !r.aggregates.is_empty() {
        let _ = writeln!(
            o,
            "\n### (c) in-kernel aggregates of a watched cgroup (sock_ops), cubic\n"
        );
        let mut ag: Vec<PathRow> = r
            .aggregates
            .iter()
            .map(|p| PathRow {
                label: p.label.clone(),
                gbps: p.gbps.clone(),
            })
            .collect();
        path_table(&mut o, &mut ag, "cubic, cgroup not watched");
    }
    if !r.cost.is_empty() {
        render_cost(&mut o, &r.cost, reps, bytes);
    }
    if !r.cpu.is_empty() {
        render_cpu(&mut o, &r.cpu, reps);
    }
    o
}
