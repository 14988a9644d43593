//! The lab runner end to end on a short run, and the testbed's cleanup when
//! a test fails half-way.

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::{measured_on_a_valid_link, privileged};
use ccload_lab::run::run_case;
use ccload_lab::scenario::Scenario;

fn netns_names() -> String {
    let o = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_short_two_flow_run_is_measured_and_summarised() {
    let _g = privileged!();
    let sc: Scenario = toml::from_str(
        r#"
title = "t"
paper = "test"
description = "reno and cubic, the second joins at 1 s on a 50-ms path"
ccs = ["reno"]
flows = [{ cc = "$cc" }, { cc = "cubic", start_s = 1.0, rtt_ms = 50 }]
duration_s = 6
warmup_s = 2
repetitions = 1
[grid]
rate_mbit = 40
rtt_ms = [20]
buffer_bdp = [1.0]
[quick]
"#,
    )
    .unwrap();
    let case = &sc.cases()[0];
    // Measured again when the delay line was late: its RTT bounds below
    // allow 5 ms of host noise (seen: p99 lateness 4.7 ms, and the 50-ms
    // flow's p95 at 87.5 ms, a full buffer and 17.5 ms above its path).
    let (r, ticks) = measured_on_a_valid_link("two flows", || {
        let mut ticks = 0;
        let r = run_case(&sc, case, "reno", 0, &mut |_| ticks += 1).expect("run");
        let late = r.summary.lateness_p99_us;
        ((r, ticks), late)
    });
    let s = &r.summary;
    eprintln!(
        "goodput {:.2} Mbit/s util {:.3} jain {:.3} rtt {:.1} ms queue {:.1} drops {} p99 {} us",
        s.goodput_mbit,
        s.utilisation,
        s.jain_bins,
        s.rtt_mean_ms,
        s.queue_mean_pkts,
        s.queue_drops,
        s.lateness_p99_us
    );
    assert!(ticks >= 20, "progress reported {ticks} times");
    assert_eq!(s.flows.len(), 2);
    assert_eq!(
        (s.flows[0].cc.as_str(), s.flows[1].cc.as_str()),
        ("reno", "cubic")
    );
    // 10-ms sampling: ~600 samples for flow 0, ~500 for flow 1.
    let n0 = r.samples.iter().filter(|x| x.flow == 0).count();
    let n1 = r.samples.iter().filter(|x| x.flow == 1).count();
    assert!(
        (450..=620).contains(&n0) && (350..=520).contains(&n1),
        "{n0} {n1} samples"
    );
    assert!(r.queue.len() >= 450, "{} queue samples", r.queue.len());
    // A 1-BDP buffer: the two flows fill the link between them.
    assert!(
        s.utilisation > 0.85 && s.utilisation <= 1.01,
        "utilisation {}",
        s.utilisation
    );
    assert!(s.jain_bins > 0.5 && s.jain_bins <= 1.0);
    let bdp = case.link.bdp_pkts().round() as u32;
    assert!(
        r.queue.iter().all(|q| q.qlen <= bdp),
        "queue above its limit"
    );
    // Each flow's RTT: at least its own propagation delay (the delay
    // line's class for the 50-ms flow), at most that plus a full buffer
    // (20 ms) and host noise.
    assert_eq!(
        (s.flows[0].path_rtt_ms, s.flows[1].path_rtt_ms),
        (Some(20.0), Some(50.0))
    );
    for (i, base) in [(0, 20.0), (1, 50.0)] {
        let min = r
            .samples
            .iter()
            .filter(|x| x.flow == i && x.min_rtt_us > 0)
            .map(|x| x.min_rtt_us as f64 / 1e3)
            .fold(f64::MAX, f64::min);
        let f = &s.flows[i];
        eprintln!("flow {i}: min RTT {min:.1} ms, p95 {:.1} ms", f.rtt_p95_ms);
        assert!(
            (base..base + 4.0).contains(&min) && f.rtt_p95_ms <= base + 20.0 + 5.0,
            "flow {i} on a {base}-ms path: min RTT {min:.1} ms, p95 {:.1}",
            f.rtt_p95_ms
        );
    }
    assert!(s.flows.iter().all(|f| f.goodput_mbit > 1.0));
    assert!(
        !netns_names().contains(&format!("ccl-t{}-", std::process::id())),
        "namespaces left behind"
    );
}

#[test]
fn namespaces_are_removed_when_a_test_panics_mid_run() {
    let _g = privileged!();
    let before = netns_names();
    let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let n2 = names.clone();
    let r = std::thread::spawn(move || {
        let link = Bottleneck::new(LinkCfg {
            delay_ms: 5.0,
            ..Default::default()
        });
        n2.lock().unwrap().extend([
            link.sender.name.clone(),
            link.router.name.clone(),
            link.receiver.name.clone(),
        ]);
        panic!("simulated test failure with the link up");
    })
    .join();
    assert!(r.is_err());
    let after = netns_names();
    for n in names.lock().unwrap().iter() {
        assert!(
            before.contains(n) || !after.contains(n.as_str()),
            "{n} left behind"
        );
    }
    assert_eq!(names.lock().unwrap().len(), 3);
}

/// `cargo xtask lab demo` (the README's main job): the controller's live
/// rows through the emulated link show its law running (`CA`), and the
/// comparison with cubic on a link of the same kind is measured.  Bounds
/// are generous (a working ccpd measures ~48 of 50 Mbit/s with 0
/// retransmissions here); a controller stuck in slow start or in Recovery,
/// or one that retransmits its way to goodput, fails them.  Runs of 4 s,
/// as test.sh runs the README's command (DEMO_SECS=4).
#[test]
fn demo_through_the_emulated_link_shows_the_law_and_compares_with_cubic() {
    let _g = privileged!();
    let root = ccload_itests::repo_root();
    let before = netns_names();
    let d = measured_on_a_valid_link("demo", || {
        let d = ccload_lab::demo::run(&root, "ccpd", Some(4.0), false).expect("demo");
        let late = d.runs.iter().map(|r| r.lateness_p99_us).max().unwrap_or(0);
        (d, late)
    });
    eprintln!("{}", ccload_lab::demo::side_by_side(&d.runs));
    let rows: Vec<&str> = d.watch.lines().filter(|l| l.contains(" > ")).collect();
    let ca = rows
        .iter()
        .filter(|l| l.split_whitespace().nth(3) == Some("CA"))
        .count();
    assert!(
        ca >= 5,
        "{ca} of {} live rows in CA (the law never ran?):\n{}",
        rows.len(),
        d.watch
    );
    let header = d
        .watch
        .lines()
        .find(|l| l.starts_with("flow"))
        .expect("table header");
    for col in ["phase", "cwnd", "srtt ms", "C Mb/s"] {
        assert!(header.contains(col), "no {col} column: {header}");
    }
    assert_eq!(
        d.runs.iter().map(|r| r.cc.as_str()).collect::<Vec<_>>(),
        ["ccpd", "cubic"]
    );
    let (c, k) = (&d.runs[0], &d.runs[1]);
    assert!(
        c.goodput_mbit > 35.0,
        "ccpd {:.1} Mbit/s of 50",
        c.goodput_mbit
    );
    assert!(
        k.goodput_mbit > 25.0,
        "cubic {:.1} Mbit/s of 50",
        k.goodput_mbit
    );
    assert!(
        c.retrans_per_seg < 0.01,
        "ccpd retransmitted {:.4} per segment",
        c.retrans_per_seg
    );
    // The base RTT seen by the flows is the emulated 40 ms.
    for r in &d.runs {
        assert!(
            (38.0..50.0).contains(&r.rtt_base_ms),
            "{}: base {:.1} ms",
            r.cc,
            r.rtt_base_ms
        );
    }
    assert_eq!(netns_names(), before, "the demo left network namespaces");
    assert!(
        !ccload::bpf::is_registered("ccpd"),
        "the demo left ccpd attached"
    );
}

/// `lab run` records where its results came from (provenance.json, the
/// scenario file) and the controllers' per-round telemetry; `lab plot` and
/// `lab compare` work from the stored directory alone.
#[test]
fn a_stored_run_records_provenance_and_replots_and_compares_from_disk() {
    let _g = privileged!();
    let root = ccload_itests::repo_root();
    let tmp = std::env::temp_dir().join(format!("ccl-labstore-{}", std::process::id()));
    struct Rm(std::path::PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _rm = Rm(tmp.clone());
    std::fs::create_dir_all(&tmp).unwrap();
    let scen = tmp.join("short.toml");
    let text = r#"
title = "short"
paper = "test"
description = "ccpd and reno, 5 s each"
ccs = ["ccpd", "reno"]
flows = [{ cc = "$cc" }]
duration_s = 5
warmup_s = 1
repetitions = 1
[grid]
rate_mbit = 20
rtt_ms = [20]
buffer_bdp = [1.0]
[quick]
"#;
    std::fs::write(&scen, text).unwrap();
    let dir = tmp.join("out");
    let (d, _, runs) =
        ccload_lab::session::run(&root, scen.to_str().unwrap(), false, Some(dir.clone()))
            .expect("lab run");
    assert_eq!(d, dir);
    assert_eq!(runs.len(), 2);

    let prov: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("provenance.json")).unwrap())
            .unwrap();
    let uname = std::process::Command::new("uname")
        .arg("-r")
        .output()
        .unwrap();
    assert_eq!(
        prov["kernel"],
        String::from_utf8_lossy(&uname.stdout).trim(),
        "{prov}"
    );
    let rev = prov["git_revision"].as_str().unwrap_or("");
    assert!(
        rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit()),
        "{prov}"
    );
    assert!(
        prov["sysctls_root_netns"]["net/ipv4/tcp_congestion_control"].is_string(),
        "{prov}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("scenario.toml")).unwrap(),
        text
    );

    // Per-round telemetry of ccpd (ours), none for reno (the kernel's).
    let tel = std::fs::read_dir(dir.join("telemetry")).unwrap().count();
    assert_eq!(tel, 1, "one telemetry file (ccpd)");
    let t = std::fs::read_to_string(dir.join("telemetry/20ms_1bdp_ccpd_rep0.jsonl")).unwrap();
    let recs: Vec<serde_json::Value> = t
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        recs.len() >= 20,
        "{} records for a 5-s, 20-ms run",
        recs.len()
    );
    assert!(recs.iter().all(|r| r["algo"] == "ccpd"));
    assert!(recs.iter().any(|r| r["phase"] == "CA"), "the law ran");

    let plots = |suffix: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.join("plots"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.retain(|n| n.ends_with(suffix));
        v.sort();
        v
    };
    let before = plots(".png");
    for p in [
        "scatter_20ms_1bdp.png",
        "cdf_rtt_20ms_1bdp.png",
        "box_utilisation.png",
        "box_rtt_p95.png",
        "ts_20ms_1bdp_ccpd.png",
    ] {
        assert!(before.contains(&p.to_string()), "no {p} in {before:?}");
    }
    assert_eq!(plots(".svg").len(), before.len());

    // From disk alone: the same runs, the plots again, a comparison.
    let st = ccload_lab::stored::load(&dir).unwrap();
    assert_eq!(st.results.len(), 2);
    for (a, b) in st.results.iter().zip(&runs) {
        assert_eq!(a.summary.cc, b.cc);
        // JSON keeps 15-17 significant digits.
        assert!((a.summary.goodput_mbit - b.goodput_mbit).abs() < 1e-9 * b.goodput_mbit);
        assert!(
            a.samples.len() > 300,
            "{} samples of {}",
            a.samples.len(),
            a.summary.cc
        );
    }
    std::fs::remove_dir_all(dir.join("plots")).unwrap();
    ccload_lab::stored::replot(&dir).unwrap();
    assert_eq!(plots(".png"), before);
    let c = ccload_lab::stored::compare(&dir, &dir, true).unwrap();
    let v: serde_json::Value = serde_json::from_str(&c).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    assert!(
        rows.iter()
            .all(|r| r["goodput_ratio"] == 1.0 && r["rtt_p95_ratio"] == 1.0),
        "{v}"
    );
    let e = ccload_lab::stored::compare(&dir, &tmp, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a lab results directory"), "{e}");

    // --resume: as if killed while writing the second run's record, the
    // first run is kept (same numbers, same samples) and only reno runs.
    let before = tmp.join("before");
    std::fs::create_dir_all(&before).unwrap();
    for f in ["summary.json", "samples.csv", "queue.csv"] {
        std::fs::copy(dir.join(f), before.join(f)).unwrap();
    }
    let log = std::fs::read_to_string(dir.join("runs.jsonl")).unwrap();
    let first = log.lines().next().unwrap();
    std::fs::write(
        dir.join("runs.jsonl"),
        format!("{first}\n{{\"case\":\"20ms_1b"),
    )
    .unwrap();
    let ccpd_samples = st.results[0].samples.len();
    let (_, _, again) = ccload_lab::session::run_or_resume(
        &root,
        scen.to_str().unwrap(),
        false,
        None,
        Some(dir.clone()),
    )
    .expect("resume");
    assert_eq!(again.len(), 2);
    assert_eq!(again[0].cc, "ccpd");
    assert_eq!(
        again[0].goodput_mbit, st.results[0].summary.goodput_mbit,
        "kept, not re-run"
    );
    assert_eq!(again[1].cc, "reno");
    let st2 = ccload_lab::stored::load(&dir).unwrap();
    assert_eq!(st2.results[0].samples.len(), ccpd_samples);
    assert!(st2.results[1].samples.len() > 300);
    assert_eq!(
        std::fs::read_to_string(dir.join("runs.jsonl"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    // Two stored runs compared: ccpd's numbers are the same (kept), reno
    // ran again (a measurement, so close but its own).
    let c: serde_json::Value =
        serde_json::from_str(&ccload_lab::stored::compare(&before, &dir, true).unwrap()).unwrap();
    let row = |cc: &str| {
        c["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["cc"] == cc)
            .unwrap_or_else(|| panic!("no {cc} row: {c}"))
            .clone()
    };
    assert_eq!(row("ccpd")["goodput_ratio"], 1.0, "{c}");
    let g = row("reno")["goodput_ratio"].as_f64().unwrap();
    assert!((0.5..2.0).contains(&g), "reno re-run ratio {g}: {c}");
    let rb = row("reno")["b"]["goodput_mbit"].as_f64().unwrap();
    assert!((rb - again[1].goodput_mbit).abs() < 1e-9 * rb, "{c}");
    // A different scenario file is refused.
    let other = tmp.join("other.toml");
    std::fs::write(&other, text.replace("duration_s = 5", "duration_s = 6")).unwrap();
    let e = ccload_lab::session::run_or_resume(
        &root,
        other.to_str().unwrap(),
        false,
        None,
        Some(dir.clone()),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("different scenario file"), "{e}");
    // Thresholds and prose may change between sittings: the finished runs
    // are kept (nothing is left to run), the file used is kept beside.
    let judged = tmp.join("judged.toml");
    std::fs::write(
        &judged,
        format!(
            "{}\n[[checks]]\ncc = \"ccpd\"\nutilisation_min = 0.5\nwhy = \"w\"\n",
            text.replace("5 s each", "5 s each (edited)")
        ),
    )
    .unwrap();
    let (_, _, kept) = ccload_lab::session::run_or_resume(
        &root,
        judged.to_str().unwrap(),
        false,
        None,
        Some(dir.clone()),
    )
    .expect("a checks-only change resumes");
    assert_eq!(kept.len(), 2);
    assert_eq!(
        kept[1].goodput_mbit, again[1].goodput_mbit,
        "kept, not re-run"
    );
    let copies = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("scenario-resume-")
        })
        .count();
    assert_eq!(copies, 1);
}

/// iperf3 as a scenario's sender (docs/lab.md, "Senders"): two iperf3
/// flows (the second from 1 s, stopped by the run at 4 s) and a lab flow
/// share the link, all ccpd (beside a cubic flow a 6-s ccpd flow's share
/// is the luck of when its first drain comes: one CI run read 1.0 Mbit/s
/// against cubic's 26); the iperf3 flows are sampled from iperf3's own
/// data socket, run the controller iperf3 was told to use (`-C ccpd`:
/// ccpd's telemetry shows three sending flows), the stopped one stops;
/// nothing of iperf3's outlives the run.
#[test]
fn iperf3_flows_are_sampled_from_iperf3s_socket_and_run_its_controller() {
    let _g = privileged!();
    if !ccload_testbed::iperf3::available() {
        eprintln!("SKIPPED: no iperf3 on PATH (scripts/setup.sh installs it)");
        return;
    }
    let _a = ccload_itests::Attached::new("ccpd", &[]);
    let mut w = ccload_itests::Watch::start(&["--algo", "ccpd"]);
    assert!(w.wait_holding("ccpd"), "watch never started");
    let sc: Scenario = toml::from_str(
        r#"
title = "t"
paper = "test"
description = "two iperf3 flows (one from 1 s to 4 s) and a lab flow, all ccpd"
ccs = ["ccpd"]
sender = "iperf3"
flows = [{ cc = "$cc" }, { cc = "$cc", start_s = 1.0, stop_s = 4.0 }, { cc = "$cc", sender = "lab" }]
duration_s = 6
warmup_s = 2
repetitions = 1
[grid]
rate_mbit = 30
rtt_ms = [20]
buffer_bdp = [1.0]
[quick]
"#,
    )
    .unwrap();
    let case = &sc.cases()[0];
    let r = run_case(&sc, case, "ccpd", 0, &mut |_| {}).expect("run");
    let mut recs = Vec::new();
    while let Ok(v) = w.rx.recv_timeout(std::time::Duration::from_millis(300)) {
        recs.push(v);
    }
    w.stop();
    let s = &r.summary;
    for f in &s.flows {
        eprintln!(
            "flow {} ({}): {:.2} Mbit/s, {} bytes, completion {:?}",
            f.flow, f.cc, f.goodput_mbit, f.bytes, f.completion_s
        );
    }
    assert_eq!(s.flows.len(), 3);
    let n = |i: usize| r.samples.iter().filter(|x| x.flow == i).count();
    // 10-ms samples from the data stream's first round trips on: ~600
    // for the timed flow (iperf3's control exchange first).
    assert!(
        (400..=620).contains(&n(0)),
        "{} samples of the timed flow",
        n(0)
    );
    // The second flow sends from 1 s until the run stops its iperf3 at
    // 4 s: what it has acknowledged grows in between and not after.
    let rx1 = |from: f64, to: f64| {
        let at = |t: f64| {
            r.samples
                .iter()
                .rfind(|x| x.flow == 1 && x.t <= t)
                .map_or(0, |x| x.rx_bytes)
        };
        at(to) - at(from)
    };
    // At least 100 segments: what a late joiner gets in its first seconds
    // beside two flows that fill the buffer is the controller's share, not
    // the sampler's (one run of this cell: 0.66 MB, where 1 MB was asked;
    // coexist's "late" mix judges that share over 40 s).  A sampler on the
    // wrong socket or a stopped one reads no growth here.
    assert!(
        rx1(1.5, 3.5) > 100 * 1448,
        "{} bytes from 1.5 to 3.5 s",
        rx1(1.5, 3.5)
    );
    assert_eq!(rx1(4.6, 6.0), 0, "bytes after the flow's stop at 4 s");
    let rx0: Vec<u64> = r
        .samples
        .iter()
        .filter(|x| x.flow == 0)
        .map(|x| x.rx_bytes)
        .collect();
    assert!(rx0.windows(2).all(|p| p[0] <= p[1]) && rx0.last() > rx0.first());
    assert!(s.flows.iter().all(|f| f.goodput_mbit > 0.5));
    assert!(
        s.utilisation > 0.85 && s.utilisation <= 1.01,
        "utilisation {}",
        s.utilisation
    );
    // ccpd's rounds from the senders' side: three flows sending for the
    // run, so iperf3's two data sockets ran ccpd (its control socket, if
    // ccpd at all, sends a few hundred bytes: a round or two).
    let mut rounds = std::collections::BTreeMap::<&str, usize>::new();
    for v in &recs {
        if v["remote"]
            .as_str()
            .is_some_and(|a| a.starts_with("10.77.2.2:"))
        {
            *rounds.entry(v["local"].as_str().unwrap_or("")).or_default() += 1;
        }
    }
    assert!(
        rounds.values().filter(|&&n| n >= 10).count() >= 3,
        "ccpd rounds per sending flow: {rounds:?}"
    );
    // No iperf3 child of this process is left (each was stopped and reaped).
    let me = std::process::id().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .filter(|st| st.contains("(iperf3)") && st.split_whitespace().nth(3) == Some(me.as_str()))
        .collect();
    assert!(left.is_empty(), "iperf3 left running: {left:?}");
    assert!(
        !netns_names().contains(&format!("ccl-t{}-", std::process::id())),
        "namespaces left behind"
    );
}
