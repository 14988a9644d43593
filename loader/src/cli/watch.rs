//! `ccload watch`: stream per-round telemetry from the pinned ring buffers
//! with tokio.  One consumer per algorithm at a time (a BPF ring buffer hands
//! each record to exactly one reader, so a second reader would silently split
//! the stream): an flock on /run/ccload/watch-<algo>.lock enforces it.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, RingBufferBuilder};
use tokio::io::unix::AsyncFd;

use crate::bpf;
use crate::bpf::algos::Algo;
use crate::bpf::stream::{daemon_socket, lock_consumer, Deframer, FdWrap};
use crate::bpf::telemetry::{write_fast, Event, FastFormat};
use crate::cli::args::{WatchArgs, WatchFormat as Format};
use crate::intf;
use crate::units::Every;

/// The fast path's output: records formatted in the ring callback.
#[derive(Default)]
struct FastOut {
    buf: Vec<u8>,
    /// Records accepted (after the filters), for `--count` and the summary.
    seen: u64,
    csv_done: std::collections::HashSet<Algo>,
}

impl FastOut {
    fn push(&mut self, data: &[u8], f: FastFormat, o: &WatchOpts) {
        if o.args.count.is_some_and(|c| self.seen >= c) {
            return;
        }
        let Some(hdr) = crate::bpf::telemetry::header(data) else {
            return;
        };
        let Some(algo) = Algo::from_id(hdr.algo) else {
            return;
        };
        // The filters read the header only (an Event without fields
        // allocates nothing).
        let ev = Event {
            algo,
            hdr,
            fields: Vec::new(),
        };
        if !o.algos.contains(&algo) || !matches(&ev, o) {
            return;
        }
        if f == FastFormat::Csv && self.csv_done.insert(algo) {
            self.buf
                .extend_from_slice(Event::csv_header(algo).as_bytes());
            self.buf.push(b'\n');
        }
        if write_fast(data, f, &mut self.buf).is_some() {
            self.seen += 1;
        }
    }
}

pub struct WatchOpts {
    /// Resolved from `args.algo`: the attached algorithms to read.
    pub algos: Vec<Algo>,
    pub args: WatchArgs,
}

impl WatchOpts {
    fn view(&self) -> View {
        if self.args.wide {
            View::Wide
        } else if let Some(c) = &self.args.columns {
            View::Columns(c.split(',').map(|s| s.trim().to_string()).collect())
        } else {
            View::Compact
        }
    }
}

fn matches(ev: &Event, o: &WatchOpts) -> bool {
    if let Some(c) = o.args.cookie {
        if ev.hdr.cookie != c {
            return false;
        }
    }
    if let Some(a) = o.args.flow {
        let (l, r) = (ev.local(), ev.remote());
        let hit = |s: std::net::SocketAddr| {
            s.port() == a.port() && (a.ip().is_unspecified() || s.ip() == a.ip())
        };
        if !hit(l) && !hit(r) {
            return false;
        }
    }
    true
}

/// Set profile 0's tracing fields of `algo` (trace_every, trace_ms),
/// changing no other field (under the state lock, so a concurrent `tune` is
/// not undone).  Returns the previous values.
fn set_tracing(algo: Algo, to: &[(&str, u32)]) -> Result<Vec<(String, u32)>> {
    let _lock = crate::host::lock::state()?;
    let mut p = bpf::read_params(algo, 0)?;
    let mut old = Vec::new();
    for (name, v) in to {
        old.push((
            name.to_string(),
            p.get(name).with_context(|| format!("no {name} tunable"))?,
        ));
        p.apply(&[(name.to_string(), v.to_string())])?;
    }
    bpf::write_params(algo, &p, 0)?;
    Ok(old)
}

/// What `--every` sets: N rounds per record, or at most one record per
/// flow per N ms (every round otherwise).
pub(crate) fn every_fields(e: Every) -> Vec<(&'static str, u32)> {
    match e {
        Every::Rounds(n) => vec![("trace_every", n), ("trace_ms", 0)],
        Every::Ms(ms) => vec![("trace_every", 1), ("trace_ms", ms)],
    }
}

/// Restores the tracing fields (only them) on exit when `--every` changed them.
struct EveryGuard(Vec<(Algo, Vec<(String, u32)>)>);
impl Drop for EveryGuard {
    fn drop(&mut self) {
        for (algo, old) in &self.0 {
            let old: Vec<(&str, u32)> = old.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            let _ = set_tracing(*algo, &old);
        }
    }
}

/// `--columns` names that no watched algorithm's record has.
fn unknown_columns(o: &WatchOpts) -> Vec<String> {
    let View::Columns(names) = o.view() else {
        return Vec::new();
    };
    names
        .into_iter()
        .filter(|n| {
            !(Event::HEADER.contains(&n.as_str())
                || n == "profile"
                || o.algos.iter().any(|a| {
                    crate::bpf::telemetry::fields(*a)
                        .iter()
                        .any(|d| d.name == n)
                }))
        })
        .collect()
}

pub fn run(o: WatchOpts) -> Result<()> {
    let bad = unknown_columns(&o);
    if !bad.is_empty() {
        bail!(
            "--columns: no field named {} (ccload watch --help-fields lists them)",
            bad.join(", ")
        );
    }
    bpf::require_root()?;
    if o.algos.is_empty() {
        bail!("nothing is attached (ccload attach --algo ALGO first)");
    }
    let (locks, maps, restore) = match open_rings(&o)? {
        Opened::Here {
            locks,
            maps,
            restore,
        } => (locks, maps, restore),
        Opened::Daemon { sock, restore } => {
            let _every = EveryGuard(restore);
            return run_from_daemon(o, sock);
        }
    };
    let _every = EveryGuard(restore);
    let drops_at_start = ring_drops(&o.algos)?;

    let mut pr = Printer::new(&o);
    // JSON and CSV take the fast path: each record is formatted in the
    // ring callback straight from the ring's memory into one buffer that is
    // written out once per batch (no Event, no allocation per record).  The
    // table keeps decoded records (it shows the latest per flow).
    let fast = match pr.format {
        Format::Json => Some(FastFormat::Json),
        Format::Csv => Some(FastFormat::Csv),
        Format::Table => None,
    };
    let opts = std::rc::Rc::new(o);
    let o = &*opts;
    let queue = std::rc::Rc::new(std::cell::RefCell::new(Vec::<Event>::new()));
    let out = std::rc::Rc::new(std::cell::RefCell::new(FastOut::default()));
    let mut builder = RingBufferBuilder::new();
    for m in &maps {
        let q = queue.clone();
        let fo = out.clone();
        let oo = opts.clone();
        builder.add(m, move |data: &[u8]| {
            match fast {
                Some(f) => fo.borrow_mut().push(data, f, &oo),
                None => {
                    if let Some(ev) = Event::decode(data) {
                        q.borrow_mut().push(ev);
                    }
                }
            }
            0
        })?;
    }
    let rb = builder.build()?;
    // An in-place upgrade that renews a ring (`attach --replace` to a
    // release whose telemetry record differs) leaves this one silent: the
    // watch says so and ends instead of waiting on it.
    let ring_ids: Vec<u32> = maps
        .iter()
        .map(|m| m.info().map(|i| i.info.id).unwrap_or(0))
        .collect();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(read_loop(
        &rb,
        o,
        &mut pr,
        fast,
        &out,
        &queue,
        &ring_ids,
        &drops_at_start,
    ))?;
    if !pr.stopped {
        // What the kernel wrote before the stop is still shown: up to
        // RB_DRAIN_MS of records came since the last drain, with no wakeup.
        rb.consume()?;
        if fast.is_some() {
            pr.write_fast(&mut out.borrow_mut(), o)?;
        } else if o.args.count.is_none_or(|c| pr.seen < c) {
            let batch: Vec<Event> = std::mem::take(&mut *queue.borrow_mut());
            pr.push_all(batch, o, &drops_at_start)?;
        }
    }
    pr.finish(o, &drops_at_start)?;
    let seen = pr.seen;
    for (algo, d0) in o.algos.iter().zip(&drops_at_start) {
        // A re-attach during the watch restarts the counters: saturate.
        let d =
            bpf::read_stats(*algo)?[intf::CCL_STAT_RB_RESERVE_FAIL as usize].saturating_sub(*d0);
        eprintln!(
            "ccload: {algo}: {seen} records shown, {d} dropped in the kernel (ring buffer full)"
        );
    }
    drop(locks);
    Ok(())
}

/// What `watch` reads: the rings here (their consumer locks held, `--every`
/// set), or the daemon's fan-out when `ccload serve` holds them.
enum Opened {
    Here {
        locks: Vec<crate::bpf::stream::ConsumerLock>,
        maps: Vec<libbpf_rs::MapHandle>,
        restore: Vec<(Algo, Vec<(String, u32)>)>,
    },
    Daemon {
        sock: std::os::unix::net::UnixStream,
        restore: Vec<(Algo, Vec<(String, u32)>)>,
    },
}

/// Lock each algorithm's ring as its consumer and open it, setting
/// `--every` in the kernel (restored by the caller's guard); the daemon's
/// socket when the daemon is the consumer.
fn open_rings(o: &WatchOpts) -> Result<Opened> {
    let mut locks = Vec::new();
    let mut maps = Vec::new();
    let mut restore = Vec::new();
    for algo in &o.algos {
        match lock_consumer(*algo) {
            Ok(l) => locks.push(l),
            Err(e) => {
                // `ccload serve` owns the ring buffers: read its fan-out.
                if let Some(sock) = daemon_socket(&o.args.socket) {
                    drop(locks);
                    // `--every` is the kernel's sampling, whoever reads the
                    // ring: set it here too, restored on exit.
                    if let Some(e) = o.args.every {
                        let todo: Vec<Algo> = o
                            .algos
                            .iter()
                            .copied()
                            .filter(|a| !restore.iter().any(|(r, _)| r == a))
                            .collect();
                        for a in todo {
                            restore.push((a, set_tracing(a, &every_fields(e))?));
                        }
                    }
                    return Ok(Opened::Daemon { sock, restore });
                }
                return Err(e);
            }
        }
        maps.push(bpf::open_map(*algo, "events")?);
        if let Some(e) = o.args.every {
            restore.push((*algo, set_tracing(*algo, &every_fields(e))?));
        }
    }
    Ok(Opened::Here {
        locks,
        maps,
        restore,
    })
}

/// Read the rings until a signal, `--count`, `--duration` or an in-place
/// upgrade that renewed a ring ends the watch.
#[allow(clippy::too_many_arguments)]
async fn read_loop(
    rb: &libbpf_rs::RingBuffer<'_>,
    o: &WatchOpts,
    pr: &mut Printer,
    fast: Option<FastFormat>,
    out: &std::cell::RefCell<FastOut>,
    queue: &std::cell::RefCell<Vec<Event>>,
    ring_ids: &[u32],
    drops_at_start: &[u64],
) -> Result<()> {
    let start = Instant::now();
    // SAFETY: the epoll fd belongs to `rb`, which outlives `afd` (dropped at
    // the end of this block), and nobody closes it meanwhile.
    let afd = unsafe { AsyncFd::register(FdWrap(rb.epoll_fd())) }.map_err(|e| e.into_parts().1)?;
    // SIGINT, SIGTERM (systemd, timeout(1), kill) and SIGHUP end the
    // loop normally, so `--every` is restored on every usual way out.
    use tokio::signal::unix::{signal, SignalKind};
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut stop = false;
    loop {
        // Controllers wake a reader only once a batch is waiting
        // (ccl_event_submit()), so the ring is also drained on a timer.
        let tick = tokio::time::sleep(Duration::from_millis(crate::bpf::RB_DRAIN_MS));
        tokio::select! {
            _ = &mut ctrl_c => break,
            _ = term.recv() => break,
            _ = hup.recv() => break,
            r = afd.readable() => r?.clear_ready(),
            _ = tick => {
                if let Some(a) = ring_renewed(&o.algos, ring_ids) {
                    eprintln!(
                        "ccload: {a} was upgraded in place with a new telemetry ring; \
                         this watch reads the old one: run `ccload watch` again"
                    );
                    break;
                }
            }
        }
        // Readiness is cleared first and the ring drained until a pass
        // finds nothing: the kernel wakes a reader only when a record
        // finds a batch waiting (ours) or lands in an empty ring (the
        // ring's default), so a reader that stopped short of empty (or
        // cleared readiness after new records came) would wait for the
        // next tick while records pile up.
        loop {
            let n = rb.consume_raw();
            if n < 0 {
                bail!(
                    "reading the ring buffer: {}",
                    std::io::Error::from_raw_os_error(-n)
                );
            }
            if fast.is_some() && pr.write_fast(&mut out.borrow_mut(), o)? {
                stop = true;
                break;
            }
            if n == 0 {
                break;
            }
        }
        if stop {
            break;
        }
        if fast.is_some() {
            if pr.write_fast(&mut out.borrow_mut(), o)? {
                break;
            }
            if o.args.duration.is_some_and(|d| start.elapsed() >= d) {
                break;
            }
            continue;
        }
        let batch: Vec<Event> = std::mem::take(&mut *queue.borrow_mut());
        if pr.push_all(batch, o, drops_at_start)?
            || o.args.duration.is_some_and(|d| start.elapsed() >= d)
        {
            break;
        }
    }
    Ok(())
}

/// The first of `algos` whose pinned `events` map is no longer the one with
/// id `ids[i]` (renewed by an in-place upgrade; detached reads as unchanged).
fn ring_renewed(algos: &[Algo], ids: &[u32]) -> Option<Algo> {
    algos.iter().zip(ids).find_map(|(a, id)| {
        let now = bpf::open_map(*a, "events").ok()?.info().ok()?.info.id;
        (now != *id).then_some(*a)
    })
}

/// A flow of the table, without formatting anything (a key per record must
/// be cheap: the table sees every record).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct FlowKey {
    algo: u32,
    family: u16,
    saddr: [u8; 16],
    sport: u16,
    daddr: [u8; 16],
    dport: u16,
}

impl FlowKey {
    fn of(e: &Event) -> FlowKey {
        FlowKey {
            algo: e.hdr.algo,
            family: e.hdr.family,
            saddr: e.hdr.saddr,
            sport: e.hdr.sport,
            daddr: e.hdr.daddr,
            dport: e.hdr.dport,
        }
    }
}

/// One column of the compact table: title and value in human units.
type Col = (&'static str, fn(&Event) -> String);

fn f1(v: f64) -> String {
    format!("{v:.1}")
}

/// The law fields that matter for each controller, in human units; a
/// controller without an entry (a new one) shows its first four fields raw.
fn law_columns(algo: Algo) -> Option<&'static [Col]> {
    Some(match algo {
        Algo::Ccpd => &[
            ("C Mb/s", |e| {
                f1(e.get("c_sps").unwrap_or(0) as f64 * e.hdr.mss as f64 * 8.0 / 1e6)
            }),
            ("B seg", |e| f1(e.get("b_q10").unwrap_or(0) as f64 / 1024.0)),
            ("x seg", |e| f1(e.get("x_q10").unwrap_or(0) as f64 / 1024.0)),
            ("e seg", |e| f1(e.get("e_q10").unwrap_or(0) as f64 / 1024.0)),
        ],
        Algo::Hetcp => &[
            ("BW Mb/s", |e| e.get("bw_mbps").unwrap_or(0).to_string()),
            ("BW*RTT", |e| e.get("gtsw_ssth").unwrap_or(0).to_string()),
            ("base ms", |e| {
                f1(e.get("base_rtt_us").unwrap_or(0) as f64 / 1000.0)
            }),
            ("losses", |e| e.get("losses").unwrap_or(0).to_string()),
        ],
        Algo::CtcpPlus => &[
            ("dwnd", |e| {
                f1(e.get("dwnd_q10").unwrap_or(0) as f64 / 1024.0)
            }),
            ("diff", |e| {
                f1(e.get("diff_q10").unwrap_or(0) as f64 / 1024.0)
            }),
            ("gamma", |e| e.get("gamma").unwrap_or(0).to_string()),
            ("losses", |e| e.get("losses").unwrap_or(0).to_string()),
        ],
        Algo::UbReno => &[
            ("extra", |e| e.get("extra").unwrap_or(0).to_string()),
            ("W_full", |e| e.get("wfull_prev").unwrap_or(0).to_string()),
            ("C(t)", |e| {
                format!("{:.3}", e.get("c_q16").unwrap_or(0) as f64 / 65536.0)
            }),
            ("lsrtt ms", |e| {
                f1(e.get("lsrtt_us").unwrap_or(0) as f64 / 1000.0)
            }),
        ],
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

/// The columns every controller shares, in human units.
const COMMON: &[Col] = &[
    ("phase", |e| e.phase_name().to_string()),
    ("state", |e| {
        crate::host::diag::ca_state_name(e.hdr.ca_state).to_string()
    }),
    ("cwnd", |e| e.hdr.snd_cwnd.to_string()),
    ("srtt ms", |e| f1(e.hdr.srtt_us as f64 / 1000.0)),
    // The window's rate: cwnd * mss / srtt.
    ("rate Mb/s", |e| {
        if e.hdr.srtt_us == 0 {
            "-".into()
        } else {
            f1(e.hdr.snd_cwnd as f64 * e.hdr.mss as f64 * 8.0 / e.hdr.srtt_us as f64)
        }
    }),
];

/// What the table shows: the compact human view (default), every field
/// raw (`--wide`), or chosen raw fields (`--columns`).
#[derive(Clone, Debug)]
pub enum View {
    Compact,
    Wide,
    Columns(Vec<String>),
}

/// The (title, value) cells of one record in `view`.
pub(crate) fn cells(e: &Event, view: &View) -> Vec<(String, String)> {
    let raw = |name: &str| -> Option<String> {
        let json = e.to_json();
        json.get(name).map(|v| match v.as_str() {
            Some(s) => s.to_string(),
            None => v.to_string(),
        })
    };
    match view {
        View::Compact => {
            let mut v: Vec<(String, String)> =
                COMMON.iter().map(|(t, f)| (t.to_string(), f(e))).collect();
            match law_columns(e.algo) {
                Some(cols) => v.extend(cols.iter().map(|(t, f)| (t.to_string(), f(e)))),
                None => v.extend(
                    e.fields
                        .iter()
                        .take(4)
                        .map(|(n, x)| (n.to_string(), x.to_string())),
                ),
            }
            v
        }
        View::Wide => {
            let mut v: Vec<(String, String)> = [
                ("phase", e.phase_name().to_string()),
                ("round", e.hdr.round.to_string()),
                ("cwnd", e.hdr.snd_cwnd.to_string()),
                ("srtt_us", e.hdr.srtt_us.to_string()),
            ]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b))
            .collect();
            v.extend(e.fields.iter().map(|(n, x)| (n.to_string(), x.to_string())));
            v
        }
        View::Columns(names) => names
            .iter()
            .map(|n| (n.clone(), raw(n).unwrap_or_else(|| "-".into())))
            .collect(),
    }
}

fn draw_table(
    latest: &BTreeMap<FlowKey, Event>,
    algos: &[Algo],
    drops0: &[u64],
    view: &View,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    // SAFETY: isatty has no preconditions.
    if unsafe { libc::isatty(1) } == 1 {
        write!(out, "\x1b[H\x1b[2J")?;
    }
    for algo in algos {
        let rows: Vec<&Event> = latest.values().filter(|e| e.algo == *algo).collect();
        let drops = bpf::read_stats(*algo)
            .map(|s| s[intf::CCL_STAT_RB_RESERVE_FAIL as usize])
            .unwrap_or(0);
        let d0 = drops0[algos.iter().position(|a| a == algo).unwrap()];
        writeln!(
            out,
            "{algo}: {} flows, ring-buffer drops since start: {}",
            rows.len(),
            drops.saturating_sub(d0)
        )?;
        let Some(first) = rows.first() else {
            writeln!(out)?;
            continue;
        };
        let w = if matches!(view, View::Compact) { 9 } else { 12 };
        write!(out, "{:<45}", "flow (local > remote)")?;
        for (t, _) in cells(first, view) {
            write!(out, " {:>w$}", truncate(&t, w))?;
        }
        writeln!(out)?;
        for e in rows {
            write!(out, "{:<45}", format!("{} > {}", e.local(), e.remote()))?;
            for (_, v) in cells(e, view) {
                write!(out, " {v:>w$}")?;
            }
            writeln!(out)?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(())
}

fn truncate(s: &str, n: usize) -> &str {
    if s.len() > n {
        &s[..n]
    } else {
        s
    }
}

/// Records each algorithm's kernel dropped so far (ring buffer full).
fn ring_drops(algos: &[Algo]) -> Result<Vec<u64>> {
    algos
        .iter()
        .map(|a| bpf::read_stats(*a).map(|s| s[intf::CCL_STAT_RB_RESERVE_FAIL as usize]))
        .collect()
}

/// Renders events as table, JSON lines or CSV.
struct Printer {
    format: Format,
    seen: u64,
    latest: BTreeMap<FlowKey, Event>,
    csv_done: std::collections::HashSet<Algo>,
    last_draw: Instant,
    stopped: bool,
}

impl Printer {
    fn new(o: &WatchOpts) -> Printer {
        let format = o.args.format.unwrap_or_else(|| {
            // SAFETY: isatty has no preconditions.
            if unsafe { libc::isatty(1) } == 1 {
                Format::Table
            } else {
                Format::Json
            }
        });
        Printer {
            format,
            seen: 0,
            latest: BTreeMap::new(),
            csv_done: Default::default(),
            last_draw: Instant::now() - Duration::from_secs(1),
            stopped: false,
        }
    }

    /// Print a batch; true when the run should end (count reached, or the
    /// reader went away).
    fn push_all(&mut self, batch: Vec<Event>, o: &WatchOpts, drops0: &[u64]) -> Result<bool> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for ev in batch {
            if !o.algos.contains(&ev.algo) || !matches(&ev, o) {
                continue;
            }
            self.seen += 1;
            let res = match self.format {
                Format::Json => writeln!(out, "{}", ev.to_json()),
                Format::Csv => {
                    if self.csv_done.insert(ev.algo) {
                        writeln!(out, "{}", Event::csv_header(ev.algo))?;
                    }
                    writeln!(out, "{}", ev.to_csv())
                }
                Format::Table => {
                    self.latest.insert(FlowKey::of(&ev), ev);
                    Ok(())
                }
            };
            if let Err(e) = res {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    self.stopped = true;
                    return Ok(true);
                }
                return Err(e.into());
            }
            if o.args.count.is_some_and(|c| self.seen >= c) {
                break;
            }
        }
        out.flush().ok();
        drop(out);
        if self.format == Format::Table && self.last_draw.elapsed() >= Duration::from_millis(500) {
            draw_table(&self.latest, &o.algos, drops0, &o.view())?;
            self.last_draw = Instant::now();
        }
        Ok(o.args.count.is_some_and(|c| self.seen >= c))
    }

    /// Write what the fast path formatted; true when the run should end.
    fn write_fast(&mut self, f: &mut FastOut, o: &WatchOpts) -> Result<bool> {
        self.seen = f.seen;
        if !f.buf.is_empty() {
            let res = std::io::stdout().lock().write_all(&f.buf);
            f.buf.clear();
            if let Err(e) = res {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    self.stopped = true;
                    return Ok(true);
                }
                return Err(e.into());
            }
        }
        Ok(o.args.count.is_some_and(|c| self.seen >= c))
    }

    fn finish(&mut self, o: &WatchOpts, drops0: &[u64]) -> Result<()> {
        if self.format == Format::Table && !self.stopped {
            draw_table(&self.latest, &o.algos, drops0, &o.view())?;
        }
        Ok(())
    }
}

/// `watch` while `ccload serve` owns the ring buffers: the daemon sends
/// every record as a little-endian u32 length and the raw bytes.
fn run_from_daemon(o: WatchOpts, sock: std::os::unix::net::UnixStream) -> Result<()> {
    use std::io::Read;
    eprintln!(
        "ccload: reading telemetry from the ccload daemon ({})",
        o.args.socket.display()
    );
    let drops0 = ring_drops(&o.algos)?;
    let mut pr = Printer::new(&o);
    let start = Instant::now();
    let mut sock = sock;
    {
        use std::io::Write;
        sock.write_all(crate::bpf::stream::HELLO_FRAMES)?;
    }
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    // SIGINT ends the loop (checked between reads).
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        if let Ok(rt) = rt {
            rt.block_on(async {
                let _ = tokio::signal::ctrl_c().await;
            });
            st.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut frames = Deframer::default();
    let mut chunk = [0u8; 65536];
    loop {
        if stop.load(std::sync::atomic::Ordering::SeqCst)
            || o.args.duration.is_some_and(|d| start.elapsed() >= d)
        {
            break;
        }
        match sock.read(&mut chunk) {
            Ok(0) => {
                eprintln!("ccload: the daemon closed the telemetry stream");
                break;
            }
            Ok(n) => frames.push(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
        let mut batch = Vec::new();
        while let Some(rec) = frames.next_record() {
            batch.extend(Event::decode(&rec));
        }
        if pr.push_all(batch, &o, &drops0)? {
            break;
        }
        if frames.corrupt {
            pr.finish(&o, &drops0)?;
            bail!(
                "the daemon's telemetry stream is corrupt (a record longer than {} bytes)",
                crate::bpf::stream::MAX_RECORD
            );
        }
    }
    pr.finish(&o, &drops0)?;
    eprintln!("ccload: {} records shown (from the daemon)", pr.seen);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::telemetry::tests::sample_record;

    /// `ccload watch`'s arguments alone.
    #[derive(clap::Parser)]
    struct Argv {
        #[command(flatten)]
        args: WatchArgs,
    }

    fn opts(algos: Vec<Algo>, extra: &[&str]) -> WatchOpts {
        use clap::Parser;
        let mut argv = vec!["watch"];
        argv.extend_from_slice(extra);
        WatchOpts {
            algos,
            args: Argv::parse_from(argv).args,
        }
    }

    #[test]
    fn compact_view_is_narrow_and_in_human_units() {
        for a in Algo::ALL {
            let e = Event::decode(&sample_record(a, 0)).unwrap();
            let c = cells(&e, &View::Compact);
            // 5 common columns and 4 law fields: fits a terminal.
            assert_eq!(c.len(), 9, "{a}");
            assert_eq!(c[2], ("cwnd".to_string(), "20".to_string()));
            assert_eq!(c[3], ("srtt ms".to_string(), "10.0".to_string()));
            assert!(cells(&e, &View::Wide).len() > 9);
        }
    }

    #[test]
    fn columns_are_checked_and_shown_raw() {
        use clap::Parser;
        let o = opts(vec![Algo::Ccpd], &["--columns", "cwnd,kp_nope,w_q10"]);
        assert_eq!(unknown_columns(&o), vec!["kp_nope".to_string()]);
        let o = opts(vec![Algo::Ccpd], &["--columns", "cwnd, srtt_us,w_q10"]);
        assert!(unknown_columns(&o).is_empty());
        let e = Event::decode(&sample_record(Algo::Ccpd, 0)).unwrap();
        let c = cells(&e, &o.view());
        assert_eq!(c[0], ("cwnd".to_string(), "20".to_string()));
        assert_eq!(c[1], ("srtt_us".to_string(), "10000".to_string()));
        assert_eq!(c[2].0, "w_q10");
        assert!(Argv::try_parse_from(["watch", "--wide", "--columns", "cwnd"]).is_err());
    }
}
