//! `ccload watch`: stream per-round telemetry from the pinned ring buffers
//! with tokio.  One consumer per algorithm at a time (a BPF ring buffer hands
//! each record to exactly one reader, so a second reader would silently split
//! the stream): an flock on /run/ccload/watch-<algo>.lock enforces it.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::RingBufferBuilder;
use tokio::io::unix::AsyncFd;

use crate::algos::Algo;
use crate::bpf;
use crate::intf;
use crate::stream::{daemon_socket, lock_consumer, Deframer, FdWrap};
use crate::telemetry::Event;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

pub struct WatchOpts {
    /// Resolved from `args.algo`: the attached algorithms to read.
    pub algos: Vec<Algo>,
    pub args: crate::cli::WatchArgs,
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

/// Set profile 0's trace_every of `algo` to `n`, changing no other field
/// (under the state lock, so a concurrent `tune` is not undone).  Returns
/// the previous value.
fn set_trace_every(algo: Algo, n: u32) -> Result<u32> {
    let _lock = crate::lock::state()?;
    let mut p = bpf::read_params(algo, 0)?;
    let old = p.get("trace_every").context("no trace_every tunable")?;
    p.apply(&[("trace_every".to_string(), n.to_string())])?;
    bpf::write_params(algo, &p, 0)?;
    Ok(old)
}

/// Restores trace_every (only it) on exit when `--every` changed it.
struct EveryGuard(Vec<(Algo, u32)>);
impl Drop for EveryGuard {
    fn drop(&mut self) {
        for (algo, old) in &self.0 {
            let _ = set_trace_every(*algo, *old);
        }
    }
}

pub fn run(o: WatchOpts) -> Result<()> {
    bpf::require_root()?;
    if o.algos.is_empty() {
        bail!("nothing is attached (ccload attach --algo ALGO first)");
    }
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
                    return run_from_daemon(o, sock);
                }
                return Err(e);
            }
        }
        maps.push(bpf::open_map(*algo, "events")?);
        if let Some(n) = o.args.every {
            restore.push((*algo, set_trace_every(*algo, n)?));
        }
    }
    let _every = EveryGuard(restore);
    let drops_at_start = ring_drops(&o.algos)?;

    let queue = std::rc::Rc::new(std::cell::RefCell::new(Vec::<Event>::new()));
    let mut builder = RingBufferBuilder::new();
    for m in &maps {
        let q = queue.clone();
        builder.add(m, move |data: &[u8]| {
            if let Some(ev) = Event::decode(data) {
                q.borrow_mut().push(ev);
            }
            0
        })?;
    }
    let rb = builder.build()?;

    let mut pr = Printer::new(&o);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let start = Instant::now();
    let result: Result<()> = rt.block_on(async {
        // SAFETY: the epoll fd belongs to `rb`, which outlives `afd` (dropped at
        // the end of this block), and nobody closes it meanwhile.
        let afd =
            unsafe { AsyncFd::register(FdWrap(rb.epoll_fd())) }.map_err(|e| e.into_parts().1)?;
        // SIGINT, SIGTERM (systemd, timeout(1), kill) and SIGHUP end the
        // loop normally, so `--every` is restored on every usual way out.
        use tokio::signal::unix::{signal, SignalKind};
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        loop {
            let tick = tokio::time::sleep(Duration::from_millis(200));
            tokio::select! {
                _ = &mut ctrl_c => break,
                _ = term.recv() => break,
                _ = hup.recv() => break,
                r = afd.readable() => {
                    let mut g = r?;
                    rb.consume()?;
                    g.clear_ready();
                }
                _ = tick => {}
            }
            let batch: Vec<Event> = std::mem::take(&mut *queue.borrow_mut());
            if pr.push_all(batch, &o, &drops_at_start)?
                || o.args.duration.is_some_and(|d| start.elapsed() >= d)
            {
                break;
            }
        }
        Ok(())
    });
    result?;
    pr.finish(&o, &drops_at_start)?;
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

fn draw_table(
    latest: &BTreeMap<(String, String, String), Event>,
    algos: &[Algo],
    drops0: &[u64],
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
        let names: Vec<&str> = crate::telemetry::fields(*algo)
            .iter()
            .map(|d| d.name)
            .collect();
        write!(
            out,
            "{:<22} {:<22} {:>6} {:>6} {:>7} {:>8}",
            "local", "remote", "phase", "round", "cwnd", "srtt_us"
        )?;
        for n in &names {
            write!(out, " {:>12}", truncate(n, 12))?;
        }
        writeln!(out)?;
        for e in rows {
            write!(
                out,
                "{:<22} {:<22} {:>6} {:>6} {:>7} {:>8}",
                e.local().to_string(),
                e.remote().to_string(),
                e.phase_name(),
                e.hdr.round,
                e.hdr.snd_cwnd,
                e.hdr.srtt_us
            )?;
            for (_, v) in &e.fields {
                write!(out, " {v:>12}")?;
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
    latest: BTreeMap<(String, String, String), Event>,
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
                    self.latest.insert(
                        (
                            ev.algo.name().into(),
                            ev.local().to_string(),
                            ev.remote().to_string(),
                        ),
                        ev,
                    );
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
            draw_table(&self.latest, &o.algos, drops0)?;
            self.last_draw = Instant::now();
        }
        Ok(o.args.count.is_some_and(|c| self.seen >= c))
    }

    fn finish(&mut self, o: &WatchOpts, drops0: &[u64]) -> Result<()> {
        if self.format == Format::Table && !self.stopped {
            draw_table(&self.latest, &o.algos, drops0)?;
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
                crate::stream::MAX_RECORD
            );
        }
    }
    pr.finish(&o, &drops0)?;
    eprintln!("ccload: {} records shown (from the daemon)", pr.seen);
    Ok(())
}
