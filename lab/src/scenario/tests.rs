//! Scenario parsing, validation and expansion.

use super::*;

#[test]
fn every_shipped_scenario_parses_and_its_quick_variant_is_short() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/lab");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let s = Scenario::load(&p).unwrap_or_else(|e| panic!("{e:#}"));
            let q = s.quick();
            q.validate().unwrap();
            // Under 2 minutes: runs x duration plus ~1.5 s of setup each
            // (the acceptance subset, run by scripts/test.sh: 10 minutes).
            let secs: f64 = q
                .cases()
                .iter()
                .map(|c| {
                    let n = q.ccs.iter().filter(|cc| q.wants(&c.label, cc)).count();
                    n as f64 * (q.for_case(&c.label).duration_s + 1.5) * q.reps_for(&c.label) as f64
                })
                .sum::<f64>();
            let limit = if q.checks.is_empty() { 120.0 } else { 600.0 };
            assert!(secs < limit, "{}: quick takes ~{secs:.0} s", p.display());
            assert!(!s.cases().is_empty());
            for other in &s.also {
                let o = Scenario::load(&dir.join(format!("{other}.toml")))
                    .unwrap_or_else(|e| panic!("{}: also {other}: {e:#}", p.display()));
                assert!(
                    !o.checks.is_empty(),
                    "{other}: `also` checks it, it has no checks"
                );
                assert!(o.also.is_empty(), "{other}: `also` nests one level only");
            }
            n += 1;
        }
    }
    assert!(n >= 4, "four papers' scenarios at least, found {n}");
}

/// A scenario of `ccs` (a TOML array), one flow per run, 10-s runs
/// repeated `reps` times, then `rest` (cells, `[grid]`, `[quick]`,
/// `[[checks]]`); not validated.
pub(crate) fn scenario(ccs: &str, reps: u32, rest: &str) -> Scenario {
    toml::from_str(&format!(
        "title = \"t\"\npaper = \"p\"\ndescription = \"d\"\nccs = {ccs}\n\
         duration_s = 10\nrepetitions = {reps}\nflows = [{{ cc = \"$cc\" }}]\n{rest}"
    ))
    .unwrap()
}

/// A short-flow mix: its arrivals join the mix's flows as fixed-size
/// arrivals, the same in every run of the case, their load of the
/// case's rate; bad arrivals and slowdown checks are refused.
#[test]
fn a_short_flow_mix_expands_its_arrivals_and_checks_them() {
    let text = |arrivals: &str, check: &str| {
        format!(
            "[grid]\nrate_mbit = 40\nrtt_ms = [40]\nbuffer_bdp = [1]\n\
             [[mixes]]\nname = \"web\"\nflows = [{{ cc = \"$cc\" }}]\n\
             arrivals = {{ {arrivals} }}\n[quick]\n\
             [[checks]]\ncc = \"ccpd\"\nagainst = \"cubic\"\n{check}why = \"w\"\n"
        )
    };
    let good = "load = 0.5, sizes = \"web_search\", seed = 1, from_s = 1";
    let check = "slowdown_ratio_max = 1.0\nslowdown_bin = \"small\"\nslowdown_q = 0.99\n";
    let s = scenario(r#"["ccpd", "cubic"]"#, 1, &text(good, check));
    s.validate().unwrap();
    let c = s.cases();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].label, "40ms_1bdp_web");
    let f: Vec<&FlowSpec> = c[0].run_flows().collect();
    // the long flow, then the arrivals: 0.5 x 40 Mbit/s over 9 s of
    // 1.67-MB flows is about 13
    assert!(!f[0].arrival && f[0].bytes.is_none());
    let a = &f[1..];
    assert!((5..30).contains(&a.len()), "{}", a.len());
    assert!(a
        .iter()
        .all(|x| x.arrival && x.bytes.is_some() && x.cc == "$cc"));
    assert!(a.iter().all(|x| (1.0..10.0).contains(&x.start_s)));
    let again = s.cases();
    assert!(again[0]
        .run_flows()
        .zip(c[0].run_flows())
        .all(|(x, y)| x.start_s == y.start_s && x.bytes == y.bytes));
    for (arr, chk, want) in [
        (
            "load = 1.5, sizes = \"web_search\", seed = 1",
            check,
            "load",
        ),
        ("load = 0.5, sizes = \"hadoop\", seed = 1", check, "hadoop"),
        (
            good,
            "slowdown_ratio_max = 1.0\nslowdown_bin = \"tiny\"\nslowdown_q = 0.99\n",
            "slowdown_bin",
        ),
        (
            good,
            "slowdown_ratio_max = 1.0\nslowdown_bin = \"small\"\nslowdown_q = 0.9\n",
            "slowdown_q",
        ),
    ] {
        let e = scenario(r#"["ccpd", "cubic"]"#, 1, &text(arr, chk))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// `[[grid.traces]]`: cases per trace sized by its mean, files read
/// and checked when the scenario is loaded (one error naming the file,
/// before any run), synthetic links generated, checks filtered by
/// trace name.
#[test]
fn trace_grids_load_check_and_label_their_cases() {
    let dir = std::env::temp_dir().join(format!("ccl-lab-tr-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("tr")).unwrap();
    // 2 opportunities a ms for 1 s: 24 Mbit/s.
    let two: String = (1..=1000).map(|t| format!("{t}\n{t}\n")).collect();
    std::fs::write(dir.join("tr/two.down"), &two).unwrap();
    std::fs::write(dir.join("tr/bad.down"), "1\n5\n4\n").unwrap();
    let text = |down: &str, mean: f64, offset: f64| {
        format!(
            r#"title = "t"
paper = "p"
description = "d"
ccs = ["ccpd", "bbr"]
duration_s = 10
repetitions = 1
flows = [{{ cc = "$cc" }}]
[grid]
rate_mbit = 20
rtt_ms = [40]
buffer_bdp = [1, 4]
[[grid.traces]]
name = "two"
down = "{down}"
mean_mbit = {mean}
offset_s = {offset}
[[grid.traces]]
name = "alt"
alternate = {{ rates_mbit = [24, 6], every_s = [1, 4], seed = 1 }}
[quick]
[[checks]]
cc = "ccpd"
against = "bbr"
trace = ["alt"]
goodput_ratio_min = 0.9
why = "w"
"#
        )
    };
    let load = |t: String| {
        let p = dir.join("s.toml");
        std::fs::write(&p, t).unwrap();
        Scenario::load(&p).map_err(|e| format!("{e:#}"))
    };
    let s = load(text("tr/two.down", 24.0, 0.5)).unwrap();
    let cases = s.cases();
    let labels: Vec<&str> = cases.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "two_40ms_1bdp",
            "two_40ms_4bdp",
            "alt_40ms_1bdp",
            "alt_40ms_4bdp"
        ]
    );
    // 24 Mbit/s x 40 ms = 80 packets; alt's nominal rate is 15.
    assert_eq!(cases[0].link.buffer_pkts, 80);
    assert_eq!(cases[2].link.buffer_pkts, 50);
    assert_eq!(cases[0].link.rate_mbit, 24.0);
    let tl = s.trace_link(&cases[1]).unwrap().unwrap();
    assert_eq!((tl.offset_ms, tl.buffer), (500, Limit::Packets(320)));
    assert!((tl.down.mean_mbit() - 24.0).abs() < 1e-9 && tl.up.is_none());
    let alt = s.trace_link(&cases[2]).unwrap().unwrap();
    assert!(
        (alt.down.mean_mbit() - 15.0).abs() < 2.0,
        "{}",
        alt.down.mean_mbit()
    );
    // The check applies to alt's cases only.
    let c = &s.checks[0];
    assert!(!applies(&cases[0], c) && applies(&cases[2], c));
    // The record of a run (no files) still has its cases.
    let rec: Scenario = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
    assert_eq!(rec.cases().len(), 4);

    // Bad files, means and offsets: one error each, naming the file.
    let e = load(text("tr/bad.down", 24.0, 0.0)).unwrap_err();
    assert!(e.contains("bad.down") && e.contains("line 3"), "{e}");
    let e = load(text("tr/none.down", 24.0, 0.0)).unwrap_err();
    assert!(e.contains("none.down"), "{e}");
    let e = load(text("tr/two.down", 12.0, 0.0)).unwrap_err();
    assert!(
        e.contains("24.00 Mbit/s") && e.contains("mean_mbit says 12"),
        "{e}"
    );
    let e = load(text("tr/two.down", 24.0, 2.0)).unwrap_err();
    assert!(e.contains("offset_s 2 is past the end"), "{e}");
    let e = load(text("tr/two.down", 24.0, 0.0).replace("name = \"alt\"", "name = \"two\""))
        .unwrap_err();
    assert!(e.contains("two traces named two"), "{e}");
    let e = load(text("tr/two.down", 24.0, 0.0).replace("trace = [\"alt\"]", "trace = [\"x\"]"))
        .unwrap_err();
    assert!(e.contains("no trace named x"), "{e}");

    // `[[grid.paths]]`: an RTT with its own buffer, not every pair.
    let paths = text("tr/two.down", 24.0, 0.0).replace(
        "rtt_ms = [40]\nbuffer_bdp = [1, 4]\n",
        "[[grid.paths]]\nrtt_ms = 40\nbuffer_pkts = 200\n\
         [[grid.paths]]\nrtt_ms = 80\nbuffer_bdp = 1\n",
    );
    let s = load(paths.clone()).unwrap();
    let cases = s.cases();
    let got: Vec<(&str, u32, f64)> = cases
        .iter()
        .map(|c| (c.label.as_str(), c.link.buffer_pkts, c.rtt_ms))
        .collect();
    // 1 BDP at 80 ms: 160 packets of the 24-Mbit/s trace, 100 of alt's 15.
    assert_eq!(
        got,
        [
            ("two_40ms_200p", 200, 40.0),
            ("two_80ms_1bdp", 160, 80.0),
            ("alt_40ms_200p", 200, 40.0),
            ("alt_80ms_1bdp", 100, 80.0)
        ]
    );
    let e =
        load(paths.replace("buffer_pkts = 200", "buffer_pkts = 200\nbuffer_bdp = 4")).unwrap_err();
    assert!(e.contains("exactly one of buffer_bdp, buffer_pkts"), "{e}");
    let e = load(paths.replace("[grid]\n", "[grid]\nrtt_ms = [20]\n")).unwrap_err();
    assert!(e.contains("[[grid.paths]] replaces rtt_ms"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_keys_are_rejected_with_their_location() {
    let dir = std::env::temp_dir().join(format!("ccl-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.toml");
    std::fs::write(
        &p,
        "title = \"x\"\npaper = \"y\"\ndescription = \"z\"\nbogus = 1\n",
    )
    .unwrap();
    let e = format!("{:#}", Scenario::load(&p).unwrap_err());
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.contains("bogus") && e.contains("line 4"), "{e}");
}

#[test]
fn grid_expands_buffers_from_the_bdp() {
    let s = scenario(
        r#"["reno", "ctcp_plus:plus=0"]"#,
        1,
        r#"[grid]
rate_mbit = 100
rtt_ms = [80]
buffer_bdp = [0.125, 1]
[quick]
"#,
    );
    let c = s.cases();
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].link.buffer_pkts, 83); // 667 x 1/8
    assert_eq!(c[1].link.buffer_pkts, 667);
    assert_eq!(c[0].link.delay_ms, 40.0);
    assert_eq!(
        parse_cc("ctcp_plus:plus=0").1,
        vec![("plus".into(), "0".into())]
    );
}

/// A veth grid: past the delay line's rates (0 = unlimited), the hosts'
/// RTT, a case per offload setting; and what a veth link cannot do is
/// refused, as are rates past the delay line's without one.
#[test]
fn a_veth_grid_runs_past_the_delay_line_and_refuses_delays() {
    let s = scenario(
        r#"["ccpd", "cubic"]"#,
        1,
        "[grid]\nveth = true\nrate_mbit = 0\nrates_mbit = [0, 1000]\nrtt_ms = [0]\n\
         buffer_pkts = [500]\noffloads = [false, true]\n[quick]\n",
    );
    s.validate().unwrap();
    let c = s.cases();
    let labels: Vec<&str> = c.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "unlim_veth_500p",
            "unlim_veth_500p_offl",
            "1000M_veth_500p",
            "1000M_veth_500p_offl"
        ]
    );
    assert!(c.iter().all(|c| c.link.veth && c.link.delay_ms == 0.0));
    assert_eq!(
        c.iter().map(|c| c.link.offloads).collect::<Vec<_>>(),
        [false, true, false, true]
    );
    for (grid, what) in [
        (
            "veth = true\nrate_mbit = 0\nrtt_ms = [1]\nbuffer_pkts = [500]",
            "rtt_ms = [0]",
        ),
        (
            "veth = true\nrate_mbit = 0\nrtt_ms = [0]\nbuffer_bdp = [1]",
            "buffer_pkts",
        ),
        (
            "veth = true\nrate_mbit = 200000\nrtt_ms = [0]\nbuffer_pkts = [5]",
            "veth link's rates",
        ),
        (
            "rate_mbit = 1000\nrtt_ms = [1]\nbuffer_bdp = [1]",
            "delay line is measured",
        ),
        (
            "rate_mbit = 0\nrtt_ms = [1]\nbuffer_bdp = [1]",
            "delay line is measured",
        ),
        (
            "rate_mbit = 100\nrtt_ms = [1]\nbuffer_bdp = [1]\noffloads = [true]",
            "needs a veth link",
        ),
    ] {
        let s = scenario(r#"["cubic"]"#, 1, &format!("[grid]\n{grid}\n[quick]\n"));
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains(what), "{grid}: {e}");
    }
}

/// paired_loss: one seed per (case, repetition), shared by the CCs;
/// unset, it is not serialised (recorded grids keep their identity).
#[test]
fn paired_loss_seeds_each_case_and_repetition() {
    let text = |extra: &str| {
        scenario(
            r#"["ub_reno", "reno"]"#,
            2,
            &format!("[grid]\nrate_mbit = 100\nrtt_ms = [190]\nloss = [1e-4]\n{extra}[quick]\n"),
        )
    };
    let plain = text("");
    assert!(!plain.grid.paired_loss);
    assert!(plain.runs_identity()["grid"].get("paired_loss").is_none());
    let paired = text("paired_loss = true\n");
    assert!(paired.grid.paired_loss);
    assert_ne!(plain.runs_identity(), paired.runs_identity());
    let a = loss_seed("100M_190ms_1bdp_loss1e-4", 0);
    assert_eq!(a, loss_seed("100M_190ms_1bdp_loss1e-4", 0));
    assert_ne!(a, loss_seed("100M_190ms_1bdp_loss1e-4", 1));
    assert_ne!(a, loss_seed("100M_190ms_0.5bdp_loss1e-4", 0));
    // The runs' seeds: none without paired_loss; a confirming cell's
    // first run (rep_base 1) is repetition 1, not the grid's 0 again.
    let case = "100M_190ms_1bdp_loss1e-4";
    assert_eq!(plain.loss_seed_for(case, 0), None);
    assert_eq!(paired.loss_seed_for(case, 0), Some(a));
    let mut confirming = paired.clone();
    confirming.cells = vec![Cell {
        case: case.into(),
        ccs: vec!["ub_reno".into(), "reno".into()],
        duration_s: None,
        repetitions: Some(2),
        rep_base: 1,
    }];
    assert_eq!(confirming.loss_seed_for(case, 0), Some(loss_seed(case, 1)));
    assert_eq!(confirming.loss_seed_for(case, 1), Some(loss_seed(case, 2)));
    // rep_base is the check's, never read from or written to a file
    let text = toml::to_string(&confirming.cells[0]).unwrap();
    assert!(!text.contains("rep_base"), "{text}");
}

#[test]
fn a_cell_runs_its_own_repetitions() {
    let text = |cells: &str| {
        scenario(
            r#"["reno", "cubic"]"#,
            2,
            &format!(
                "{cells}\n[grid]\nrate_mbit = 20\nrtt_ms = [10, 80]\nbuffer_bdp = [1]\n[quick]\n"
            ),
        )
    };
    let plain = text(r#"cells = [{ case = "10ms_1bdp", ccs = ["reno"] }]"#);
    plain.validate().unwrap();
    assert_eq!(plain.reps_for("10ms_1bdp"), 2);
    // Unset, the field is not serialised: directories recorded before
    // it existed still resume (their runs' identity is unchanged).
    let id = plain.runs_identity();
    assert!(id["cells"][0].get("repetitions").is_none(), "{id}");
    let more = text(
        r#"cells = [{ case = "10ms_1bdp", ccs = ["reno"], repetitions = 5 },
                   { case = "80ms_1bdp", ccs = ["cubic"] }]"#,
    );
    more.validate().unwrap();
    assert_eq!(more.reps_for("10ms_1bdp"), 5);
    assert_eq!(more.reps_for("80ms_1bdp"), 2);
    let zero = text(r#"cells = [{ case = "10ms_1bdp", ccs = ["reno"], repetitions = 0 }]"#);
    let e = zero.validate().unwrap_err().to_string();
    assert!(e.contains("repetitions >= 1"), "{e}");
}

/// A resumption compares the runs of the variant it makes: a full
/// check's finished runs stand when only the quick variant changed, and
/// a quick check's do not when its quick runs changed.
#[test]
fn the_quick_variant_is_not_part_of_the_full_runs_identity() {
    let with = |quick: &str| {
        scenario(
            r#"["reno"]"#,
            1,
            &format!("[grid]\nrate_mbit = 20\nrtt_ms = [10]\nbuffer_bdp = [1]\n[quick]\n{quick}"),
        )
    };
    let (a, b) = (with("duration_s = 20"), with("duration_s = 30"));
    assert_eq!(a.runs_identity(), b.runs_identity());
    assert_ne!(a.quick().runs_identity(), b.quick().runs_identity());
    assert_ne!(a.runs_identity(), a.quick().runs_identity());
}

/// `sender`: the scenario's default for its flows, a flow's own
/// choice over it, the lab's for a mix's arrivals; `lab` is absent
/// from a run's identity (runs recorded before the field stand) and
/// `iperf3` is in it; an unknown sender is refused.
#[test]
fn a_flow_runs_on_the_sender_it_or_its_scenario_chose() {
    let grid = "[grid]\nrate_mbit = 20\nrtt_ms = [10]\nbuffer_bdp = [1]\n[quick]\n";
    let with = |top: &str| -> Result<Scenario, toml::de::Error> {
        toml::from_str(&format!(
            "title = \"t\"\npaper = \"p\"\ndescription = \"d\"\nccs = [\"reno\"]\n\
             duration_s = 10\nrepetitions = 1\n{top}\n{grid}"
        ))
    };
    let plain = with(r#"flows = [{ cc = "$cc" }]"#).unwrap();
    let iperf = with(
        r#"sender = "iperf3"
flows = [{ cc = "$cc" }, { cc = "cubic", sender = "lab" }]"#,
    )
    .unwrap();
    assert_eq!(plain.sender, Sender::Lab);
    let c = iperf.cases();
    let chosen: Vec<Sender> = c[0]
        .run_flows()
        .map(|f| f.sender.unwrap_or(iperf.sender))
        .collect();
    assert_eq!(chosen, [Sender::Iperf3, Sender::Lab]);
    assert!(plain.runs_identity().get("sender").is_none());
    assert_eq!(iperf.runs_identity()["sender"], "iperf3");
    assert_ne!(
        plain.runs_identity(),
        with(
            r#"sender = "iperf3"
flows = [{ cc = "$cc" }]"#
        )
        .unwrap()
        .runs_identity()
    );
    let e = with(
        r#"sender = "netperf"
flows = [{ cc = "$cc" }]"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("netperf") && e.contains("iperf3"), "{e}");
    let mixed = with(
        r#"flows = []
mixes = [{ name = "web", flows = [{ cc = "$cc" }], arrivals = { load = 0.5, sizes = "web_search", seed = 1, from_s = 1 } }]
sender = "iperf3""#,
    )
    .unwrap();
    let mc = mixed.cases();
    let f: Vec<&FlowSpec> = mc[0].run_flows().collect();
    assert!(f[0].sender.is_none() && f.len() > 1);
    assert!(f[1..]
        .iter()
        .all(|x| x.arrival && x.sender == Some(Sender::Lab)));
    // the quick variant may choose its own
    let q: Scenario = toml::from_str(
        &toml::to_string(&iperf)
            .unwrap()
            .replace("[quick]\n", "[quick]\nsender = \"lab\"\n"),
    )
    .unwrap();
    assert_eq!((q.sender, q.quick().sender), (Sender::Iperf3, Sender::Lab));
    assert_eq!(iperf.quick().sender, Sender::Iperf3);
    let sized = with(
        r#"sender = "iperf3"
flows = [{ cc = "$cc", bytes = 1000000 }]"#,
    )
    .unwrap();
    let e = sized.validate().unwrap_err().to_string();
    assert!(e.contains("iperf3 flows are timed"), "{e}");
    assert!(iperf.validate().is_ok());
}
