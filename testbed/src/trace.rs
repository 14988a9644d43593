//! Trace-driven bottlenecks: a drop-tail queue drained at the delivery
//! opportunities of a measured capacity trace, as mahimahi's `mm-link`
//! replays them (Netravali et al., USENIX ATC 2015; the traces of Winstein
//! et al., NSDI 2013).
//!
//! Format: one line per opportunity, its time in ms from the trace's start;
//! each opportunity may drain 1500 bytes from the queue; several lines with
//! one time are several opportunities in that millisecond.  An opportunity
//! that finds the queue empty is lost (no credit builds up); a packet larger
//! than what is left of an opportunity continues in the next one and leaves
//! with the opportunity that drains its last byte.  The trace repeats with a
//! period of its last timestamp.
//!
//! [`TraceQueue`] is the queue as a pure function of arrival times and
//! sizes: the delay line's reader asks it when each packet it reads leaves
//! the bottleneck (or that it is dropped), and releases it that much later
//! plus the propagation delay.  Departures are in arrival order, so the
//! line never reorders.

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;

/// Bytes one opportunity may drain.
pub const OPPORTUNITY_BYTES: u32 = 1500;

/// A parsed capacity trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Opportunity times, ms, non-decreasing, the last one > 0.
    opps_ms: Vec<u64>,
}

/// What is wrong with a trace file, with its line (from 1).
#[derive(Debug, PartialEq, Eq)]
pub enum TraceError {
    Empty,
    NotANumber { line: usize, text: String },
    Decreasing { line: usize, prev: u64, ms: u64 },
    ZeroPeriod,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Empty => write!(f, "no opportunities (an empty trace)"),
            TraceError::NotANumber { line, text } => {
                write!(
                    f,
                    "line {line}: `{text}` is not a whole number of milliseconds"
                )
            }
            TraceError::Decreasing { line, prev, ms } => write!(
                f,
                "line {line}: {ms} ms comes after {prev} ms (times must not decrease)"
            ),
            TraceError::ZeroPeriod => {
                write!(f, "its last timestamp is 0 ms: a trace needs a period > 0")
            }
        }
    }
}

impl std::error::Error for TraceError {}

impl Trace {
    /// Parse mahimahi text: one whole number of ms per line (blank lines
    /// are skipped).
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut opps_ms = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() {
                continue;
            }
            let ms: u64 = l.parse().map_err(|_| TraceError::NotANumber {
                line: i + 1,
                text: l.chars().take(40).collect(),
            })?;
            if let Some(&prev) = opps_ms.last() {
                if ms < prev {
                    return Err(TraceError::Decreasing {
                        line: i + 1,
                        prev,
                        ms,
                    });
                }
            }
            opps_ms.push(ms);
        }
        match opps_ms.last() {
            None => Err(TraceError::Empty),
            Some(0) => Err(TraceError::ZeroPeriod),
            Some(_) => Ok(Trace { opps_ms }),
        }
    }

    /// Read and parse a trace file; errors name the file.
    pub fn load(path: &Path) -> anyhow::Result<Trace> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("trace {}: {e}", path.display()))?;
        Trace::parse(&text).map_err(|e| anyhow::anyhow!("trace {}: {e}", path.display()))
    }

    /// `per_ms` opportunities every millisecond, for `period_ms`: a fixed
    /// rate of `per_ms` x 12 Mbit/s.
    pub fn fixed(per_ms: u32, period_ms: u64) -> Trace {
        Trace::steps(&[(period_ms, per_ms)])
    }

    /// Opportunities at `per_ms[i].1` a millisecond for `per_ms[i].0` ms,
    /// one stretch after the other (a capacity that steps).
    pub fn steps(per_ms: &[(u64, u32)]) -> Trace {
        let mut opps_ms = Vec::new();
        let mut t = 0;
        for &(dur, n) in per_ms {
            for _ in 0..dur {
                t += 1;
                opps_ms.extend(std::iter::repeat_n(t, n as usize));
            }
        }
        Trace { opps_ms }
    }

    /// A capacity given per millisecond, Mbit/s of 1500-byte opportunities:
    /// `rate_ms(t)` for t = 1..=`period_ms`.  Fractions carry over from one
    /// ms to the next, so a rate of 6 Mbit/s is one opportunity every 2 ms.
    /// The last millisecond always has an opportunity (its timestamp is
    /// the period, so a capacity of 0 there would shorten the trace).
    pub fn from_rate(period_ms: u64, mut rate_ms: impl FnMut(u64) -> f64) -> Trace {
        let per_mbit_ms = 1e6 / 8.0 / f64::from(OPPORTUNITY_BYTES) / 1e3;
        let mut opps_ms = Vec::new();
        let mut credit = 0.0;
        for t in 1..=period_ms.max(1) {
            credit += rate_ms(t).max(0.0) * per_mbit_ms;
            let n = credit.floor();
            credit -= n;
            opps_ms.extend(std::iter::repeat_n(t, n as usize));
        }
        if opps_ms.last() != Some(&period_ms.max(1)) {
            opps_ms.push(period_ms.max(1));
        }
        Trace { opps_ms }
    }

    /// A capacity that alternates between `rates_mbit.0` and `.1`, each
    /// stretch lasting a whole number of ms drawn uniformly from
    /// `every_ms` (seeded), over `period_ms`.
    pub fn alternating(
        rates_mbit: (f64, f64),
        every_ms: (u64, u64),
        seed: u64,
        period_ms: u64,
    ) -> Trace {
        let mut rng = SplitMix(seed);
        let (lo, hi) = (every_ms.0.max(1), every_ms.1.max(every_ms.0.max(1)));
        let mut ends = Vec::new();
        let mut t = 0;
        while t < period_ms {
            t += lo + rng.below(hi - lo + 1);
            ends.push(t);
        }
        let mut i = 0;
        Trace::from_rate(period_ms, |ms| {
            while ms > ends[i] {
                i += 1;
            }
            if i % 2 == 0 {
                rates_mbit.0
            } else {
                rates_mbit.1
            }
        })
    }

    /// A seeded random walk of the capacity with outages
    /// ([`Walk`]): every `step_ms` the rate is multiplied by e^(sigma z),
    /// z uniform in [-1, 1], pulled back towards the mean by a tenth of the
    /// log distance and kept within [min, max]; outages (rate 0) start at
    /// exponentially distributed gaps and last `outage_ms`.
    pub fn random_walk(w: &Walk) -> Trace {
        let mut rng = SplitMix(w.seed);
        let mut rate = w.mean_mbit;
        let mut next_step = w.step_ms.max(1);
        let mut next_outage = w.outage_every_ms.map(|m| 1 + rng.exp(m as f64) as u64);
        let mut outage_until = 0;
        Trace::from_rate(w.period_ms, |ms| {
            if ms >= next_step {
                let z = rng.unit() * 2.0 - 1.0;
                let pull = (w.mean_mbit / rate).ln() * 0.1;
                rate = (rate * (w.sigma * z + pull).exp()).clamp(w.min_mbit, w.max_mbit);
                next_step += w.step_ms.max(1);
            }
            if let Some(at) = next_outage {
                if ms >= at {
                    outage_until = ms + w.outage_ms;
                    let gap = w.outage_every_ms.unwrap_or(u64::MAX) as f64;
                    next_outage = Some(outage_until + 1 + rng.exp(gap) as u64);
                }
            }
            if ms < outage_until {
                0.0
            } else {
                rate
            }
        })
    }

    /// The period: the last timestamp, ms.
    pub fn period_ms(&self) -> u64 {
        *self.opps_ms.last().unwrap()
    }

    /// Opportunities per period.
    pub fn len(&self) -> usize {
        self.opps_ms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.opps_ms.is_empty()
    }

    /// Mean capacity, Mbit/s of IP bytes.
    pub fn mean_mbit(&self) -> f64 {
        self.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0 / (self.period_ms() as f64 * 1e3)
    }

    /// The capacity offered in trace time `[from_ms, to_ms)` (across
    /// repetitions), Mbit/s of IP bytes.
    pub fn mbit_between(&self, from_ms: u64, to_ms: u64) -> f64 {
        if to_ms <= from_ms {
            return 0.0;
        }
        let n = self.first_at_or_after(to_ms) - self.first_at_or_after(from_ms);
        n as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0 / ((to_ms - from_ms) as f64 * 1e3)
    }

    /// Time of opportunity `k` (counting across repetitions), ms.
    fn at_ms(&self, k: u64) -> u64 {
        let n = self.len() as u64;
        (k / n) * self.period_ms() + self.opps_ms[(k % n) as usize]
    }

    /// The first opportunity at `ms` or later.
    fn first_at_or_after(&self, ms: u64) -> u64 {
        let n = self.len() as u64;
        let p = self.period_ms();
        // Times within a period run 0..=p; the one at p belongs to this period.
        let (mut rep, mut rel) = (ms / p, ms % p);
        if rel == 0 && rep > 0 {
            rep -= 1;
            rel = p;
        }
        let i = self.opps_ms.partition_point(|&t| t < rel) as u64;
        rep * n + i
    }
}

/// The parameters of [`Trace::random_walk`].
#[derive(Clone, Debug, PartialEq)]
pub struct Walk {
    pub mean_mbit: f64,
    pub min_mbit: f64,
    pub max_mbit: f64,
    /// The rate changes every this many ms ...
    pub step_ms: u64,
    /// ... by a factor of up to e^sigma either way.
    pub sigma: f64,
    /// Mean gap between outages, ms (None: no outages) ...
    pub outage_every_ms: Option<u64>,
    /// ... and how long each lasts.
    pub outage_ms: u64,
    pub seed: u64,
    pub period_ms: u64,
}

/// splitmix64: small, seeded, the same sequence on every machine.
pub struct SplitMix(pub u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Exponential with mean `mean`.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

/// The bottleneck's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Packets(u32),
    Bytes(u64),
}

/// A drop-tail queue drained at a trace's opportunities.  Times are ns on
/// any clock; the trace's time `offset_ms` is at `start_ns`.
#[derive(Debug)]
pub struct TraceQueue {
    trace: std::sync::Arc<Trace>,
    /// The trace's time 0, ns (start_ns - offset).
    zero_ns: i128,
    limit: Limit,
    /// The next opportunity with bytes left, and how many.
    k: u64,
    left: u32,
    /// Departures (ns) and sizes of the packets in the queue.
    queued: VecDeque<(u64, u32)>,
    backlog: u64,
    pub drops: u64,
    pub packets: u64,
    /// Queueing delay of each accepted packet, 100-us buckets (the last
    /// is overflow).
    pub qdelay_hist: Vec<u64>,
}

/// Queueing-delay histogram range, 100-us buckets: 20 s.
const QDELAY_BUCKETS: usize = 200_000;

impl TraceQueue {
    pub fn new(
        trace: std::sync::Arc<Trace>,
        start_ns: u64,
        offset_ms: u64,
        limit: Limit,
    ) -> TraceQueue {
        let zero_ns = start_ns as i128 - offset_ms as i128 * 1_000_000;
        let k = trace.first_at_or_after(offset_ms);
        TraceQueue {
            trace,
            zero_ns,
            limit,
            k,
            left: OPPORTUNITY_BYTES,
            queued: VecDeque::new(),
            backlog: 0,
            drops: 0,
            packets: 0,
            qdelay_hist: vec![0; QDELAY_BUCKETS + 1],
        }
    }

    fn opp_ns(&self, k: u64) -> i128 {
        self.zero_ns + self.trace.at_ms(k) as i128 * 1_000_000
    }

    /// Opportunities of the trace at times in `[from_ns, to_ns)`.
    pub fn opportunities_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        let ms = |t: u64| -> u64 {
            let rel = t as i128 - self.zero_ns;
            if rel <= 0 {
                0
            } else {
                // the first whole ms at or after t
                ((rel + 999_999) / 1_000_000) as u64
            }
        };
        let a = self.trace.first_at_or_after(ms(from_ns));
        let b = self.trace.first_at_or_after(ms(to_ns));
        b.saturating_sub(a)
    }

    /// A packet of `len` bytes arrives at `now_ns`: when it leaves the
    /// bottleneck (ns, >= now_ns), or None when the buffer is full.
    pub fn enqueue(&mut self, now_ns: u64, len: u32) -> Option<u64> {
        while self.queued.front().is_some_and(|&(d, _)| d <= now_ns) {
            let (_, b) = self.queued.pop_front().unwrap();
            self.backlog -= u64::from(b);
        }
        let full = match self.limit {
            Limit::Packets(n) => self.queued.len() >= n as usize,
            Limit::Bytes(n) => self.backlog + u64::from(len) > n,
        };
        if full {
            self.drops += 1;
            return None;
        }
        // Opportunities before the arrival found the queue empty (every
        // queued packet leaves by the cursor's opportunity): they are lost.
        if self.opp_ns(self.k) < now_ns as i128 {
            let rel_ms = ((now_ns as i128 - self.zero_ns).max(0) + 999_999) / 1_000_000;
            let k = self.trace.first_at_or_after(rel_ms as u64);
            // the arrival may fall inside a millisecond after its whole-ms
            // opportunities: those are before it too
            let mut k = k.max(self.k + 1);
            while self.opp_ns(k) < now_ns as i128 {
                k += 1;
            }
            self.k = k;
            self.left = OPPORTUNITY_BYTES;
        }
        let mut need = len.max(1);
        loop {
            let take = need.min(self.left);
            need -= take;
            self.left -= take;
            if need == 0 {
                break;
            }
            self.k += 1;
            self.left = OPPORTUNITY_BYTES;
        }
        let dep = self.opp_ns(self.k).max(now_ns as i128) as u64;
        if self.left == 0 {
            self.k += 1;
            self.left = OPPORTUNITY_BYTES;
        }
        self.queued.push_back((dep, len));
        self.backlog += u64::from(len);
        self.packets += 1;
        let q = ((dep - now_ns) / 100_000) as usize;
        self.qdelay_hist[q.min(QDELAY_BUCKETS)] += 1;
        Some(dep)
    }

    /// Queueing delay quantile `q` (0..=1) of the accepted packets, ms.
    pub fn qdelay_ms(&self, q: f64) -> f64 {
        qdelay_quantile(&self.qdelay_hist, q)
    }
}

/// Quantile `q` of a 100-us histogram, ms (the bucket's upper edge).
pub fn qdelay_quantile(hist: &[u64], q: f64) -> f64 {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let want = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, n) in hist.iter().enumerate() {
        seen += n;
        if seen >= want {
            return (i + 1) as f64 * 0.1;
        }
    }
    hist.len() as f64 * 0.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const MS: u64 = 1_000_000;

    #[test]
    fn bad_traces_are_one_clear_error() {
        assert_eq!(Trace::parse(""), Err(TraceError::Empty));
        assert_eq!(Trace::parse("\n\n"), Err(TraceError::Empty));
        assert_eq!(Trace::parse("0\n0\n"), Err(TraceError::ZeroPeriod));
        assert_eq!(
            Trace::parse("1\n2\nx3\n"),
            Err(TraceError::NotANumber {
                line: 3,
                text: "x3".into()
            })
        );
        assert_eq!(
            Trace::parse("1\n5\n4\n"),
            Err(TraceError::Decreasing {
                line: 3,
                prev: 5,
                ms: 4
            })
        );
        assert_eq!(
            Trace::parse("-1\n").unwrap_err().to_string(),
            "line 1: `-1` is not a whole number of milliseconds"
        );
        let t = Trace::parse("1\n1\n3\n").unwrap();
        assert_eq!((t.len(), t.period_ms()), (3, 3));
        assert!((t.mean_mbit() - 12.0).abs() < 1e-9);
        assert!((Trace::fixed(1, 1000).mean_mbit() - 12.0).abs() < 1e-9);
        // "1 1 3": [0, 3) holds the two at 1 ms, [1, 7) those at 1, 1, 3,
        // 4, 4 and 6 ms.
        assert!((t.mbit_between(0, 3) - 2.0 * 12.0 / 3.0).abs() < 1e-9);
        assert!((t.mbit_between(1, 7) - 6.0 * 12.0 / 6.0).abs() < 1e-9);
    }

    /// The hand-worked sequence: trace "2 2 5" (period 5 ms: two
    /// opportunities at 2 ms, one at 5 ms, repeating), a queue of 3 packets.
    #[test]
    fn departures_follow_a_hand_worked_sequence() {
        let t = Arc::new(Trace::parse("2\n2\n5\n").unwrap());
        let mut q = TraceQueue::new(t, 0, 0, Limit::Packets(3));
        // t = 0: 1000 B uses 1000 of the first 2-ms opportunity.
        assert_eq!(q.enqueue(0, 1000), Some(2 * MS));
        // 1000 B more: 500 left there, spills into the second: leaves at 2.
        assert_eq!(q.enqueue(0, 1000), Some(2 * MS));
        // 1500 B: 1000 left in the second 2-ms one, the rest at 5 ms.
        assert_eq!(q.enqueue(MS, 1500), Some(5 * MS));
        // Three queued: the fourth is dropped.
        assert_eq!(q.enqueue(MS, 100), None);
        assert_eq!(q.drops, 1);
        // At 3 ms two have left; 1000 B continues the 5-ms opportunity
        // (500 B used of it): 1000 left -> leaves at 5 ms.
        assert_eq!(q.enqueue(3 * MS, 1000), Some(5 * MS));
        // Next repetition: 7, 7, 10 ms.  Arriving at 6 ms (the queue is
        // empty after 5 ms): the 5-ms remainder is lost; the first 7-ms one.
        assert_eq!(q.enqueue(6 * MS, 1500), Some(7 * MS));
        // Arriving at 8 ms: the second 7-ms opportunity found the queue
        // empty and is lost; the 10-ms one.
        assert_eq!(q.enqueue(8 * MS, 40), Some(10 * MS));
        // Small packets share what is left of it; the queue of 3 holds.
        assert_eq!(q.enqueue(9 * MS, 40), Some(10 * MS));
        assert_eq!(q.enqueue(9 * MS, 40), Some(10 * MS));
        assert_eq!(q.enqueue(9 * MS, 40), None, "the queue of 3 is full");
        // Many small packets (ACKs) share one opportunity: 37 x 40 B leave
        // at 10 ms, the 38th spills into the 12-ms one.
        let mut q = TraceQueue::new(
            Arc::new(Trace::parse("2\n2\n5\n").unwrap()),
            0,
            0,
            Limit::Bytes(1_000_000),
        );
        for _ in 0..37 {
            assert_eq!(q.enqueue(9 * MS, 40), Some(10 * MS));
        }
        assert_eq!(q.enqueue(9 * MS, 40), Some(12 * MS));
        // A packet arriving exactly at an opportunity uses it.
        assert_eq!(
            TraceQueue::new(
                Arc::new(Trace::parse("2\n2\n5\n").unwrap()),
                0,
                0,
                Limit::Packets(9)
            )
            .enqueue(5 * MS, 100),
            Some(5 * MS)
        );
    }

    #[test]
    fn an_offset_starts_inside_the_trace_and_the_clock_is_any() {
        let t = Arc::new(Trace::parse("2\n2\n5\n").unwrap());
        // Trace time 3 ms at clock 1000 ms: the next opportunity is at
        // trace time 5 ms, clock 1002 ms.
        let mut q = TraceQueue::new(t.clone(), 1000 * MS, 3, Limit::Packets(9));
        assert_eq!(q.enqueue(1000 * MS, 1500), Some(1002 * MS));
        assert_eq!(q.enqueue(1000 * MS, 1500), Some(1004 * MS));
        // Opportunities in [clock 1000, 1010) ms = trace [3, 13): 5, 7, 7, 10, 12, 12.
        assert_eq!(q.opportunities_between(1000 * MS, 1010 * MS), 6);
    }

    /// Opportunities per ms of `t` over [from, to) ms, as Mbit/s.
    fn mbit_between(t: &Trace, from: u64, to: u64) -> f64 {
        let n = t.opps_ms.iter().filter(|&&m| m > from && m <= to).count();
        n as f64 * 1500.0 * 8.0 / ((to - from) as f64 * 1e3)
    }

    #[test]
    fn synthetic_traces_hold_their_rates_and_seeds() {
        // 6 Mbit/s is one opportunity every 2 ms; 18 three every 2 ms.
        let t = Trace::from_rate(10, |_| 6.0);
        assert_eq!(t.opps_ms, [2, 4, 6, 8, 10]);
        let t = Trace::from_rate(4, |_| 18.0);
        assert_eq!(t.opps_ms, [1, 2, 2, 3, 4, 4]);
        // An outage at the end still ends the trace at its period.
        assert_eq!(Trace::from_rate(5, |_| 0.0).opps_ms, [5]);

        // Alternating 24 / 6 Mbit/s in stretches of 1-4 s: every stretch
        // carries its own rate, stretches are 1-4 s, the seed decides them.
        let a = Trace::alternating((24.0, 6.0), (1000, 4000), 7, 60_000);
        assert_eq!(a, Trace::alternating((24.0, 6.0), (1000, 4000), 7, 60_000));
        assert_ne!(a, Trace::alternating((24.0, 6.0), (1000, 4000), 8, 60_000));
        assert_eq!(a.period_ms(), 60_000);
        let mut rng = SplitMix(7);
        let (mut t0, mut i) = (0, 0);
        while t0 < 56_000 {
            let len = 1000 + rng.below(3001);
            assert!((1000..=4000).contains(&len));
            let want = if i % 2 == 0 { 24.0 } else { 6.0 };
            let got = mbit_between(&a, t0, (t0 + len).min(60_000));
            assert!(
                (got - want).abs() < 0.05 * want,
                "stretch {i}: {got} of {want}"
            );
            t0 += len;
            i += 1;
        }
        assert!(i >= 14, "{i} stretches in 56 s");

        // The walk stays within its bounds outside outages, has outages of
        // the given length, and its mean is near the given one.
        let w = Walk {
            mean_mbit: 12.0,
            min_mbit: 2.0,
            max_mbit: 30.0,
            step_ms: 100,
            sigma: 0.3,
            outage_every_ms: Some(10_000),
            outage_ms: 500,
            seed: 3,
            period_ms: 120_000,
        };
        let r = Trace::random_walk(&w);
        assert_eq!(r, Trace::random_walk(&w));
        assert_ne!(
            r,
            Trace::random_walk(&Walk {
                seed: 4,
                ..w.clone()
            })
        );
        let mut dark = 0;
        let mut ms = 0;
        while ms + 100 <= 120_000 {
            let got = mbit_between(&r, ms, ms + 100);
            if got == 0.0 {
                dark += 100;
            } else {
                // a 100-ms window holds whole opportunities: +-0.12 Mbit/s
                assert!(got <= 30.0 + 0.2, "{got} Mbit/s at {ms} ms");
            }
            ms += 100;
        }
        // ~12 outages of 500 ms in 120 s (a window may straddle an edge)
        assert!(
            (2_000..=14_000).contains(&dark),
            "{dark} ms without capacity"
        );
        let mean = r.mean_mbit();
        assert!((6.0..=20.0).contains(&mean), "mean {mean}");
    }

    #[test]
    fn a_fixed_trace_carries_its_rate() {
        // 1 opportunity a ms, 1500-byte packets offered at twice the rate
        // into 100 packets of buffer: one leaves a ms, the rest queue up to
        // the limit, and 100 ms of queue is 100 ms of delay.
        let mut q = TraceQueue::new(Arc::new(Trace::fixed(1, 1000)), 0, 0, Limit::Packets(100));
        let mut last = 0;
        for i in 0..4000u64 {
            if let Some(d) = q.enqueue(i * MS / 2, 1500) {
                assert!(d >= last);
                last = d;
            }
        }
        // Over 2000 ms: ~2000 departures and the 100 still queued accepted,
        // the rest dropped.
        assert!((2090..=2102).contains(&q.packets), "{}", q.packets);
        assert_eq!(q.packets + q.drops, 4000);
        assert!(q.qdelay_ms(0.99) > 95.0 && q.qdelay_ms(0.99) < 102.0);
    }
}
