//! `-j/--json` and `-p/--pretty` on every command: each prints JSON that
//! parses (compact: one document per line), tunable values are numbers,
//! and errors are `{"error": ..., "exit_code": N}` on stdout with nothing
//! on stderr.

use std::process::Output;

use ccload_itests::*;
use serde_json::Value;

/// Detaches everything and removes the temp dir, even on failure.
struct Cleanup(std::path::PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--all"]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run `ccload args`, require exit `code`, and parse stdout: under `-j`
/// exactly one compact document per line (one line unless `lines`).
fn doc(args: &[&str], code: i32) -> Value {
    let o = ccload(args);
    check_exit(args, &o, code);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "ccload {args:?}: want one JSON line, got:\n{out}"
    );
    serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("ccload {args:?}: not JSON ({e}):\n{out}"))
}

fn check_exit(args: &[&str], o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "ccload {args:?}: exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// An error document: message, exit code, stderr empty.
fn error(args: &[&str], code: i32, says: &str) {
    let o = ccload(args);
    check_exit(args, &o, code);
    assert!(
        o.stderr.is_empty(),
        "ccload {args:?}: stderr under -j: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "ccload {args:?}: error is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    });
    let msg = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {v}"));
    assert!(
        msg.contains(says),
        "ccload {args:?}: {msg:?} lacks {says:?}"
    );
    assert_eq!(v["exit_code"], code, "{v}");
}

/// The commands that need no root: algos, the field help of stats, watch
/// and status, and usage errors.
#[test]
fn offline_commands_and_usage_errors_speak_json() {
    let v = doc(&["-j", "algos"], 0);
    let algos: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["algo"].as_str().unwrap())
        .collect();
    assert_eq!(algos, ["ccpd", "hetcp", "ctcp_plus", "ub_reno"]);
    let ub = &v[3]["tunables"];
    let alpha = ub
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "alpha")
        .unwrap();
    assert_eq!(
        alpha["default"], 1.02,
        "rounded as the user set it: {alpha}"
    );

    // -p: indented, same document.
    let o = ccload(&["algos", "--pretty"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.lines().count() > 50 && text.contains("\n  {"),
        "not indented"
    );
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);

    let f = doc(&["stats", "--help-fields", "-j"], 0);
    assert!(f["counters"].as_array().unwrap().len() >= 5, "{f}");
    assert!(
        f["histograms"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"] == "srtt"),
        "{f}"
    );
    let w = doc(&["watch", "--help-fields", "-j"], 0);
    assert!(
        w["fields"]["ccpd"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "c_sps"),
        "{w}"
    );
    assert!(
        w["header"].as_array().unwrap().iter().any(|x| x == "cwnd"),
        "{w}"
    );
    let s = doc(&["status", "--help-stats", "-j"], 0);
    assert!(
        s.as_array().unwrap().iter().all(|x| x["help"].is_string()),
        "{s}"
    );

    // Usage errors raised by clap are JSON under -j too; help stays text.
    error(
        &["-j", "attach", "--algo", "vegas"],
        2,
        "invalid value 'vegas' for '--algo <ALGO>' [possible values: ccpd, hetcp, ctcp_plus, ub_reno]",
    );
    error(&["-j", "tune", "--algo", "ccpd", "--set", "kp"], 2, "kp");
    error(&["-j", "top"], 2, "full-screen");
    let h = ccload(&["-j", "attach", "--help"]);
    assert!(h.status.success() && String::from_utf8_lossy(&h.stdout).contains("Usage"));
}

#[test]
fn every_state_command_speaks_json_with_numbers() {
    let _g = privileged!();
    let dir = std::env::temp_dir().join(format!("ccl-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _c = Cleanup(dir.clone());
    let _ = ccload(&["detach", "--all"]);

    // Bad input: one JSON error, nothing changed.
    error(
        &["-j", "tune", "--algo", "ccpd", "--set", "kp=999"],
        2,
        "out of range",
    );
    error(&["-j", "detach", "--algo", "ccpd"], 1, "not attached");

    let a = doc(&["-j", "attach", "--algo", "ccpd"], 0);
    assert_eq!(
        (a["algo"].as_str(), a["outcome"].as_str()),
        (Some("ccpd"), Some("attached"))
    );
    assert_eq!(a["pin_dir"], "/sys/fs/bpf/ccload/ccpd");
    let again = doc(&["attach", "--algo", "ccpd", "--json"], 0);
    assert_eq!(again["outcome"], "already_attached");

    let st = doc(&["-j", "status"], 0);
    let t = &st["attached"][0]["tunables"];
    assert!(
        t["kp"].is_f64() && t["kd"].is_u64(),
        "numbers, not strings: {t}"
    );
    assert_eq!((t["kp"].as_f64(), t["kd"].as_u64()), (Some(2.0), Some(100)));

    let tu = doc(
        &[
            "-j", "tune", "--algo", "ccpd", "--set", "kp=4", "--set", "kd=50",
        ],
        0,
    );
    let ch = tu["changes"].as_array().unwrap();
    assert_eq!(ch.len(), 2, "{tu}");
    assert_eq!(
        (
            ch[0]["name"].as_str(),
            ch[0]["old"].as_f64(),
            ch[0]["new"].as_f64()
        ),
        (Some("kp"), Some(2.0), Some(4.0))
    );
    assert_eq!(
        (ch[1]["old"].as_u64(), ch[1]["new"].as_u64()),
        (Some(100), Some(50))
    );
    let show = doc(&["-j", "tune", "--algo", "ccpd", "--show"], 0);
    let kp = show["tunables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "kp")
        .unwrap();
    assert_eq!(
        (
            kp["value"].as_f64(),
            kp["default"].as_f64(),
            kp["max"].as_f64()
        ),
        (Some(4.0), Some(2.0), Some(16.0))
    );
    let reset = doc(&["-j", "tune", "--algo", "ccpd", "--reset"], 0);
    assert_eq!(reset["changes"].as_array().unwrap().len(), 2, "{reset}");

    assert!(doc(&["-j", "flows"], 0).is_array());
    let stats = doc(&["-j", "stats"], 0);
    assert_eq!(stats["algos"][0]["algo"], "ccpd", "{stats}");
    let d = ccload(&["-j", "doctor"]);
    let checks: Value = serde_json::from_slice(&d.stdout).unwrap();
    assert!(checks
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["ok"].is_boolean()));
    assert_eq!(
        doc(&["-j", "rollout", "abort", "--interrupted"], 0)["rolled_back"],
        serde_json::json!([])
    );
    assert_eq!(
        doc(&["-j", "rollout", "status"], 0)["rollouts"],
        serde_json::json!([])
    );

    // Watch: JSON lines (possibly none: no flow runs).
    let o = ccload(&["-j", "watch", "--algo", "ccpd", "--duration", "0.3"]);
    check_exit(&["watch"], &o, 0);
    for l in String::from_utf8(o.stdout).unwrap().lines() {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("watch line ({e}): {l}"));
    }

    // cgroups.
    let cg = TestCgroup::new("json");
    let cw = TestCgroup::new("jsonw");
    let set = doc(&["-j", "cgroup", "set", cg.path(), "--algo", "hetcp"], 0);
    assert_eq!(
        (set["algo"].as_str(), set["auto_attached"].as_bool()),
        (Some("hetcp"), Some(true)),
        "{set}"
    );
    assert!(set["cgroup_id"].as_u64().unwrap() > 0);
    assert_eq!(doc(&["-j", "cgroup", "watch", cw.path()], 0)["watch"], true);
    let list = doc(&["-j", "cgroup", "list"], 0);
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    assert_eq!(
        doc(&["-j", "cgroup", "unset", cw.path()], 0)["unbound"],
        true
    );
    let un = doc(&["-j", "cgroup", "unset", cw.path()], 1);
    assert_eq!(
        (un["unbound"].as_bool(), un["exit_code"].as_i64()),
        (Some(false), Some(1)),
        "{un}"
    );
    assert!(un["error"].as_str().unwrap().contains("not bound"));
    doc(&["-j", "cgroup", "unset", cg.path()], 0);

    // apply: the plan as objects, then an idempotent second apply.
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[algos.ub_reno]\nset = {{ beta = 0.95 }}\n[[cgroups]]\npath = \"{}\"\nalgo = \"ub_reno\"\n",
            cg.path()
        ),
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let dry = doc(&["-j", "apply", c, "--dry-run"], 0);
    let ops: Vec<&str> = dry["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["op"].as_str().unwrap())
        .collect();
    // Declarative: what the config does not name is detached.
    assert_eq!(ops, ["attach", "tune", "detach", "detach", "bind"], "{dry}");
    assert_eq!(dry["changes"][1]["changes"][0]["new"], 0.95, "{dry}");
    assert_eq!(
        (dry["dry_run"].as_bool(), dry["applied"].as_u64()),
        (Some(true), Some(0))
    );
    let ap = doc(&["-j", "apply", c], 0);
    assert_eq!(ap["applied"], 5, "{ap}");
    assert_eq!(
        doc(&["-j", "apply", c], 0)["changes"],
        serde_json::json!([])
    );

    let det = doc(&["-j", "detach", "--all"], 0);
    let mut gone: Vec<&str> = det["detached"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    gone.sort();
    assert_eq!(gone, ["ub_reno"], "{det}");
    assert_eq!(det["cgroup_bindings_removed"], 1, "{det}");
}
