//! `ccload serve --config FILE...`: the daemon for servers.
//!
//! - applies the config at start and again on SIGHUP or when one of its files'
//!   content changes ([`cfgwatch`]: edits, renames, ConfigMap updates); a
//!   bad file is logged and the running state kept;
//! - owns the telemetry ring buffers of the attached controllers and fans
//!   every record out to `ccload watch` clients over a local socket
//!   (length-prefixed raw records; a slow client loses records, counted);
//! - serves Prometheus/OpenMetrics text on `serve.metrics` (default
//!   127.0.0.1:9464): per algorithm the kernel counters (flows, rounds,
//!   losses, RTOs, ring-buffer overruns) and socket counts, and per
//!   algorithm x profile the telemetry record counts and histograms of RTT
//!   and window (at most 4 x 16 label sets);
//! - logs one line per event on stderr: with sd-daemon priority prefixes
//!   under journald, with the level in words elsewhere, or JSON with the
//!   events' fields ([`logging`], `tracing`); tells
//!   systemd when it is ready, reloading and stopping ([`notify`],
//!   `Type=notify`), and feeds its watchdog from the event loop
//!   (`WatchdogSec=`);
//! - on SIGTERM/SIGINT keeps the kernel state, or removes it when the config
//!   says `on_exit = "remove"`.
//!
//! Failure model: after the start-up apply and listener binds, nothing
//! ends the daemon but a signal. A ring buffer it cannot open (a `watch`
//! holds it) is reported on `/metrics` and retried; accept errors back off
//! ([`http`]); a failed reload keeps the running state. So `on_exit =
//! "remove"` only ever runs on SIGTERM/SIGINT, never because of an error.
//!
//! Everything runs on one thread (a tokio `LocalSet`): state is in
//! `RefCell`s, with no mutex to poison. The one blocking piece, the
//! netlink socket dump for `ccload_sockets`, runs on tokio's blocking pool
//! and is cached for [`SOCK_CACHE_TTL`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapHandle, RingBufferBuilder};
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncWriteExt;
use tokio::signal::unix::{signal, SignalKind};

use crate::bind::config::{self, Desired};
use crate::bpf::algos::Algo;
use crate::bpf::telemetry::Event;
use crate::{bpf, bpf::stream};

mod cfgwatch;
mod cgwatch;
mod http;
mod inotify;
mod logging;
mod metrics;
mod pods;
mod rollouts;
#[cfg(test)]
mod tests;

use metrics::Metrics;

/// How long a socket count stays fresh.
const SOCK_CACHE_TTL: Duration = Duration::from_secs(2);
/// How often ring buffers that could not be opened are tried again.
const RING_RETRY: Duration = Duration::from_secs(3);

/// Tell the service manager about our state (sd_notify(3)): a datagram on
/// `$NOTIFY_SOCKET` when systemd (Type=notify) set it; nothing otherwise.
/// Hand-written: the `sd-notify` crate (0.5) connects to the variable's
/// value as a file path, and systemd also hands out abstract addresses
/// (`@name`), which this sends to.
fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let sent = if let Some(name) = bytes.strip_prefix(b"@") {
        // An abstract socket address.
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(&path))
    };
    if let Err(e) = sent {
        tracing::warn!("sd_notify {state:?}: {e}");
    }
}

/// systemd's watchdog (`WatchdogSec=`): the period within which a
/// `WATCHDOG=1` must come, from `WATCHDOG_USEC` when `WATCHDOG_PID` is
/// unset or names this process `me` (sd_watchdog_enabled(3)).
fn watchdog_period(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    match pid.map(|p| p.trim().parse::<u32>()) {
        None => Some(Duration::from_micros(usec)),
        Some(Ok(p)) if p == me => Some(Duration::from_micros(usec)),
        Some(_) => None,
    }
}

/// CLOCK_MONOTONIC in microseconds, for `RELOADING=1`'s MONOTONIC_USEC.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// What the daemon's tasks share (one thread; see the module comment).
struct State {
    metrics: RefCell<Metrics>,
    desired: RefCell<Desired>,
    /// Socket counts per CC and when they were taken. An async mutex:
    /// concurrent scrapes wait for one dump instead of starting their own.
    sockets: tokio::sync::Mutex<(Option<Instant>, BTreeMap<String, u64>)>,
    /// The config's `[[rollouts]]`, each on its own thread.
    rollouts: RefCell<rollouts::Rollouts>,
    /// The node's pods as last listed (`[[pods]]`; None before the first
    /// list).
    pods: RefCell<Option<Vec<crate::bind::pods::PodInfo>>>,
}

impl State {
    fn new(d: Desired) -> State {
        State {
            metrics: Default::default(),
            desired: RefCell::new(d),
            sockets: Default::default(),
            rollouts: Default::default(),
            pods: Default::default(),
        }
    }

    /// The config with its `[[pods]]` as cgroup entries now.
    fn effective(&self) -> Desired {
        crate::bind::config::with_pods(&self.desired.borrow(), self.pods.borrow().as_deref())
    }

    async fn scrape(&self) -> String {
        let socks = {
            let mut c = self.sockets.lock().await;
            if c.0.is_none_or(|t| t.elapsed() >= SOCK_CACHE_TTL) {
                // A dump can take long on a busy host: off this thread.
                match tokio::task::spawn_blocking(crate::host::diag::count_by_cc).await {
                    Ok(Ok(n)) => *c = (Some(Instant::now()), n),
                    Ok(Err(e)) => tracing::warn!("socket count: {e}"),
                    Err(e) => tracing::warn!("socket count: {e}"),
                }
            }
            c.1.clone()
        };
        let stats: metrics::KernelStats = bpf::attached()
            .into_iter()
            .filter_map(|a| bpf::read_stats(a).ok().map(|s| (a, s)))
            .collect();
        let aggs = crate::bind::agg::collect().unwrap_or_else(|e| {
            tracing::warn!("aggregates: {e:#}");
            crate::bind::agg::All {
                algos: Vec::new(),
                cgroups: Vec::new(),
            }
        });
        let d = self.effective();
        let mut o = metrics::render(&mut self.metrics.borrow_mut(), &d, &stats, &aggs, &socks);
        self.rollouts.borrow().render(&mut o);
        let c = cgroups_now(&d);
        metrics::render_cgroup_states(&mut o, c.bound, c.unbound.len(), c.missing.len());
        o.text()
    }

    /// Alive (`/livez`, the liveness probe) unless a restart would help:
    /// a controller the config names is not attached (a start attaches
    /// it).  A cgroup that fails to bind is not a reason: a restart would
    /// fail the same way, for ever.
    fn alive(&self) -> std::result::Result<String, String> {
        let attached = bpf::attached();
        let gone: Vec<String> = self
            .effective()
            .algos
            .keys()
            .filter(|a| !attached.contains(a))
            .map(|a| a.to_string())
            .collect();
        if !gone.is_empty() {
            return Err(format!(
                "configured but not attached: {} (SIGHUP re-applies the config)",
                gone.join(", ")
            ));
        }
        Ok("ok\n".into())
    }

    /// Healthy (`/healthz`, the readiness probe) when alive and every
    /// existing cgroup the config names is bound as configured.  The body
    /// lists the entries that name no cgroup yet (bound when one appears).
    fn health(&self) -> std::result::Result<String, String> {
        self.alive()?;
        let d = self.effective();
        let c = cgroups_now(&d);
        if !c.unbound.is_empty() {
            return Err(format!(
                "configured cgroups not bound: {}",
                c.unbound.join(", ")
            ));
        }
        let mut body = String::from("ok\n");
        if !d.pods.is_empty() && self.pods.borrow().is_none() {
            body.push_str("waiting for the node's pod list\n");
        }
        for m in &c.missing {
            body.push_str(&format!("waiting for cgroup {m}\n"));
        }
        Ok(body)
    }
}

/// Upgrade in place every attached controller whose object is not the one
/// this binary embeds (a package upgrade or an image bump left the old code
/// running): tunables carried over, connections kept (crate::bpf::upgrade).
/// Returns (upgraded, failed); a failed upgrade leaves the old object
/// attached and running, and is logged.
fn upgrade_stale(verbose: bool) -> Result<(u64, u64)> {
    let stale: Vec<_> = bpf::attached()
        .into_iter()
        .filter(|a| !crate::bpf::upgrade::attached_identity(*a).is_ok_and(|id| id.is_ours(*a)))
        .collect();
    if stale.is_empty() {
        return Ok((0, 0));
    }
    let _lock = crate::host::lock::state()?;
    let (mut ok, mut failed) = (0, 0);
    for a in stale {
        match crate::bpf::upgrade::upgrade(
            a,
            &[],
            bpf::is_allowed(a.name()),
            verbose,
            &crate::bind::leftovers::sweep,
        ) {
            Ok(r) => {
                ok += 1;
                for l in r.lines(a) {
                    tracing::info!("{}", l.trim());
                }
            }
            Err(e) => {
                failed += 1;
                tracing::error!(
                    "{a}: in-place upgrade failed, the attached object keeps running: {e:#}"
                );
            }
        }
    }
    Ok((ok, failed))
}

/// Reconcile the kernel to `d` and the pods its `[[pods]]` select now;
/// returns `d` with its profiles' stable ids.
fn apply(
    mut d: Desired,
    pods: Option<&[crate::bind::pods::PodInfo]>,
    verbose: bool,
) -> Result<Desired> {
    // Held while the kernel state is reconciled, as every CLI command does.
    // A daemon outwaits busy operators (six times the CLI's wait) rather
    // than give up a start or a reload.
    let mut tries = 0;
    let _lock = loop {
        match crate::host::lock::state() {
            Err(e)
                if tries < 5
                    && matches!(
                        e.downcast_ref::<crate::error::CclError>(),
                        Some(crate::error::CclError::Busy { .. })
                    ) =>
            {
                tries += 1;
                tracing::warn!("{e}; waiting again");
            }
            other => break other?,
        }
    };
    let ids = crate::bind::profiles::stabilise(&mut d)?;
    let plan = config::plan(&crate::bind::config::with_pods(&d, pods))?;
    if plan.is_empty() {
        tracing::info!("config: kernel already matches");
    }
    for c in &plan {
        tracing::info!("config: {c}");
    }
    config::execute(&plan, verbose)?;
    crate::bind::profiles::save(&ids)?;
    Ok(d)
}

/// The config's `[[cgroups]]` against the kernel now.
#[derive(Debug, Default)]
pub(crate) struct CgroupsNow {
    /// Cgroups bound as configured.
    pub bound: usize,
    /// Existing cgroups an entry names that are not bound as it says.
    pub unbound: Vec<String>,
    /// Entries that name no existing cgroup.
    pub missing: Vec<String>,
}

fn cgroups_now(d: &Desired) -> CgroupsNow {
    let mut out = CgroupsNow::default();
    if d.cgroups.is_empty() {
        return out;
    }
    let r = crate::bind::cgroup_rules::resolve(&d.cgroups);
    let have = crate::bind::cgroup::bound_ids().unwrap_or_default();
    let in_rollout: Vec<u64> = crate::bind::rollout::recorded()
        .iter()
        .map(|r| r.canary_id)
        .collect();
    for (path, id, i) in &r.bound {
        let rule = &d.cgroups[*i];
        match have.get(id) {
            Some((cc, p)) if *cc == rule.cc && *p == rule.profile => out.bound += 1,
            _ if in_rollout.contains(id) => {}
            _ => out.unbound.push(path.display().to_string()),
        }
    }
    out.missing = r
        .missing
        .iter()
        .map(|&i| d.cgroups[i].pattern.display().to_string())
        .collect();
    out
}

/// Bind the cgroups that appeared or were made again, unbind the ones
/// that went (the state lock is held, as for every change); then watch the
/// directories the entries can grow in now.
fn reconcile_cgroups(st: &State, cgw: &mut cgwatch::CgroupWatch, verbose: bool) {
    let d = st.effective();
    // The rollouts in pods follow the pods: one whose pod is gone is
    // rolled back before the bindings change (then its pod is unbound as
    // any other), one starts in a pod chosen now after them (so that its
    // control arm is the CC `[[pods]]` gave the pod).
    let sync_rollouts = || {
        if !d.pod_rollouts.is_empty() {
            st.rollouts.borrow_mut().sync(&d.rollouts);
        }
    };
    if !d.pod_rollouts.is_empty() {
        st.rollouts.borrow_mut().retire(&d.rollouts);
    }
    if d.cgroups.is_empty() && d.pods.is_empty() {
        sync_rollouts();
        return;
    }
    let res = (|| -> Result<u64> {
        let _lock = crate::host::lock::state()?;
        let plan = config::plan_cgroups(&d)?;
        for c in &plan {
            tracing::info!("cgroups: {c}");
        }
        config::execute(&plan, verbose)?;
        Ok(plan
            .iter()
            .filter(|c| matches!(c, config::Change::Bind { .. }))
            .count() as u64)
    })();
    match res {
        Ok(n) => st.metrics.borrow_mut().cgroup_binds += n,
        Err(e) => {
            st.metrics.borrow_mut().cgroup_errors += 1;
            tracing::warn!("cgroups: {e:#}");
        }
    }
    if let Err(e) = cgw.rewatch(&d.cgroups) {
        tracing::warn!("cgroup watch: {e}");
    }
    sync_rollouts();
}

type Queue = Rc<RefCell<Vec<Vec<u8>>>>;

/// The ring buffers of the attached controllers the daemon could lock.
///
/// The ring buffer reads maps whose fds live beside it, and `rb` is
/// declared first so that it is freed (its rings unmapped, its epoll
/// closed) before those fds close. A reload drops the whole struct: no fd
/// outlives it.
struct Rings {
    rb: Option<libbpf_rs::RingBuffer<'static>>,
    _maps: Box<[MapHandle]>,
    _locks: Vec<stream::ConsumerLock>,
    /// Attached controllers whose ring buffer could not be opened.
    missing: Vec<Algo>,
    /// The rings read, by map id: an in-place upgrade that renews a ring,
    /// or a controller attached meanwhile, makes them stale ([`Rings::stale`]).
    ids: Vec<(Algo, u32)>,
}

impl Rings {
    fn empty() -> Rings {
        Rings {
            rb: None,
            _maps: Box::new([]),
            _locks: Vec::new(),
            missing: Vec::new(),
            ids: Vec::new(),
        }
    }

    /// Do the pinned rings differ from the ones read (renewed by an
    /// upgrade, attached or detached since)?
    fn stale(&self) -> bool {
        let now: Vec<(Algo, u32)> = bpf::attached()
            .into_iter()
            .filter(|a| !self.missing.contains(a))
            .filter_map(|a| Some((a, bpf::open_map(a, "events").ok()?.info().ok()?.info.id)))
            .collect();
        now != self.ids
    }

    /// The rings' epoll fd registered with tokio (None without rings).  One
    /// that cannot be registered is given up and the rings are retried.
    /// It must be dropped before the rings are replaced.
    fn poll_fd(&mut self) -> Option<AsyncFd<stream::FdWrap>> {
        // SAFETY: the epoll fd belongs to `self.rb`, which outlives the
        // AsyncFd (the caller drops it before the rings are replaced).
        let reg = (self.rb.as_ref())
            .map(|rb| unsafe { AsyncFd::register(stream::FdWrap(rb.epoll_fd())) });
        match reg {
            Some(Ok(a)) => Some(a),
            Some(Err(e)) => {
                tracing::warn!("ring buffer poll: {e}; retrying");
                *self = Rings {
                    missing: bpf::attached(),
                    ..Rings::empty()
                };
                None
            }
            None => None,
        }
    }

    /// Controllers wake a reader only once a batch is waiting
    /// (ccl_event_submit()): whatever woke the loop, drain the rings, count
    /// each record in the metrics and fan it out to the `watch` clients.
    fn drain(&self, q: &Queue, st: &State, tx: &tokio::sync::broadcast::Sender<Rc<[u8]>>) {
        if let Some(rb) = &self.rb {
            if let Err(e) = rb.consume() {
                tracing::warn!("ring buffer: {e}");
            }
        }
        let batch = std::mem::take(&mut *q.borrow_mut());
        if !batch.is_empty() {
            let mut m = st.metrics.borrow_mut();
            for raw in batch {
                if let Some(ev) = Event::decode(&raw) {
                    m.record(&ev);
                }
                let _ = tx.send(raw.into());
            }
        }
    }

    /// Open what can be opened; an algorithm whose ring another consumer
    /// holds (or that vanished mid-reload) is logged and left for a retry.
    fn open(q: &Queue) -> Rings {
        Self::try_open(q).unwrap_or_else(|e| {
            tracing::warn!("telemetry not read, retrying: {e:#}");
            Rings {
                missing: bpf::attached(),
                ..Rings::empty()
            }
        })
    }

    fn try_open(q: &Queue) -> Result<Rings> {
        let mut locks = Vec::new();
        let mut maps = Vec::new();
        let mut missing = Vec::new();
        let mut ids = Vec::new();
        for a in bpf::attached() {
            match stream::lock_consumer(a).and_then(|l| Ok((l, bpf::open_map(a, "events")?))) {
                Ok((l, m)) => {
                    ids.push((a, m.info().map(|i| i.info.id).unwrap_or(0)));
                    locks.push(l);
                    maps.push(m);
                }
                Err(e) => {
                    tracing::warn!("{a} telemetry not read, retrying: {e:#}");
                    missing.push(a);
                }
            }
        }
        let maps = maps.into_boxed_slice();
        // The built ring buffer borrows only its callbacks ('static: each
        // owns a clone of `q`), not the maps: libbpf has mmapped each ring
        // and registered its fd with epoll by then.
        let mut b = RingBufferBuilder::new();
        for m in maps.iter() {
            let q = q.clone();
            b.add(m, move |data: &[u8]| {
                q.borrow_mut().push(data.to_vec());
                0
            })?;
        }
        let rb = if maps.is_empty() {
            None
        } else {
            Some(b.build()?)
        };
        Ok(Rings {
            rb,
            _maps: maps,
            _locks: locks,
            missing,
            ids,
        })
    }
}

/// Why the main loop ended.
enum Exit {
    Signal(&'static str),
}

pub fn run(config_paths: &[PathBuf], verbose: bool, json_logs: bool) -> Result<()> {
    logging::init(logging::log_format(json_logs));
    bpf::require_root()?;
    let srcs = config::read_all(config_paths)?;
    let parsed = config::parse_all(&srcs)?;
    let (upgrades, upgrade_errors) = upgrade_stale(verbose)?;
    let desired = apply(parsed, None, verbose).context("initial config apply")?;
    let names = names(config_paths);
    tracing::info!(config = %names, "applied {names}");
    let st = Rc::new(State::new(desired));
    st.metrics.borrow_mut().applies = 1;
    st.metrics.borrow_mut().upgrades = upgrades;
    st.metrics.borrow_mut().upgrade_errors = upgrade_errors;
    st.rollouts.borrow_mut().sync(&st.effective().rollouts);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let res = local.block_on(
        &rt,
        main_loop(config_paths.to_vec(), &srcs, st.clone(), verbose),
    );
    let d = st.desired.borrow().clone();
    let _ = std::fs::remove_file(&d.serve.socket);
    match res {
        Ok(Exit::Signal(sig)) => {
            tracing::info!(signal = sig, "{sig}");
            notify("STOPPING=1");
            // A stop request aborts the rollouts: each is rolled back.
            st.rollouts.borrow_mut().stop_all();
            if d.serve.remove_on_exit {
                let empty = config::parse(Path::new("<on_exit = remove>"), "")?;
                apply(empty, None, verbose)?;
                tracing::info!("exit: removed ccload's kernel state (on_exit = remove)");
            } else {
                tracing::info!("exit: kernel state kept (on_exit = keep)");
            }
            Ok(())
        }
        Err(e) => {
            // Not a stop request: leave the kernel as it is.
            tracing::error!(error = %format!("{e:#}"), "exit on error, kernel state kept: {e:#}");
            Err(e)
        }
    }
}

/// Serve one telemetry client until it goes away.  `ccload watch` says
/// [`stream::HELLO_FRAMES`] first and gets length-prefixed raw records (its
/// decoder is the fast path); any other client (`socat - UNIX:...`, a
/// script) gets JSON lines, one record per line as `ccload -j watch`
/// prints them, once it has sent nothing else for 200 ms.
async fn fan_out(
    mut s: tokio::net::UnixStream,
    mut rx: tokio::sync::broadcast::Receiver<Rc<[u8]>>,
    st: Rc<State>,
) {
    use tokio::io::AsyncReadExt;
    st.metrics.borrow_mut().clients += 1;
    let mut hello = [0u8; stream::HELLO_FRAMES.len()];
    let frames = matches!(
        tokio::time::timeout(Duration::from_millis(200), s.read_exact(&mut hello)).await,
        Ok(Ok(_)) if hello == *stream::HELLO_FRAMES
    );
    loop {
        match rx.recv().await {
            Ok(rec) if frames => {
                let len = stream::frame(&rec);
                if s.write_all(&len).await.is_err() || s.write_all(&rec).await.is_err() {
                    break;
                }
            }
            Ok(rec) => {
                let Some(ev) = Event::decode(&rec) else {
                    continue;
                };
                let mut line = ev.to_json().to_string();
                line.push('\n');
                if s.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                st.metrics.borrow_mut().fanout_dropped += n;
            }
            Err(_) => break,
        }
    }
    st.metrics.borrow_mut().clients -= 1;
}

/// The metrics listener (its accept loop spawned) and the telemetry
/// socket for `ccload watch` (mode 0600), as `[serve]` says.
async fn bind_listeners(st: &Rc<State>) -> Result<tokio::net::UnixListener> {
    let (mlisten, sock_path, limits) = {
        let d = st.desired.borrow();
        let limits = http::Limits {
            deadline: d.serve.request_timeout,
            max_conns: d.serve.max_connections,
        };
        (d.serve.metrics.clone(), d.serve.socket.clone(), limits)
    };
    let http = tokio::net::TcpListener::bind(&mlisten)
        .await
        .with_context(|| format!("metrics listener on {mlisten}"))?;
    // The bound address: a config may say port 0.
    tracing::info!("metrics on http://{}/metrics", http.local_addr()?);
    if let Some(dir) = sock_path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    }
    let _ = std::fs::remove_file(&sock_path);
    let unix = tokio::net::UnixListener::bind(&sock_path)
        .with_context(|| format!("telemetry socket {}", sock_path.display()))?;
    std::fs::set_permissions(
        &sock_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .with_context(|| format!("{}", sock_path.display()))?;
    tracing::info!("telemetry for `ccload watch` on {}", sock_path.display());
    tokio::task::spawn_local(http::accept_loop(http, st.clone(), limits));
    Ok(unix)
}

/// A SIGHUP or a changed file: apply the config again; a config that
/// fails keeps the running state.
fn reload_config(
    paths: &[PathBuf],
    why: &str,
    st: &Rc<State>,
    cfgw: &mut cfgwatch::ConfigWatch,
    cgw: &mut cgwatch::CgroupWatch,
    podw: &mut pods::PodWatch,
    verbose: bool,
) {
    let names = names(paths);
    tracing::info!(config = %names, why, "{why}: reloading {names}");
    let srcs = config::read_all(paths);
    cfgw.loaded(srcs.as_deref().ok());
    notify(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
    let listed = st.pods.borrow().clone();
    let applied = srcs
        .and_then(|s| config::parse_all(&s))
        .and_then(|d| apply(d, listed.as_deref(), verbose));
    match applied {
        Ok(d) => {
            podw.sync(&d, st);
            *st.desired.borrow_mut() = d;
            st.rollouts.borrow_mut().sync(&st.effective().rollouts);
            if let Err(e) = cgw.rewatch(&st.effective().cgroups) {
                tracing::warn!("cgroup watch: {e}");
            }
            st.metrics.borrow_mut().applies += 1;
            tracing::info!("reload applied");
        }
        Err(e) => {
            st.metrics.borrow_mut().apply_errors += 1;
            tracing::error!(error = %format!("{e:#}"), "reload failed, keeping the running state: {e:#}");
        }
    }
}

/// The config's files, for messages: `a.toml + b.toml`.
fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The daemon's watches: the config's files (`srcs` as `st` was applied
/// from them), the cgroup tree of its bindings and, for `[[pods]]`, the
/// node's pods through the Kubernetes API.
fn watches(
    paths: &[PathBuf],
    srcs: &[config::Source],
    st: &Rc<State>,
) -> Result<(cfgwatch::ConfigWatch, cgwatch::CgroupWatch, pods::PodWatch)> {
    let cfgw = cfgwatch::ConfigWatch::new(paths, Some(srcs))
        .with_context(|| format!("watching {}", names(paths)))?;
    let mut cgw = cgwatch::CgroupWatch::new();
    if let Err(e) = cgw.rewatch(&st.effective().cgroups) {
        tracing::warn!("cgroup watch: {e}");
    }
    let mut podw = pods::PodWatch::new();
    podw.sync(&st.desired.borrow(), st);
    Ok((cfgw, cgw, podw))
}

/// The node's pods changed: the cgroups their selectors pick are bound
/// and unbound as the config's own are.
fn pods_changed(
    st: &Rc<State>,
    list: Vec<crate::bind::pods::PodInfo>,
    cgw: &mut cgwatch::CgroupWatch,
    verbose: bool,
) {
    let n = list.len();
    *st.pods.borrow_mut() = Some(list);
    let sel = st.effective().cgroups.len() - st.desired.borrow().cgroups.len();
    st.metrics.borrow_mut().pods_selected = Some(sel as u64);
    tracing::info!("pods: {n} on this node, {sel} selected");
    reconcile_cgroups(st, cgw, verbose);
}

/// `srcs` are the config's files as `st` was applied from them.
async fn main_loop(
    paths: Vec<PathBuf>,
    srcs: &[config::Source],
    st: Rc<State>,
    verbose: bool,
) -> Result<Exit> {
    // The handlers first: a SIGTERM that comes once the listeners are up
    // (systemd sends one any time after READY=1) is a clean stop, never
    // the default action's kill.
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let unix = bind_listeners(&st).await?;
    let (tx, _) = tokio::sync::broadcast::channel::<Rc<[u8]>>(16384);
    let q: Queue = Default::default();
    let mut rings = Rings::open(&q);
    st.metrics.borrow_mut().rings_missing = rings.missing.clone();
    // Config applied, listeners bound, rings open: ready.
    notify("READY=1\nSTATUS=serving");
    let (mut cfgw, mut cgw, mut podw) = watches(&paths, srcs, &st)?;
    // The watchdog is fed from this loop, at half its period: a loop that
    // hangs stops feeding it and systemd restarts the daemon.
    let mut watchdog = watchdog_period(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
    .map(|p| tokio::time::interval(p / 2));
    let mut unix_backoff = Duration::from_millis(10);
    loop {
        let afd = rings.poll_fd();
        let retry_at = tokio::time::Instant::now() + RING_RETRY;
        let mut checked = std::time::Instant::now();
        let reload = loop {
            let readable = async {
                match &afd {
                    Some(a) => a.readable().await.map(Some),
                    None => std::future::pending().await,
                }
            };
            let retry = async {
                if rings.missing.is_empty() {
                    std::future::pending::<()>().await
                } else {
                    tokio::time::sleep_until(retry_at).await
                }
            };
            let feed = async {
                match watchdog.as_mut() {
                    Some(i) => i.tick().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = feed => notify("WATCHDOG=1"),
                _ = term.recv() => return Ok(Exit::Signal("SIGTERM")),
                _ = int.recv() => return Ok(Exit::Signal("SIGINT")),
                _ = hup.recv() => break Some("SIGHUP"),
                r = cgw.due() => {
                    if let Err(e) = r {
                        tracing::warn!("cgroup watch: {e}");
                    }
                    reconcile_cgroups(&st, &mut cgw, verbose);
                }
                list = podw.changed() => pods_changed(&st, list, &mut cgw, verbose),
                r = cfgw.changed() => match r {
                    Ok(()) => break Some("config file changed"),
                    Err(e) => tracing::warn!("config watch: {e}"),
                },
                _ = retry => break None,
                r = readable => {
                    match r {
                        // Cleared before the drain below, so a record
                        // that lands meanwhile wakes the next poll.
                        Ok(Some(mut g)) => g.clear_ready(),
                        Ok(None) => {}
                        Err(e) => tracing::warn!("ring buffer poll: {e}"),
                    }
                }
                c = unix.accept() => match c {
                    Ok((s, _)) => {
                        unix_backoff = Duration::from_millis(10);
                        tokio::task::spawn_local(fan_out(s, tx.subscribe(), st.clone()));
                    }
                    Err(e) => {
                        st.metrics.borrow_mut().accept_errors += 1;
                        tracing::warn!("telemetry accept failed ({e}); backing off");
                        tokio::time::sleep(unix_backoff).await;
                        unix_backoff = (unix_backoff * 2).min(Duration::from_secs(1));
                    }
                },
                _ = tokio::time::sleep(Duration::from_millis(crate::bpf::RB_DRAIN_MS)) => {}
            }
            // Once a second: a ring renewed by an in-place upgrade (or a
            // controller attached meanwhile) is read from now on.
            if checked.elapsed() >= Duration::from_secs(1) {
                checked = std::time::Instant::now();
                if rings.stale() {
                    tracing::info!(
                        "telemetry rings changed (attach, detach or upgrade): reopening"
                    );
                    break None;
                }
            }
            rings.drain(&q, &st, &tx);
        };
        drop(afd);
        // Release the consumer locks before applying (and re-locking).
        drop(std::mem::replace(&mut rings, Rings::empty()));
        if let Some(why) = reload {
            reload_config(&paths, why, &st, &mut cfgw, &mut cgw, &mut podw, verbose);
        }
        rings = Rings::open(&q);
        st.metrics.borrow_mut().rings_missing = rings.missing.clone();
        if reload.is_some() {
            notify("READY=1\nSTATUS=serving");
        }
    }
}

#[cfg(test)]
mod watchdog_tests {
    #[test]
    fn the_watchdog_period_is_systemds_for_this_process_only() {
        use std::time::Duration;
        let p = super::watchdog_period;
        assert_eq!(p(Some("30000000"), None, 7), Some(Duration::from_secs(30)));
        assert_eq!(
            p(Some("30000000"), Some("7"), 7),
            Some(Duration::from_secs(30))
        );
        // set for another process (a parent's), or not at all, or nonsense
        assert_eq!(p(Some("30000000"), Some("8"), 7), None);
        assert_eq!(p(None, None, 7), None);
        for bad in ["", "0", "-5", "x"] {
            assert_eq!(p(Some(bad), None, 7), None, "{bad}");
        }
    }
}
