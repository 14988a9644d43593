//! Privileged tests of attach/detach/status/tune against the running kernel.
//! Each runs its transfers in its own network namespace.

use std::time::Duration;

use ccload_itests::*;

const MB: u64 = 1 << 20;

/// The struct_ops map id of an attached algorithm (for the leak check).
fn struct_ops_id(algo: &str) -> u64 {
    let st = status_json();
    st["attached"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["algo"] == algo)
        .unwrap()["struct_ops_map_id"]
        .as_u64()
        .unwrap()
}

fn nothing_left(algo: &str, map_id: u64) {
    assert!(
        wait_until(Duration::from_secs(5), || !registered(algo)),
        "{algo} still registered after detach"
    );
    assert!(
        !std::path::Path::new(&format!("/sys/fs/bpf/ccload/{algo}")).exists(),
        "pins left under /sys/fs/bpf/ccload/{algo}"
    );
    // The struct_ops map is freed after an RCU grace period: poll bpftool for
    // this attach's map id (other ids may belong to someone else).
    let listed = || {
        std::process::Command::new("bpftool")
            .args(["struct_ops", "show"])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.starts_with(&format!("{map_id}:")))
            })
            .unwrap_or(false)
    };
    assert!(
        wait_until(Duration::from_secs(10), || !listed()),
        "bpftool struct_ops show still lists {algo} (map id {map_id})"
    );
}

#[test]
fn ccpd_attach_transfer_detach() {
    let _s = privileged!();
    let guard = Attached::new("ccpd", &[]);
    assert!(
        registered("ccpd"),
        "ccpd missing from tcp_available_congestion_control"
    );
    // Registration outlives the attaching process: ccload has exited here.
    let before = status_json();
    assert_eq!(stat_in(&before, "ccpd", "flows_init"), 0);

    let ns = NetNs::new();
    let t = ns
        .run(|| transfer("ccpd", 256 * MB, "127.0.0.1:0".parse().unwrap()))
        .expect("transfer with ccpd");
    assert_eq!(t.bytes, 256 * MB, "whole transfer received");
    assert_eq!(t.sender_cc, "ccpd");
    assert_eq!(
        t.receiver_cc, "ccpd",
        "accepted socket inherits the listener's CC"
    );
    eprintln!("ccpd loopback: {:.0} Mbit/s", t.mbps());

    let after = status_json();
    assert!(
        stat_in(&after, "ccpd", "flows_init") >= 2,
        "both ends ran init: {after}"
    );
    // Loopback carries 64 KB segments: ~1 ACK per 100-300 KB here.
    let (acks, rounds, events) = (
        stat_in(&after, "ccpd", "acks"),
        stat_in(&after, "ccpd", "rounds"),
        stat_in(&after, "ccpd", "events"),
    );
    assert!(acks >= 50, "cong_control ran per ACK: {acks}");
    assert!(
        rounds >= 5 && rounds <= acks,
        "round tracker advanced: {rounds} rounds, {acks} acks"
    );
    assert!(
        events > 0 && events <= rounds,
        "one record per round at most: {events}"
    );
    let a = &after["attached"][0];
    assert!(a["struct_ops_map_id"].as_u64().unwrap() > 0);
    // A pinned link holds it, or without struct_ops links (Linux < 6.4)
    // its pinned map.
    if ccload::bpf::struct_ops_links() {
        assert_eq!(a["held_by"], "link");
        assert!(a["link_id"].as_u64().unwrap() > 0);
    } else {
        assert_eq!(a["held_by"], "map");
        assert_eq!(a["link_id"], 0);
    }
    assert_eq!(a["tunables"]["kp"], 2.0);
    assert_eq!(a["tunables"]["kd"], 100);

    let id = struct_ops_id("ccpd");
    drop(guard);
    nothing_left("ccpd", id);
    // With ccpd gone, a new socket cannot select it.
    let err = ns.run(|| transfer("ccpd", MB, "127.0.0.1:0".parse().unwrap()));
    assert!(err.is_err(), "ccpd still selectable after detach");
}

#[test]
fn attach_twice_is_a_noop_and_detach_twice_is_soft() {
    let _s = privileged!();
    let g = Attached::new("ccpd", &["--set", "kp=4"]);
    let id1 = status_json()["attached"][0]["link_id"].clone();
    let out = ccload_ok(&["attach", "--algo", "ccpd", "--set", "kp=3"]);
    assert!(out.contains("already attached"), "{out}");
    let st = status_json();
    assert_eq!(st["attached"][0]["link_id"], id1, "same link");
    assert_eq!(
        st["attached"][0]["tunables"]["kp"], 4.0,
        "second attach changed nothing"
    );
    let id = struct_ops_id("ccpd");
    drop(g);
    nothing_left("ccpd", id);

    let o = ccload(&["detach", "--algo", "ccpd"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "detach of a detached algorithm is a soft failure"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("ccpd is not attached"));
    let o = ccload(&["detach", "--all"]);
    assert!(o.status.success());
}

#[test]
fn bad_tunable_is_rejected_and_pinned_values_unchanged() {
    let _s = privileged!();
    // Not attached: a bad value fails before anything is loaded.
    let o = ccload(&["attach", "--algo", "ccpd", "--set", "kp=100"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("kp=100") && e.contains("0.25..16"), "{e}");
    assert!(!registered("ccpd") && !std::path::Path::new("/sys/fs/bpf/ccload/ccpd").exists());

    let _g = Attached::new("ccpd", &["--set", "kp=4", "--set", "kd=50"]);
    let p0 = ccload::bpf::read_params(ccload::bpf::algos::Algo::Ccpd, 0).unwrap();
    for bad in [
        ["--set", "kp=0.1"],
        ["--set", "kd=-1"],
        ["--set", "nope=1"],
        ["--set", "mode=2"],
    ] {
        let mut args = vec!["tune", "--algo", "ccpd"];
        args.extend_from_slice(&bad);
        let o = ccload(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?} accepted");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("ccload: "));
    }
    // A batch with one bad value writes none of it.
    let o = ccload(&["tune", "--algo", "ccpd", "--set", "kd=10", "--set", "kp=99"]);
    assert_eq!(o.status.code(), Some(2));
    let p1 = ccload::bpf::read_params(ccload::bpf::algos::Algo::Ccpd, 0).unwrap();
    assert_eq!(
        p0.to_bytes(),
        p1.to_bytes(),
        "params map changed by a rejected tune"
    );

    // A good tune is written and read back.
    let out = ccload_ok(&["tune", "--algo", "ccpd", "--set", "kd=10"]);
    assert!(out.contains("kd: 50 -> 10"), "{out}");
    let p2 = ccload::bpf::read_params(ccload::bpf::algos::Algo::Ccpd, 0).unwrap();
    assert_eq!(p2.get("kd"), Some(10));
    assert_eq!(p2.get("kp"), Some(4096));
}

#[test]
fn errors_are_one_clear_line() {
    let _s = privileged!();
    let o = ccload(&["attach", "--algo", "vegas"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("'vegas'") && e.contains("possible values: ccpd, hetcp, ctcp_plus, ub_reno"),
        "{e}"
    );

    // Non-root: rejected before any kernel work.
    let o = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(ccload_bin())
        .args(["attach", "--algo", "ccpd"])
        .output();
    match o {
        Ok(o) => {
            assert_eq!(o.status.code(), Some(2));
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(e.contains("must run as root"), "{e}");
            assert!(!registered("ccpd"));
        }
        Err(e) => eprintln!("SKIPPED non-root half: setpriv unavailable ({e})"),
    }
}

/// bytes_acked of the sender's connection to the link's receiver, and
/// whether `ss` names `algo` for it (None: no such connection).
fn acked_on(bn: &ccload_itests::link::Bottleneck, algo: &str) -> Option<(u64, bool)> {
    let o = bn
        .sender
        .exec("ss", &["-tinH", "state", "established", "dst", "10.77.2.2"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let acked = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("bytes_acked:"))?
        .parse()
        .ok()?;
    Some((acked, out.contains(algo)))
}

#[test]
fn replace_swaps_objects_under_a_running_flow() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &["--set", "kp=4"]);
    let link = status_json()["attached"][0]["link_id"].clone();
    let map0 = status_json()["attached"][0]["struct_ops_map_id"].clone();
    let bn = ccload_itests::link::Bottleneck::new(ccload_itests::link::LinkCfg {
        rate_mbit: 50.0,
        buffer_pkts: 50,
        ..Default::default()
    });
    // A flow of 4 GiB (ended when dropped): it is running when the swap
    // lands however long loading the new object takes on this host.
    let _flow = long_flow_on(&bn, "-", Some("ccpd"));
    assert!(
        wait_until(Duration::from_secs(10), || {
            acked_on(&bn, "ccpd").is_some_and(|(a, cc)| cc && a > MB)
        }),
        "the flow never started on ccpd"
    );
    if !ccload::bpf::struct_ops_links() {
        // Linux < 6.4: no link to swap the object under; refused in one
        // line, and the flow keeps its controller.
        let o = ccload(&["attach", "--algo", "ccpd", "--replace"]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(
            e.contains("struct_ops link") && e.lines().count() == 1,
            "{e}"
        );
        let (a0, _) = acked_on(&bn, "ccpd").expect("the flow survives the refusal");
        assert!(
            wait_until(Duration::from_secs(30), || {
                acked_on(&bn, "ccpd").is_some_and(|(a, cc)| cc && a >= a0 + 4 * MB)
            }),
            "the flow stopped after a refused replace"
        );
        assert_eq!(status_json()["attached"][0]["struct_ops_map_id"], map0);
        return;
    }
    let out = ccload_ok(&["attach", "--algo", "ccpd", "--replace"]);
    assert!(out.contains("replaced"), "{out}");
    // The same connection keeps moving bytes on the new object.
    let (a0, _) = acked_on(&bn, "ccpd").expect("the flow survives the swap");
    assert!(
        wait_until(Duration::from_secs(30), || {
            acked_on(&bn, "ccpd").is_some_and(|(a, cc)| cc && a >= a0 + 4 * MB)
        }),
        "the flow stopped moving bytes after the swap (acked {a0}, now {:?})",
        acked_on(&bn, "ccpd")
    );
    let st = status_json();
    assert_eq!(st["attached"][0]["link_id"], link, "same pinned link");
    assert_ne!(
        st["attached"][0]["struct_ops_map_id"], map0,
        "new struct_ops map behind it"
    );
    assert_eq!(
        st["attached"][0]["tunables"]["kp"], 4.0,
        "pinned params reused"
    );
}

/// Restores the root namespace's default CC on drop, whatever happens.
struct DefaultCc(String);
impl Drop for DefaultCc {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/net/ipv4/tcp_congestion_control", &self.0);
    }
}

fn default_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn default_flag_sets_and_restores_the_sysctl() {
    let _s = privileged!();
    // The kernel lets only the initial namespace default to a restricted CC,
    // so this runs where `ccload attach --default` is meant to: the root
    // namespace.  The guard restores the value even if the test fails.
    let orig = DefaultCc(default_cc());
    let g = Attached::new("ccpd", &["--default"]);
    assert_eq!(default_cc(), "ccpd");
    let st = status_json();
    assert_eq!(st["attached"][0]["default"], true);
    assert_eq!(st["attached"][0]["restores_default"], orig.0.as_str());
    drop(g);
    assert_eq!(default_cc(), orig.0, "detach restores the replaced default");

    // In a child namespace the kernel refuses; ccload says why and leaves nothing.
    let ns = NetNs::new();
    let o = ns.exec(
        ccload_bin().to_str().unwrap(),
        &["attach", "--algo", "ccpd", "--default"],
    );
    let _cleanup = Attached("ccpd");
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("tcp_allowed_congestion_control"), "{e}");
    assert!(
        wait_until(Duration::from_secs(5), || !registered("ccpd")),
        "failed attach left ccpd registered"
    );
}

#[test]
fn iperf3_selects_ccpd() {
    let _s = privileged!();
    if std::process::Command::new("iperf3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED iperf3_selects_ccpd: iperf3 not installed");
        return;
    }
    let _g = Attached::new("ccpd", &[]);
    let ns = NetNs::new();
    let mut srv = std::process::Command::new("nsenter")
        .args([
            &format!("--net=/run/netns/{}", ns.name),
            "iperf3",
            "-s",
            "-1",
            "-p",
            "5299",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let o = ns.exec(
        "iperf3",
        &[
            "-c",
            "127.0.0.1",
            "-p",
            "5299",
            "-C",
            "ccpd",
            "-t",
            "1",
            "-J",
        ],
    );
    let _ = srv.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["end"]["sender_tcp_congestion"], "ccpd");
    assert!(j["end"]["sum_received"]["bytes"].as_u64().unwrap() > 10 * MB);
}

/// `ccload algos --json` needs neither root nor BPF: every controller with
/// its tunables (numbers as numbers, defaults inside their ranges) and
/// telemetry fields, from the same tables the BPF side clamps with.
#[test]
fn algos_lists_tunables_offline_as_json() {
    let v: serde_json::Value = serde_json::from_str(&ccload_ok(&["algos", "--json"])).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["algo"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ccpd", "hetcp", "ctcp_plus", "ub_reno"]);
    for a in v.as_array().unwrap() {
        // one line saying what it is for (CCL_<NAME>_PURPOSE)
        let purpose = a["purpose"].as_str().unwrap();
        assert!(purpose.len() > 20 && !purpose.contains('\n'), "{a}");
        let t = a["tunables"].as_array().unwrap();
        assert!(
            t.iter().any(|d| d["name"] == "trace_every"),
            "{}",
            a["algo"]
        );
        for d in t {
            let (lo, def, hi) = (
                d["min"].as_f64().unwrap(),
                d["default"].as_f64().unwrap(),
                d["max"].as_f64().unwrap(),
            );
            assert!(lo <= def && def <= hi, "{d}");
            assert!(!d["help"].as_str().unwrap().is_empty(), "{d}");
        }
        assert!(!a["telemetry"].as_array().unwrap().is_empty());
    }
    let kp = &v[0]["tunables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "kp")
        .unwrap()["default"];
    assert_eq!(kp.as_f64(), Some(2.0));
}
