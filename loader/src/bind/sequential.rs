//! An always-valid comparison of two arms that may be looked at after
//! every interval without inflating false alarms: the normal-mixture
//! sequential probability ratio test (mSPRT; Robbins 1970; Johari, Pekelis
//! and Walsh, "Always valid inference", 2017).
//!
//! Why this one: a fixed-horizon test looked at every 30 s of a 10-minute
//! rollout is twenty tests, and its false alarms add up; group-sequential
//! bounds need the number of looks in advance.  The mSPRT's likelihood
//! ratio, mixed over a normal prior on the effect, is a martingale under
//! the null, so by Ville's inequality it exceeds 1/alpha at *any* look with
//! probability at most alpha: an operator may watch it, stop early, or
//! extend the run.
//!
//! What it is applied to: the harm a guard like `retrans_ratio <= 1.5`
//! names.  Each interval i gives the candidate's and the control's
//! retransmitted fraction, a_i and b_i; the observation is
//! d_i = a_i - k * b_i (k = the guard's bound), so the null is "no more
//! harm than the guard allows" (mean of d <= 0).  The intervals, not the
//! segments, are the samples: losses come in bursts within a connection,
//! and per-segment binomial variances would understate the noise several
//! times over (the unit test below shows what that does to the false
//! alarms).  The variance is the sample variance of the d_i (plug-in, as
//! Johari et al. do), so the test waits for `min_looks` intervals; the
//! mixture's scale tau is one look's standard deviation (the unit-
//! information prior), so Lambda_n = exp(z^2 n / (2 (n + 1))) / sqrt(n + 1)
//! with z = mean * sqrt(n) / sd: the evidence in standard deviations,
//! whatever the retransmission rates.  (A tau tied to the rates, k *
//! mean(b) / 2, left a canary retransmitting 60 % of its segments against
//! the control's 0.1 % at Lambda 3 after 20 looks: a prior that small
//! has no weight on an effect that large.)

/// The decision after a look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Not enough evidence either way yet.
    Continue,
    /// The candidate harms beyond the bound (Lambda >= 1/alpha, d > 0).
    Harm,
}

/// One comparison: the bound k, the false-alarm level alpha.
#[derive(Debug, Clone)]
pub struct Msprt {
    pub bound: f64,
    pub alpha: f64,
    pub min_looks: usize,
    d: Vec<f64>,
}

impl Msprt {
    pub fn new(bound: f64, alpha: f64) -> Msprt {
        Msprt {
            bound,
            alpha,
            min_looks: 5,
            d: Vec::new(),
        }
    }

    /// One interval: the candidate's and the control's retransmitted
    /// fraction of the segments they sent in it.
    pub fn look(&mut self, candidate: f64, control: f64) -> Verdict {
        self.d.push(candidate - self.bound * control);
        self.verdict()
    }

    /// The mixture likelihood ratio Lambda_n so far (1 before `min_looks`;
    /// at most 1e12, where the evidence is beyond doubt and a float would
    /// soon overflow).
    pub fn lambda(&self) -> f64 {
        let n = self.d.len();
        if n < self.min_looks.max(2) {
            return 1.0;
        }
        let nf = n as f64;
        let mean = self.d.iter().sum::<f64>() / nf;
        let var = self.d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (nf - 1.0);
        // sigma^2 of one look, floored: identical looks (in practice no
        // retransmission on either side: mean 0, never harm) divide by it
        let s2 = var.max(1e-12);
        // the mixture's scale: one look's sigma (unit information), so the
        // test reads the effect in standard deviations whatever the
        // retransmission rates are
        let tau2 = s2;
        // Lambda_n = sqrt(s2 / (s2 + n tau2)) exp(n^2 tau2 mean^2 / (2 s2 (s2 + n tau2)))
        let v = s2 + nf * tau2;
        ((s2 / v).ln() / 2.0 + nf * nf * tau2 * mean * mean / (2.0 * s2 * v))
            .min(12.0 * std::f64::consts::LN_10)
            .exp()
    }

    pub fn verdict(&self) -> Verdict {
        let n = self.d.len();
        let mean = if n > 0 {
            self.d.iter().sum::<f64>() / n as f64
        } else {
            0.0
        };
        if mean > 0.0 && self.lambda() >= 1.0 / self.alpha {
            Verdict::Harm
        } else {
            Verdict::Continue
        }
    }

    pub fn looks(&self) -> usize {
        self.d.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so the simulation is
    /// the same every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Retransmitted fraction of one interval: `conns` connections of
        /// `segs` segments each, each connection's loss rate drawn around
        /// `p` (losses come per connection: overdispersion).
        fn interval(&mut self, p: f64, conns: u32, segs: u32) -> f64 {
            let mut r = 0u64;
            for _ in 0..conns {
                let pc = p * 2.0 * self.next();
                for _ in 0..segs {
                    if self.next() < pc {
                        r += 1;
                    }
                }
            }
            r as f64 / (conns * segs) as f64
        }
    }

    fn run(rng: &mut Rng, pa: f64, pb: f64, looks: usize) -> Option<usize> {
        let mut t = Msprt::new(1.5, 0.05);
        for i in 0..looks {
            let (a, b) = (rng.interval(pa, 10, 100), rng.interval(pb, 10, 100));
            if t.look(a, b) == Verdict::Harm {
                return Some(i + 1);
            }
        }
        None
    }

    /// Watched at every look of 400 simulated rollouts of 40 looks, it cries
    /// harm in at most alpha of them (plus three standard errors of the
    /// simulation) where the candidate sits exactly at the bound (1.5x the
    /// control's retransmissions: the null's worst case), and far less with
    /// identical arms; a candidate with 3x the control's is found in most
    /// runs, early.
    #[test]
    fn watched_at_every_look_it_keeps_its_false_alarm_rate_and_finds_harm() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let n = 400;
        let se = (0.05f64 * 0.95 / n as f64).sqrt();
        let edge = (0..n)
            .filter(|_| run(&mut rng, 0.03, 0.02, 40).is_some())
            .count();
        assert!(
            (edge as f64 / n as f64) <= 0.05 + 3.0 * se,
            "{edge} false alarms in {n} at the bound"
        );
        let alarms = (0..n)
            .filter(|_| run(&mut rng, 0.02, 0.02, 40).is_some())
            .count();
        assert!(
            alarms <= edge,
            "{alarms} false alarms in {n} with identical arms"
        );
        let found: Vec<usize> = (0..100)
            .filter_map(|_| run(&mut rng, 0.06, 0.02, 40))
            .collect();
        assert!(found.len() >= 90, "harm found in {} of 100", found.len());
        let mut f = found.clone();
        f.sort();
        eprintln!(
            "at the bound: {edge} false alarms in {n} rollouts of 40 looks; identical \
             arms: {alarms}; 3x harm: found in {} of 100, median look {}",
            found.len(),
            f[f.len() / 2]
        );
        assert!(f[f.len() / 2] <= 15, "median look {}", f[f.len() / 2]);
    }

    /// Nothing before `min_looks`; a candidate better than the control is
    /// never harm however long it is watched.
    #[test]
    fn it_waits_for_its_looks_and_never_blames_a_better_candidate() {
        let mut t = Msprt::new(1.5, 0.05);
        for _ in 0..4 {
            assert_eq!(t.look(0.5, 0.01), Verdict::Continue);
        }
        assert_eq!(t.look(0.5, 0.01), Verdict::Harm);
        let mut rng = Rng(7);
        assert!((0..50).all(|_| run(&mut rng, 0.01, 0.02, 60).is_none()));
    }
}
