//! Property tests ("fuzzing" on stable Rust) of the parsers that read
//! input ccload does not control: the TOML config, telemetry records from
//! the ring buffer and the daemon's socket, and netlink replies. Each must
//! return an error or a value for any input, never panic. The daemon's
//! HTTP path has its own in serve/tests.rs.
//!
//! Bounded runs are part of scripts/test.sh (`PROPTEST_CASES`); a long
//! run: `PROPTEST_CASES=200000 cargo test --locked -p ccload fuzz`.

use std::path::Path;

use proptest::prelude::*;

use crate::bpf::algos::Algo;
use crate::{bind::config, bpf::stream, bpf::telemetry, host::diag, host::netlink};

/// One of `words`, verbatim (proptest reads a bare &str as a regex).
fn one_of(words: &'static [&'static str]) -> BoxedStrategy<String> {
    proptest::sample::select(words)
        .prop_map(str::to_string)
        .boxed()
}

/// TOML-shaped text: sections a config has, filled with real tunable
/// names and values that are valid, out of range, or of the wrong type,
/// and now and then a line of garbage.
fn config_text() -> impl Strategy<Value = String> {
    let algo = prop_oneof![
        4 => one_of(&["ccpd", "hetcp", "ctcp_plus", "ub_reno"]),
        1 => one_of(&["cubic", "\"\"", "\"ccpd\\u0000\""]),
        1 => "[a-z_]{1,10}",
    ];
    let names: Vec<&'static str> = Algo::ALL
        .iter()
        .flat_map(|a| a.params().iter().map(|d| d.name))
        .collect();
    let tunable = prop_oneof![
        6 => proptest::sample::select(names).prop_map(str::to_string),
        1 => "[a-z_]{1,12}",
    ];
    let value = prop_oneof![
        6 => (0u32..64).prop_map(|v| v.to_string()),
        1 => one_of(&[
            "-1", "1e309", "nan", "inf", "4294967296", "18446744073709551616", "\"4\"",
            "\"x\"", "true", "[1, 2]", "{ kp = 4 }",
        ]),
        1 => "[0-9]{1,25}",
    ];
    let set = proptest::collection::vec((tunable, value.clone()), 0..3).prop_map(|kv| {
        let kv: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
        format!("set = {{ {} }}", kv.join(", "))
    });
    let serve_line = (
        one_of(&[
            "metrics",
            "on_exit",
            "socket",
            "max_connections",
            "request_timeout_ms",
            "x",
        ]),
        prop_oneof![
            value,
            one_of(&[
                "\"127.0.0.1:0\"",
                "\"[::1]:9464\"",
                "\"remove\"",
                "\"keep\"",
                "\"/run/x.sock\""
            ]),
        ],
    )
        .prop_map(|(k, v)| format!("{k} = {v}"));
    let section = prop_oneof![
        4 => (algo.clone(), set.clone()).prop_map(|(a, s)| format!("[algos.{a}]\n{s}")),
        2 => ("[a-z]{1,6}", algo.clone(), set)
            .prop_map(|(p, a, s)| format!("[profiles.{p}]\nalgo = \"{a}\"\n{s}")),
        1 => proptest::collection::vec(serve_line, 0..4)
            .prop_map(|l| format!("[serve]\n{}", l.join("\n"))),
        1 => (algo, one_of(&["\"/sys/fs/cgroup\"", "\"../../etc\"", "\"\"", "\"/nonexistent\""]))
            .prop_map(|(a, p)| format!("[[cgroups]]\npath = {p}\nalgo = \"{a}\"")),
        1 => one_of(&["default_cc = \"reno\"", "default_cc = 4", "bogus = 1"]),
        1 => "\\PC{0,30}",
    ];
    proptest::collection::vec(section, 0..5).prop_map(|l| l.join("\n"))
}

proptest! {
    #[test]
    fn fuzz_config_parse_never_panics(text in config_text()) {
        // Parsing and planning touch nothing in the kernel.
        if let Ok(d) = config::parse(Path::new("<fuzz>"), &text) {
            // A config that parses has valid tunables and serve limits.
            for (algo, profiles) in &d.algos {
                for p in profiles.values() {
                    for desc in algo.params() {
                        let v = p.get(desc.name).unwrap();
                        prop_assert!((desc.min..=desc.max).contains(&v), "{algo} {} = {v}", desc.name);
                    }
                }
            }
            prop_assert!(d.serve.max_connections >= 1);
        }
    }

    #[test]
    fn fuzz_config_parse_arbitrary_text(text in "\\PC{0,400}") {
        let _ = config::parse(Path::new("<fuzz>"), &text);
    }

    #[test]
    fn fuzz_record_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2 * telemetry::EVENT_SIZE)) {
        if let Some(ev) = telemetry::Event::decode(&bytes) {
            prop_assert!(Algo::ALL.contains(&ev.algo));
            let _ = (ev.to_json(), ev.to_csv(), ev.local(), ev.remote(), ev.phase_name());
        }
    }

    #[test]
    fn fuzz_record_of_each_algo_with_random_payload(algo in 0..Algo::ALL.len(), profile in any::<u32>(), payload in proptest::collection::vec(any::<u8>(), telemetry::EVENT_SIZE)) {
        let a = Algo::ALL[algo];
        let mut raw = telemetry::tests::sample_record(a, profile);
        // Everything after the algorithm id is random.
        let keep = std::mem::offset_of!(crate::intf::ccl_event, algo) + 4;
        raw[keep..].copy_from_slice(&payload[keep..]);
        let ev = telemetry::Event::decode(&raw).unwrap();
        prop_assert_eq!(ev.algo, a);
        prop_assert_eq!(ev.fields.len(), telemetry::fields(a).len());
        let csv = ev.to_csv();
        prop_assert_eq!(csv.split(',').count(), telemetry::Event::csv_header(a).split(',').count());
    }

    #[test]
    fn fuzz_deframer_any_stream(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..32)) {
        let mut d = stream::Deframer::default();
        for c in &chunks {
            d.push(c);
            while let Some(r) = d.next_record() {
                prop_assert!(r.len() <= stream::MAX_RECORD);
            }
        }
    }

    #[test]
    fn fuzz_netlink_walk_and_attrs(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut n = 0usize;
        let _ = netlink::walk(&data, &mut |_, body: &[u8]| {
            n += body.len();
            let _ = diag::parse_msg(body);
        });
        prop_assert!(n <= data.len());
        let total: usize = netlink::attrs(&data).map(|(_, p)| p.len() + 4).sum();
        prop_assert!(total <= data.len());
    }

    #[test]
    fn fuzz_netlink_messages_with_valid_headers(msgs in proptest::collection::vec((any::<u16>(), proptest::collection::vec(any::<u8>(), 0..120)), 0..8)) {
        // Well-formed nlmsghdrs around random bodies (the shape the kernel
        // sends), so the walker reaches the body parsers.
        let mut data = Vec::new();
        for (ty, body) in &msgs {
            let len = 16 + body.len();
            data.extend_from_slice(&(len as u32).to_ne_bytes());
            data.extend_from_slice(&ty.to_ne_bytes());
            data.extend_from_slice(&[0; 10]);
            data.extend_from_slice(body);
            data.resize(netlink::align4(data.len()), 0);
        }
        let mut seen = 0;
        let _ = netlink::walk(&data, &mut |_, body: &[u8]| {
            seen += 1;
            if let Some(s) = diag::parse_msg(body) {
                let _ = (s.local, s.remote, s.cong.len());
            }
        });
        prop_assert!(seen <= msgs.len());
    }
}

/// The config strategy reaches past the parser's front door: some of its
/// texts are valid configs (otherwise the property above checks nothing).
#[test]
fn config_strategy_yields_valid_configs() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strat = config_text();
    let ok = (0..2000)
        .filter(|_| {
            let text = strat.new_tree(&mut runner).unwrap().current();
            config::parse(Path::new("<fuzz>"), &text).is_ok_and(|d| !d.algos.is_empty())
        })
        .count();
    assert!(ok >= 10, "{ok} of 2000 generated configs attach something");
}

proptest! {
    /// The fast writer (no decoding, no allocation) prints exactly what the
    /// decoded path prints, for any bytes of any algorithm's record.
    #[test]
    fn fast_writer_matches_the_decoded_record(
        mut raw in proptest::collection::vec(any::<u8>(), crate::bpf::telemetry::EVENT_SIZE),
        algo in 0usize..crate::bpf::algos::Algo::ALL.len(),
        v6 in any::<bool>(),
    ) {
        use crate::bpf::telemetry::{write_fast, Event, FastFormat};
        let a = crate::bpf::algos::Algo::ALL[algo];
        let off = std::mem::offset_of!(crate::intf::ccl_event, algo);
        raw[off..off + 4].copy_from_slice(&a.id().to_ne_bytes());
        let off = std::mem::offset_of!(crate::intf::ccl_event, family);
        let fam = if v6 { libc::AF_INET6 } else { libc::AF_INET } as u16;
        raw[off..off + 2].copy_from_slice(&fam.to_ne_bytes());
        let ev = Event::decode(&raw).unwrap();
        let mut out = Vec::new();
        prop_assert_eq!(write_fast(&raw, FastFormat::Json, &mut out), Some(a));
        let got: serde_json::Value = serde_json::from_slice(&out).unwrap();
        prop_assert_eq!(got, ev.to_json());
        out.clear();
        write_fast(&raw, FastFormat::Csv, &mut out);
        prop_assert_eq!(String::from_utf8(out).unwrap(), format!("{}\n", ev.to_csv()));
    }
}
