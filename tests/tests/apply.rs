//! `ccload apply`: the shipped example configs reconcile the kernel, a
//! second apply changes nothing, --dry-run changes nothing, and a bad config
//! is rejected with its location and changes nothing.

use std::path::PathBuf;

use ccload_itests::*;

/// Removes everything the test applied, even on failure.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--all"]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn example(name: &str, paths: &[(&str, &str)], dir: &std::path::Path) -> PathBuf {
    let src = ccload_itests::repo_root().join("configs").join(name);
    let mut t = std::fs::read_to_string(src).unwrap();
    for (from, to) in paths {
        assert!(t.contains(from), "{name} has {from}");
        t = t.replace(from, to);
    }
    let p = dir.join(name);
    std::fs::write(&p, t).unwrap();
    p
}

fn snapshot() -> (String, String) {
    (
        ccload_ok(&["status", "--json"]),
        ccload_ok(&["cgroup", "list", "--json"]),
    )
}

#[test]
fn examples_apply_idempotently_and_bad_configs_change_nothing() {
    let _s = privileged!();
    let dir = std::env::temp_dir().join(format!("ccl-apply-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _c = Cleanup(dir.clone());
    let (web, backup) = (TestCgroup::new("web"), TestCgroup::new("backup"));
    let f = example(
        "web-server.toml",
        &[
            ("/sys/fs/cgroup/system.slice/nginx.service", web.path()),
            ("/sys/fs/cgroup/system.slice/backup.service", backup.path()),
        ],
        &dir,
    );
    let fs = f.to_str().unwrap();
    // Dry run: the plan, and no change.
    let before = snapshot();
    let out = ccload_ok(&["apply", fs, "--dry-run"]);
    assert!(
        out.contains("+ attach ccpd") && out.contains("dry run"),
        "{out}"
    );
    assert_eq!(snapshot(), before, "--dry-run changed the kernel");
    // Apply, then check every piece.
    let out = ccload_ok(&["apply", fs]);
    eprintln!("{out}");
    assert!(out.contains("+ attach ccpd"), "{out}");
    assert!(out.contains("~ tune ccpd profile 0: kp 2 -> 4"), "{out}");
    assert!(registered("ccpd"));
    // Every tunable of both profiles is what the file says (the rest are
    // the defaults), read back from the kernel's params map.
    let want = |sets: &[(&str, &str)]| {
        let mut p = ccload::bpf::algos::Algo::Ccpd.defaults();
        let sets: Vec<(String, String)> = sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p.apply(&sets).unwrap();
        p.raw
    };
    let p0 = ccload::bpf::read_params(ccload::bpf::algos::Algo::Ccpd, 0).unwrap();
    let p1 = ccload::bpf::read_params(ccload::bpf::algos::Algo::Ccpd, 1).unwrap();
    assert_eq!(p0.raw, want(&[("kp", "4"), ("kd", "100")]), "profile 0");
    assert_eq!(p1.raw, want(&[("kp", "2"), ("kd", "100")]), "profile web");
    let l: serde_json::Value =
        serde_json::from_str(&ccload_ok(&["cgroup", "list", "--json"])).unwrap();
    let find = |p: &str| {
        l.as_array()
            .unwrap()
            .iter()
            .find(|e| e["cgroup"] == p)
            .cloned()
    };
    let w = find(web.path()).expect("web bound");
    assert_eq!(
        (w["algo"].as_str(), w["profile"].as_u64()),
        (Some("ccpd"), Some(1))
    );
    let b = find(backup.path()).expect("backup bound");
    assert_eq!(
        (b["algo"].as_str(), b["profile"].as_u64()),
        (Some("cubic"), Some(0))
    );
    // Named profiles of the applied config work on the command line.
    let byname = ccload_ok(&["tune", "--algo", "ccpd", "--show", "--profile", "web"]);
    assert!(byname.starts_with("ccpd profile 1:"), "{byname}");
    let o = ccload(&["tune", "--algo", "ccpd", "--show", "--profile", "nosuch"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(2) && e.contains("known: web"),
        "{e}"
    );
    // Idempotent.
    let again = ccload_ok(&["apply", fs]);
    assert!(again.trim_end().ends_with("no changes"), "{again}");
    // A bad config: rejected with file:line:col, nothing changed.
    let bad = dir.join("bad.toml");
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("kp = 2, kd = 100", "kp = 2, kd = 100000");
    std::fs::write(&bad, text).unwrap();
    let snap = snapshot();
    let o = ccload(&["apply", bad.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    // Line 13, column 22: the value of kd in [profiles.web].
    assert!(
        e.contains(&format!("{}:13:22:", bad.display())) && e.contains("kd"),
        "{e}"
    );
    assert_eq!(snapshot(), snap, "a rejected config changed the kernel");
    // The bulk-host example replaces it: ccpd detached, hetcp and ub_reno
    // attached, bindings moved.
    let (xfer, repl) = (TestCgroup::new("xfer"), TestCgroup::new("repl"));
    let g = example(
        "bulk-host.toml",
        &[
            ("/sys/fs/cgroup/system.slice/transfer.service", xfer.path()),
            (
                "/sys/fs/cgroup/system.slice/replication.service",
                repl.path(),
            ),
        ],
        &dir,
    );
    let gs = g.to_str().unwrap();
    let out = ccload_ok(&["apply", gs]);
    eprintln!("{out}");
    for want in [
        "+ attach hetcp",
        "+ attach ub_reno",
        "- detach ccpd",
        "- unbind",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    assert!(!registered("ccpd") && registered("hetcp") && registered("ub_reno"));
    let p1 = ccload_ok(&["tune", "--algo", "ub_reno", "--show", "--profile", "1"]);
    assert!(p1.contains("0.95"), "{p1}");
    assert!(ccload_ok(&["apply", gs]).trim_end().ends_with("no changes"));
    // An empty config takes everything away.
    let empty = dir.join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    ccload_ok(&["apply", empty.to_str().unwrap()]);
    assert!(!registered("hetcp") && !registered("ub_reno"));
    assert_eq!(ccload_ok(&["cgroup", "list", "--json"]).trim(), "[]");
}
