//! A userspace delay line between two TUN devices: every packet read from one
//! device is written to the other `delay` later, in arrival order.  This is
//! how the lab adds propagation delay on a kernel without netem.
//!
//! Per direction there are two threads: a reader that timestamps packets as
//! they leave the kernel, and a writer that sleeps (absolute-time
//! `clock_nanosleep`, never a busy spin) until each packet's release time.
//! Both run SCHED_FIFO where allowed: at normal priority a parallel compile
//! pushed release lateness p99 to milliseconds.  The constant delay keeps
//! release order equal to arrival order, so the line never reorders.
//!
//! Flows may have longer round trips than the line's base delay: a flow's
//! TCP port (the receiver's, which is each lab flow's own) can be put in a
//! delay class that adds its extra delay in each direction
//! ([`DelayLine::set_port_class`]).  Each class has its own reader-fed FIFO
//! and writer, so release order stays arrival order within a class and no
//! class waits behind another's packets.
//!
//! The writer records how late each release was in a 1-us histogram; a run
//! whose p99 lateness exceeds [`LATENESS_P99_LIMIT_US`] must be reported
//! invalid by its caller.  Packets due at one instant (the opportunities of
//! one millisecond of a trace) are written one after another, and each is
//! late only from the end of the write before it: a trace's burst of 20
//! opportunities is not 20 late releases.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::trace::{Limit, Trace, TraceQueue};

/// Runs whose release lateness p99 exceeds this are invalid.
pub const LATENESS_P99_LIMIT_US: u64 = 200;
/// Histogram range; later releases land in the overflow bucket.
const HIST_US: usize = 20_000;
/// Packets a direction may hold (100 Mbit/s x 200 ms is ~1700 full frames).
const MAX_QUEUED: usize = 50_000;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// Open `/dev/net/tun` and create an L3 TUN device `name` in the calling
/// thread's network namespace.  The device lives as long as the fd.
pub fn tun_create(name: &str) -> std::io::Result<OwnedFd> {
    assert!(name.len() < libc::IFNAMSIZ);
    // SAFETY: open(2) on a constant path; the fd is owned below.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF takes a struct ifreq, which IfReq lays out (40 bytes).
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// CLOCK_MONOTONIC in ns (the kernel's ktime; tcp_mstamp is this / 1000).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until_ns(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: valid timespec; EINTR just ends the sleep early and the caller
    // re-checks the clock.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Make the calling thread SCHED_FIFO with a 1-ns timer slack; false if the
/// kernel refused (not root, or RT bandwidth disabled).
fn make_realtime() -> bool {
    // SAFETY: prctl/sched_setscheduler on the calling thread only.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1);
        let p = libc::sched_param { sched_priority: 40 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0
    }
}

/// Random loss drawn by the delay line from a seed: the n-th packet of the
/// forward direction is lost when the n-th draw of the seed's sequence is
/// under `p`.  Bernoulli per packet, as the iptables `statistic` rule, but
/// reproducible: two runs on one seed that send the same packets lose the
/// same ones (common random numbers), so two CCs measured on one seed
/// differ by their laws, not by where the loss fell.  The line sits behind
/// the bottleneck queue, so a lost packet has crossed it (at p <= 1e-3 the
/// queue carries at most 0.1 % more than with the loss before it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeededLoss {
    pub p: f64,
    pub seed: u64,
}

impl SeededLoss {
    /// Is the n-th packet (from 0) lost?  splitmix64 of (seed, n): every
    /// draw is independent of the others and of the packets' timing.
    pub fn lost(&self, n: u64) -> bool {
        let mut z = self
            .seed
            .wrapping_add(n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // the top 53 bits as a uniform number in [0, 1)
        ((z >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < self.p
    }
}

/// What one direction of the line did.
#[derive(Clone, Debug)]
pub struct DirStats {
    pub packets: u64,
    pub bytes: u64,
    /// Dropped because the line held MAX_QUEUED packets already.
    pub queue_drops: u64,
    /// Writes the destination device refused.
    pub write_errors: u64,
    /// Whether both threads got SCHED_FIFO.
    pub realtime: bool,
    /// `hist[i]` = releases that were i us late; the last bucket is overflow.
    pub hist: Vec<u64>,
    /// A trace-driven direction ([`Shaper`]): its bottleneck's counters.
    pub trace: Option<TraceStats>,
}

/// What a trace-driven bottleneck did over a run.
#[derive(Clone, Debug)]
pub struct TraceStats {
    /// Packets accepted into the bottleneck queue, and dropped at its tail.
    pub packets: u64,
    pub drops: u64,
    /// Bytes the trace offered while the line ran (opportunities x 1500).
    pub offered_bytes: u64,
    /// How long the line ran, s.
    pub secs: f64,
    /// Queueing delay at the bottleneck, 100-us buckets (trace::qdelay_quantile).
    pub qdelay_hist: Vec<u64>,
}

impl TraceStats {
    /// Queueing delay quantile, ms.
    pub fn qdelay_ms(&self, q: f64) -> f64 {
        crate::trace::qdelay_quantile(&self.qdelay_hist, q)
    }

    /// The trace's capacity over the run, Mbit/s.
    pub fn offered_mbit(&self) -> f64 {
        self.offered_bytes as f64 * 8.0 / 1e6 / self.secs.max(1e-9)
    }
}

/// A direction whose bottleneck is a capacity trace (crate::trace): the
/// reader queues each packet in a drop-tail [`TraceQueue`] and releases it
/// at its departure plus the propagation delay.  The router then has no
/// TBF: the trace is the link.
#[derive(Clone, Debug)]
pub struct Shaper {
    pub trace: Arc<Trace>,
    /// Where in the trace the run starts, ms.
    pub offset_ms: u64,
    pub limit: Limit,
}

impl DirStats {
    fn new() -> DirStats {
        DirStats {
            packets: 0,
            bytes: 0,
            queue_drops: 0,
            write_errors: 0,
            realtime: false,
            hist: vec![0; HIST_US + 1],
            trace: None,
        }
    }

    /// Lateness quantile in us (`q` in 0..=1); HIST_US means "at least".
    pub fn lateness_us(&self, q: f64) -> u64 {
        let n: u64 = self.hist.iter().sum();
        if n == 0 {
            return 0;
        }
        let want = ((n as f64 * q).ceil() as u64).max(1);
        let mut acc = 0;
        for (i, c) in self.hist.iter().enumerate() {
            acc += c;
            if acc >= want {
                return i as u64;
            }
        }
        HIST_US as u64
    }

    pub fn merge(&mut self, o: &DirStats) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.queue_drops += o.queue_drops;
        self.write_errors += o.write_errors;
        self.realtime &= o.realtime;
        for (a, b) in self.hist.iter_mut().zip(&o.hist) {
            *a += b;
        }
    }
}

/// Both directions' statistics for a finished run.
#[derive(Clone, Debug)]
pub struct DelayReport {
    pub forward: DirStats,
    pub reverse: DirStats,
}

impl DelayReport {
    pub fn combined(&self) -> DirStats {
        let mut s = self.forward.clone();
        s.merge(&self.reverse);
        s
    }

    /// Whether the run's timing can be trusted (p99 lateness within limit).
    pub fn valid(&self) -> bool {
        self.combined().lateness_us(0.99) <= LATENESS_P99_LIMIT_US
    }
}

struct Pkt {
    due_ns: u64,
    data: Vec<u8>,
}

/// Which delay class each TCP port's packets are in (0: the base delay).
struct PortClasses(Vec<AtomicU8>);

impl PortClasses {
    fn new() -> PortClasses {
        PortClasses((0..=u16::MAX).map(|_| AtomicU8::new(0)).collect())
    }

    /// The class of an IPv4 TCP packet by its `dst` (else source) port;
    /// 0 for anything else.
    fn of(&self, pkt: &[u8], dst: bool) -> usize {
        if pkt.len() < 20 || pkt[0] >> 4 != 4 || pkt[9] != libc::IPPROTO_TCP as u8 {
            return 0;
        }
        let at = (pkt[0] & 0xf) as usize * 4 + if dst { 2 } else { 0 };
        match pkt.get(at..at + 2) {
            Some(b) => {
                self.0[u16::from_be_bytes([b[0], b[1]]) as usize].load(Ordering::Relaxed) as usize
            }
            None => 0,
        }
    }
}

/// A running two-way delay line; stop it with [`DelayLine::stop`] (dropping
/// it also stops it).
pub struct DelayLine {
    stop: Arc<AtomicBool>,
    /// The delay classes of TCP ports ([`DelayLine::set_port_class`]);
    /// None when the line has only the base delay.
    classes: Option<Arc<PortClasses>>,
    n_classes: usize,
    /// CLOCK_MONOTONIC ns until which no packet leaves (see [`DelayLine::stall`])
    stall_until: Arc<AtomicU64>,
    /// Packets the seeded loss dropped (forward direction).
    loss_drops: Arc<AtomicU64>,
    /// The forward direction's seeded loss, replaceable while the line
    /// runs ([`DelayLine::set_loss`]).
    loss: Arc<LossCtl>,
    /// (direction: 0 forward, 1 reverse; thread), the readers first.
    threads: Vec<(usize, JoinHandle<DirStats>)>,
}

/// A seeded loss the reader picks up between two packets: `gen` changes
/// with every [`DelayLine::set_loss`], and the reader then reads `cur` and
/// restarts its draw index at 0.
struct LossCtl {
    gen: AtomicU64,
    cur: Mutex<Option<SeededLoss>>,
}

impl DelayLine {
    /// Start moving packets `a -> b` after `fwd` and `b -> a` after `rev`.
    pub fn start(a: OwnedFd, b: OwnedFd, fwd: Duration, rev: Duration) -> DelayLine {
        DelayLine::start_lossy(a, b, fwd, rev, None)
    }

    /// [`DelayLine::start`], losing forward packets as `loss` draws.
    pub fn start_lossy(
        a: OwnedFd,
        b: OwnedFd,
        fwd: Duration,
        rev: Duration,
        loss: Option<SeededLoss>,
    ) -> DelayLine {
        DelayLine::start_classes(a, b, fwd, rev, loss, &[])
    }

    /// [`DelayLine::start_lossy`] with delay classes: class `k` (from 1)
    /// adds `extra[k - 1]` to both directions' delay, for the ports put in
    /// it with [`DelayLine::set_port_class`].
    pub fn start_classes(
        a: OwnedFd,
        b: OwnedFd,
        fwd: Duration,
        rev: Duration,
        loss: Option<SeededLoss>,
        extra: &[Duration],
    ) -> DelayLine {
        DelayLine::start_shaped(a, b, fwd, rev, loss, extra, [None, None])
    }

    /// [`DelayLine::start_classes`] with a trace-driven bottleneck in the
    /// directions that have a [`Shaper`] (forward, reverse); their traces
    /// start together, now.
    pub fn start_shaped(
        a: OwnedFd,
        b: OwnedFd,
        fwd: Duration,
        rev: Duration,
        loss: Option<SeededLoss>,
        extra: &[Duration],
        shapers: [Option<Shaper>; 2],
    ) -> DelayLine {
        assert!(
            extra.len() < u8::MAX as usize,
            "{} delay classes",
            extra.len()
        );
        let classes = (!extra.is_empty()).then(|| Arc::new(PortClasses::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let stall_until = Arc::new(AtomicU64::new(0));
        let loss_drops = Arc::new(AtomicU64::new(0));
        let ctl = Arc::new(LossCtl {
            gen: AtomicU64::new(0),
            cur: Mutex::new(loss),
        });
        let (a, b) = (Arc::new(a), Arc::new(b));
        let mut threads = Vec::new();
        let mut writers = Vec::new();
        let t0 = now_ns();
        let [sh_fwd, sh_rev] = shapers;
        for (dir, (src, dst, d, l, sh)) in [
            (a.clone(), b.clone(), fwd, Some(ctl.clone()), sh_fwd),
            (b, a, rev, None, sh_rev),
        ]
        .into_iter()
        .enumerate()
        {
            let tq = sh.map(|s| TraceQueue::new(s.trace, t0, s.offset_ms, s.limit));
            let mut txs = Vec::new();
            for x in std::iter::once(Duration::ZERO).chain(extra.iter().copied()) {
                let (tx, rx) = mpsc::sync_channel::<Pkt>(MAX_QUEUED);
                txs.push((tx, (d + x).as_nanos() as u64));
                let (st, hold, dst) = (stop.clone(), stall_until.clone(), dst.clone());
                writers.push((dir, std::thread::spawn(move || writer(dst, rx, st, hold))));
            }
            let (st, drops) = (stop.clone(), loss_drops.clone());
            // Forward packets go to the receiver's port, reverse ones come
            // from it.
            let by = classes.clone().map(|c| (c, dir == 0));
            threads.push((
                dir,
                std::thread::spawn(move || reader(src, txs, by, st, l, drops, tq)),
            ));
        }
        threads.extend(writers);
        DelayLine {
            stop,
            classes,
            n_classes: extra.len(),
            stall_until,
            loss_drops,
            loss: ctl,
            threads,
        }
    }

    /// Replace the forward direction's seeded loss from the next packet on
    /// (`None`: no loss).  The draw index restarts at 0, so the n-th packet
    /// after this call is lost as the n-th draw of `loss`: two runs that
    /// switch the same loss on at their own moment lose the same packets
    /// counted from that moment (a test's loss onset, common random numbers).
    pub fn set_loss(&self, loss: Option<SeededLoss>) {
        *self.loss.cur.lock().unwrap_or_else(|e| e.into_inner()) = loss;
        self.loss.gen.fetch_add(1, Ordering::SeqCst);
    }

    /// Put TCP port `port`'s packets (both directions) in delay class
    /// `class` (0: the base delay; see [`DelayLine::start_classes`]) from
    /// the next packet on.
    pub fn set_port_class(&self, port: u16, class: usize) {
        assert!(
            class <= self.n_classes,
            "class {class} of {}",
            self.n_classes
        );
        if let Some(c) = &self.classes {
            c.0[port as usize].store(class as u8, Ordering::Relaxed);
        }
    }

    /// The count of packets the seeded loss dropped, live (it outlives the
    /// line).
    pub fn loss_drops(&self) -> Arc<AtomicU64> {
        self.loss_drops.clone()
    }

    /// Stall the path for `d` from now, both directions: no packet leaves
    /// until then, and the held ones leave together at the end, in order (a
    /// router or a host descheduled, a link-layer retry burst).  The stall
    /// shows in the lateness statistics, as it should.
    pub fn stall(&self, d: Duration) {
        self.stall_until
            .store(now_ns() + d.as_nanos() as u64, Ordering::SeqCst);
    }

    pub fn stop(mut self) -> DelayReport {
        self.finish()
    }

    fn finish(&mut self) -> DelayReport {
        self.stop.store(true, Ordering::SeqCst);
        let mut dirs = [DirStats::new(), DirStats::new()];
        let mut seen = [0usize; 2];
        for (dir, t) in self.threads.drain(..) {
            let st = t.join().unwrap_or_else(|_| DirStats::new());
            // A reader's statistics are its queue drops and realtime flag;
            // the writers' carry the releases.
            if seen[dir] == 0 {
                dirs[dir].realtime = st.realtime;
                dirs[dir].queue_drops = st.queue_drops;
                dirs[dir].trace = st.trace;
            } else {
                dirs[dir].merge(&st);
            }
            seen[dir] += 1;
        }
        let [forward, reverse] = dirs;
        DelayReport { forward, reverse }
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.finish();
        }
    }
}

/// Reads packets from `src` and queues each to its class's writer with its
/// release time; `txs[k]` = (class k's writer, its delay in ns).  `by`: the
/// port classes and whether a packet's class is its destination port's.
fn reader(
    src: Arc<OwnedFd>,
    txs: Vec<(mpsc::SyncSender<Pkt>, u64)>,
    by: Option<(Arc<PortClasses>, bool)>,
    stop: Arc<AtomicBool>,
    ctl: Option<Arc<LossCtl>>,
    loss_drops: Arc<AtomicU64>,
    mut tq: Option<TraceQueue>,
) -> DirStats {
    let t0 = now_ns();
    // Packets read: the index of the loss draws.
    let mut idx = 0u64;
    // u64::MAX is no generation: the first packet reads the loss in force.
    let (mut gen, mut loss) = (u64::MAX, None::<SeededLoss>);
    let mut st = DirStats::new();
    st.realtime = make_realtime();
    let mut pfd = libc::pollfd {
        fd: src.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 50) };
        if n <= 0 {
            continue;
        }
        loop {
            // SAFETY: reading into our buffer.  The fd is blocking, so it is
            // read only after poll reported it readable.
            let len = unsafe { libc::read(src.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if len <= 0 {
                break;
            }
            if let Some(c) = &ctl {
                let g = c.gen.load(Ordering::Relaxed);
                if g != gen {
                    gen = g;
                    loss = *c.cur.lock().unwrap_or_else(|e| e.into_inner());
                    idx = 0;
                }
            }
            idx += 1;
            if loss.is_some_and(|l| l.lost(idx - 1)) {
                loss_drops.fetch_add(1, Ordering::Relaxed);
            } else {
                let now = now_ns();
                // The trace's bottleneck: when it leaves, or a tail drop.
                let left = match &mut tq {
                    Some(q) => q.enqueue(now, len as u32),
                    None => Some(now),
                };
                if let Some(dep) = left {
                    let data = buf[..len as usize].to_vec();
                    let k = by.as_ref().map_or(0, |(c, dst)| c.of(&data, *dst));
                    let (tx, d_ns) = &txs[k.min(txs.len() - 1)];
                    let p = Pkt {
                        due_ns: dep + d_ns,
                        data,
                    };
                    if tx.try_send(p).is_err() {
                        st.queue_drops += 1;
                    }
                }
            }
            // SAFETY: as above, zero timeout.
            if unsafe { libc::poll(&mut pfd, 1, 0) } <= 0 {
                break;
            }
        }
    }
    if let Some(q) = tq {
        let t1 = now_ns();
        st.trace = Some(TraceStats {
            packets: q.packets,
            drops: q.drops,
            offered_bytes: q.opportunities_between(t0, t1)
                * u64::from(crate::trace::OPPORTUNITY_BYTES),
            secs: (t1 - t0) as f64 / 1e9,
            qdelay_hist: q.qdelay_hist,
        });
    }
    st
}

fn writer(
    dst: Arc<OwnedFd>,
    rx: mpsc::Receiver<Pkt>,
    stop: Arc<AtomicBool>,
    stall_until: Arc<AtomicU64>,
) -> DirStats {
    let mut st = DirStats::new();
    st.realtime = make_realtime();
    // Packets due at one instant (a trace's opportunities of one ms) leave
    // one after the other: each is late only from when the one before it
    // was written.
    let (mut prev_due, mut prev_end) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let p = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(p) => p,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut t = now_ns();
        let due = p.due_ns.max(stall_until.load(Ordering::Relaxed));
        while t < due {
            sleep_until_ns(due);
            t = now_ns();
        }
        // SAFETY: writing a packet we own to a TUN fd.
        let w = unsafe { libc::write(dst.as_raw_fd(), p.data.as_ptr().cast(), p.data.len()) };
        if w < 0 {
            st.write_errors += 1;
            continue;
        }
        let from = if p.due_ns == prev_due {
            p.due_ns.max(prev_end)
        } else {
            p.due_ns
        };
        (prev_due, prev_end) = (p.due_ns, now_ns());
        let late_us = (t.saturating_sub(from) / 1000) as usize;
        st.hist[late_us.min(HIST_US)] += 1;
        st.packets += 1;
        st.bytes += p.data.len() as u64;
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_quantiles_come_from_the_histogram() {
        let mut s = DirStats::new();
        s.hist[3] = 98;
        s.hist[150] = 1;
        s.hist[HIST_US] = 1;
        assert_eq!(s.lateness_us(0.5), 3);
        assert_eq!(s.lateness_us(0.98), 3);
        assert_eq!(s.lateness_us(0.99), 150);
        assert_eq!(s.lateness_us(1.0), HIST_US as u64);
        let mut r = DirStats::new();
        r.hist[500] = 100;
        let rep = DelayReport {
            forward: s,
            reverse: r,
        };
        // Half the releases were 500 us late: the run is invalid.
        assert_eq!(rep.combined().lateness_us(0.99), 500);
        assert!(!rep.valid());
    }

    /// A packet's class is its TCP port's: the destination port forward,
    /// the source port in reverse; anything but IPv4 TCP is in class 0.
    #[test]
    fn packets_are_classed_by_their_tcp_port() {
        let c = PortClasses::new();
        c.0[5001].store(2, Ordering::Relaxed);
        // IPv4, IHL 5, TCP; source port 40000, destination 5001
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[9] = libc::IPPROTO_TCP as u8;
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5001u16.to_be_bytes());
        assert_eq!(c.of(&p, true), 2);
        assert_eq!(c.of(&p, false), 0);
        p[20..22].copy_from_slice(&5001u16.to_be_bytes());
        assert_eq!(c.of(&p, false), 2);
        // options (IHL 6) move the ports
        let mut q = vec![0u8; 44];
        q[0] = 0x46;
        q[9] = libc::IPPROTO_TCP as u8;
        q[26..28].copy_from_slice(&5001u16.to_be_bytes());
        assert_eq!(c.of(&q, true), 2);
        p[9] = libc::IPPROTO_UDP as u8;
        assert_eq!(c.of(&p, true), 0);
        assert_eq!(c.of(&p[..21], true), 0);
        p[0] = 0x60;
        assert_eq!(c.of(&p, true), 0);
    }

    /// The seeded loss is Bernoulli at its rate, the same for one seed and
    /// different for another, and independent between neighbours.
    #[test]
    fn seeded_loss_is_reproducible_bernoulli() {
        let n = 2_000_000u64;
        let a = SeededLoss { p: 1e-3, seed: 7 };
        let lost: Vec<u64> = (0..n).filter(|&i| a.lost(i)).collect();
        // mean 2,000, sd 45: within 5 sd
        assert!((1_775..=2_225).contains(&lost.len()), "{}", lost.len());
        assert_eq!(lost, (0..n).filter(|&i| a.lost(i)).collect::<Vec<_>>());
        let b = SeededLoss { seed: 8, ..a };
        let same = lost.iter().filter(|&&i| b.lost(i)).count();
        assert!(
            same < 20,
            "seeds 7 and 8 share {same} of {} losses",
            lost.len()
        );
        // after a loss the next packet is lost at the rate, not more
        let next = lost.iter().filter(|&&i| a.lost(i + 1)).count();
        assert!(next < 20, "{next} pairs");
        let none = SeededLoss { p: 0.0, seed: 7 };
        assert!((0..n).all(|i| !none.lost(i)));
    }
}
