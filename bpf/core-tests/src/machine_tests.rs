//! hetcp's and ctcp_plus's state machines (the `*_on_*` functions of
//! bpf/core/hetcp_core.h and ctcp_core.h, one per hook) in a closed loop
//! with a fluid model of a drop-tail bottleneck, as the kernel calls them:
//! pkts_acked then cong_avoid per ACK, ssthresh() and PRR's halving at a
//! loss.  Each test checks what the paper's model predicts (Eq. 1-3 of
//! HE-TCP, Compound's Diff control) against the machine's windows.

use crate::params::Algo;
use ccload_intf as intf;

/// A drop-tail bottleneck: `c` segments/s, `base_us` of RTT, `buf` segments
/// of buffer.  One round carries the window `w`: the queue is what exceeds
/// the pipe, the RTT its delay on top of the base, and the ACKs come back
/// spaced evenly over that RTT.
#[derive(Clone, Copy)]
struct Link {
    c: f64,
    base_us: f64,
    buf: f64,
}

impl Link {
    /// 100 Mbit/s of 1500-byte segments, 80 ms.
    fn wan(buf_bdp: f64) -> Link {
        let l = Link {
            c: 100e6 / 8.0 / 1500.0,
            base_us: 80_000.0,
            buf: 0.0,
        };
        Link {
            buf: buf_bdp * l.bdp(),
            ..l
        }
    }
    fn bdp(&self) -> f64 {
        self.c * self.base_us / 1e6
    }
    fn queue(&self, w: u32) -> f64 {
        (w as f64 - self.bdp()).max(0.0)
    }
    fn rtt_us(&self, w: u32) -> f64 {
        self.base_us + self.queue(w) / self.c * 1e6
    }
}

const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

// ---------------------------------------------------------------- hetcp

struct Hetcp {
    ca: intf::hetcp,
    p: intf::ccl_hetcp_params,
    cwnd: u32,
    ssth: u32,
    frac: u32,
    now_us: f64,
    /// ssthresh writes of the machine, in order.
    writes: Vec<u32>,
    losses: u32,
}

impl Hetcp {
    fn new(sets: &[(&str, &str)]) -> Hetcp {
        let mut ca = intf::hetcp::default();
        unsafe { intf::hetcp_on_init(&mut ca, 0, 0) };
        Hetcp {
            ca,
            p: Algo::Hetcp.params_struct(sets),
            cwnd: 10,
            ssth: INFINITE_SSTHRESH,
            frac: 0,
            now_us: 1.0,
            writes: Vec::new(),
            losses: 0,
        }
    }

    /// One round on `l`: its ACKs, then a loss if the queue overflowed (or
    /// `force_loss`): ssthresh(), and PRR brings the window to it within a
    /// round in which cong_avoid does not run.
    fn round(&mut self, l: &Link, force_loss: bool) {
        let w = self.cwnd;
        let rtt = l.rtt_us(w);
        let dt = rtt / w as f64;
        for _ in 0..w {
            self.now_us += dt;
            let now = self.now_us as u64;
            unsafe { intf::hetcp_on_rtt(&mut self.ca, rtt as i32, now as u32) };
            let a = intf::hetcp_ack {
                now_us: now,
                snd_cwnd: self.cwnd,
                snd_ssthresh: self.ssth,
                acked: 1,
                srtt_us: rtt as u32,
            };
            let mut o = intf::hetcp_out::default();
            unsafe { intf::hetcp_on_ack(&mut self.ca, &self.p, &a, &mut o) };
            if o.ssth != 0 {
                self.ssth = o.ssth;
                self.writes.push(o.ssth);
            }
            // Below ssthresh (or plain Reno before an RTT sample) slow
            // start; above it Reno's +1/cwnd, scaled by ai_rtt_ms.
            if self.cwnd < self.ssth {
                self.cwnd += 1;
                continue;
            }
            let aw =
                unsafe { intf::hetcp_ai_window(self.cwnd, self.ca.base_rtt_us, self.p.ai_rtt_ms) };
            self.frac += 1;
            if self.frac >= aw {
                (self.cwnd, self.frac) = (self.cwnd + 1, 0);
            }
        }
        if force_loss || l.queue(w) > l.buf {
            self.losses += 1;
            let s = unsafe {
                intf::hetcp_on_loss(&mut self.ca, &self.p, self.now_us as u64, self.cwnd)
            };
            (self.ssth, self.cwnd, self.frac) = (s, s, 0);
            self.now_us += l.rtt_us(s);
        }
    }
}

#[test]
fn hetcp_machine_is_reno_until_its_first_rtt_sample() {
    let mut h = Hetcp::new(&[]);
    let a = intf::hetcp_ack {
        now_us: 1000,
        snd_cwnd: 10,
        snd_ssthresh: INFINITE_SSTHRESH,
        acked: 1,
        srtt_us: 0,
    };
    let mut o = intf::hetcp_out::default();
    for _ in 0..50 {
        unsafe { intf::hetcp_on_ack(&mut h.ca, &h.p, &a, &mut o) };
        assert!(o.reno != 0 && o.sampled == 0 && o.ssth == 0);
    }
    unsafe { intf::hetcp_on_rtt(&mut h.ca, 80_000, 1000) };
    let mut sampled = 0;
    for _ in 0..50 {
        unsafe { intf::hetcp_on_ack(&mut h.ca, &h.p, &a, &mut o) };
        assert_eq!(o.reno, 0);
        sampled += o.sampled;
    }
    // SampleInterval is 1 below si_small = 10 segments (Fig. 2).
    assert_eq!(sampled, 50);
    assert_eq!(h.ca.base_rtt_us, 80_000);
}

/// Slow start ends once a queue stands, at the estimated BDP (Eq. 3):
/// before the buffer (1 BDP) overflows, with the estimate at the link's
/// rate, and not while the path shows no queue.
#[test]
fn hetcp_machine_leaves_slow_start_at_the_estimated_bdp() {
    let l = Link::wan(1.0);
    let mut h = Hetcp::new(&[]);
    let mut exit = None;
    for round in 0..40 {
        let queued = l.queue(h.cwnd) > 0.0;
        h.round(&l, false);
        if !queued {
            assert!(
                h.writes.is_empty(),
                "ssthresh written at round {round} without a queue"
            );
        }
        if !h.writes.is_empty() {
            exit = Some(round);
            break;
        }
    }
    let round = exit.expect("slow start never ended");
    let bw = h.ca.pre_bw_q8 as f64 / 256.0;
    let ssth = h.writes[0] as f64;
    eprintln!(
        "hetcp slow start: ended at round {round}, ssthresh {ssth} (BDP {:.0}), estimate {bw:.0} seg/s (link {:.0}), {} losses",
        l.bdp(),
        l.c,
        h.losses
    );
    assert_eq!(h.losses, 0, "slow start ended by a loss");
    assert!(h.ca.flags as u32 & intf::HETCP_F_SS_DONE != 0);
    assert!(
        (bw / l.c - 1.0).abs() < 0.1,
        "estimate {bw:.0} for {:.0}",
        l.c
    );
    assert!(
        (ssth / l.bdp() - 1.0).abs() < 0.15,
        "ssthresh {ssth} for a BDP of {:.0}",
        l.bdp()
    );
}

/// One loss at window `w0` on a 100 Mbit/s, 80 ms path with a 2-BDP buffer
/// (no overflow), the estimator converged over 40 rounds at that window
/// after a round that showed the empty path, congestion avoidance as
/// Reno's (`ai_rtt_ms` 0).  Returns the rounds until cwnd >= 0.9 w0 (None
/// after 2000) and the ssthresh writes from the loss on.
fn hetcp_regain(loss_bw: &str, w0: u32) -> (Option<u32>, Vec<u32>) {
    let l = Link::wan(2.0);
    let mut h = Hetcp::new(&[("loss_bw", loss_bw), ("ai_rtt_ms", "0")]);
    h.round(&l, false);
    h.ssth = w0;
    for _ in 0..40 {
        h.cwnd = w0;
        h.round(&l, false);
    }
    assert_eq!(h.losses, 0);
    h.cwnd = w0;
    h.round(&l, true);
    h.writes.clear();
    for n in 1..=2000 {
        h.round(&l, false);
        if h.cwnd * 10 >= w0 * 9 {
            return (Some(n), h.writes);
        }
    }
    (None, h.writes)
}

/// A random loss below the BDP (no queue): Fig. 2 restarts the estimator
/// (loss_bw 0), whose first write is the floor and whose later samples
/// measure the halved window, so RI never fires and the window regrows as
/// Reno's (0.4 w0 = 240 rounds).  With the estimate kept (loss_bw 1) the
/// first cong_avoid after recovery writes BW x BaseRTT (Eq. 3), the window
/// from before the loss, and RI regains it at once.  After a congestive
/// loss at 1.8 BDP the estimate is the link's rate, so the kept target is
/// the BDP and never above it (RI refills no queue).
#[test]
fn hetcp_machine_regains_a_random_loss_with_the_kept_estimate() {
    let bdp = Link::wan(2.0).bdp() as u32;
    let (restart, rwrites) = hetcp_regain("0", 600);
    let (keep, writes) = hetcp_regain("1", 600);
    let top = writes.iter().copied().max().unwrap_or(0);
    eprintln!(
        "hetcp, random loss at 600: restart {restart:?} rounds (first write {:?}), kept {keep:?} (ssthresh <= {top})",
        rwrites.first()
    );
    assert_eq!(rwrites.first(), Some(&2), "restart writes the floor");
    assert!(restart.is_some_and(|r| r >= 200), "Fig. 2: {restart:?}");
    assert!(keep.is_some_and(|r| r <= 2), "kept: {keep:?}");
    assert!(
        top <= 606,
        "kept target {top} above the window before the loss"
    );
    let (keep, writes) = hetcp_regain("1", 1200);
    let top = writes.iter().copied().max().unwrap_or(0);
    eprintln!("hetcp, congestive loss at 1200: kept {keep:?} (ssthresh <= {top}, BDP {bdp})");
    assert!(
        top <= bdp + bdp / 100 && top >= bdp - bdp / 100,
        "target {top} vs BDP {bdp}"
    );
    assert!(keep.is_some(), "regrows by CA above the BDP");
}

/// Undo and RTO bring back the estimate a loss restarted (loss_bw 0), and
/// cancel the ssthresh write recovery left pending; rto_reset 1 keeps the
/// restart.
#[test]
fn hetcp_machine_undo_and_rto_restore_the_estimate() {
    for (hook, rto_reset, restored) in [("undo", 0, true), ("rto", 0, true), ("rto", 1, false)] {
        let l = Link::wan(2.0);
        let mut h = Hetcp::new(&[("loss_bw", "0")]);
        for _ in 0..60 {
            h.round(&l, false);
        }
        let bw = h.ca.pre_bw_q8;
        assert!(bw > 0);
        let s = unsafe { intf::hetcp_on_loss(&mut h.ca, &h.p, h.now_us as u64, h.cwnd) };
        assert_eq!(s, h.cwnd / 2);
        assert_eq!(h.ca.pre_bw_q8, 0, "loss_bw 0 restarts the estimate");
        match hook {
            "undo" => {
                let w = unsafe { intf::hetcp_on_undo(&mut h.ca, s, h.cwnd) };
                assert_eq!(w, h.cwnd, "undo returns the window from before the loss");
            }
            _ => unsafe { intf::hetcp_on_rto(&mut h.ca, rto_reset) },
        }
        assert_eq!(
            h.ca.pre_bw_q8 == bw,
            restored,
            "{hook}, rto_reset {rto_reset}"
        );
        assert_eq!(h.ca.flags as u32 & intf::HETCP_F_PENDING_CA, 0);
        let a = intf::hetcp_ack {
            now_us: h.now_us as u64 + 1,
            snd_cwnd: s,
            snd_ssthresh: s,
            acked: 1,
            srtt_us: 80_000,
        };
        let mut o = intf::hetcp_out::default();
        unsafe { intf::hetcp_on_ack(&mut h.ca, &h.p, &a, &mut o) };
        assert_eq!(o.ssth, 0, "{hook}: a pending write survived");
    }
}

// ------------------------------------------------------------ ctcp_plus

struct Ctcp {
    ca: intf::ctcp_plus,
    p: intf::ccl_ctcp_plus_params,
    cwnd: u32,
    ssth: u32,
    now_us: f64,
    snd_nxt: u32,
    /// Per round: (loss window, delay window in segments, Diff in segments
    /// when the rules ran).
    log: Vec<(u32, u32, Option<f64>)>,
    loss_log: Vec<CtcpLoss>,
    losses: u32,
}

/// One ssthresh() of the loop: the state it saw and what it left.
#[derive(Debug)]
#[allow(dead_code)] // read through Debug in failure messages
struct CtcpLoss {
    cwnd_l: u32,
    swnd: u32,
    pipe: u32,
    gamma: u32,
    diff_reno_q10: Option<i32>,
    cwnd_l_after: u32,
    dwnd_after_q10: u32,
    gamma_after: u32,
    ev: u32,
}

const MSS: u32 = 1448;

impl Ctcp {
    fn new(sets: &[(&str, &str)]) -> Ctcp {
        let p: intf::ccl_ctcp_plus_params = Algo::CtcpPlus.params_struct(sets);
        let mut ca = intf::ctcp_plus::default();
        unsafe { intf::ctcp_on_init(&mut ca, 10, p.gamma, 0, 0) };
        Ctcp {
            ca,
            p,
            cwnd: 10,
            ssth: INFINITE_SSTHRESH,
            now_us: 1.0,
            snd_nxt: 0,
            log: Vec::new(),
            loss_log: Vec::new(),
            losses: 0,
        }
    }

    /// One round: the window leaves, its ACKs come back (pkts_acked, then
    /// cong_avoid), the round ends on the last one; a loss as in hetcp's.
    fn round(&mut self, l: &Link, force_loss: bool) {
        let w = self.cwnd;
        let rtt = l.rtt_us(w);
        let dt = rtt / w as f64;
        self.snd_nxt = self.snd_nxt.wrapping_add(w * MSS);
        let mut diff = None;
        for i in 1..=w {
            self.now_us += dt;
            unsafe { intf::ctcp_on_rtt(&mut self.ca, rtt as i32) };
            unsafe {
                intf::ctcp_on_ack(&mut self.ca, &self.p, self.cwnd, self.ssth, 1, true);
            }
            if i == w {
                let input = intf::ctcp_round_in {
                    snd_cwnd: self.cwnd,
                    snd_ssthresh: self.ssth,
                    mss: MSS,
                    now_ms: (self.now_us / 1000.0) as u32,
                };
                let mut r = intf::ctcp_round::default();
                let s = unsafe { intf::ctcp_on_round(&mut self.ca, &self.p, &input, &mut r) };
                if s != 0 {
                    self.ssth = s;
                }
                if r.win != 0 {
                    diff = Some(r.diff_q10 as f64 / 1024.0);
                }
                unsafe { intf::ctcp_rearm(&mut self.ca, self.snd_nxt, self.snd_nxt) };
            }
            self.cwnd = unsafe { intf::ctcp_window(&mut self.ca, u32::MAX) };
        }
        self.log
            .push((self.ca.cwnd_l, self.ca.dwnd_q10 >> 10, diff));
        if force_loss || l.queue(w) > l.buf {
            self.losses += 1;
            let (ca, mut ev) = (self.ca, 0);
            let s = unsafe {
                intf::ctcp_on_loss(&mut self.ca, &self.p, self.cwnd, self.ca.gamma, &mut ev)
            };
            self.loss_log.push(CtcpLoss {
                cwnd_l: ca.cwnd_l,
                swnd: self.cwnd,
                pipe: (self.cwnd as u64 * ca.base_rtt_us as u64 / ca.last_rtt_us.max(1) as u64)
                    as u32,
                gamma: ca.gamma,
                diff_reno_q10: (ca.diff_reno_q10 >= 0).then_some(ca.diff_reno_q10),
                cwnd_l_after: self.ca.cwnd_l,
                dwnd_after_q10: self.ca.dwnd_q10,
                gamma_after: self.ca.gamma,
                ev,
            });
            (self.ssth, self.cwnd) = (s, s);
            self.now_us += l.rtt_us(s);
        }
    }
}

/// Compound's delay window grows while Diff < gamma and shrinks once the
/// queue reaches it: in congestion avoidance from a small window on a
/// deep buffer (4 BDP), the flow, whose Diff is the segments it keeps
/// queued, fills the pipe within rounds and then holds a queue of the
/// order of gamma while its loss window grows underneath (dwnd yields a
/// segment for each Reno adds), where Reno alone would fill the buffer.
#[test]
fn ctcp_machine_holds_a_queue_of_about_gamma() {
    let l = Link::wan(4.0);
    let mut c = Ctcp::new(&[("probe_ms", "0")]);
    c.ssth = 100;
    for _ in 0..400 {
        c.round(&l, false);
    }
    let gamma = c.p.gamma as f64;
    let diffs: Vec<f64> = c.log[200..].iter().filter_map(|r| r.2).collect();
    let mean = diffs.iter().sum::<f64>() / diffs.len().max(1) as f64;
    let grew = c.log.iter().any(|r| r.1 > 0);
    eprintln!(
        "ctcp: {} losses, mean Diff {mean:.1} over {} rounds (gamma {gamma}), window {} (BDP {:.0})",
        c.losses,
        diffs.len(),
        c.cwnd,
        l.bdp()
    );
    assert!(grew, "the delay window never grew");
    assert_eq!(c.losses, 0, "the queue reached a 4-BDP buffer");
    assert!(diffs.len() > 100, "the rules ran in {} rounds", diffs.len());
    assert!(
        mean < 3.0 * gamma && mean > 0.2 * gamma,
        "mean Diff {mean:.1} for gamma {gamma}"
    );
    assert!(
        l.queue(c.cwnd) < 4.0 * gamma,
        "queue {:.0}",
        l.queue(c.cwnd)
    );
    assert!(
        c.log[399].1 > 0,
        "the delay window ran out: {:?}",
        c.log[399]
    );
}

/// Every loss of a flow on a BDP/2 buffer, against Compound's model:
/// cwnd = cwnd/2 and dwnd = max(swnd (1 - beta) - cwnd/2, 0) with
/// swnd = cwnd + dwnd, or, for a loss rand_keep judges random, the pipe
/// swnd baseRTT/RTT kept; each congestive loss tunes gamma by TUBE,
/// gamma + (0.75 Diff_reno - gamma) / 2 within [5, 30].
#[test]
fn ctcp_machine_loss_splits_the_window_per_beta() {
    let l = Link::wan(0.5);
    let mut c = Ctcp::new(&[("gamma_tune", "1"), ("probe_ms", "0")]);
    for _ in 0..600 {
        c.round(&l, false);
    }
    let beta = c.p.beta_q10 as f64 / 1024.0;
    let mut congestive = 0;
    for x in &c.loss_log {
        let (cl, swnd) = (x.cwnd_l.min(x.swnd) as f64, x.swnd as f64);
        let half = (cl / 2.0).floor().max(1.0);
        let keep = if x.ev & intf::CTCP_LOSS_RANDOM != 0 {
            x.pipe as f64
        } else {
            0.0
        };
        let want_dw = ((swnd * (1.0 - beta)).max(keep.min(swnd)) - half).max(0.0);
        assert_eq!(x.cwnd_l_after as f64, half, "{x:?}");
        assert!(
            (x.dwnd_after_q10 as f64 / 1024.0 - want_dw).abs() <= 1.0,
            "{x:?}: dwnd model {want_dw:.1}"
        );
        if x.ev & intf::CTCP_LOSS_RANDOM == 0 {
            congestive += 1;
            if let Some(d) = x.diff_reno_q10 {
                let t = (d as f64 / 1024.0 * 0.75).floor();
                let g = (x.gamma as f64 + ((t - x.gamma as f64) / 2.0).trunc()).clamp(5.0, 30.0);
                assert_eq!(x.gamma_after as f64, g, "{x:?}");
            }
        }
    }
    eprintln!(
        "ctcp on a BDP/2 buffer: {} losses, {congestive} congestive, gamma now {}",
        c.losses, c.ca.gamma
    );
    assert!(c.losses >= 3, "{} losses on a BDP/2 buffer", c.losses);
    assert!(congestive >= 1);
}

/// Outside Open the round's samples are not taken (the delay component
/// stops), an RTO drops the delay window, and Open again starts a fresh
/// round with the base RTT kept.
#[test]
fn ctcp_machine_state_and_rto() {
    let l = Link::wan(1.0);
    let mut c = Ctcp::new(&[("probe_ms", "0")]);
    c.ssth = 100;
    for _ in 0..30 {
        c.round(&l, false);
    }
    let base = c.ca.base_rtt_us;
    assert!(
        base != u32::MAX && c.ca.dwnd_q10 > 0,
        "dwnd {}",
        c.ca.dwnd_q10
    );
    unsafe { intf::ctcp_on_state(&mut c.ca, false, 0, 0) };
    let n = c.ca.cnt_rtt;
    unsafe { intf::ctcp_on_rtt(&mut c.ca, 50_000) };
    assert_eq!(c.ca.cnt_rtt, n, "a sample taken outside Open");
    unsafe { intf::ctcp_on_rto(&mut c.ca) };
    assert_eq!(c.ca.dwnd_q10, 0);
    unsafe { intf::ctcp_on_state(&mut c.ca, true, 7, 9) };
    assert_eq!(
        (c.ca.cnt_rtt, c.ca.beg_snd_una, c.ca.beg_snd_nxt),
        (0, 7, 9)
    );
    assert_eq!(c.ca.base_rtt_us, base);
    unsafe { intf::ctcp_on_rtt(&mut c.ca, 50_000) };
    assert_eq!(c.ca.cnt_rtt, 1);
}
