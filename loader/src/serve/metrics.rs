//! The daemon's metrics: what it counts about itself and the telemetry
//! records it fans out, and the Prometheus text it renders on `/metrics`.
//! Flow metrics (retransmissions, loss events, RTOs, Recovery time, srtt,
//! cwnd and delivery-rate histograms) come from the in-kernel aggregates
//! (crate::bind::agg), per controller profile and per bound or watched cgroup:
//! exact whatever the ring buffer drops, the same numbers as `ccload stats`.
//!
//! Rendering takes the socket counts as an argument: they come from a
//! netlink dump made off the request path ([`super::SockCache`]).
//!
//! The families are built as the `prometheus` crate's data model and
//! written by its `TextEncoder` (text format 0.0.4: escaping, `+Inf`,
//! line order).  Not `prometheus-client`: it writes only OpenMetrics,
//! whose counter families (`# TYPE ccload_flows counter` over samples
//! named `ccload_flows_total`) `promtool check metrics` reads as samples
//! without HELP, and the test command lints a scrape with promtool.

use std::collections::BTreeMap;

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};

use crate::bind::agg::{self, Agg};
use crate::bind::config::Desired;
use crate::bpf::algos::Algo;
use crate::bpf::telemetry::Event;
use crate::intf;

/// Everything the daemon counts. Lives in one `RefCell` on the daemon's
/// single thread: no mutex to poison, and a panic while rendering ends
/// that request's task only.
#[derive(Default)]
pub(super) struct Metrics {
    records: BTreeMap<(Algo, u32), u64>,
    pub applies: u64,
    pub apply_errors: u64,
    pub clients: u64,
    pub fanout_dropped: u64,
    pub http_requests: u64,
    pub http_refused: u64,
    pub http_timeouts: u64,
    pub accept_errors: u64,
    /// Cgroups bound after start-up by the reconcile (appeared, made again).
    pub cgroup_binds: u64,
    /// Reconciles of the cgroups that failed (retried).
    pub cgroup_errors: u64,
    /// Controllers upgraded in place at start-up (their object was not
    /// this binary's), and upgrades that failed.
    pub upgrades: u64,
    pub upgrade_errors: u64,
    /// Attached algorithms whose ring buffer the daemon could not open
    /// (another consumer holds it); retried every few seconds.
    pub rings_missing: Vec<Algo>,
    /// `[[pods]]`: the node's pods the entries select (None: no list yet).
    pub pods_selected: Option<u64>,
    /// `[[pods]]`: failed Kubernetes API calls (retried).
    pub pod_watch_errors: u64,
}

/// The families of one scrape, in the order they are added.
#[derive(Default)]
pub(super) struct Exposition(Vec<MetricFamily>);

/// A sample's labels, (name, value); values are escaped when written.
pub(super) type Labels<'a> = [(&'a str, &'a str)];

impl Exposition {
    /// Starts a family; the samples added next are its.  A family that
    /// gets none is left out of the text.
    pub fn family(&mut self, name: &str, kind: MetricType, help: &str) {
        let mut f = MetricFamily::default();
        f.set_name(name.into());
        f.set_help(help.into());
        f.set_field_type(kind);
        self.0.push(f);
    }

    fn metric(&mut self, labels: &Labels) -> (&mut Metric, MetricType) {
        let f = self.0.last_mut().expect("a sample before its family");
        let kind = f.get_field_type();
        let pairs = labels
            .iter()
            .map(|(k, v)| {
                let mut p = LabelPair::default();
                p.set_name((*k).into());
                p.set_value((*v).into());
                p
            })
            .collect();
        f.mut_metric().push(Metric::from_label(pairs));
        (f.mut_metric().last_mut().unwrap(), kind)
    }

    /// A sample of the current counter or gauge family.
    pub fn sample(&mut self, labels: &Labels, v: f64) {
        match self.metric(labels) {
            (m, MetricType::COUNTER) => {
                let mut c = Counter::default();
                c.set_value(v);
                m.set_counter(c);
            }
            (m, _) => {
                let mut g = Gauge::default();
                g.set_value(v);
                m.set_gauge(g);
            }
        }
    }

    /// A histogram of the current family: cumulative counts per upper
    /// bound (`+Inf` is added), the sum and the count.
    pub fn histogram(&mut self, labels: &Labels, cumulative: &[(f64, u64)], sum: f64, count: u64) {
        let mut h = Histogram::default();
        h.set_bucket(
            cumulative
                .iter()
                .map(|&(le, n)| {
                    let mut b = Bucket::default();
                    b.set_upper_bound(le);
                    b.set_cumulative_count(n);
                    b
                })
                .collect(),
        );
        h.set_sample_sum(sum);
        h.set_sample_count(count);
        self.metric(labels).0.set_histogram(h);
    }

    /// The exposition text.
    pub fn text(self) -> String {
        let fams: Vec<MetricFamily> = self
            .0
            .into_iter()
            .filter(|f| !f.get_metric().is_empty())
            .collect();
        // Fails only on a family without a name or samples: none here.
        prometheus::TextEncoder::new()
            .encode_to_string(&fams)
            .expect("named families with samples")
    }
}

impl Metrics {
    pub fn record(&mut self, ev: &Event) {
        let key = (ev.algo, ev.hdr.profile % intf::CCL_NR_PROFILES);
        *self.records.entry(key).or_default() += 1;
    }
}

/// How an aggregate counter is exposed: metric name (after the scope
/// prefix) and the factor to base units; None = the `_sum`/`_count` of a
/// histogram.
fn counter_metric(name: &str) -> Option<(&'static str, f64)> {
    Some(match name {
        "flows_started" => ("flows_started_total", 1.0),
        "flows_ended" => ("flows_ended_total", 1.0),
        "bytes_acked" => ("acked_bytes_total", 1.0),
        "segs_out" => ("sent_segments_total", 1.0),
        "retrans_segs" => ("retransmitted_segments_total", 1.0),
        "loss_events" => ("loss_events_total", 1.0),
        "rtos" => ("rtos_total", 1.0),
        "recovery_ns" => ("recovery_seconds_total", 1e-9),
        _ => return None,
    })
}

/// How an aggregate histogram is exposed: name, factor to base units, the
/// counter holding its sum, and the `le` bounds (base units).  The kernel's
/// log-linear buckets are ~9 % wide; a bucket is counted under the first
/// bound its upper edge does not exceed.
fn hist_metric(name: &str) -> (&'static str, f64, &'static str, &'static [f64]) {
    match name {
        "srtt" => (
            "srtt_seconds",
            1e-6,
            "srtt_sum_us",
            &[
                0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0,
            ],
        ),
        "cwnd" => (
            "cwnd_segments",
            1.0,
            "cwnd_sum",
            &[
                4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0,
            ],
        ),
        // Bytes, Prometheus's base unit (`promtool check metrics` flags
        // bits); 1 kbit/s is 125 bytes/s, the bounds are 0.1 Mbit/s to
        // 100 Gbit/s.
        "rate" => (
            "delivery_rate_bytes_per_second",
            125.0,
            "rate_sum_kbps",
            &[
                1.25e4, 1.25e5, 1.25e6, 6.25e6, 1.25e7, 6.25e7, 1.25e8, 1.25e9, 1.25e10,
            ],
        ),
        "fct" => (
            "short_flow_completion_seconds",
            1e-6,
            "fct_sum_us",
            &[
                0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 60.0,
            ],
        ),
        other => panic!("histogram {other} has no metric (serve/metrics.rs)"),
    }
}

/// Help text from the aggregates table, as a sentence.
fn sentence(d: &str) -> String {
    let mut c = d.chars();
    match c.next() {
        Some(f) => format!("{}{}.", f.to_uppercase(), c.as_str()),
        None => String::new(),
    }
}

/// The aggregate families for one scope (`ccload_` per controller
/// profile, `ccload_cgroup_` per cgroup): slots are (labels, Agg).
fn render_aggs(
    o: &mut Exposition,
    prefix: &str,
    scope: &str,
    slots: &[(Vec<(&str, String)>, &Agg)],
) {
    for d in crate::bind::agg::counters() {
        let Some((name, scale)) = counter_metric(d.name) else {
            continue;
        };
        o.family(
            &format!("{prefix}{name}"),
            MetricType::COUNTER,
            &format!("{} ({scope})", sentence(d.help).trim_end_matches('.')),
        );
        for (lbl, a) in slots {
            o.sample(&borrowed(lbl), a.get(d.name) as f64 * scale);
        }
    }
    for d in crate::bind::agg::hists() {
        let (name, scale, sum, bounds) = hist_metric(d.name);
        o.family(
            &format!("{prefix}{name}"),
            MetricType::HISTOGRAM,
            &format!(
                "{}, one sample per flow per smoothed RTT ({scope})",
                sentence(d.help).trim_end_matches('.')
            ),
        );
        for (lbl, a) in slots {
            let h = a.hist(d.name);
            let mut cum = vec![0u64; bounds.len()];
            for (b, &n) in h.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                let upper = crate::bind::agg::bucket_lower(b + 1) as f64 * scale;
                if let Some(i) = bounds.iter().position(|le| upper <= le * (1.0 + 1e-9)) {
                    for c in &mut cum[i..] {
                        *c += n;
                    }
                }
            }
            let buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(cum).collect();
            o.histogram(
                &borrowed(lbl),
                &buckets,
                a.get(sum) as f64 * scale,
                h.iter().sum(),
            );
        }
    }
}

/// Owned label values as [`Labels`].
fn borrowed<'a>(l: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    l.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn profile_label(d: &Desired, algo: Algo, id: u32) -> String {
    match d.profile_names.get(&(algo, id)) {
        Some(n) => n.clone(),
        None if id == 0 => "default".into(),
        None => id.to_string(),
    }
}

/// The kernel counters of each attached controller, by stats index.
pub(super) type KernelStats = Vec<(Algo, Vec<u64>)>;

/// The families of one scrape (the daemon, the kernel, the telemetry);
/// the caller adds the rollouts' and the cgroup states, then writes
/// [`Exposition::text`].
pub(super) fn render(
    m: &mut Metrics,
    d: &Desired,
    stats: &KernelStats,
    aggs: &agg::All,
    sockets: &BTreeMap<String, u64>,
) -> Exposition {
    let mut o = Exposition::default();
    render_daemon(&mut o, m);
    render_kernel(&mut o, d, stats, sockets);
    render_telemetry(&mut o, m, d, aggs);
    o
}

/// The daemon's own families: up, config applies, HTTP and accept errors,
/// cgroup and pod reconciles, upgrades, clients, unread rings.
fn render_daemon(o: &mut Exposition, m: &Metrics) {
    o.family(
        "ccload_up",
        MetricType::GAUGE,
        "The ccload daemon is running.",
    );
    o.sample(&[], 1.0);
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
        (
            "ccload_cgroup_binds_total",
            "Cgroups bound after start-up, as they appeared or were made again.",
            m.cgroup_binds,
        ),
        (
            "ccload_upgrades_total",
            "Attached controllers upgraded in place to this binary's object at start-up (tunables carried, connections kept).",
            m.upgrades,
        ),
        (
            "ccload_upgrade_errors_total",
            "In-place upgrades that failed at start-up (the attached object kept running).",
            m.upgrade_errors,
        ),
        (
            "ccload_cgroup_reconcile_errors_total",
            "Failed reconciles of the configured cgroups (retried).",
            m.cgroup_errors,
        ),
        (
            "ccload_pod_watch_errors_total",
            "Failed Kubernetes API calls of the [[pods]] watch (retried with backoff).",
            m.pod_watch_errors,
        ),
    ] {
        o.family(name, MetricType::COUNTER, help);
        o.sample(&[], v as f64);
    }
    o.family(
        "ccload_pods_selected",
        MetricType::GAUGE,
        "Pods of this node the [[pods]] entries select (absent before the first list).",
    );
    if let Some(n) = m.pods_selected {
        o.sample(&[], n as f64);
    }
    o.family(
        "ccload_watch_clients",
        MetricType::GAUGE,
        "Connected telemetry clients.",
    );
    o.sample(&[], m.clients as f64);
    o.family(
        "ccload_ring_unread",
        MetricType::GAUGE,
        "1 for an attached controller whose ring buffer another consumer holds.",
    );
    for a in &m.rings_missing {
        o.sample(&[("algo", a.name())], 1.0);
    }
}

/// The controllers' kernel counters, which configured ones are attached,
/// and their sockets.
fn render_kernel(
    o: &mut Exposition,
    d: &Desired,
    stats: &KernelStats,
    sockets: &BTreeMap<String, u64>,
) {
    // HELP text comes from the one stats table (stats::STATS).
    let counters: [(&str, u32); 4] = [
        ("ccload_flows_total", intf::CCL_STAT_FLOW_INIT),
        ("ccload_rounds_total", intf::CCL_STAT_ROUNDS),
        (
            "ccload_ringbuf_overruns_total",
            intf::CCL_STAT_RB_RESERVE_FAIL,
        ),
        ("ccload_events_total", intf::CCL_STAT_EVENTS),
    ];
    for (name, idx) in counters {
        o.family(name, MetricType::COUNTER, &crate::bpf::stats::help(idx));
        for (a, s) in stats {
            if let Some(&v) = s.get(idx as usize) {
                o.sample(&[("algo", a.name())], v as f64);
            }
        }
    }
    o.family(
        "ccload_controller_attached",
        MetricType::GAUGE,
        "1 for each controller the config names that is attached, 0 for one that is not.",
    );
    for a in d.algos.keys() {
        let on = stats.iter().any(|(s, _)| s == a);
        o.sample(&[("algo", a.name())], f64::from(u8::from(on)));
    }
    o.family(
        "ccload_sockets",
        MetricType::GAUGE,
        "TCP sockets using the controller in the daemon's network namespace.",
    );
    for (a, _) in stats {
        let n = sockets.get(a.name()).copied().unwrap_or(0);
        o.sample(&[("algo", a.name())], n as f64);
    }
}

/// Telemetry record counts, and the in-kernel aggregates per controller
/// profile and per cgroup.
fn render_telemetry(o: &mut Exposition, m: &Metrics, d: &Desired, aggs: &agg::All) {
    o.family(
        "ccload_telemetry_records_total",
        MetricType::COUNTER,
        "Telemetry records received, by profile.",
    );
    for ((a, p), n) in &m.records {
        let profile = profile_label(d, *a, *p);
        o.sample(
            &[("algo", a.name()), ("profile", profile.as_str())],
            *n as f64,
        );
    }
    let profiles: Vec<(Vec<(&str, String)>, &Agg)> = aggs
        .algos
        .iter()
        .map(|(a, p, g)| {
            (
                vec![
                    ("algo", a.name().to_string()),
                    ("profile", profile_label(d, *a, *p)),
                ],
                g,
            )
        })
        .collect();
    render_aggs(o, "ccload_", "per controller profile", &profiles);
    let cgroups: Vec<(Vec<(&str, String)>, &Agg)> = aggs
        .cgroups
        .iter()
        .map(|c| {
            let (b, g) = (&c.binding, &c.total);
            let path = b
                .cgroup
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| format!("id:{}", b.cgroup_id));
            let cc = if b.algo.is_empty() {
                "unchanged".to_string()
            } else {
                b.algo.clone()
            };
            (vec![("cgroup", path), ("cc", cc)], g)
        })
        .collect();
    render_aggs(o, "ccload_cgroup_", "per bound or watched cgroup", &cgroups);
    render_rules(o, aggs);
}

/// Per path rule of each binding that has rules: what the connections it
/// chose did (`rule` is the rule as written; `default` for those none
/// chose, on the binding's own CC).
fn render_rules(o: &mut Exposition, aggs: &agg::All) {
    type Get = fn(&crate::bind::cgroup::SlotCounts) -> u64;
    let families: [(&str, &str, Get); 4] = [
        (
            "ccload_cgroup_rule_connections_total",
            "Connections a path rule chose (or none did: rule=\"default\").",
            |c| c.connections,
        ),
        (
            "ccload_cgroup_rule_acked_bytes_total",
            "Bytes acknowledged on the connections a path rule chose.",
            |c| c.bytes_acked,
        ),
        (
            "ccload_cgroup_rule_sent_segments_total",
            "Data segments sent on the connections a path rule chose, retransmissions included.",
            |c| c.segs_out,
        ),
        (
            "ccload_cgroup_rule_retransmitted_segments_total",
            "Data segments retransmitted on the connections a path rule chose.",
            |c| c.retrans_segs,
        ),
    ];
    let mut rows: Vec<(String, String, String, &crate::bind::cgroup::SlotCounts)> = Vec::new();
    for b in aggs.cgroups.iter().map(|c| &c.binding) {
        let path = b
            .cgroup
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!("id:{}", b.cgroup_id));
        for r in &b.rules {
            rows.push((path.clone(), r.text.clone(), r.rule.cc.clone(), &r.counts));
        }
        if let Some(u) = &b.unmatched {
            rows.push((path.clone(), "default".into(), b.algo.clone(), u));
        }
    }
    if rows.is_empty() {
        return;
    }
    for (name, help, get) in families {
        o.family(name, MetricType::COUNTER, help);
        for (cg, rule, cc, c) in &rows {
            o.sample(
                &[
                    ("cgroup", cg.as_str()),
                    ("rule", rule.as_str()),
                    ("cc", cc.as_str()),
                ],
                get(c) as f64,
            );
        }
    }
}

/// How many configured cgroups are bound, unbound, or named by entries
/// that match none yet.
pub(super) fn render_cgroup_states(
    o: &mut Exposition,
    bound: usize,
    unbound: usize,
    missing: usize,
) {
    o.family(
        "ccload_cgroups",
        MetricType::GAUGE,
        "Configured cgroups: bound as configured, existing but not bound, entries naming none yet.",
    );
    for (state, n) in [("bound", bound), ("unbound", unbound), ("missing", missing)] {
        o.sample(&[("state", state)], n as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut o = Exposition::default();
        o.family("ccload_x", MetricType::GAUGE, "X.");
        o.sample(&[("a", "web"), ("b", "a\"b\\c\nd")], 1.0);
        assert_eq!(
            o.text(),
            "# HELP ccload_x X.\n# TYPE ccload_x gauge\nccload_x{a=\"web\",b=\"a\\\"b\\\\c\\nd\"} 1\n"
        );
    }

    #[test]
    fn a_family_without_samples_is_left_out() {
        let mut o = Exposition::default();
        o.family("ccload_ring_unread", MetricType::GAUGE, "Unread.");
        o.family("ccload_up", MetricType::GAUGE, "Up.");
        o.sample(&[], 1.0);
        assert_eq!(
            o.text(),
            "# HELP ccload_up Up.\n# TYPE ccload_up gauge\nccload_up 1\n"
        );
    }

    /// An aggregate with `n` srtt samples of `us` microseconds.
    fn with_srtt(n: u64, us: u64) -> Agg {
        let mut a = Agg::default();
        // SAFETY: pure function of an integer.
        let b = unsafe { intf::ccl_hist_bucket(us) } as usize;
        a.hist[intf::CCL_HIST_srtt as usize][b] = n;
        a.c[intf::CCL_AGG_samples as usize] = n;
        a.c[intf::CCL_AGG_srtt_sum_us as usize] = n * us;
        a.c[intf::CCL_AGG_retrans_segs as usize] = 7;
        a.c[intf::CCL_AGG_recovery_ns as usize] = 1_500_000_000;
        a
    }

    #[test]
    fn a_hostile_profile_name_cannot_forge_a_sample() {
        let scrape = |name: &str| {
            let mut d = crate::bind::config::parse(std::path::Path::new("<t>"), "").unwrap();
            d.profile_names.insert((Algo::Ccpd, 1), name.into());
            let mut m = Metrics::default();
            let raw = crate::bpf::telemetry::tests::sample_record(Algo::Ccpd, 1);
            m.record(&Event::decode(&raw).unwrap());
            let aggs = agg::All {
                algos: vec![(Algo::Ccpd, 1, with_srtt(3, 10_000))],
                cgroups: vec![],
            };
            render(&mut m, &d, &vec![], &aggs, &BTreeMap::new()).text()
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
    }

    #[test]
    fn aggregates_render_in_base_units_with_cumulative_buckets() {
        let d = crate::bind::config::parse(std::path::Path::new("<t>"), "").unwrap();
        let aggs = agg::All {
            algos: vec![(Algo::Ccpd, 0, with_srtt(3, 10_000))],
            cgroups: vec![],
        };
        let o = render(
            &mut Metrics::default(),
            &d,
            &vec![],
            &aggs,
            &BTreeMap::new(),
        )
        .text();
        let l = "algo=\"ccpd\",profile=\"default\"";
        // 10 ms is above 0.005 s and below 0.02 s; the sum is in seconds.
        for (sample, want) in [
            (
                format!("ccload_srtt_seconds_bucket{{{l},le=\"0.005\"}} "),
                "0",
            ),
            (
                format!("ccload_srtt_seconds_bucket{{{l},le=\"0.02\"}} "),
                "3",
            ),
            (
                format!("ccload_srtt_seconds_bucket{{{l},le=\"+Inf\"}} "),
                "3",
            ),
            (format!("ccload_srtt_seconds_count{{{l}}} "), "3"),
            (format!("ccload_srtt_seconds_sum{{{l}}} "), "0.03"),
            (format!("ccload_retransmitted_segments_total{{{l}}} "), "7"),
            (format!("ccload_recovery_seconds_total{{{l}}} "), "1.5"),
        ] {
            let line = o
                .lines()
                .find(|x| x.starts_with(&sample))
                .unwrap_or_else(|| panic!("no {sample} in\n{o}"));
            assert_eq!(&line[sample.len()..], want, "{line}");
        }
        // Every family has HELP and TYPE once; every counter ends in _total.
        for f in o.lines().filter_map(|x| x.strip_prefix("# TYPE ")) {
            let (name, kind) = f.split_once(' ').unwrap();
            assert_eq!(o.matches(&format!("# TYPE {name} ")).count(), 1, "{name}");
            assert!(o.contains(&format!("# HELP {name} ")), "{name}");
            if kind == "counter" {
                assert!(name.ends_with("_total"), "{name}");
            }
        }
    }

    /// Every family `/metrics` can show, each with a sample: a controller
    /// profile and a cgroup with aggregates, kernel counters, a telemetry
    /// record, an unread ring, a rollout, the cgroup states.
    fn full_scrape() -> String {
        let d = crate::bind::config::parse(
            std::path::Path::new("<t>"),
            "[algos.ccpd]\n[algos.hetcp]\n",
        )
        .unwrap();
        let mut m = Metrics::default();
        let raw = crate::bpf::telemetry::tests::sample_record(Algo::Ccpd, 0);
        m.record(&Event::decode(&raw).unwrap());
        m.rings_missing.push(Algo::Hetcp);
        m.pods_selected = Some(3);
        let b = crate::bind::cgroup::Binding {
            cgroup: Some("/sys/fs/cgroup/web.slice".into()),
            cgroup_id: 7,
            algo: "ccpd".into(),
            profile: 0,
            active: 1,
            passive: 0,
            errors: 0,
            rules: vec![crate::bind::cgroup::RuleCount {
                rule: "dst 10.0.0.0/8 -> cubic"
                    .parse::<crate::bind::path_rules::RuleSpec>()
                    .map(|s| crate::bind::path_rules::PathRule {
                        when: s.when,
                        cc: s.cc,
                        profile: 0,
                    })
                    .unwrap(),
                text: "dst 10.0.0.0/8 -> cubic".into(),
                counts: crate::bind::cgroup::SlotCounts {
                    connections: 2,
                    bytes_acked: 3000,
                    segs_out: 4,
                    retrans_segs: 1,
                },
            }],
            unmatched: Some(crate::bind::cgroup::SlotCounts {
                connections: 1,
                ..Default::default()
            }),
            auto_attached: false,
        };
        let aggs = agg::All {
            algos: vec![(Algo::Ccpd, 0, with_srtt(3, 10_000))],
            cgroups: vec![agg::CgroupAgg {
                binding: b,
                total: with_srtt(2, 20_000),
                slots: Vec::new(),
            }],
        };
        let stats = vec![(Algo::Ccpd, vec![1; intf::CCL_NR_STATS as usize])];
        let socks = BTreeMap::from([("ccpd".to_string(), 2)]);
        let mut o = render(&mut m, &d, &stats, &aggs, &socks);
        let r = super::super::rollouts::Rollouts::default();
        r.status.lock().unwrap().insert(
            "/sys/fs/cgroup/a.slice".into(),
            super::super::rollouts::Status {
                algo: "ccpd".into(),
                state: "running",
                intervals: 3,
                failing: 1,
                ratios: vec![("retrans_ratio <= 1.5".into(), 1.2)],
                harm_evidence: Some(3.5),
            },
        );
        r.render(&mut o);
        render_cgroup_states(&mut o, 1, 0, 2);
        o.text()
    }

    #[test]
    fn a_configured_controller_that_is_not_attached_reads_zero() {
        let o = full_scrape();
        assert!(
            o.contains("\nccload_controller_attached{algo=\"ccpd\"} 1\n"),
            "{o}"
        );
        assert!(
            o.contains("\nccload_controller_attached{algo=\"hetcp\"} 0\n"),
            "{o}"
        );
    }

    /// Family name -> (type, label names but `le`), from an exposition.
    fn families(o: &str) -> BTreeMap<String, (String, Vec<String>)> {
        let mut f: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
        for l in o.lines() {
            if let Some(t) = l.strip_prefix("# TYPE ") {
                let (n, k) = t.split_once(' ').unwrap();
                f.insert(n.into(), (k.into(), Vec::new()));
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap();
                let fam = ["_bucket", "_sum", "_count"]
                    .iter()
                    .filter_map(|s| name.strip_suffix(s))
                    .find(|b| f.get(*b).is_some_and(|x| x.0 == "histogram"))
                    .unwrap_or(name);
                let labels: Vec<String> = l
                    .split_once('{')
                    .map(|(_, r)| {
                        r.split("\",")
                            .filter_map(|kv| kv.split_once('=').map(|x| x.0.to_string()))
                            .filter(|k| k != "le")
                            .collect()
                    })
                    .unwrap_or_default();
                let e = f.get_mut(fam).unwrap_or_else(|| panic!("{fam}: no TYPE"));
                for k in labels {
                    if !e.1.contains(&k) {
                        e.1.push(k);
                    }
                }
            }
        }
        f
    }

    /// docs/metrics.md lists every family `/metrics` shows, with its type
    /// and labels, and nothing else.
    #[test]
    fn the_metrics_reference_matches_the_exposition() {
        let got = families(&full_scrape());
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/metrics.md"),
        )
        .unwrap();
        let mut want = BTreeMap::new();
        for l in doc.lines().filter(|l| l.starts_with("| `ccload_")) {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            let labels: Vec<String> = cells[3]
                .split(',')
                .map(|x| x.trim().trim_matches('`').to_string())
                .filter(|x| !x.is_empty() && x != "-")
                .collect();
            want.insert(name, (cells[2].to_string(), labels));
        }
        for (n, (k, ls)) in &got {
            let (wk, wl) = want
                .get(n)
                .unwrap_or_else(|| panic!("{n} ({k}) is on /metrics but not in docs/metrics.md"));
            assert_eq!(wk, k, "{n}: type");
            let (mut a, mut b) = (ls.clone(), wl.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "{n}: labels");
        }
        for n in want.keys() {
            assert!(
                got.contains_key(n),
                "docs/metrics.md lists {n}, /metrics has none"
            );
        }
    }

    #[test]
    fn every_aggregate_is_exposed() {
        for d in agg::counters() {
            let as_sum = agg::hists().iter().any(|h| hist_metric(h.name).2 == d.name);
            assert!(
                counter_metric(d.name).is_some() || as_sum || d.name == "samples",
                "{} is not on /metrics",
                d.name
            );
        }
    }
}
