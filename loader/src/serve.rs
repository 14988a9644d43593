//! `ccload serve --config FILE`: the daemon for servers.
//!
//! - applies the config at start and again on SIGHUP (a bad file is logged
//!   and the running state kept);
//! - owns the telemetry ring buffers of the attached controllers and fans
//!   every record out to `ccload watch` clients over a local socket
//!   (length-prefixed raw records; a slow client loses records, counted);
//! - serves Prometheus/OpenMetrics text on `serve.metrics` (default
//!   127.0.0.1:9464): per algorithm the kernel counters (flows, rounds,
//!   losses, RTOs, ring-buffer overruns) and socket counts, and per
//!   algorithm x profile the telemetry record counts and histograms of RTT
//!   and window (at most 4 x 16 label sets);
//! - logs one line per event on stderr with sd-daemon priority prefixes
//!   (`<6>`, `<4>`, `<3>`), which journald understands;
//! - on SIGTERM/SIGINT keeps the kernel state, or removes it when the config
//!   says `on_exit = "remove"`.
//!
//! Size: over 400 lines because the hand-written HTTP server and metrics
//! renderer live here; issue #13 replaces the server with a crate and
//! splits the metrics out.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::RingBufferBuilder;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{signal, SignalKind};

use crate::algos::Algo;
use crate::config::{self, Desired};
use crate::telemetry::Event;
use crate::{bpf, intf, stream};

const RTT_MS_BUCKETS: [f64; 10] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];
const CWND_BUCKETS: [f64; 10] = [
    4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

fn log(prio: u8, msg: impl std::fmt::Display) {
    eprintln!("<{prio}>ccload: {msg}");
}

#[derive(Default, Clone)]
struct Hist {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Hist {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; bounds.len()];
        }
        for (b, le) in self.buckets.iter_mut().zip(bounds) {
            if v <= *le {
                *b += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

#[derive(Default)]
struct Metrics {
    records: BTreeMap<(Algo, u32), u64>,
    rtt: BTreeMap<(Algo, u32), Hist>,
    cwnd: BTreeMap<(Algo, u32), Hist>,
    last_seen: HashMap<(Algo, u32, u64), Instant>,
    applies: u64,
    apply_errors: u64,
    clients: u64,
    fanout_dropped: u64,
}

impl Metrics {
    fn record(&mut self, ev: &Event) {
        let key = (ev.algo, ev.hdr.profile % intf::CCL_NR_PROFILES);
        *self.records.entry(key).or_default() += 1;
        self.rtt
            .entry(key)
            .or_default()
            .observe(&RTT_MS_BUCKETS, ev.hdr.srtt_us as f64 / 1000.0);
        self.cwnd
            .entry(key)
            .or_default()
            .observe(&CWND_BUCKETS, ev.hdr.snd_cwnd as f64);
        self.last_seen
            .insert((key.0, key.1, ev.hdr.cookie), Instant::now());
    }
}

fn profile_label(d: &Desired, algo: Algo, id: u32) -> String {
    match d.profile_names.get(&(algo, id)) {
        Some(n) => n.clone(),
        None if id == 0 => "default".into(),
        None => id.to_string(),
    }
}

fn render(m: &mut Metrics, d: &Desired) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# HELP ccload_up The ccload daemon is running.\n# TYPE ccload_up gauge\nccload_up 1"
    );
    let _ = writeln!(o, "# HELP ccload_config_applies_total Successful config applications.\n# TYPE ccload_config_applies_total counter\nccload_config_applies_total {}", m.applies);
    let _ = writeln!(o, "# HELP ccload_config_errors_total Rejected config reloads.\n# TYPE ccload_config_errors_total counter\nccload_config_errors_total {}", m.apply_errors);
    let _ = writeln!(o, "# HELP ccload_watch_clients Connected telemetry clients.\n# TYPE ccload_watch_clients gauge\nccload_watch_clients {}", m.clients);
    let _ = writeln!(o, "# HELP ccload_fanout_dropped_total Records a slow client did not get.\n# TYPE ccload_fanout_dropped_total counter\nccload_fanout_dropped_total {}", m.fanout_dropped);
    // HELP text comes from the one stats table (stats::STATS).
    let counters: [(&str, u32); 6] = [
        ("ccload_flows_total", intf::CCL_STAT_FLOW_INIT),
        ("ccload_rounds_total", intf::CCL_STAT_ROUNDS),
        ("ccload_loss_events_total", intf::CCL_STAT_LOSS_EVENTS),
        ("ccload_rtos_total", intf::CCL_STAT_RTO),
        (
            "ccload_ringbuf_overruns_total",
            intf::CCL_STAT_RB_RESERVE_FAIL,
        ),
        ("ccload_events_total", intf::CCL_STAT_EVENTS),
    ];
    let attached = bpf::attached();
    let stats: Vec<(Algo, Vec<u64>)> = attached
        .iter()
        .filter_map(|a| bpf::read_stats(*a).ok().map(|s| (*a, s)))
        .collect();
    for (name, idx) in counters {
        let help = crate::stats::help(idx);
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
        for (a, s) in &stats {
            let _ = writeln!(o, "{name}{{algo=\"{a}\"}} {}", s[idx as usize]);
        }
    }
    let _ = writeln!(o, "# HELP ccload_sockets TCP sockets using the controller in the daemon's network namespace.\n# TYPE ccload_sockets gauge");
    let socks = crate::diag::tcp_sockets().unwrap_or_default();
    for a in &attached {
        let n = socks.iter().filter(|s| s.cong == a.name()).count();
        let _ = writeln!(o, "ccload_sockets{{algo=\"{a}\"}} {n}");
    }
    let _ = writeln!(o, "# HELP ccload_telemetry_records_total Telemetry records received, by profile.\n# TYPE ccload_telemetry_records_total counter");
    for ((a, p), n) in &m.records {
        let _ = writeln!(
            o,
            "ccload_telemetry_records_total{{algo=\"{a}\",profile=\"{}\"}} {n}",
            profile_label(d, *a, *p)
        );
    }
    let cutoff = Instant::now() - Duration::from_secs(10);
    m.last_seen.retain(|_, t| *t >= cutoff);
    let mut active: BTreeMap<(Algo, u32), u64> = BTreeMap::new();
    for (a, p, _) in m.last_seen.keys() {
        *active.entry((*a, *p)).or_default() += 1;
    }
    let _ = writeln!(o, "# HELP ccload_active_flows Flows with a telemetry record in the last 10 s.\n# TYPE ccload_active_flows gauge");
    for ((a, p), n) in &active {
        let _ = writeln!(
            o,
            "ccload_active_flows{{algo=\"{a}\",profile=\"{}\"}} {n}",
            profile_label(d, *a, *p)
        );
    }
    for (name, help, bounds, map) in [
        (
            "ccload_srtt_ms",
            "Smoothed RTT at round ends, ms.",
            &RTT_MS_BUCKETS,
            &m.rtt,
        ),
        (
            "ccload_cwnd_segments",
            "Congestion window at round ends, segments.",
            &CWND_BUCKETS,
            &m.cwnd,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} histogram");
        for ((a, p), h) in map {
            let lbl = format!("algo=\"{a}\",profile=\"{}\"", profile_label(d, *a, *p));
            for (le, c) in bounds.iter().zip(&h.buckets) {
                let _ = writeln!(o, "{name}_bucket{{{lbl},le=\"{le}\"}} {c}");
            }
            let _ = writeln!(o, "{name}_bucket{{{lbl},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(o, "{name}_sum{{{lbl}}} {}", h.sum);
            let _ = writeln!(o, "{name}_count{{{lbl}}} {}", h.count);
        }
    }
    o
}

fn apply(d: &Desired, verbose: bool) -> Result<()> {
    // Held while the kernel state is reconciled, as every CLI command does.
    let _lock = crate::lock::state()?;
    let plan = config::plan(d)?;
    if plan.is_empty() {
        log(6, "config: kernel already matches");
    }
    for c in &plan {
        log(6, format!("config: {c}"));
    }
    config::execute(&plan, verbose)?;
    config::save_profile_names(d)
}

type Queue = std::rc::Rc<std::cell::RefCell<Vec<Vec<u8>>>>;

/// Ring buffers of every attached controller, with their consumer locks.
#[derive(Default)]
struct Rings {
    rb: Option<libbpf_rs::RingBuffer<'static>>,
    _locks: Vec<stream::ConsumerLock>,
}

fn open_rings(q: &Queue) -> Result<Rings> {
    let mut locks = Vec::new();
    let mut b = RingBufferBuilder::new();
    let mut any = false;
    let mut maps = Vec::new();
    for a in bpf::attached() {
        locks.push(stream::lock_consumer(a)?);
        maps.push(bpf::open_map(a, "events")?);
    }
    // The maps must outlive the ring buffer: leak the handles (a few per
    // reload over the daemon's life; each is one fd that libbpf dup()ed).
    let maps: &'static [libbpf_rs::MapHandle] = Box::leak(maps.into_boxed_slice());
    for m in maps {
        let q = q.clone();
        b.add(m, move |data: &[u8]| {
            q.borrow_mut().push(data.to_vec());
            0
        })?;
        any = true;
    }
    Ok(Rings {
        rb: if any { Some(b.build()?) } else { None },
        _locks: locks,
    })
}

async fn serve_http(
    stream: tokio::net::TcpStream,
    m: Arc<Mutex<Metrics>>,
    d: Arc<Mutex<Desired>>,
) -> Result<()> {
    let mut s = stream;
    let mut buf = vec![0u8; 4096];
    let mut n = 0;
    // Read the request head (bounded).
    while n < buf.len() {
        let k = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf[n..])).await??;
        if k == 0 {
            break;
        }
        n += k;
        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buf[..n]);
    let line = head.lines().next().unwrap_or("");
    let (code, body) = if line.starts_with("GET /metrics ") {
        let d = d.lock().unwrap().clone();
        (200, render(&mut m.lock().unwrap(), &d))
    } else {
        (404, "not found: try /metrics\n".to_string())
    };
    let resp = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        if code == 200 { "OK" } else { "Not Found" },
        body.len()
    );
    s.write_all(resp.as_bytes()).await?;
    s.shutdown().await.ok();
    Ok(())
}

pub fn run(config_path: &Path, verbose: bool) -> Result<()> {
    bpf::require_root()?;
    let desired = config::load(config_path)?;
    apply(&desired, verbose).context("initial config apply")?;
    log(6, format!("applied {}", config_path.display()));
    let metrics = Arc::new(Mutex::new(Metrics {
        applies: 1,
        ..Default::default()
    }));
    let desired = Arc::new(Mutex::new(desired));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let res = local.block_on(
        &rt,
        main_loop(config_path.to_path_buf(), desired.clone(), metrics, verbose),
    );
    let d = desired.lock().unwrap().clone();
    if d.serve.remove_on_exit {
        let empty = config::parse(Path::new("<on_exit = remove>"), "")?;
        apply(&empty, verbose)?;
        log(6, "exit: removed ccload's kernel state (on_exit = remove)");
    } else {
        log(6, "exit: kernel state kept (on_exit = keep)");
    }
    let _ = std::fs::remove_file(&d.serve.socket);
    res
}

async fn main_loop(
    path: PathBuf,
    desired: Arc<Mutex<Desired>>,
    metrics: Arc<Mutex<Metrics>>,
    verbose: bool,
) -> Result<()> {
    let (mlisten, sock_path) = {
        let d = desired.lock().unwrap();
        (d.serve.metrics.clone(), d.serve.socket.clone())
    };
    let http = tokio::net::TcpListener::bind(&mlisten)
        .await
        .with_context(|| format!("metrics listener on {mlisten}"))?;
    log(6, format!("metrics on http://{mlisten}/metrics"));
    if let Some(dir) = sock_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(&sock_path);
    let unix = tokio::net::UnixListener::bind(&sock_path)
        .with_context(|| format!("telemetry socket {}", sock_path.display()))?;
    std::fs::set_permissions(
        &sock_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )?;
    log(
        6,
        format!("telemetry for `ccload watch` on {}", sock_path.display()),
    );
    let (tx, _) = tokio::sync::broadcast::channel::<Arc<Vec<u8>>>(16384);
    let q: Queue = Default::default();
    let mut rings = open_rings(&q)?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        let afd = match &rings.rb {
            // SAFETY: the epoll fd belongs to `rings.rb`, which outlives
            // `afd` (dropped before `rings` is replaced on reload).
            Some(rb) => Some(
                unsafe { AsyncFd::register(stream::FdWrap(rb.epoll_fd())) }
                    .map_err(|e| e.into_parts().1)?,
            ),
            None => None,
        };
        let reload = loop {
            let readable = async {
                match &afd {
                    Some(a) => a.readable().await.map(Some),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = term.recv() => { log(6, "SIGTERM"); return Ok(()); }
                _ = int.recv() => { log(6, "SIGINT"); return Ok(()); }
                _ = hup.recv() => break true,
                r = readable => {
                    if let Some(mut g) = r? {
                        if let Some(rb) = &rings.rb {
                            rb.consume()?;
                        }
                        g.clear_ready();
                    }
                }
                c = http.accept() => {
                    let (s, _) = c?;
                    let (m, d) = (metrics.clone(), desired.clone());
                    tokio::task::spawn_local(async move {
                        if let Err(e) = serve_http(s, m, d).await {
                            log(4, format!("metrics request: {e:#}"));
                        }
                    });
                }
                c = unix.accept() => {
                    let (mut s, _) = c?;
                    let mut rx = tx.subscribe();
                    let m = metrics.clone();
                    m.lock().unwrap().clients += 1;
                    tokio::task::spawn_local(async move {
                        loop {
                            match rx.recv().await {
                                Ok(rec) => {
                                    let len = stream::frame(&rec);
                                    if s.write_all(&len).await.is_err() || s.write_all(&rec).await.is_err() {
                                        break;
                                    }
                                }
                                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                                    m.lock().unwrap().fanout_dropped += n;
                                }
                                Err(_) => break,
                            }
                        }
                        m.lock().unwrap().clients -= 1;
                    });
                }
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
            let batch = std::mem::take(&mut *q.borrow_mut());
            if !batch.is_empty() {
                let mut m = metrics.lock().unwrap();
                for raw in batch {
                    if let Some(ev) = Event::decode(&raw) {
                        m.record(&ev);
                    }
                    let _ = tx.send(Arc::new(raw));
                }
            }
        };
        if reload {
            log(6, format!("SIGHUP: reloading {}", path.display()));
            drop(afd);
            // Release the consumer locks before applying (and re-locking).
            drop(std::mem::take(&mut rings));
            match config::load(&path).and_then(|d| apply(&d, verbose).map(|_| d)) {
                Ok(d) => {
                    *desired.lock().unwrap() = d;
                    metrics.lock().unwrap().applies += 1;
                    log(6, "reload applied");
                }
                Err(e) => {
                    metrics.lock().unwrap().apply_errors += 1;
                    log(
                        3,
                        format!("reload failed, keeping the running state: {e:#}"),
                    );
                }
            }
            rings = open_rings(&q)?;
        }
    }
}
