//! The daemon's metrics: what it counts about itself and the telemetry
//! records it fans out, and the Prometheus text it renders on `/metrics`.
//!
//! Rendering takes the socket counts as an argument: they come from a
//! netlink dump made off the request path ([`super::SockCache`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::algos::Algo;
use crate::config::Desired;
use crate::intf;
use crate::telemetry::Event;

/// Bucket bounds of the RTT histogram, seconds (Prometheus base unit).
const SRTT_BUCKETS_S: [f64; 10] = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0];
const CWND_BUCKETS: [f64; 10] = [
    4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

/// A cumulative histogram over fixed bounds.
#[derive(Default, Clone)]
pub(super) struct Hist {
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

/// Everything the daemon counts. Lives in one `RefCell` on the daemon's
/// single thread: no mutex to poison, and a panic while rendering ends
/// that request's task only.
#[derive(Default)]
pub(super) struct Metrics {
    records: BTreeMap<(Algo, u32), u64>,
    rtt: BTreeMap<(Algo, u32), Hist>,
    cwnd: BTreeMap<(Algo, u32), Hist>,
    last_seen: HashMap<(Algo, u32, u64), Instant>,
    pub applies: u64,
    pub apply_errors: u64,
    pub clients: u64,
    pub fanout_dropped: u64,
    pub http_requests: u64,
    pub http_refused: u64,
    pub http_timeouts: u64,
    pub accept_errors: u64,
    /// Attached algorithms whose ring buffer the daemon could not open
    /// (another consumer holds it); retried every few seconds.
    pub rings_missing: Vec<Algo>,
}

impl Metrics {
    pub fn record(&mut self, ev: &Event) {
        let key = (ev.algo, ev.hdr.profile % intf::CCL_NR_PROFILES);
        *self.records.entry(key).or_default() += 1;
        self.rtt
            .entry(key)
            .or_default()
            .observe(&SRTT_BUCKETS_S, ev.hdr.srtt_us as f64 / 1e6);
        self.cwnd
            .entry(key)
            .or_default()
            .observe(&CWND_BUCKETS, ev.hdr.snd_cwnd as f64);
        self.last_seen
            .insert((key.0, key.1, ev.hdr.cookie), Instant::now());
    }
}

/// A label value in the exposition format: backslash, double quote and
/// newline escaped (profile names come from an operator's config).
pub(super) fn escape_label(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

fn profile_label(d: &Desired, algo: Algo, id: u32) -> String {
    escape_label(&match d.profile_names.get(&(algo, id)) {
        Some(n) => n.clone(),
        None if id == 0 => "default".into(),
        None => id.to_string(),
    })
}

fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The kernel counters of each attached controller, by stats index.
pub(super) type KernelStats = Vec<(Algo, Vec<u64>)>;

/// The text for one scrape.
pub(super) fn render(
    m: &mut Metrics,
    d: &Desired,
    stats: &KernelStats,
    sockets: &BTreeMap<String, u64>,
) -> String {
    let mut o = String::new();
    family(
        &mut o,
        "ccload_up",
        "gauge",
        "The ccload daemon is running.",
    );
    let _ = writeln!(o, "ccload_up 1");
    for (name, help, v) in [
        (
            "ccload_config_applies_total",
            "Successful config applications.",
            m.applies,
        ),
        (
            "ccload_config_errors_total",
            "Rejected config reloads.",
            m.apply_errors,
        ),
        (
            "ccload_fanout_dropped_total",
            "Records a slow client did not get.",
            m.fanout_dropped,
        ),
        (
            "ccload_http_requests_total",
            "HTTP requests answered.",
            m.http_requests,
        ),
        (
            "ccload_http_refused_total",
            "HTTP connections closed unanswered because the connection cap was reached.",
            m.http_refused,
        ),
        (
            "ccload_http_timeouts_total",
            "HTTP connections closed at the request deadline.",
            m.http_timeouts,
        ),
        (
            "ccload_accept_errors_total",
            "Failed accept() calls on the daemon's listeners (retried with backoff).",
            m.accept_errors,
        ),
    ] {
        family(&mut o, name, "counter", help);
        let _ = writeln!(o, "{name} {v}");
    }
    family(
        &mut o,
        "ccload_watch_clients",
        "gauge",
        "Connected telemetry clients.",
    );
    let _ = writeln!(o, "ccload_watch_clients {}", m.clients);
    family(
        &mut o,
        "ccload_ring_unread",
        "gauge",
        "1 for an attached controller whose ring buffer another consumer holds.",
    );
    for a in &m.rings_missing {
        let _ = writeln!(o, "ccload_ring_unread{{algo=\"{a}\"}} 1");
    }
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
    for (name, idx) in counters {
        family(&mut o, name, "counter", &crate::stats::help(idx));
        for (a, s) in stats {
            if let Some(v) = s.get(idx as usize) {
                let _ = writeln!(o, "{name}{{algo=\"{a}\"}} {v}");
            }
        }
    }
    family(
        &mut o,
        "ccload_sockets",
        "gauge",
        "TCP sockets using the controller in the daemon's network namespace.",
    );
    for (a, _) in stats {
        let n = sockets.get(a.name()).copied().unwrap_or(0);
        let _ = writeln!(o, "ccload_sockets{{algo=\"{a}\"}} {n}");
    }
    family(
        &mut o,
        "ccload_telemetry_records_total",
        "counter",
        "Telemetry records received, by profile.",
    );
    for ((a, p), n) in &m.records {
        let _ = writeln!(
            o,
            "ccload_telemetry_records_total{{algo=\"{a}\",profile=\"{}\"}} {n}",
            profile_label(d, *a, *p)
        );
    }
    let cutoff = Instant::now()
        .checked_sub(Duration::from_secs(10))
        .unwrap_or_else(Instant::now);
    m.last_seen.retain(|_, t| *t >= cutoff);
    let mut active: BTreeMap<(Algo, u32), u64> = BTreeMap::new();
    for (a, p, _) in m.last_seen.keys() {
        *active.entry((*a, *p)).or_default() += 1;
    }
    family(
        &mut o,
        "ccload_active_flows",
        "gauge",
        "Flows with a telemetry record in the last 10 s.",
    );
    for ((a, p), n) in &active {
        let _ = writeln!(
            o,
            "ccload_active_flows{{algo=\"{a}\",profile=\"{}\"}} {n}",
            profile_label(d, *a, *p)
        );
    }
    for (name, help, bounds, map) in [
        (
            "ccload_srtt_seconds",
            "Smoothed RTT at round ends, seconds.",
            &SRTT_BUCKETS_S,
            &m.rtt,
        ),
        (
            "ccload_cwnd_segments",
            "Congestion window at round ends, segments.",
            &CWND_BUCKETS,
            &m.cwnd,
        ),
    ] {
        family(&mut o, name, "histogram", help);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("web"), "web");
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn a_hostile_profile_name_cannot_forge_a_sample() {
        let scrape = |name: &str| {
            let mut d = crate::config::parse(std::path::Path::new("<t>"), "").unwrap();
            d.profile_names.insert((Algo::Ccpd, 1), name.into());
            let mut m = Metrics::default();
            let raw = crate::telemetry::tests::sample_record(Algo::Ccpd, 1);
            m.record(&Event::decode(&raw).unwrap());
            render(&mut m, &d, &vec![], &BTreeMap::new())
        };
        let plain = scrape("web");
        let hostile = scrape("x\"} 1\nccload_up 0\n#");
        // Escaping keeps one sample per line: the hostile name adds none.
        assert_eq!(plain.lines().count(), hostile.lines().count());
        assert_eq!(hostile.matches("\nccload_up ").count(), 1, "{hostile}");
        assert!(
            hostile.contains("profile=\"x\\\"} 1\\nccload_up 0\\n#\""),
            "{hostile}"
        );
        // The 10-ms RTT is in seconds, in the le="0.01" bucket.
        assert!(
            plain.contains(
                "ccload_srtt_seconds_bucket{algo=\"ccpd\",profile=\"web\",le=\"0.01\"} 1"
            ),
            "{plain}"
        );
    }
}
