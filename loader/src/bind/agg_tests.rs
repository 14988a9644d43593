//! The aggregate core (bpf/core/agg_core.h), run on the host: bucket
//! arithmetic against an f64 model, sampling, counter deltas and the
//! Recovery state machine; and crate::bind::agg's quantiles on known data.

use proptest::prelude::*;

use crate::bind::agg::{self, Agg, BUCKETS};
use crate::intf;

fn bucket(v: u64) -> usize {
    // SAFETY: pure function of an integer.
    unsafe { intf::ccl_hist_bucket(v) as usize }
}

#[test]
fn small_values_have_exact_buckets_and_buckets_are_contiguous() {
    for v in 0..16u64 {
        assert_eq!(bucket(v), v as usize);
        assert_eq!(agg::bucket_lower(v as usize), v);
    }
    for b in 1..BUCKETS {
        assert!(
            agg::bucket_lower(b) > agg::bucket_lower(b - 1),
            "bucket {b}"
        );
        // The last value of bucket b-1 is one below the first of b.
        assert_eq!(bucket(agg::bucket_lower(b) - 1), b - 1);
        assert_eq!(bucket(agg::bucket_lower(b)), b);
    }
}

proptest! {
    /// Model: a value v >= 8 lies in [2^e, 2^(e+1)) with e = floor(log2 v);
    /// its bucket spans 2^(e-3), so its width is at most 1/8 of its lower
    /// bound, and v is inside it.
    #[test]
    fn bucket_contains_value_and_is_at_most_an_eighth_wide(v in 0u64..(1u64 << 34)) {
        let b = bucket(v);
        prop_assert!(b < BUCKETS);
        let lo = agg::bucket_lower(b);
        prop_assert!(lo <= v);
        if b + 1 < BUCKETS {
            let hi = agg::bucket_lower(b + 1);
            prop_assert!(v < hi);
            if v >= 8 {
                let e = (v as f64).log2().floor();
                prop_assert_eq!((hi - lo) as f64, 2f64.powf(e - 3.0));
                prop_assert!(((hi - lo) as f64) / (lo as f64) <= 0.125 + 1e-12);
            }
        }
    }

    #[test]
    fn huge_values_land_in_the_last_bucket(v in (1u64 << 34)..u64::MAX) {
        prop_assert_eq!(bucket(v), BUCKETS - 1);
    }

    /// The quantile of samples drawn into the histogram is within one
    /// bucket width (12.5 %) of the exact sample quantile.
    #[test]
    fn quantiles_are_within_a_bucket(mut xs in proptest::collection::vec(1u64..10_000_000, 1..400),
                                     q in 0.01f64..0.99) {
        let mut h = [0u64; BUCKETS];
        for &x in &xs {
            h[bucket(x)] += 1;
        }
        xs.sort_unstable();
        let exact = xs[((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1] as f64;
        let got = agg::quantile(&h, q).unwrap();
        prop_assert!((got - exact).abs() <= exact * 0.125 + 1.0,
                     "q {} exact {} got {}", q, exact, got);
    }
}

fn input(now_ms: u64, srtt_us: u32) -> intf::ccl_agg_in {
    intf::ccl_agg_in {
        now_ns: now_ms * 1_000_000,
        srtt_us,
        cwnd: 10,
        mss: 1448,
        ..Default::default()
    }
}

fn fresh() -> (intf::ccl_agg, intf::ccl_agg_sk) {
    (intf::ccl_agg::default(), intf::ccl_agg_sk::default())
}

fn c(a: &intf::ccl_agg, name: &str) -> u64 {
    a.c[agg::counters().iter().position(|d| d.name == name).unwrap()]
}

#[test]
fn one_histogram_sample_per_srtt_and_exact_counter_sums() {
    let (mut a, mut s) = fresh();
    let mut i = input(0, 10_000);
    // SAFETY (all calls below): pure functions on local structs.
    unsafe { intf::ccl_agg_start(&mut a, &mut s, &i, intf::CCL_CA_OPEN) };
    assert_eq!(c(&a, "flows_started"), 1);
    // 100 ms of ACKs every 1 ms with a 10 ms srtt: 10 samples, not 100.
    let mut sampled = 0;
    for ms in 1..=100u64 {
        i = input(ms, 10_000);
        i.segs_out = ms as u32 * 10;
        i.total_retrans = ms as u32 / 10;
        i.bytes_acked = ms * 14480;
        i.rate_delivered = 100;
        i.rate_interval_us = 10_000;
        sampled += unsafe { intf::ccl_agg_tick(&mut a, &mut s, &i) };
    }
    assert_eq!(sampled, 10);
    assert_eq!(c(&a, "samples"), 10);
    // The counters are flushed at samples; the end flushes the rest.
    unsafe { intf::ccl_agg_end(&mut a, &mut s, &i) };
    assert_eq!(c(&a, "segs_out"), 1000);
    assert_eq!(c(&a, "retrans_segs"), 10);
    assert_eq!(c(&a, "bytes_acked"), 100 * 14480);
    assert_eq!(c(&a, "flows_ended"), 1);
    // 100 segments of 1448 bytes in 10 ms = 115.84 Mbit/s = 115840 kbit/s.
    assert_eq!(c(&a, "rate_sum_kbps"), 10 * 115_840);
    let g = Agg {
        c: a.c,
        hist: a.hist,
    };
    let p50 = g.quantile("srtt", 0.5).unwrap();
    assert!((p50 - 10_000.0).abs() <= 10_000.0 * 0.125, "{p50}");
    // A second end (close after release) counts nothing twice.
    unsafe { intf::ccl_agg_end(&mut a, &mut s, &i) };
    assert_eq!(c(&a, "flows_ended"), 1);
}

#[test]
fn counter_deltas_survive_a_u32_wrap() {
    let (mut a, mut s) = fresh();
    let mut i = input(0, 1000);
    i.segs_out = u32::MAX - 5;
    unsafe { intf::ccl_agg_start(&mut a, &mut s, &i, 0) };
    i.segs_out = 4; // wrapped: 10 segments later
    unsafe { intf::ccl_agg_flush(&mut a, &mut s, &i) };
    assert_eq!(c(&a, "segs_out"), 10);
}

#[test]
fn recovery_episodes_loss_events_rtos_and_time() {
    let (mut a, mut s) = fresh();
    let i = input(0, 1000);
    let ms = |m: u64| m * 1_000_000;
    unsafe {
        intf::ccl_agg_start(&mut a, &mut s, &i, intf::CCL_CA_OPEN);
        intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_DISORDER, ms(5), 1);
        intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_RECOVERY, ms(10), 1);
        intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_OPEN, ms(30), 1);
    }
    assert_eq!(c(&a, "loss_events"), 1);
    assert_eq!(c(&a, "recovery_ns"), ms(20));
    // An RTO during Recovery: still one episode, one RTO; a backed-off
    // second RTO re-enters Loss: two RTOs; time runs until Open.
    unsafe {
        intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_RECOVERY, ms(100), 1);
        intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_LOSS, ms(150), 1);
        intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_LOSS, ms(450), 1);
        intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_OPEN, ms(500), 1);
    }
    assert_eq!(c(&a, "loss_events"), 2);
    assert_eq!(c(&a, "rtos"), 2);
    assert_eq!(c(&a, "recovery_ns"), ms(20) + ms(400));
    // The cgroup program counts RTOs itself (count_rto = 0).
    unsafe { intf::ccl_agg_state(&mut a, &mut s, intf::CCL_CA_LOSS, ms(600), 0) };
    assert_eq!(c(&a, "rtos"), 2);
    // A flow that ends in Loss has its Recovery time closed at the end.
    let mut end = input(700, 1000);
    end.now_ns = ms(700);
    unsafe { intf::ccl_agg_end(&mut a, &mut s, &end) };
    assert_eq!(c(&a, "recovery_ns"), ms(20) + ms(400) + ms(100));
}

#[test]
fn trace_ms_limits_records_per_flow() {
    let mut s = intf::ccl_agg_sk::default();
    let due = |s: &mut intf::ccl_agg_sk, ms: u64, every: u32| unsafe {
        intf::ccl_trace_ms_due(s, ms * 1_000_000, every) != 0
    };
    assert!(due(&mut s, 1, 0) && due(&mut s, 1, 0));
    let kept: Vec<u64> = (1..=100).filter(|&ms| due(&mut s, ms, 10)).collect();
    assert_eq!(kept, vec![1, 11, 21, 31, 41, 51, 61, 71, 81, 91]);
}

#[test]
fn since_gives_the_interval_and_summary_derives_ratios() {
    let mut before = Agg::default();
    let mut after = Agg::default();
    let i = |n: &str| agg::counters().iter().position(|d| d.name == n).unwrap();
    before.c[i("segs_out")] = 1000;
    before.c[i("retrans_segs")] = 10;
    after.c[i("segs_out")] = 3000;
    after.c[i("retrans_segs")] = 30;
    after.hist[0][bucket(20_000)] = 5;
    let d = after.since(&before);
    assert_eq!(d.get("segs_out"), 2000);
    assert_eq!(d.retrans_ratio(), Some(0.01));
    let s = d.summary();
    assert!(s.srtt_ms_p50.unwrap() > 19.0 && s.srtt_ms_p50.unwrap() < 23.0);
    assert_eq!(Agg::default().summary().srtt_ms_p95, None);
    assert_eq!(Agg::default().retrans_ratio(), None);
}

#[test]
fn descriptor_tables_match_the_enums() {
    assert_eq!(agg::counters().len(), intf::CCL_AGG_NR_COUNTERS as usize);
    assert_eq!(agg::hists().len(), intf::CCL_AGG_NR_HISTS as usize);
    assert_eq!(agg::hists()[intf::CCL_HIST_srtt as usize].name, "srtt");
    assert_eq!(
        agg::counters()[intf::CCL_AGG_retrans_segs as usize].name,
        "retrans_segs"
    );
    for d in agg::counters().iter().chain(agg::hists()) {
        assert!(!d.help.is_empty(), "{}", d.name);
    }
}

/// A short flow's completion time, start to end, goes into `fct` (and
/// its sum); a flow past 1 MiB either way does not.
#[test]
fn short_flows_add_their_completion_time() {
    let (mut a, _) = fresh();
    let run = |a: &mut intf::ccl_agg, acked: u64, received: u64, ms: u64| {
        let mut s = intf::ccl_agg_sk::default();
        let mut i = input(1_000, 10_000);
        // SAFETY: pure functions on local structs.
        unsafe { intf::ccl_agg_start(a, &mut s, &i, intf::CCL_CA_OPEN) };
        i.now_ns += ms * 1_000_000;
        i.bytes_acked = acked;
        i.bytes_received = received;
        unsafe { intf::ccl_agg_end(a, &mut s, &i) };
    };
    run(&mut a, 100_000, 300, 5);
    run(&mut a, 1 << 20, 1 << 20, 40);
    run(&mut a, (1 << 20) + 1, 0, 7);
    run(&mut a, 0, (1 << 20) + 1, 9);
    let g = Agg {
        c: a.c,
        hist: a.hist,
    };
    assert_eq!(g.hist("fct").iter().sum::<u64>(), 2);
    assert_eq!(c(&a, "fct_sum_us"), 45_000);
    assert_eq!(c(&a, "flows_ended"), 4);
    let sm = g.summary();
    assert_eq!(sm.short_flows, 2);
    let p50 = sm.fct_ms_p50.unwrap();
    assert!((4.5..=5.7).contains(&p50), "{p50}");
}
