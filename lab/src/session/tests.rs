//! The session's unit tests (no privileges: directories, the confirm
//! policy, the failure explanation).

use super::check::*;
use super::*;
use crate::checks::CheckOutcome;

fn run(case: &str, cc: &str, valid: bool) -> RunSummary {
    RunSummary {
        case: case.into(),
        cc: cc.into(),
        valid,
        ..Default::default()
    }
}

fn outcome(case: &str, cc: &str, against: &str, pass: bool) -> CheckOutcome {
    CheckOutcome {
        case: case.into(),
        cc: cc.into(),
        against: against.into(),
        metric: "goodput",
        value: 0.0,
        reference: 0.0,
        bound: String::new(),
        pass,
        why: String::new(),
        runs: 1,
        confirm_reps: 0,
        paired: None,
    }
}

#[test]
fn only_failing_thresholds_on_invalid_runs_are_measured_again() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sc = Scenario::load(&scenario_path(&root, "acceptance").unwrap())
        .unwrap()
        .quick();
    // A cell with its own duration keeps it when measured again.
    let long = sc.cells.iter().find(|c| c.duration_s.is_some()).unwrap();
    let runs = [
        run(&long.case, "ccpd", false),
        run(&long.case, "cubic", true),
        run("B", "hetcp", true),
        run("B", "reno", true),
        run("C", "ctcp_plus", false),
        run("C", "reno", true),
        run("D", "ub_reno", true),
        run("D", "reno", false),
        // valid, but the path stood still for 20 ms of a 40-ms RTT
        RunSummary {
            lateness_max_us: 20_000,
            rtt_base_ms: 40.0,
            ..run("E", "ctcp_plus", true)
        },
        run("E", "reno", true),
        // valid, its longest hold-up 3 ms: under an eighth of 40 ms
        RunSummary {
            lateness_max_us: 3_000,
            rtt_base_ms: 40.0,
            ..run("F", "ctcp_plus", true)
        },
        run("F", "reno", true),
    ];
    let outs = [
        // failing, its controller's run late: both runs again
        outcome(&long.case, "ccpd", "cubic", false),
        // failing on valid runs: a real miss, not measured again
        outcome("B", "hetcp", "reno", false),
        // passing on a late run: kept
        outcome("C", "ctcp_plus", "reno", true),
        // failing, the reference's run late
        outcome("D", "ub_reno", "reno", false),
        // a threshold without a reference
        outcome("D", "ub_reno", "", false),
        // failing on a stalled run: measured again
        outcome("E", "ctcp_plus", "reno", false),
        // failing, no run stalled: a real miss
        outcome("F", "ctcp_plus", "reno", false),
    ];
    let cells = suspect_cells(&sc, &outs, &runs);
    let got: Vec<(&str, Vec<&str>, Option<f64>)> = cells
        .iter()
        .map(|c| {
            (
                c.case.as_str(),
                c.ccs.iter().map(|s| s.as_str()).collect(),
                c.duration_s,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (long.case.as_str(), vec!["ccpd", "cubic"], long.duration_s),
            ("D", vec!["ub_reno", "reno"], None),
            ("E", vec!["ctcp_plus", "reno"], None),
        ]
    );
}

/// A stall is a hold-up of more than an eighth of the base RTT, at least
/// 2 ms; of two measurements a check keeps the valid, unstalled, less
/// late one.
#[test]
fn a_stall_is_an_eighth_of_the_rtt_and_ranks_behind_a_clean_run() {
    let at = |rtt_ms: f64, max_us: u64, p99_us: u64, valid: bool| RunSummary {
        rtt_base_ms: rtt_ms,
        lateness_max_us: max_us,
        lateness_p99_us: p99_us,
        ..run("A", "reno", valid)
    };
    assert!(!at(40.0, 5_000, 50, true).stalled());
    assert!(at(40.0, 5_001, 50, true).stalled());
    assert!(!at(10.0, 2_000, 50, true).stalled(), "the 2-ms floor");
    assert!(at(10.0, 2_001, 50, true).stalled());
    assert!(!at(190.0, 20_000, 50, true).stalled(), "20 ms of 190");
    // no base RTT measured: the floor alone
    assert!(at(0.0, 2_001, 50, true).stalled());
    let clean_but_late = at(40.0, 4_000, 150, true);
    let stalled = at(40.0, 19_000, 60, true);
    let invalid = at(40.0, 900, 400, false);
    assert!(clean_but_late.lateness_rank() < stalled.lateness_rank());
    assert!(stalled.lateness_rank() < invalid.lateness_rank());
    assert!(at(40.0, 3_000, 90, true).lateness_rank() < clean_but_late.lateness_rank());
}

#[test]
fn an_interrupted_check_is_judged_so_far_and_never_passes() {
    let dir = std::env::temp_dir().join(format!("ccl-judge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = [run("A", "ccpd", true), run("A", "cubic", true)];
    let pass = [outcome("A", "ccpd", "cubic", true)];
    let cmd = "cargo xtask lab check acceptance --resume X";
    // Every threshold that ran passes, but 2 of 10 runs is no verdict.
    let e = judge(&dir, &runs, &pass, 10, Some(cmd))
        .unwrap_err()
        .to_string();
    assert!(e.contains("interrupted after 2 of 10 runs"), "{e}");
    assert!(e.contains(cmd), "{e}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("**Incomplete:** 2 of 10 runs"), "{report}");
    let checks = std::fs::read_to_string(dir.join("checks.json")).unwrap();
    assert!(checks.contains("\"pass\": true"), "{checks}");
    // The same grid whole: a pass; one failing threshold: a failure.
    std::fs::remove_file(dir.join("report.md")).unwrap();
    judge(&dir, &runs, &pass, 2, None).unwrap();
    let fail = [outcome("A", "ccpd", "cubic", false)];
    let e = judge(&dir, &runs, &fail, 2, None).unwrap_err().to_string();
    assert!(e.contains("1 acceptance threshold(s) failed"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A failing retransmission threshold says where the flows' bursts
/// came and what our controller's telemetry said in them (from the
/// re-measuring directory when the kept run is there).
#[test]
fn a_retransmission_failure_explains_its_bursts() {
    use crate::summary::{FlowSummary, RetransPeak};
    let dir = std::env::temp_dir().join(format!("ccl-retx-{}", std::process::id()));
    let tel = dir.join("again").join("telemetry");
    std::fs::create_dir_all(&tel).unwrap();
    let rec = |t_us: u64, cwnd: u32, loss_class: u32| {
        format!(
            "{{\"local\":\"10.77.1.1:5000\",\"t_us\":{t_us},\"phase\":\"CA\",\"mode\":3,\
             \"loss_class\":{loss_class},\"cwnd\":{cwnd},\"rtts_us\":79000,\
             \"rtt_min_us\":40000,\"rtt_max_us\":120000}}\n"
        )
    };
    // run time 0 at t_us 1e9; the burst at 7.1 s
    let text = [
        rec(1_000_000_000, 10, 0),
        rec(1_007_000_000, 300, 2),
        rec(1_007_300_000, 310, 1),
    ]
    .concat();
    std::fs::write(tel.join("c_ccpd_rep0.jsonl"), text).unwrap();
    let peak = RetransPeak {
        t_s: 7.1,
        n: 335,
        cwnd: 310,
        cwnd_max: 700,
        ca_state: 3,
    };
    let mut r = run("c", "ccpd", true);
    r.lateness_max_us = 23_400;
    r.repairs = Some([1, 0]);
    r.flows = vec![
        FlowSummary {
            flow: 0,
            cc: "ccpd".into(),
            retransmits: 387,
            retrans_peak: Some(peak),
            ..Default::default()
        },
        FlowSummary {
            flow: 1,
            cc: "cubic".into(),
            retransmits: 63,
            ..Default::default()
        },
    ];
    let e = explain_retransmissions(&dir, &[r], "c", "ccpd");
    assert!(
        e.contains("flow 0 ccpd: 387 retransmitted, 335 of them in 0.5 s from 7.10 s (cwnd 310, up to 700; ca_state 3)"),
        "{e}"
    );
    assert!(e.contains("flow 1 cubic: 63 retransmitted\n"), "{e}");
    assert!(
        e.contains("c ccpd rep 1: delay line late by up to 23.4 ms; the guard repaired ssthresh 1 and cwnd 0 time(s)\n"),
        "{e}"
    );
    // the two records in 6.9-7.6 s, from the again/ directory
    assert!(e.contains("again/telemetry/c_ccpd_rep0.jsonl"), "{e}");
    assert!(
        e.contains("2 records, phase CA, mode 3, loss_class 2/1, cwnd 300-310, rtts 79-79 ms, rtt_min 40-40 ms, rtt_max 120-120 ms"),
        "{e}"
    );
    assert_eq!(explain_retransmissions(&dir, &[], "c", "ccpd"), "");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_quick_confirmation_makes_at_most_half_its_runs_again() {
    assert_eq!(remeasure_budget(true, Remeasure::InvalidOrStalled, 6), 3);
    assert_eq!(remeasure_budget(true, Remeasure::InvalidOrStalled, 1), 1);
    // a full check's confirmation and `lab run` are not bounded
    assert_eq!(
        remeasure_budget(false, Remeasure::InvalidOrStalled, 6),
        usize::MAX
    );
    assert_eq!(remeasure_budget(true, Remeasure::Invalid, 6), usize::MAX);
}

#[test]
fn a_stopped_confirmation_is_resumed() {
    let dir = std::env::temp_dir().join(format!("ccl-sub-{}", std::process::id()));
    let d = dir.join("confirm");
    // Never started: a new directory.
    assert_eq!(sub_dir(&dir, "confirm"), (Some(d.clone()), None));
    // An empty directory is no session to resume.
    std::fs::create_dir_all(&d).unwrap();
    assert_eq!(sub_dir(&dir, "confirm"), (Some(d.clone()), None));
    // A session's directory (its scenario is copied there first):
    // resumed; a sibling is not.
    std::fs::write(d.join("scenario.toml"), "").unwrap();
    assert_eq!(sub_dir(&dir, "confirm"), (None, Some(d.clone())));
    assert_eq!(sub_dir(&dir, "again"), (Some(dir.join("again")), None));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failing_comparisons_are_confirmed_with_those_sharing_a_remeasured_cc() {
    let o = |case: &str, cc: &str, against: &str, pass: bool, runs, reps| {
        let mut x = outcome(case, cc, against, pass);
        x.runs = runs;
        x.confirm_reps = reps;
        x
    };
    let outs = [
        o("A", "ctcp_plus", "reno", false, 1, 3),
        o("A", "ub_reno", "reno", false, 1, 3),
        // passing, or without a reference, or without confirm_reps
        o("A", "hetcp", "reno", true, 1, 3),
        o("A", "ccpd", "", false, 1, 0),
        o("B", "hetcp", "cubic", false, 1, 0),
        // already measured three times
        o("C", "ctcp_plus", "reno", false, 3, 3),
        o("D", "ub_reno", "reno", false, 2, 3),
        // a case whose check asks for nine (confirm_reps_in)
        o("E", "ub_reno", "reno", false, 1, 9),
        // passing, but its reference is re-measured for ub_reno: as
        // often as ub_reno; hetcp against cubic there is untouched
        o("F", "ub_reno", "reno", false, 1, 3),
        o("F", "ctcp_plus", "reno", true, 1, 3),
        o("F", "hetcp", "cubic", true, 1, 3),
        // an absolute floor of a check without `against` (share_min):
        // its CC alone, and never when it passed
        o("G", "ctcp_plus", "", false, 1, 3),
        o("A", "ccpd", "", true, 1, 3),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sc = Scenario::load(&scenario_path(&root, "acceptance").unwrap()).unwrap();
    let got: Vec<(String, Vec<String>, usize)> = confirm_cells(&sc, &outs)
        .into_iter()
        .map(|(c, n)| (c.case, c.ccs, n))
        .collect();
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        [
            (
                "A".to_string(),
                v(&["ctcp_plus", "reno", "ub_reno", "hetcp"]),
                2
            ),
            ("D".to_string(), v(&["ub_reno", "reno"]), 1),
            ("E".to_string(), v(&["ub_reno", "reno"]), 8),
            ("F".to_string(), v(&["ub_reno", "reno", "ctcp_plus"]), 2),
            ("G".to_string(), v(&["ctcp_plus"]), 2),
        ]
    );
}

/// A check resumed after its scenario file changed in prose only: the copy
/// the results directory keeps names its traces relative to configs/lab/,
/// where it came from, not to the directory it sits in (docs/grid/ has no
/// traces/), and its runs are compared all the same.
#[test]
fn a_grid_resumes_after_its_scenario_changed_in_prose() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = scenario_path(&root, "cellular").unwrap();
    let dir = std::env::temp_dir().join(format!("ccl-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        dir.join("scenario.toml"),
        format!("# an older comment\n{text}"),
    )
    .unwrap();
    let got = results_dir(&root, &path, "cellular", false, None, Some(&dir));
    // runs that differ are still refused
    std::fs::write(
        dir.join("scenario.toml"),
        text.replace("duration_s = 30", "duration_s = 31"),
    )
    .unwrap();
    let other = results_dir(&root, &path, "cellular", false, None, Some(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got.unwrap(), dir);
    let e = other.unwrap_err().to_string();
    assert!(e.contains("its runs differ"), "{e}");
}
