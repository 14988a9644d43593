//! `ccload watch`: stream per-round telemetry from the pinned ring buffers
//! with tokio.  One consumer per algorithm at a time (a BPF ring buffer hands
//! each record to exactly one reader, so a second reader would silently split
//! the stream): an flock on /run/ccload/watch-<algo>.lock enforces it.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::RingBufferBuilder;
use tokio::io::unix::AsyncFd;

use crate::algos::Algo;
use crate::bpf;
use crate::intf;
use crate::telemetry::Event;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

pub struct WatchOpts {
    pub algos: Vec<Algo>,
    pub flow: Option<std::net::SocketAddr>,
    pub cookie: Option<u64>,
    pub format: Option<Format>,
    pub every: Option<u32>,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
}

/// Exclusive consumer lock, released when the process exits.
pub struct ConsumerLock(#[allow(dead_code)] std::fs::File);

pub fn lock_consumer(algo: Algo) -> Result<ConsumerLock> {
    std::fs::create_dir_all("/run/ccload").context("failed to create /run/ccload")?;
    let path = format!("/run/ccload/watch-{algo}.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("failed to open {path}"))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let holder = std::fs::read_to_string(&path).unwrap_or_default();
        bail!(
            "{algo} telemetry is already being consumed (pid {}); a BPF ring buffer gives each \
             record to one reader only, so a second `watch` would silently split the stream",
            holder.trim()
        );
    }
    let mut f = f;
    let _ = f.set_len(0);
    let _ = write!(f, "{}", std::process::id());
    Ok(ConsumerLock(f))
}

struct FdWrap(i32);
impl AsRawFd for FdWrap {
    fn as_raw_fd(&self) -> i32 {
        self.0
    }
}

fn matches(ev: &Event, o: &WatchOpts) -> bool {
    if let Some(c) = o.cookie {
        if ev.hdr.cookie != c {
            return false;
        }
    }
    if let Some(a) = o.flow {
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

/// Restores trace_every on exit when `--every` changed it.
struct EveryGuard(Vec<(Algo, crate::algos::Params)>);
impl Drop for EveryGuard {
    fn drop(&mut self) {
        for (algo, p) in &self.0 {
            let _ = bpf::write_params(*algo, p, 0);
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
        locks.push(lock_consumer(*algo)?);
        maps.push(bpf::open_map(*algo, "events")?);
        if let Some(n) = o.every {
            let old = bpf::read_params(*algo, 0)?;
            let mut new = old.clone();
            new.apply(&[("trace_every".to_string(), n.to_string())])?;
            bpf::write_params(*algo, &new, 0)?;
            restore.push((*algo, old));
        }
    }
    let _every = EveryGuard(restore);
    let drops_at_start: Vec<u64> = o
        .algos
        .iter()
        .map(|a| bpf::read_stats(*a).map(|s| s[intf::CCL_STAT_RB_RESERVE_FAIL as usize]))
        .collect::<Result<_>>()?;

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

    let format = o.format.unwrap_or_else(|| {
        // SAFETY: isatty has no preconditions.
        if unsafe { libc::isatty(1) } == 1 {
            Format::Table
        } else {
            Format::Json
        }
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let start = Instant::now();
    let mut seen = 0u64;
    let mut latest: BTreeMap<(String, String, String), Event> = BTreeMap::new();
    let mut csv_headers_done = std::collections::HashSet::new();
    let mut last_draw = Instant::now() - Duration::from_secs(1);
    let stdout = std::io::stdout();
    let result: Result<()> = rt.block_on(async {
        // SAFETY: the epoll fd belongs to `rb`, which outlives `afd` (dropped at
        // the end of this block), and nobody closes it meanwhile.
        let afd =
            unsafe { AsyncFd::register(FdWrap(rb.epoll_fd())) }.map_err(|e| e.into_parts().1)?;
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            let tick = tokio::time::sleep(Duration::from_millis(200));
            tokio::select! {
                _ = &mut ctrl_c => break,
                r = afd.readable() => {
                    let mut g = r?;
                    rb.consume()?;
                    g.clear_ready();
                }
                _ = tick => {}
            }
            let batch: Vec<Event> = std::mem::take(&mut *queue.borrow_mut());
            let mut out = stdout.lock();
            for ev in batch {
                if !matches(&ev, &o) {
                    continue;
                }
                seen += 1;
                let res = match format {
                    Format::Json => writeln!(out, "{}", ev.to_json()),
                    Format::Csv => {
                        if csv_headers_done.insert(ev.algo) {
                            writeln!(out, "{}", Event::csv_header(ev.algo))?;
                        }
                        writeln!(out, "{}", ev.to_csv())
                    }
                    Format::Table => {
                        latest.insert(
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
                        return Ok(());
                    }
                    return Err(e.into());
                }
                if o.count.is_some_and(|c| seen >= c) {
                    break;
                }
            }
            out.flush().ok();
            if format == Format::Table && last_draw.elapsed() >= Duration::from_millis(500) {
                draw_table(&latest, &o.algos, &drops_at_start)?;
                last_draw = Instant::now();
            }
            if o.count.is_some_and(|c| seen >= c)
                || o.duration.is_some_and(|d| start.elapsed() >= d)
            {
                break;
            }
        }
        Ok(())
    });
    result?;
    if format == Format::Table {
        draw_table(&latest, &o.algos, &drops_at_start)?;
    }
    for (algo, d0) in o.algos.iter().zip(&drops_at_start) {
        let d = bpf::read_stats(*algo)?[intf::CCL_STAT_RB_RESERVE_FAIL as usize] - d0;
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
            drops - d0
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
