//! A short-flow mix: Poisson arrivals of fixed-size flows whose sizes
//! follow a measured distribution, and their flow completion times as
//! slowdowns per size bin.
//!
//! The sizes are the web-search workload of DCTCP (Alizadeh et al.,
//! SIGCOMM 2010), as the CDF pFabric (Alizadeh et al., SIGCOMM 2013)
//! published for it: sizes in 1460-byte packets, linear between the
//! points, mean 1141 packets (1.67 MB).  At a load `rho` of a link of `C`
//! bit/s the flows arrive at `rho * C / 8 / mean` per second.

use serde::{Deserialize, Serialize};

/// `[[mixes]] arrivals = { ... }`: fixed-size flows of `cc` arriving as a
/// Poisson process from `from_s` until `until_s` (default: the run's end).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Arrivals {
    #[serde(default = "under_test")]
    pub cc: String,
    /// Offered load as a fraction of the link's (mean) capacity.
    pub load: f64,
    /// The size distribution: "web_search".
    pub sizes: String,
    pub seed: u64,
    #[serde(default)]
    pub from_s: f64,
    #[serde(default)]
    pub until_s: Option<f64>,
}

fn under_test() -> String {
    "$cc".into()
}

/// (size in 1460-byte packets, cumulative probability).
const WEB_SEARCH: [(f64, f64); 12] = [
    (6.0, 0.0),
    (6.0, 0.15),
    (13.0, 0.2),
    (19.0, 0.3),
    (33.0, 0.4),
    (53.0, 0.53),
    (133.0, 0.6),
    (667.0, 0.7),
    (1333.0, 0.8),
    (3333.0, 0.9),
    (6667.0, 0.97),
    (20000.0, 1.0),
];
const PACKET: f64 = 1460.0;

/// The size in bytes at cumulative probability `u` in [0, 1].
pub fn web_search_bytes(u: f64) -> u64 {
    let u = u.clamp(0.0, 1.0);
    let i = WEB_SEARCH
        .windows(2)
        .position(|w| u <= w[1].1)
        .unwrap_or(WEB_SEARCH.len() - 2);
    let ((s0, p0), (s1, p1)) = (WEB_SEARCH[i], WEB_SEARCH[i + 1]);
    let s = if p1 > p0 {
        s0 + (s1 - s0) * (u - p0) / (p1 - p0)
    } else {
        s1
    };
    (s * PACKET).round() as u64
}

/// The distribution's mean size, bytes (the integral of the piecewise
/// linear inverse CDF).
pub fn web_search_mean_bytes() -> f64 {
    WEB_SEARCH
        .windows(2)
        .map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0)
        .sum::<f64>()
        * PACKET
}

impl Arrivals {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.sizes == "web_search",
            "arrivals: unknown size distribution {:?} (known: web_search)",
            self.sizes
        );
        anyhow::ensure!(
            self.load > 0.0 && self.load < 1.0,
            "arrivals: load {} is not in (0, 1)",
            self.load
        );
        anyhow::ensure!(
            self.from_s >= 0.0 && self.until_s.is_none_or(|u| u > self.from_s),
            "arrivals: from_s {} must be >= 0 and before until_s",
            self.from_s
        );
        Ok(())
    }

    /// The flows of a run on a link of `rate_mbit` lasting `duration_s`,
    /// as (arrival time s, size bytes): the same seed gives every
    /// controller the same flows at the same times.
    pub fn flows(&self, rate_mbit: f64, duration_s: f64) -> Vec<(f64, u64)> {
        let per_s = self.load * rate_mbit * 1e6 / 8.0 / web_search_mean_bytes();
        let until = self.until_s.unwrap_or(duration_s).min(duration_s);
        let mut rng = ccload_testbed::trace::SplitMix(self.seed);
        let mut out = Vec::new();
        let mut t = self.from_s + rng.exp(1.0 / per_s);
        while t < until {
            out.push((t, web_search_bytes(rng.unit()).max(1)));
            t += rng.exp(1.0 / per_s);
        }
        out
    }
}

/// The size bins slowdowns are reported in, bytes: [lo, hi).
pub const BINS: [(&str, u64, u64); 3] = [
    ("small", 0, 100_000),
    ("medium", 100_000, 1_000_000),
    ("large", 1_000_000, u64::MAX),
];

/// Flow completion times of one size bin: slowdown quantiles, FCT over
/// the ideal (see [`ideal_fct_s`]).  A flow still running at the end
/// counts with the time it had (a lower bound of its slowdown).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FctBin {
    pub bin: String,
    pub flows: u32,
    pub unfinished: u32,
    pub p50: f64,
    pub p99: f64,
}

impl FctBin {
    /// The slowdown at quantile `q` (0.5 or 0.99, what
    /// [`slowdown_metric`] names); None for any other.
    pub fn at(&self, q: f64) -> Option<f64> {
        is_p99(q).map(|p99| if p99 { self.p99 } else { self.p50 })
    }
}

/// Whether the quantile `q` is the p99 (0.99) or the p50 (0.5) a bin
/// reports; None for any other.
fn is_p99(q: f64) -> Option<bool> {
    if q == 0.99 {
        Some(true)
    } else if q == 0.5 {
        Some(false)
    } else {
        None
    }
}

/// The completion time of a flow of `bytes` alone on a link of
/// `payload_mbit` (its TCP payload rate) and `rtt_ms`: the handshake's
/// round trip, the last byte's one-way trip, the bytes at the rate.
pub fn ideal_fct_s(bytes: u64, payload_mbit: f64, rtt_ms: f64) -> f64 {
    1.5 * rtt_ms / 1e3 + bytes as f64 * 8.0 / (payload_mbit * 1e6)
}

/// Slowdowns per bin from (bytes, slowdown, finished) of each arrived
/// fixed-size flow; bins without flows are left out.
pub fn fct_bins(flows: &[(u64, f64, bool)]) -> Vec<FctBin> {
    BINS.iter()
        .filter_map(|&(name, lo, hi)| {
            let mut s: Vec<f64> = flows
                .iter()
                .filter(|f| (lo..hi).contains(&f.0))
                .map(|f| f.1)
                .collect();
            if s.is_empty() {
                return None;
            }
            let unfinished = flows
                .iter()
                .filter(|f| (lo..hi).contains(&f.0) && !f.2)
                .count() as u32;
            s.sort_by(f64::total_cmp);
            Some(FctBin {
                bin: name.into(),
                flows: s.len() as u32,
                unfinished,
                p50: rank(&s, 0.5),
                p99: rank(&s, 0.99),
            })
        })
        .collect()
}

/// The nearest-rank quantile of sorted values: with few flows p99 is the
/// largest, never an interpolation past it.
fn rank(sorted: &[f64], q: f64) -> f64 {
    let k = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[k - 1]
}

/// The metric name of a slowdown comparison in size bin `bin` at quantile
/// `q`; None for a bin or a quantile the summary does not keep.
pub fn slowdown_metric(bin: &str, q: f64) -> Option<&'static str> {
    Some(match (bin, is_p99(q)?) {
        ("small", false) => "slowdown_p50_small",
        ("small", true) => "slowdown_p99_small",
        ("medium", false) => "slowdown_p50_medium",
        ("medium", true) => "slowdown_p99_medium",
        ("large", false) => "slowdown_p50_large",
        ("large", true) => "slowdown_p99_large",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_search_sizes_follow_the_published_cdf() {
        // the points themselves
        assert_eq!(web_search_bytes(0.0), 6 * 1460);
        assert_eq!(web_search_bytes(0.15), 6 * 1460);
        assert_eq!(web_search_bytes(0.53), 53 * 1460);
        assert_eq!(web_search_bytes(1.0), 20000 * 1460);
        // halfway between 0.7 (667) and 0.8 (1333): 1000 packets
        assert_eq!(web_search_bytes(0.75), 1000 * 1460);
        // the mean of the piecewise-linear sizes, worked by hand: 1140.97
        // packets
        let m = web_search_mean_bytes() / 1460.0;
        assert!((m - 1140.97).abs() < 0.01, "{m}");
        // and what 200,000 draws average to
        let mut rng = ccload_testbed::trace::SplitMix(5);
        let n = 200_000;
        let avg = (0..n)
            .map(|_| web_search_bytes(rng.unit()) as f64)
            .sum::<f64>()
            / n as f64;
        assert!((avg / web_search_mean_bytes() - 1.0).abs() < 0.02, "{avg}");
        // 55 % of flows are under 100 KB (68 packets lies past 0.53)
        let small = (0..n)
            .filter(|_| web_search_bytes(rng.unit()) < 100_000)
            .count() as f64
            / n as f64;
        assert!((0.53..0.57).contains(&small), "{small}");
    }

    #[test]
    fn arrivals_offer_their_load_and_repeat_with_their_seed() {
        let a = Arrivals {
            cc: "$cc".into(),
            load: 0.5,
            sizes: "web_search".into(),
            seed: 1,
            from_s: 2.0,
            until_s: None,
        };
        a.validate().unwrap();
        let f = a.flows(100.0, 2000.0);
        assert_eq!(f, a.flows(100.0, 2000.0));
        assert!(f.iter().all(|x| x.0 >= 2.0 && x.0 < 2000.0));
        assert!(f.windows(2).all(|w| w[0].0 < w[1].0));
        // 0.5 x 100 Mbit/s over 1998 s, in bytes, within 10 % (a sum of
        // heavy-tailed sizes)
        let bytes: u64 = f.iter().map(|x| x.1).sum();
        let want = 0.5 * 100e6 / 8.0 * 1998.0;
        assert!((bytes as f64 / want - 1.0).abs() < 0.1, "{bytes} vs {want}");
        let other = Arrivals {
            seed: 2,
            ..a.clone()
        };
        assert_ne!(f[0].0, other.flows(100.0, 2000.0)[0].0);
        for bad in [
            Arrivals {
                load: 1.0,
                ..a.clone()
            },
            Arrivals {
                sizes: "hadoop".into(),
                ..a.clone()
            },
            Arrivals {
                until_s: Some(1.0),
                ..a.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn slowdowns_are_binned_by_size_with_nearest_rank_quantiles() {
        assert!((ideal_fct_s(1_000_000, 8.0, 40.0) - (0.06 + 1.0)).abs() < 1e-12);
        let flows = [
            (10_000, 3.0, true),
            (20_000, 1.0, true),
            (99_999, 2.0, false),
            (100_000, 5.0, true),
            (5_000_000, 1.5, true),
        ];
        let b = fct_bins(&flows);
        assert_eq!(b.len(), 3);
        assert_eq!(
            b[0],
            FctBin {
                bin: "small".into(),
                flows: 3,
                unfinished: 1,
                p50: 2.0,
                p99: 3.0
            }
        );
        assert_eq!((b[1].flows, b[1].p50, b[1].p99), (1, 5.0, 5.0));
        assert_eq!((b[2].bin.as_str(), b[2].p50), ("large", 1.5));
        assert!(fct_bins(&[]).is_empty());
    }
}
