//! One run: a fresh bottleneck, N bulk flows started and stopped on the
//! scenario's schedule, every flow's TCP_INFO and the queue sampled every
//! 10 ms, then summarised.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ccload_testbed::delay::DelayReport;
use ccload_testbed::iperf3::{self, Iperf3};
use ccload_testbed::link::{Bottleneck, TraceLink, PFIFO};
use ccload_testbed::tcpinfo::tcp_info;
use ccload_testbed::traffic::{connect, set_cc, socket_for};

use crate::scenario::{delay_class, parse_cc, Case, Scenario, Sender};
use crate::summary::{
    payload_share, summarise, Flow, FlowSample, QueueSample, RunResult, RunSummary,
};

/// Set by Ctrl-C: runs stop early and the guards remove their namespaces;
/// the session keeps no run that was in progress.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// Run one case with `cc` substituted for `$cc`; `tick` is called about
/// every 100 ms with the elapsed fraction (progress bars).
pub fn run_case(
    sc: &Scenario,
    case: &Case,
    cc: &str,
    rep: u32,
    tick: &mut dyn FnMut(f64),
) -> anyhow::Result<RunResult> {
    let mut cfg = case.link.clone();
    cfg.loss_seed = sc.loss_seed_for(&case.label, rep);
    let trace_link = sc.trace_link(case)?;
    cfg.trace = trace_link.clone();
    let mut link = Bottleneck::new(cfg);
    let (cc_name, _) = parse_cc(cc);
    let flows = run_flows(sc, case, &cc_name);
    let senders: Vec<Sender> = case
        .run_flows()
        .map(|f| f.sender.unwrap_or(sc.sender))
        .collect();
    anyhow::ensure!(
        senders.iter().all(|s| s.is_lab()) || iperf3::available(),
        "sender = \"iperf3\": no iperf3 on PATH (scripts/setup.sh installs it)"
    );
    let algo = cc_name.parse::<ccload::bpf::algos::Algo>().ok();
    let repairs0 = algo.and_then(repair_counts);
    let t0 = Instant::now();
    let mut st = Started::new(flows.len());
    let mut probe = link.qdisc_probe();
    let mut samples = Vec::new();
    let mut queue = Vec::new();
    let mut next_tick = 0.0;
    let end = sc.duration_s;
    loop {
        let t = t0.elapsed().as_secs_f64();
        if t >= end || STOP.load(Ordering::Relaxed) {
            break;
        }
        st.start_due(&link, &flows, &senders, t0, t)?;
        poll_iperf3(&mut st.iperfs, &mut st.socks, &flows, t)?;
        st.take_arrivals();
        sample_flows(&st.socks, &flows, &senders, t, &mut samples);
        if let Ok(Some(q)) = probe.by_handle(PFIFO) {
            queue.push(QueueSample {
                t,
                qlen: q.qlen,
                backlog: q.backlog,
                drops: q.drops,
            });
        }
        let all_done = flows
            .iter()
            .all(|f| f.bytes.is_some() && f.done_at.lock().unwrap().is_some());
        if all_done {
            break;
        }
        if t >= next_tick {
            tick((t / end).min(1.0));
            next_tick = t + 0.1;
        }
        let next = Duration::from_millis(10 * (1 + (t0.elapsed().as_millis() / 10) as u64));
        std::thread::sleep(next.saturating_sub(t0.elapsed()));
    }
    let t_end = t0.elapsed().as_secs_f64();
    st.stop_senders();
    let qfinal = link.queue();
    let random_drops = link.random_drops();
    st.join();
    // A veth link has no delay line: nothing of its timing to judge.
    let rep_delay = link.stop_delay();
    drop(link);
    let summary = summarise(
        sc,
        case,
        cc,
        rep,
        &flows,
        &samples,
        &queue,
        t_end,
        qfinal.drops as u64,
        random_drops,
    );
    let summary = with_link(
        sc,
        case,
        summary,
        t_end,
        trace_link.as_ref(),
        rep_delay.as_ref(),
    );
    let summary = RunSummary {
        repairs: repairs0
            .zip(algo.and_then(repair_counts))
            .map(|(a, b)| [b[0].saturating_sub(a[0]), b[1].saturating_sub(a[1])]),
        ..summary
    };
    Ok(RunResult {
        summary,
        samples,
        queue,
    })
}

/// The run's flows as they start: the lab senders' sockets and threads,
/// the iperf3 processes until they are stopped, and the arrivals that
/// connect on their own threads until their streams show.
struct Started {
    started: Vec<bool>,
    socks: Vec<Option<Arc<TcpStream>>>,
    iperfs: Vec<Option<Iperf3>>,
    threads: Vec<FlowThread>,
    pending: Vec<(usize, Arc<OnceLock<Arc<TcpStream>>>)>,
    stop_all: Arc<AtomicBool>,
}

impl Started {
    fn new(n: usize) -> Started {
        Started {
            started: vec![false; n],
            socks: vec![None; n],
            iperfs: (0..n).map(|_| None).collect(),
            threads: Vec::new(),
            pending: Vec::new(),
            stop_all: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Start the flows due at `t`.  Flows due together connect first and
    /// then send together: a connect takes a round trip, and flows that
    /// each started sending after the previous one's handshake were an RTT
    /// apart in slow start, the first with twice the second's window
    /// throughout.
    fn start_due(
        &mut self,
        link: &Bottleneck,
        flows: &[Flow],
        senders: &[Sender],
        t0: Instant,
        t: f64,
    ) -> anyhow::Result<()> {
        let due: Vec<usize> = (0..flows.len())
            .filter(|&i| !self.started[i] && t >= flows[i].start)
            .collect();
        for &i in &due {
            self.started[i] = true;
            if flows[i].arrival {
                let (th, s) = start_arrival(link, i, &flows[i], t0, self.stop_all.clone())?;
                self.threads.push(th);
                self.pending.push((i, s));
            } else if senders[i] == Sender::Iperf3 {
                self.iperfs[i] = Some(start_iperf3(link, i, &flows[i])?);
            } else {
                self.socks[i] = Some(connect_flow(link, i, &flows[i], t0)?);
            }
        }
        for &i in due
            .iter()
            .filter(|&&i| !flows[i].arrival && senders[i].is_lab())
        {
            let s = self.socks[i].clone().expect("connected above");
            self.threads
                .push(start_sender(s, &flows[i], t0, self.stop_all.clone()));
        }
        Ok(())
    }

    /// The arrivals whose streams showed since the last call.
    fn take_arrivals(&mut self) {
        let socks = &mut self.socks;
        self.pending.retain(|(i, s)| match s.get() {
            Some(s) => {
                socks[*i] = Some(s.clone());
                false
            }
            None => true,
        });
    }

    /// Tell the senders' threads to stop, and stop iperf3's processes.
    fn stop_senders(&mut self) {
        self.stop_all.store(true, Ordering::Relaxed);
        for p in self.iperfs.iter_mut().filter_map(Option::take) {
            p.stop();
        }
    }

    /// Close the sockets and wait for the threads.
    fn join(self) {
        drop(self.socks);
        for th in self.threads {
            let _ = th.join();
        }
    }
}

/// The run's summary with what the link measured: the delay line's
/// queueing delay and what a trace offered (trace-driven links), and its
/// own lateness, which says whether the run measured the host.
fn with_link(
    sc: &Scenario,
    case: &Case,
    summary: RunSummary,
    t_end: f64,
    trace_link: Option<&TraceLink>,
    rep_delay: Option<&DelayReport>,
) -> RunSummary {
    let comb = rep_delay.map(|r| r.combined());
    let late = |q: f64| comb.as_ref().map_or(0, |c| c.lateness_us(q));
    // A trace-driven link: the delay line's own bottleneck counters.
    let tr = rep_delay.and_then(|r| r.forward.trace.as_ref());
    let payload = payload_share(case.link.mtu);
    // What the trace offered over the window goodput is measured in (the
    // delay line's trace clock starts a few ms before t0).
    let offered = trace_link.map(|l| {
        let ms = |s: f64| l.offset_ms + (s * 1e3) as u64;
        l.down.mbit_between(ms(sc.warmup_s), ms(t_end))
    });
    RunSummary {
        qdelay_p50_ms: tr.map(|t| t.qdelay_ms(0.5)).or(summary.qdelay_p50_ms),
        qdelay_p95_ms: tr.map(|t| t.qdelay_ms(0.95)).or(summary.qdelay_p95_ms),
        offered_mbit: offered,
        utilisation: match offered {
            Some(o) if o > 0.0 => summary.goodput_mbit / (o * payload),
            _ => summary.utilisation,
        },
        lateness_p50_us: late(0.5),
        lateness_p99_us: late(0.99),
        lateness_max_us: late(1.0),
        realtime: comb.as_ref().is_none_or(|c| c.realtime),
        valid: rep_delay.is_none_or(|r| r.valid()),
        ..summary
    }
}

/// The run's flows (Case::run_flows), `$cc` as `cc_name`.
fn run_flows(sc: &Scenario, case: &Case, cc_name: &str) -> Vec<Flow> {
    case.run_flows()
        .map(|f| Flow {
            cc: if f.cc == "$cc" {
                cc_name.to_string()
            } else {
                f.cc.clone()
            },
            start: f.start_s,
            stop: f.stop_s.unwrap_or(sc.duration_s).min(sc.duration_s),
            bytes: f.bytes,
            arrival: f.arrival,
            path_rtt_ms: (!case.link.extra_delay_ms.is_empty())
                .then(|| f.rtt_ms.unwrap_or(case.rtt_ms)),
            class: delay_class(&case.flows, f, case.rtt_ms),
            rx: Arc::new(AtomicU64::new(0)),
            done_at: Arc::new(std::sync::Mutex::new(None)),
        })
        .collect()
}

/// iperf3 flows: each one's data stream once it shows (an error after
/// IPERF3_START_S without one), and its process stopped at its stop time.
fn poll_iperf3(
    iperfs: &mut [Option<Iperf3>],
    socks: &mut [Option<Arc<TcpStream>>],
    flows: &[Flow],
    t: f64,
) -> anyhow::Result<()> {
    for (i, slot) in iperfs.iter_mut().enumerate() {
        let Some(p) = slot else { continue };
        if socks[i].is_none() {
            match p.data_socket() {
                Ok(Some(s)) => socks[i] = Some(Arc::new(s)),
                Ok(None) if t < flows[i].start + IPERF3_START_S => {}
                Ok(None) => anyhow::bail!(
                    "flow {i} ({}): iperf3 showed no data stream in {IPERF3_START_S} s",
                    flows[i].cc
                ),
                Err(e) => anyhow::bail!("flow {i} ({}): {e}", flows[i].cc),
            }
        }
        if t >= flows[i].stop {
            if let Some(p) = slot.take() {
                p.stop();
            }
        }
    }
    Ok(())
}

/// One TCP_INFO sample of each connected flow at `t` (a finished short
/// flow has nothing more to show).
fn sample_flows(
    socks: &[Option<Arc<TcpStream>>],
    flows: &[Flow],
    senders: &[Sender],
    t: f64,
    samples: &mut Vec<FlowSample>,
) {
    for (i, s) in socks.iter().enumerate() {
        let Some(s) = s else { continue };
        // a finished short flow has nothing more to show
        if flows[i].arrival && flows[i].done_at.lock().unwrap().is_some() {
            continue;
        }
        if let Some(ti) = tcp_info(s.as_raw_fd()) {
            if senders[i] == Sender::Iperf3 {
                // iperf3's receiver counts for itself: what the
                // receiver has is what it acknowledged
                flows[i].rx.store(ti.tcpi_bytes_acked, Ordering::Relaxed);
            }
            samples.push(FlowSample {
                t,
                flow: i,
                cwnd: ti.tcpi_snd_cwnd,
                srtt_us: ti.tcpi_rtt,
                min_rtt_us: ti.tcpi_min_rtt,
                delivered: ti.tcpi_delivered,
                total_retrans: ti.tcpi_total_retrans,
                pacing_rate: ti.tcpi_pacing_rate,
                delivery_rate: ti.tcpi_delivery_rate,
                rx_bytes: flows[i].rx.load(Ordering::Relaxed),
                ca_state: ti.tcpi_ca_state,
                ssthresh: ti.tcpi_snd_ssthresh,
                unacked: ti.tcpi_unacked,
                sacked: ti.tcpi_sacked,
                lost: ti.tcpi_lost,
                retrans_out: ti.tcpi_retrans,
            });
        }
    }
}

/// A ccload controller's guard counters (ssth_repaired, cwnd_repaired);
/// None when it is not attached or its stats cannot be read.
fn repair_counts(algo: ccload::bpf::algos::Algo) -> Option<[u64; 2]> {
    ccload::bpf::guard_repairs(algo).ok()
}

type FlowThread = std::thread::JoinHandle<()>;

/// Connect flow `i` through `link` and start its receiver; nothing is sent
/// until [`start_sender`].
fn connect_flow(
    link: &Bottleneck,
    i: usize,
    f: &Flow,
    t0: Instant,
) -> anyhow::Result<Arc<TcpStream>> {
    let addr = start_receiver(link, f, t0)?;
    let sock = sender_socket(link, i, f, addr)?;
    let stream = connect(sock, addr).map_err(|e| anyhow::anyhow!("flow {i} ({}): {e}", f.cc))?;
    Ok(Arc::new(stream))
}

/// Flow `i`'s socket, made in the sender's namespace (where it stays
/// wherever it is used), its congestion control set before the handshake.
fn sender_socket(
    link: &Bottleneck,
    i: usize,
    f: &Flow,
    addr: SocketAddr,
) -> anyhow::Result<std::os::fd::OwnedFd> {
    let cc = f.cc.clone();
    link.sender
        .run(move || -> std::io::Result<std::os::fd::OwnedFd> {
            let sock = socket_for(addr)?;
            set_cc(sock.as_raw_fd(), &cc)?;
            Ok(sock)
        })
        .map_err(|e| anyhow::anyhow!("flow {i} ({}): {e}", f.cc))
}

/// Seconds an iperf3 flow may take from its start to show its data
/// stream (the control exchange is a few round trips; a server that
/// never listens fails sooner, in [`Iperf3::start`]).
const IPERF3_START_S: f64 = 10.0;

/// Flow `i` with iperf3 at both ends: its server on a free port of the
/// receiver (the port carries the flow's delay class), then its client
/// until its stop time (iperf3's `-t` is whole seconds: one more, and the
/// run stops it at its time).
fn start_iperf3(link: &Bottleneck, i: usize, f: &Flow) -> anyhow::Result<Iperf3> {
    let ip = std::net::IpAddr::V4(link.receiver_ip);
    let port = iperf3::free_port(&link.receiver, ip)?;
    link.set_port_class(port, f.class);
    // timed only (Scenario::validate refuses a size)
    let secs = (f.stop - f.start).ceil() as u64 + 1;
    Iperf3::start(&link.receiver, &link.sender, ip, port, &f.cc, secs)
        .map_err(|e| anyhow::anyhow!("flow {i} ({}): {e}", f.cc))
}

/// A short-flow mix's arrival: its receiver now, its connect and its bytes
/// on a thread of its own (a connect takes a round trip, which the
/// sampling loop and the next arrivals must not wait for); its stream is
/// published once connected, for sampling.
fn start_arrival(
    link: &Bottleneck,
    i: usize,
    f: &Flow,
    t0: Instant,
    stop_all: Arc<AtomicBool>,
) -> anyhow::Result<(FlowThread, Arc<OnceLock<Arc<TcpStream>>>)> {
    let addr = start_receiver(link, f, t0)?;
    let sock = sender_socket(link, i, f, addr)?;
    let shown = Arc::new(OnceLock::new());
    let publish = shown.clone();
    let (stop, bytes) = (f.stop, f.bytes);
    let th = std::thread::spawn(move || {
        // a SYN lost in a full buffer is sent again after 1 s, 3 s, ...:
        // the connect gives up when the flow's time is over (a blocking
        // connect waits at most SO_SNDTIMEO)
        let left = (stop - t0.elapsed().as_secs_f64()).max(0.1);
        let tv = libc::timeval {
            tv_sec: left as libc::time_t,
            tv_usec: (left.fract() * 1e6) as libc::suseconds_t,
        };
        // SAFETY: a valid timeval of the right size on a socket we own.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        let Ok(s) = connect(sock, addr) else { return };
        let s = Arc::new(s);
        let _ = publish.set(s.clone());
        send_until(&s, stop, bytes, t0, &stop_all);
    });
    Ok((th, shown))
}

/// Listen for flow `f` on the receiver's side and read what arrives,
/// marking when its byte count is complete; returns the address.
fn start_receiver(link: &Bottleneck, f: &Flow, t0: Instant) -> anyhow::Result<SocketAddr> {
    let bind: SocketAddr = (link.receiver_ip, 0).into();
    let cc = f.cc.clone();
    let listener = link.receiver.run(move || -> std::io::Result<TcpListener> {
        let l = TcpListener::bind(bind)?;
        set_cc(l.as_raw_fd(), &cc)?;
        Ok(l)
    })?;
    let addr = listener.local_addr()?;
    link.set_port_class(addr.port(), f.class);
    let rx = f.rx.clone();
    let done_at = f.done_at.clone();
    let want = f.bytes;
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let mut buf = vec![0u8; 1 << 18];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            let tot = rx.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            if want.is_some_and(|w| tot >= w) {
                *done_at.lock().unwrap() = Some(t0.elapsed().as_secs_f64());
            }
        }
    });
    Ok(addr)
}

/// Send on a connected flow until its stop time, its byte count or the
/// end of the run.
fn start_sender(
    s2: Arc<TcpStream>,
    f: &Flow,
    t0: Instant,
    stop_all: Arc<AtomicBool>,
) -> FlowThread {
    let (stop, bytes) = (f.stop, f.bytes);
    std::thread::spawn(move || send_until(&s2, stop, bytes, t0, &stop_all))
}

/// Write `bytes` (None: without end) until the flow's stop time or the
/// end of the run, then close the sending side.
fn send_until(s: &TcpStream, stop: f64, bytes: Option<u64>, t0: Instant, stop_all: &AtomicBool) {
    let chunk = vec![0x5au8; 1 << 16];
    let mut left = bytes.unwrap_or(u64::MAX);
    let mut w: &TcpStream = s;
    // Blocking writes; a send timeout lets the loop see its deadline.
    let _ = s.set_write_timeout(Some(Duration::from_millis(50)));
    while left > 0
        && !stop_all.load(Ordering::Relaxed)
        && !STOP.load(Ordering::Relaxed)
        && t0.elapsed().as_secs_f64() < stop
    {
        let n = left.min(chunk.len() as u64) as usize;
        match w.write(&chunk[..n]) {
            Ok(k) => left -= k as u64,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
}
