//! Per-cgroup deployment (cgroup sock_ops): processes in cgroup A get ccpd
//! with tunable profile 3, processes in cgroup B get cubic, on both ends of
//! real connections (active and passive); a profile's tunables reach only
//! the sockets bound to it; sockets outside bound cgroups are untouched.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

/// A helper process: its "KEY value" lines arrive on a channel.
struct Helper {
    child: Child,
    rx: mpsc::Receiver<(String, String)>,
}

impl Helper {
    fn spawn(args: &[&str]) -> Helper {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ccl-sockhelper"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some((k, v)) = l.split_once(' ') {
                    let _ = tx.send((k.to_string(), v.to_string()));
                }
            }
        });
        Helper { child, rx }
    }
    fn get(&self, key: &str) -> String {
        loop {
            let (k, v) = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("helper never printed {key}"));
            if k == key {
                return v;
            }
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One connection from a process in `client_cg` (sender namespace) to a
/// process in `server_cg` (receiver namespace); returns (client CC, server
/// CC, bytes received).
fn connection(
    link: &Bottleneck,
    client_cg: &str,
    server_cg: &str,
    bytes: u64,
) -> (String, String, u64) {
    let srv = Helper::spawn(&[server_cg, &link.receiver.name, "listen", "10.77.2.2"]);
    let port = srv.get("PORT");
    let cli = Helper::spawn(&[
        client_cg,
        &link.sender.name,
        "connect",
        &format!("10.77.2.2:{port}"),
        &bytes.to_string(),
    ]);
    let ccc = cli.get("CC");
    let scc = srv.get("CC");
    let n: u64 = srv.get("BYTES").parse().unwrap();
    (ccc, scc, n)
}

#[test]
fn cgroups_get_their_own_controller_and_profile_on_both_ends() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &["--set", "kd=0"]);
    ccload_ok(&[
        "tune",
        "--algo",
        "ccpd",
        "--profile",
        "3",
        "--set",
        "kp=8",
        "--set",
        "kd=0",
    ]);
    let (a, b, c) = (
        TestCgroup::new("A"),
        TestCgroup::new("B"),
        TestCgroup::new("C"),
    );
    ccload_ok(&[
        "cgroup",
        "set",
        a.path(),
        "--algo",
        "ccpd",
        "--profile",
        "3",
    ]);
    ccload_ok(&["cgroup", "set", b.path(), "--algo", "cubic"]);
    ccload_ok(&["cgroup", "set", c.path(), "--algo", "ccpd"]);
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 60,
        delay_ms: 5.0,
        ..Default::default()
    });
    // Both directions: A active -> B passive, B active -> A passive.
    let mut w = Watch::start(&["--algo", "ccpd"]);
    assert!(w.wait_holding("ccpd"), "watch did not start");
    let (ca, sb, n) = connection(&link, a.path(), b.path(), 6 * MB);
    assert_eq!((ca.as_str(), sb.as_str(), n), ("ccpd", "cubic", 6 * MB));
    let mut recs_a = Vec::new();
    while let Ok(r) = w.rx.recv_timeout(Duration::from_millis(300)) {
        recs_a.push(r);
    }
    let (cb, sa, _) = connection(&link, b.path(), a.path(), MB);
    assert_eq!((cb.as_str(), sa.as_str()), ("cubic", "ccpd"));
    // C (ccpd, profile 0) to a server outside any bound cgroup ("-": the
    // test's own cgroup): the server keeps the namespace default.
    let (cc, so, _) = connection(&link, c.path(), "-", 6 * MB);
    assert_eq!(cc, "ccpd");
    assert_ne!(so, "ccpd", "a socket outside bound cgroups was changed");
    let mut recs_c = Vec::new();
    while let Ok(r) = w.rx.recv_timeout(Duration::from_millis(300)) {
        recs_c.push(r);
    }
    w.stop();
    // The profile reached only A's sockets: A's sender records say profile
    // 3 and the kernel's law used Kp = 8; C's say profile 0 and the default Kp.
    let sender = |v: &[serde_json::Value], port_of_server: bool| -> Vec<serde_json::Value> {
        v.iter()
            .filter(|r| r["remote"].as_str().unwrap().starts_with("10.77.2.2:") == port_of_server)
            .cloned()
            .collect()
    };
    let a_recs = sender(&recs_a, true);
    let c_recs = sender(&recs_c, true);
    assert!(
        a_recs.len() >= 10 && c_recs.len() >= 10,
        "{} {} records",
        a_recs.len(),
        c_recs.len()
    );
    assert!(
        a_recs.iter().all(|r| i(r, "profile") == 3),
        "A's records carry profile 3"
    );
    assert!(
        c_recs.iter().all(|r| i(r, "profile") == 0),
        "C's records carry profile 0"
    );
    let default_kp = ccpd_default_kp();
    let kps = |v: &[serde_json::Value]| -> Vec<i64> {
        v.iter()
            .filter_map(|r| ccpd_kp_used(r, &[default_kp, 8192]))
            .collect()
    };
    let (ka, kc) = (kps(&a_recs), kps(&c_recs));
    eprintln!(
        "controlled rounds: A {} (kp {:?}), C {} (kp {:?})",
        ka.len(),
        ka.first(),
        kc.len(),
        kc.first()
    );
    assert!(
        ka.len() >= 3 && ka.iter().all(|&k| k == 8192),
        "A's law: {ka:?}"
    );
    assert!(
        kc.len() >= 3 && kc.iter().all(|&k| k == default_kp),
        "C's law: {kc:?}"
    );
    // The binding's counters saw the connections.
    let l: serde_json::Value =
        serde_json::from_str(&ccload_ok(&["cgroup", "list", "--json"])).unwrap();
    let ent = |p: &str| {
        l.as_array()
            .unwrap()
            .iter()
            .find(|e| e["cgroup"] == p)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        (
            ent(a.path())["active"].as_u64(),
            ent(a.path())["passive"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(
        (
            ent(b.path())["active"].as_u64(),
            ent(b.path())["passive"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(ent(b.path())["algo"], "cubic");
    ccload_ok(&["tune", "--algo", "ccpd", "--profile", "3", "--reset"]);
}

#[test]
fn bad_cgroup_requests_are_rejected_and_change_nothing() {
    let _s = privileged!();
    let a = TestCgroup::new("bad");
    let before = ccload_ok(&["cgroup", "list", "--json"]);
    // Missing cgroup, not a cgroup v2 directory, unknown CC, profile out of
    // range (also for one of ours not attached: it must stay unattached).
    for (args, want) in [
        (
            vec![
                "/sys/fs/cgroup/unified/ccl-no-such-cgroup",
                "--algo",
                "cubic",
            ],
            "no such directory",
        ),
        (
            vec!["/tmp", "--algo", "cubic"],
            "not in a cgroup v2 hierarchy",
        ),
        (
            vec![a.path(), "--algo", "hetcp", "--profile", "16"],
            "out of range",
        ),
        (
            vec![
                "/sys/fs/cgroup/unified/ccl-no-such-cgroup",
                "--algo",
                "hetcp",
            ],
            "no such directory",
        ),
        (
            vec![a.path(), "--algo", "nosuchcc"],
            "unknown congestion control",
        ),
        (
            vec![a.path(), "--algo", "cubic", "--profile", "16"],
            "out of range",
        ),
    ] {
        let mut full = vec!["cgroup", "set"];
        full.extend(&args);
        let o = ccload(&full);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
    }
    let o = ccload(&["cgroup", "unset", a.path()]);
    assert_eq!(o.status.code(), Some(1), "unset of an unbound cgroup");
    assert_eq!(ccload_ok(&["cgroup", "list", "--json"]), before);
    assert!(!registered("hetcp"), "a refused binding attached hetcp");
}

/// Binding a cgroup to one of ours that is not attached attaches it first,
/// as the kernel loads a CC module on first use.
#[test]
fn binding_to_an_unattached_controller_attaches_it() {
    let _s = privileged!();
    struct Detach;
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = ccload(&["detach", "--all"]);
        }
    }
    let _d = Detach;
    let a = TestCgroup::new("auto");
    assert!(!registered("hetcp"));
    let out = ccload_ok(&["cgroup", "set", a.path(), "--algo", "hetcp"]);
    assert!(out.contains("attached hetcp (first use"), "{out}");
    assert!(registered("hetcp"));
    let l = ccload_ok(&["cgroup", "list"]);
    assert!(l.contains(a.path()) && l.contains("hetcp"), "{l}");
    // Already attached: nothing more is said.
    let out = ccload_ok(&["cgroup", "set", a.path(), "--algo", "hetcp"]);
    assert!(!out.contains("first use"), "{out}");
}

/// The in-kernel aggregates, from `ccload stats --json`: the entry of
/// cgroup `path`, or of controller `algo` profile `p`.
fn stats_of(f: impl Fn(&serde_json::Value) -> bool, list: &str) -> serde_json::Value {
    let st: serde_json::Value = serde_json::from_str(&ccload_ok(&["stats", "--json"])).unwrap();
    st[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| f(e))
        .cloned()
        .unwrap_or_else(|| panic!("not in stats: {st}"))
}

fn counter(e: &serde_json::Value, name: &str) -> u64 {
    e["counters"][name].as_u64().unwrap()
}

/// One sending connection of `bytes` from cgroup `cg` to a server outside
/// bound cgroups: (client CC, and from the client's final TCP_INFO its data
/// segments sent, retransmissions, bytes acked, and the retransmissions
/// before the connection was established -- a SYN lost to the link's
/// random loss).
fn sender_flow(link: &Bottleneck, cg: &str, bytes: u64) -> (String, u64, u64, u64, u64) {
    let srv = Helper::spawn(&["-", &link.receiver.name, "listen", "10.77.2.2"]);
    let port = srv.get("PORT");
    let cli = Helper::spawn(&[
        cg,
        &link.sender.name,
        "connect",
        &format!("10.77.2.2:{port}"),
        &bytes.to_string(),
    ]);
    let cc = cli.get("CC");
    assert_eq!(srv.get("BYTES").parse::<u64>().unwrap(), bytes);
    let ti: Vec<u64> = cli
        .get("TCPINFO")
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    (cc, ti[0], ti[1], ti[2], ti[3])
}

/// The aggregates are exact: per cgroup (a bound one on ccpd, a watched
/// one that keeps the kernel's CC) they count each flow once, and its
/// data segments, retransmissions and acked bytes equal what the socket's
/// own TCP_INFO says at the end; the controller's per-profile aggregate
/// saw the same ccpd flow with the same numbers; srtt quantiles sit at
/// the path's RTT.  Random loss makes retransmissions and loss events.
#[test]
fn aggregates_match_each_sockets_own_counters() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &[]);
    let (a, b) = (TestCgroup::new("aggA"), TestCgroup::new("aggB"));
    ccload_ok(&["cgroup", "set", a.path(), "--algo", "ccpd"]);
    let out = ccload_ok(&["cgroup", "watch", b.path()]);
    assert!(out.contains("keep their congestion control"), "{out}");
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 60,
        delay_ms: 10.0,
        loss: 0.01,
        ..Default::default()
    });
    let is_ccpd0 = |e: &serde_json::Value| e["algo"] == "ccpd" && e["profile"] == 0;
    let p0 = stats_of(is_ccpd0, "algos");
    let (cca, segs_a, retr_a, acked_a, syn_a) = sender_flow(&link, a.path(), 4 * MB);
    let (ccb, segs_b, retr_b, acked_b, syn_b) = sender_flow(&link, b.path(), 4 * MB);
    assert_eq!(cca, "ccpd");
    assert_ne!(ccb, "ccpd", "a watched cgroup's CC was changed");
    eprintln!("A: {segs_a} segs, {retr_a} retrans; B ({ccb}): {segs_b} segs, {retr_b} retrans");
    assert!(retr_a > 0 && retr_b > 0, "1 % loss made no retransmissions");
    // The close reaches the programs when the socket leaves TIME_WAIT's
    // parent: wait for the flows to be counted out.
    let ended = |p: &str| counter(&stats_of(|e| e["cgroup"] == p, "cgroups"), "flows_ended");
    let t0 = std::time::Instant::now();
    while (ended(a.path()) < 1 || ended(b.path()) < 1) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let p1 = stats_of(is_ccpd0, "algos");
    // The cgroup program counts from establishment: a SYN the 1 % loss
    // dropped is retransmitted before it (seen once: 29 against 30).
    for (path, segs, retr, acked) in [
        (a.path(), segs_a, retr_a - syn_a, acked_a),
        (b.path(), segs_b, retr_b - syn_b, acked_b),
    ] {
        let e = stats_of(|e| e["cgroup"] == path, "cgroups");
        eprintln!("{path}: {}", e["summary"]);
        assert_eq!(counter(&e, "flows_started"), 1, "{path}");
        assert_eq!(counter(&e, "flows_ended"), 1, "{path}");
        assert_eq!(counter(&e, "segs_out"), segs, "{path}");
        assert_eq!(counter(&e, "retrans_segs"), retr, "{path}");
        // TCP_INFO's count includes the SYN, acked before the connection
        // is established (where the cgroup program starts counting).
        assert_eq!(counter(&e, "bytes_acked"), acked - 1, "{path}");
        assert!(counter(&e, "loss_events") >= 1, "{path}");
        // Path RTT 20 ms plus queueing: p50 between 20 ms and 20 ms + the
        // 60-packet buffer at 20 Mbit/s (36 ms), with a bucket's slack.
        let p50 = e["summary"]["srtt_ms_p50"].as_f64().unwrap();
        assert!((18.0..70.0).contains(&p50), "{path}: srtt p50 {p50} ms");
        assert!(counter(&e, "samples") >= 20, "{path}");
    }
    assert_eq!(stats_of(|e| e["cgroup"] == b.path(), "cgroups")["algo"], "");
    // The controller saw the ccpd flow (and only it) under profile 0.
    let d = |n: &str| counter(&p1, n) - counter(&p0, n);
    assert_eq!(
        (
            d("flows_started"),
            d("flows_ended"),
            d("segs_out"),
            d("retrans_segs")
        ),
        (1, 1, segs_a, retr_a)
    );
    // The controller is given the socket before the SYN: it counts it.
    assert_eq!(d("bytes_acked"), acked_a);
    assert!(d("loss_events") >= 1);
    // Completion time of short flows: a 4-MB flow is not one, a 256-KB one
    // is, from establishment to close: at least its path's 20-ms RTT and
    // the 105 ms 256 KB take at 20 Mbit/s.
    for e in [
        stats_of(|e| e["cgroup"] == a.path(), "cgroups"),
        stats_of(|e| e["cgroup"] == b.path(), "cgroups"),
    ] {
        assert_eq!(e["summary"]["short_flows"], 0, "{e}");
    }
    sender_flow(&link, a.path(), 256 * 1024);
    let t0 = std::time::Instant::now();
    while ended(a.path()) < 2 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let e = stats_of(|e| e["cgroup"] == a.path(), "cgroups");
    assert_eq!(e["summary"]["short_flows"], 1, "{e}");
    let fct = e["summary"]["fct_ms_p50"].as_f64().unwrap();
    assert!((100.0..10_000.0).contains(&fct), "fct {fct} ms");
}

/// A long flow from cgroup `cg` through `link` (killed when dropped).
fn long_flow(link: &Bottleneck, cg: &str) -> (Helper, Helper) {
    let srv = Helper::spawn(&["-", &link.receiver.name, "listen", "10.77.2.2"]);
    let port = srv.get("PORT");
    let cli = Helper::spawn(&[
        cg,
        &link.sender.name,
        "connect",
        &format!("10.77.2.2:{port}"),
        &(4u64 << 30).to_string(),
    ]);
    (srv, cli)
}

/// ccpd's profile 5 made harmful for the rollout tests: a buffer-estimate
/// floor far above their links' 40-packet buffer, so the law keeps
/// overflowing it.
fn harmful_profile_5() {
    ccload_ok(&[
        "tune",
        "--algo",
        "ccpd",
        "--profile",
        "5",
        "--set",
        "b_min=1000",
        "--set",
        "bmax_on_loss=0",
    ]);
}

/// The rollout tests' link: 20 Mbit/s, 40 packets, 20 ms.
fn rollout_link() -> Bottleneck {
    Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 40,
        delay_ms: 10.0,
        ..Default::default()
    })
}

/// `ccload ARGS` (a rollout with --json): once `bound()` holds (10 s at
/// most: the rollout has bound its cgroup, and a socket gets its CC at
/// connect()), the flows `start()` makes run until the rollout ends;
/// returns the exit code and the JSON lines.
fn run_rollout<F>(
    args: &[&str],
    bound: impl Fn() -> bool,
    start: impl FnOnce() -> F,
) -> (i32, Vec<serde_json::Value>) {
    let mut child = std::process::Command::new(ccload_bin())
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let w0 = std::time::Instant::now();
    while !bound() && w0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _flows = start();
    let lines: Vec<serde_json::Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .map(|l| serde_json::from_str(&l).unwrap())
        .collect();
    (child.wait().unwrap().code().unwrap_or(-1), lines)
}

/// `ccload rollout` with a canary that has flows through one link and a
/// control on cubic with flows through an identical second link (so the
/// canary cannot hurt the control): returns (exit code, JSON lines) and
/// the seconds it ran.
fn rollout(
    canary: &TestCgroup,
    control: &TestCgroup,
    args: &[&str],
) -> (i32, Vec<serde_json::Value>, f64) {
    let (lc, lk) = (rollout_link(), rollout_link());
    let mut all = vec![
        "rollout",
        "--canary",
        canary.path(),
        "--control",
        control.path(),
        "--json",
    ];
    all.extend_from_slice(args);
    let t0 = std::time::Instant::now();
    let (code, lines) = run_rollout(
        &all,
        || cgroup_binding(canary.path()).is_some_and(|(a, _)| a == "ccpd"),
        || {
            (
                long_flow(&lc, canary.path()),
                long_flow(&lk, control.path()),
            )
        },
    );
    (code, lines, t0.elapsed().as_secs_f64())
}

/// The canary rollout: a canary on a harmful ccpd profile (a
/// buffer-estimate floor far above the 40-packet buffer, so the law keeps
/// overflowing it) against a control on cubic is rolled back after 2
/// failing intervals, the canary's binding restored exactly (unbound) and
/// the control untouched; the same rollout with ccpd's defaults runs its
/// course and `--promote` binds the control too; `rollout status`,
/// `promote` and `abort` act on a rollout in progress, and `abort
/// --interrupted` on one that was killed.
#[test]
fn a_harmful_canary_is_rolled_back_and_a_good_one_promoted() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &[]);
    harmful_profile_5();
    let (can, ctl) = (TestCgroup::new("canary"), TestCgroup::new("control"));
    let _r = AbortRollouts;
    ccload_ok(&["cgroup", "set", ctl.path(), "--algo", "cubic"]);

    let (code, lines, secs) = rollout(
        &can,
        &ctl,
        &[
            "--algo",
            "ccpd",
            "--profile",
            "5",
            "--guard",
            "retrans_ratio <= 2",
            "--interval",
            "2s",
            "--for",
            "30s",
        ],
    );
    for l in &lines {
        eprintln!("{l}");
    }
    assert_eq!(code, 1, "the harmful canary was not rolled back");
    let intervals: Vec<_> = lines.iter().filter(|l| l.get("n").is_some()).collect();
    let last = intervals.last().unwrap();
    assert_eq!(last["verdict"], "fail");
    assert_eq!(last["failing_in_a_row"], 2);
    // Judged (not insufficient) intervals: the first two failing ones trip it.
    let judged = intervals
        .iter()
        .filter(|i| i["verdict"] != "insufficient traffic")
        .count();
    assert_eq!(judged, 2, "rolled back within 2 judged intervals");
    // The always-valid evidence rides along from the first judged interval
    // (crate::sequential: it needs five before it can say harm).
    assert!(
        intervals
            .iter()
            .filter(|i| i["verdict"] != "insufficient traffic")
            .all(|i| i["harm_evidence"].as_f64().is_some_and(|l| l >= 0.0)),
        "{intervals:?}"
    );
    assert!(secs < 15.0, "took {secs:.1} s");
    assert!(lines.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("retrans_ratio <= 2"));
    assert_eq!(
        cgroup_binding(can.path()),
        None,
        "the canary was unbound (it had no binding)"
    );
    assert_eq!(cgroup_binding(ctl.path()), Some(("cubic".to_string(), 0)));
    // Nothing of this rollout stays recorded (other runs' records are not
    // this test's business).
    let recorded = status_json()["rollouts"].to_string();
    assert!(!recorded.contains(can.path()), "{recorded}");

    let (code, lines, _) = rollout(
        &can,
        &ctl,
        &[
            "--algo",
            "ccpd",
            "--guard",
            "retrans_ratio <= 3",
            "--guard",
            "srtt_p95_ratio <= 1.5",
            "--interval",
            "2s",
            "--for",
            "6s",
            "--promote",
        ],
    );
    for l in &lines {
        eprintln!("{l}");
    }
    assert_eq!(code, 0, "the good canary was rolled back");
    assert_eq!(lines.iter().filter(|l| l.get("n").is_some()).count(), 3);
    assert_eq!(cgroup_binding(can.path()), Some(("ccpd".to_string(), 0)));
    assert_eq!(
        cgroup_binding(ctl.path()),
        Some(("ccpd".to_string(), 0)),
        "promoted"
    );

    // The verbs.  A rollout of profile 5 in progress (no traffic: its
    // intervals report insufficient traffic and it runs on) is listed with
    // its progress; `promote` ends it early with exit 0, the control bound
    // as the canary is.
    let spawn = || {
        let child = std::process::Command::new(ccload_bin())
            .args([
                "rollout",
                "--algo",
                "ccpd",
                "--profile",
                "5",
                "--canary",
                can.path(),
                "--control",
                ctl.path(),
                "--interval",
                "1s",
                "--for",
                "60s",
            ])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let w0 = std::time::Instant::now();
        let progress = || {
            status_json()["rollouts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["canary"] == can.path() && r["done"].as_u64() >= Some(1))
        };
        while !progress() && w0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(cgroup_binding(can.path()), Some(("ccpd".to_string(), 5)));
        child
    };
    let mut child = spawn();
    let st = ccload_ok(&["rollout", "status", can.path()]);
    assert!(
        st.contains("running (pid") && st.contains("/60, 0 failing in a row"),
        "{st}"
    );
    let r = ccload_ok(&["rollout", "promote", can.path()]);
    assert!(r.contains("promoted the running rollout of ccpd"), "{r}");
    assert_eq!(child.wait().unwrap().code(), Some(0), "promoted early");
    assert_eq!(cgroup_binding(ctl.path()), Some(("ccpd".to_string(), 5)));

    // `abort` rolls a running one back: the canary gets its previous
    // binding (ccpd, profile 0) and the rollout exits as on Ctrl-C.
    ccload_ok(&["cgroup", "set", can.path(), "--algo", "ccpd"]);
    let mut child = spawn();
    let r = ccload_ok(&["rollout", "abort", can.path()]);
    assert!(r.contains("rolled back the running rollout of ccpd"), "{r}");
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(cgroup_binding(can.path()), Some(("ccpd".to_string(), 0)));

    // A rollout killed half-way is reported as interrupted and rolled back
    // by `abort --interrupted`; `--resume` (which rolled back) says so.
    let mut child = spawn();
    child.kill().unwrap();
    child.wait().unwrap();
    let st = ccload_ok(&["status"]);
    assert!(
        st.contains("interrupted; `ccload rollout abort --interrupted`"),
        "{st}"
    );
    assert!(ccload_ok(&["rollout", "status"]).contains("interrupted (its process is gone"));
    let o = ccload(&["rollout", "--resume"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("rollout abort --interrupted"));
    let r = ccload_ok(&["rollout", "abort", "--interrupted"]);
    assert!(
        r.contains(&format!(
            "rolled back the interrupted rollout of ccpd on {}",
            can.path()
        )),
        "{r}"
    );
    assert_eq!(cgroup_binding(can.path()), Some(("ccpd".to_string(), 0)));
    assert_eq!(cgroup_binding(ctl.path()), Some(("ccpd".to_string(), 5)));
    assert!(!ccload_ok(&["status"]).contains("rollout of"));
    let o = ccload(&["rollout", "promote", can.path()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no rollout is recorded on"));
    ccload_ok(&["tune", "--algo", "ccpd", "--profile", "5", "--reset"]);
}

/// Stable profile ids: flows bound by `apply` to profiles `web`
/// and `zz` keep their tunables across an apply that adds `api` (which
/// sorts first: numbered in name order it would take web's id) and removes
/// `zz` and its cgroup: web keeps its id, zz's id is retired while its flow
/// lives (its tunables stay; api takes another id).
#[test]
fn flows_keep_their_profiles_tunables_across_an_apply_that_adds_and_removes() {
    let _s = privileged!();
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = ccload(&["detach", "--all"]);
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let dir = std::env::temp_dir().join(format!("ccl-ids-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _c = Cleanup(dir.clone());
    let (web, zz, sink) = (
        TestCgroup::new("web"),
        TestCgroup::new("zz"),
        TestCgroup::new("sink"),
    );
    let profile = |name: &str, kp: u32| {
        format!("[profiles.{name}]\nalgo = \"ccpd\"\nset = {{ kp = {kp}, kd = 0 }}\n")
    };
    let bind = |cg: &TestCgroup, name: &str| {
        format!(
            "[[cgroups]]\npath = \"{}\"\nalgo = \"ccpd\"\nprofile = \"{name}\"\n",
            cg.path()
        )
    };
    let apply = |file: &str, text: String| {
        let p = dir.join(file);
        std::fs::write(&p, text).unwrap();
        ccload_ok(&["apply", p.to_str().unwrap()])
    };
    let head = "[algos.ccpd]\nset = { kd = 0 }\n";
    apply(
        "before.toml",
        format!(
            "{head}{}{}{}{}",
            profile("web", 8),
            profile("zz", 4),
            bind(&web, "web"),
            bind(&zz, "zz")
        ),
    );
    assert_eq!(cgroup_binding(web.path()), Some(("ccpd".into(), 1)));
    assert_eq!(cgroup_binding(zz.path()), Some(("ccpd".into(), 2)));
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 40.0,
        buffer_pkts: 60,
        delay_ms: 5.0,
        ..Default::default()
    });
    let mut w = Watch::start(&["--algo", "ccpd"]);
    assert!(w.wait_holding("ccpd"), "watch never took ccpd's ring");
    // Two flows of 16 MB, one from each cgroup, at once.
    let flow = |cg: &TestCgroup| {
        let srv = Helper::spawn(&[sink.path(), &link.receiver.name, "listen", "10.77.2.2"]);
        let port = srv.get("PORT");
        let cli = Helper::spawn(&[
            cg.path(),
            &link.sender.name,
            "connect",
            &format!("10.77.2.2:{port}"),
            &(16 * MB).to_string(),
        ]);
        assert_eq!(cli.get("CC"), "ccpd");
        (format!("10.77.2.2:{port}"), srv, cli)
    };
    let (to_web, web_srv, _web_cli) = flow(&web);
    let (to_zz, zz_srv, _zz_cli) = flow(&zz);
    // Kp of the controlled rounds of one flow, (before, after) `t_us`.
    let mut recs: Vec<serde_json::Value> = Vec::new();
    let kps = |recs: &[serde_json::Value], remote: &str, t: i64, after: bool| -> Vec<i64> {
        recs.iter()
            .filter(|r| r["remote"] == remote && (i(r, "t_us") > t) == after)
            // the law (L0/L1) in force, not a drain or the competitive mode
            .filter(|r| i(r, "mode") <= 1)
            .filter_map(|r| ccpd_kp_used(r, &[2048, 4096, 8192]))
            .collect()
    };
    // Both flows under control with their profiles' Kp, then the apply.
    let ok = wait_until(Duration::from_secs(20), || {
        while let Ok(r) = w.rx.try_recv() {
            recs.push(r);
        }
        kps(&recs, &to_web, i64::MAX, false).len() >= 3
            && kps(&recs, &to_zz, i64::MAX, false).len() >= 3
    });
    assert!(ok, "both flows under control before the apply");
    let out = apply(
        "after.toml",
        format!(
            "{head}{}{}{}",
            profile("api", 4),
            profile("web", 8),
            bind(&web, "web")
        ),
    );
    eprintln!("{out}");
    let t_applied = (ccload_testbed::delay::now_ns() / 1000) as i64;
    assert_eq!(web_srv.get("BYTES"), (16 * MB).to_string());
    assert_eq!(zz_srv.get("BYTES"), (16 * MB).to_string());
    while let Ok(r) = w.rx.recv_timeout(Duration::from_millis(300)) {
        recs.push(r);
    }
    w.stop();
    let (wb, wa) = (
        kps(&recs, &to_web, t_applied, false),
        kps(&recs, &to_web, t_applied, true),
    );
    let (zb, za) = (
        kps(&recs, &to_zz, t_applied, false),
        kps(&recs, &to_zz, t_applied, true),
    );
    eprintln!(
        "controlled rounds before/after the apply: web {}/{}, zz {}/{}",
        wb.len(),
        wa.len(),
        zb.len(),
        za.len()
    );
    assert!(wb.iter().all(|&k| k == 8192), "web before: {wb:?}");
    assert!(zb.iter().all(|&k| k == 4096), "zz before: {zb:?}");
    assert!(
        wa.len() >= 3 && wa.iter().all(|&k| k == 8192),
        "web after: {wa:?}"
    );
    assert!(
        za.len() >= 3 && za.iter().all(|&k| k == 4096),
        "zz after: {za:?}"
    );
    // web kept its id and binding; zz's id is retired, api took the next.
    assert_eq!(cgroup_binding(web.path()), Some(("ccpd".into(), 1)));
    assert_eq!(cgroup_binding(zz.path()), None);
    let api = ccload_ok(&["tune", "--algo", "ccpd", "--show", "--profile", "api"]);
    assert!(api.starts_with("ccpd profile 3:"), "{api}");
    let ids: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ccload::bind::profiles::PROFILE_IDS).unwrap(),
    )
    .unwrap();
    assert_eq!(ids["ccpd"]["retired"]["2"], "zz", "{ids}");
}

/// One connection from a process in `client_cg` in namespace `from` to a
/// listener in `server_cg` in namespace `to` at `ip`: (client CC, server
/// CC).
fn path_connection(
    from: &str,
    client_cg: &str,
    to: &str,
    server_cg: &str,
    ip: &str,
) -> (String, String) {
    let srv = Helper::spawn(&[server_cg, to, "listen", ip]);
    let port = srv.get("PORT");
    let cli = Helper::spawn(&[
        client_cg,
        from,
        "connect",
        &format!("{ip}:{port}"),
        &(256 * 1024).to_string(),
    ]);
    let (c, s) = (cli.get("CC"), srv.get("CC"));
    assert_eq!(srv.get("BYTES"), (256 * 1024).to_string());
    (c, s)
}

/// The path rules of cgroup `path` from `ccload cgroup list --json`:
/// (rule text, connections) each.
fn rules_of(path: &str) -> Vec<(String, u64)> {
    let l: serde_json::Value = serde_json::from_str(&ccload_ok(&["-j", "cgroup", "list"])).unwrap();
    let b = l
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["cgroup"] == path)
        .unwrap_or_else(|| panic!("{path} not in {l}"));
    b["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["text"].as_str().unwrap().to_string(),
                r["connections"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Path rules: one cgroup, two destinations in two network namespaces —
/// the link's receiver, 40 ms away, and a neighbour on a veth from the
/// sender's namespace, under a millisecond.  By prefix and by the
/// handshake's RTT the far one gets ccpd and the near one the binding's
/// cubic, on the active side and (prefix) on the passive one; each rule
/// counts exactly the connections it chose.  Bad rules change nothing.
#[test]
fn path_rules_choose_the_cc_per_destination() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &[]);
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 50.0,
        buffer_pkts: 100,
        delay_ms: 20.0,
        ..Default::default()
    });
    let near = NetNs::new();
    let sender = link.sender.name.clone();
    run_ok(
        "ip",
        &[
            "-n", &sender, "link", "add", "vn", "type", "veth", "peer", "name", "vm", "netns",
            &near.name,
        ],
    );
    for (ns, dev, ip) in [
        (&sender, "vn", "10.79.0.1/24"),
        (&near.name, "vm", "10.79.0.2/24"),
    ] {
        run_ok("ip", &["-n", ns, "addr", "add", ip, "dev", dev]);
        run_ok("ip", &["-n", ns, "link", "set", dev, "up"]);
    }
    let far_ip = "10.77.2.2";
    let near_ip = "10.79.0.2";
    let receiver = link.receiver.name.clone();
    let cg = TestCgroup::new("paths");

    // By prefix.
    ccload_ok(&[
        "cgroup",
        "set",
        cg.path(),
        "--algo",
        "cubic",
        "--rule",
        "dst 10.77.2.0/24 -> ccpd",
    ]);
    let far = path_connection(&sender, cg.path(), &receiver, "-", far_ip);
    let nearc = path_connection(&sender, cg.path(), &near.name, "-", near_ip);
    assert_eq!((far.0.as_str(), nearc.0.as_str()), ("ccpd", "cubic"));
    // The passive side: a listener in the cgroup, its peer's address.
    ccload_ok(&[
        "cgroup",
        "set",
        cg.path(),
        "--algo",
        "cubic",
        "--rule",
        "dst 10.79.0.0/24 -> ccpd",
    ]);
    let p = path_connection(&near.name, "-", &sender, cg.path(), "10.79.0.1");
    assert_eq!(p.1, "ccpd", "the accepted connection from the near peer");
    let p = path_connection(&receiver, "-", &sender, cg.path(), "10.77.1.1");
    assert_eq!(p.1, "cubic", "the accepted connection from the far peer");
    assert_eq!(
        rules_of(cg.path()),
        [("dst 10.79.0.0/24 -> ccpd".to_string(), 1)]
    );

    // By the handshake's RTT: the far path is 40 ms, the near one far
    // below 5 ms.
    ccload_ok(&[
        "cgroup",
        "set",
        cg.path(),
        "--algo",
        "cubic",
        "--rule",
        "rtt >= 5ms -> ccpd",
    ]);
    let far = path_connection(&sender, cg.path(), &receiver, "-", far_ip);
    let nearc = path_connection(&sender, cg.path(), &near.name, "-", near_ip);
    assert_eq!((far.0.as_str(), nearc.0.as_str()), ("ccpd", "cubic"));
    assert_eq!(rules_of(cg.path()), [("rtt >= 5ms -> ccpd".to_string(), 1)]);

    // First match wins: the near prefix before the RTT rule.
    ccload_ok(&[
        "cgroup",
        "set",
        cg.path(),
        "--algo",
        "ccpd",
        "--rule",
        "dst 10.79.0.0/24 -> reno",
        "--rule",
        "rtt < 5ms -> cubic",
    ]);
    let far = path_connection(&sender, cg.path(), &receiver, "-", far_ip);
    let nearc = path_connection(&sender, cg.path(), &near.name, "-", near_ip);
    assert_eq!((far.0.as_str(), nearc.0.as_str()), ("ccpd", "reno"));
    assert_eq!(
        rules_of(cg.path()),
        [
            ("dst 10.79.0.0/24 -> reno".to_string(), 1),
            ("rtt < 5ms -> cubic".to_string(), 0)
        ]
    );
    // `ccload stats` per rule, the default last: the same connections.
    let st: serde_json::Value = serde_json::from_str(&ccload_ok(&["-j", "stats"])).unwrap();
    let b = st["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["cgroup"] == cg.path())
        .unwrap_or_else(|| panic!("{} not in {st}", cg.path()));
    let per_rule: Vec<(String, String, u64)> = b["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["text"].as_str().unwrap().to_string(),
                r["cc"].as_str().unwrap().to_string(),
                r["counters"]["flows_started"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        per_rule,
        [
            ("dst 10.79.0.0/24 -> reno".into(), "reno".into(), 1),
            ("rtt < 5ms -> cubic".into(), "cubic".into(), 0),
            ("default".into(), "ccpd".into(), 1),
        ]
    );

    // The binding's paths as a lab scenario: the lab accepts it, and its
    // cells hold both paths (the near one at the delay line's floor).
    let text = ccload_ok(&["cgroup", "export", cg.path()]);
    let dir = std::env::temp_dir().join(format!("ccl-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mine.toml"), &text).unwrap();
    let sc = ccload_lab::scenario::Scenario::load(&dir.join("mine.toml"));
    let _ = std::fs::remove_dir_all(&dir);
    let sc = sc.unwrap_or_else(|e| panic!("{e:#}\n{text}"));
    let rtts: Vec<f64> = sc.cases().iter().map(|c| c.rtt_ms).collect();
    assert!(
        rtts.iter().any(|r| *r < 1.0),
        "the near path: {rtts:?}\n{text}"
    );
    assert!(
        rtts.iter().any(|r| (35.0..60.0).contains(r)),
        "the 40-ms path: {rtts:?}\n{text}"
    );

    // Bad rules: one line each, the binding as it was.
    let before = ccload_ok(&["-j", "cgroup", "list"]);
    for (rule, want) in [
        ("dst 10.0.0.0/8 -> cubic", "overlap"),
        ("dst 10.2.0.0/16 -> nosuchcc", "nosuchcc"),
        ("rtt >= soon -> ccpd", "not a duration"),
        ("dst 10.0.0.1/8 -> cubic", "host bits"),
    ] {
        let o = ccload(&[
            "cgroup",
            "set",
            cg.path(),
            "--algo",
            "cubic",
            "--rule",
            "dst 10.1.0.0/16 -> ccpd",
            "--rule",
            rule,
        ]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{rule}: {e}");
        assert!(e.contains(want) && e.lines().count() == 1, "{rule}: {e}");
    }
    assert_eq!(
        ccload_ok(&["-j", "cgroup", "list"]),
        before,
        "a refused rule changed the binding"
    );

    // `ccload flows` names the rule that chose each open connection: the
    // near one by its prefix (reno: listed though not ours), the far one
    // by the default.  Last: the killed flows' counters move on a while.
    let open_flow = |to: &str, ip: &str| {
        let srv = Helper::spawn(&["-", to, "listen", ip]);
        let port = srv.get("PORT");
        let cli = Helper::spawn(&[
            cg.path(),
            &sender,
            "connect",
            &format!("{ip}:{port}"),
            &(64u64 << 30).to_string(),
        ]);
        cli.get("CC");
        (srv, cli)
    };
    let (_fs, _fc) = open_flow(&receiver, far_ip);
    let (_ns, _nc) = open_flow(&near.name, near_ip);
    let flows: serde_json::Value =
        serde_json::from_str(&ccload_ok(&["-j", "flows", "-N", &sender])).unwrap();
    let chosen = |ip: &str| {
        let f = flows
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["remote"].as_str().unwrap().starts_with(&format!("{ip}:")))
            .unwrap_or_else(|| panic!("no flow to {ip} in {flows}"));
        (
            f["cong"].as_str().unwrap().to_string(),
            f["chosen"]["rule"].clone(),
            f["chosen"]["rule_text"].as_str().unwrap_or("").to_string(),
        )
    };
    assert_eq!(
        chosen(near_ip),
        (
            "reno".into(),
            serde_json::json!(0),
            "dst 10.79.0.0/24 -> reno".into()
        )
    );
    assert_eq!(
        chosen(far_ip),
        ("ccpd".into(), serde_json::Value::Null, "default".into())
    );
    drop((_fs, _fc, _ns, _nc));
}

/// `[[cgroups]] rules` through `ccload apply`: the binding gets them in
/// order, a second apply changes nothing, and changing a rule rebinds.
#[test]
fn apply_binds_path_rules_and_a_second_apply_changes_nothing() {
    let _s = privileged!();
    struct Detach;
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = ccload(&["detach", "--all"]);
        }
    }
    let _d = Detach;
    let cg = TestCgroup::new("apply-rules");
    let dir = std::env::temp_dir().join(format!("ccl-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    let write = |rules: &str| {
        std::fs::write(
            &file,
            format!(
                "[algos.ccpd]\n[profiles.wan]\nalgo = \"ccpd\"\n[[cgroups]]\npath = \"{}\"\nalgo = \"cubic\"\nrules = [{rules}]\n",
                cg.path()
            ),
        )
        .unwrap();
    };
    let f = file.to_str().unwrap();
    write("\"dst 10.77.2.0/24,fd00::/8 -> ccpd/wan\", \"rtt < 1ms -> reno\"");
    let out = ccload_ok(&["apply", f]);
    assert!(
        out.contains("; dst 10.77.2.0/24,fd00::/8 -> ccpd/1; rtt < 1ms -> reno"),
        "{out}"
    );
    assert_eq!(
        rules_of(cg.path()),
        [
            ("dst 10.77.2.0/24,fd00::/8 -> ccpd/1".to_string(), 0),
            ("rtt < 1ms -> reno".to_string(), 0)
        ]
    );
    let out = ccload_ok(&["apply", f]);
    assert!(out.contains("no changes"), "{out}");
    write("\"rtt < 1ms -> reno\", \"dst 10.77.2.0/24,fd00::/8 -> ccpd/wan\"");
    let out = ccload_ok(&["apply", f]);
    assert!(out.contains("+ bind"), "the order changed: {out}");
    assert_eq!(rules_of(cg.path())[0].0, "rtt < 1ms -> reno");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A/B inside one cgroup: `share 0.3 -> ccpd` before the binding's cubic
/// splits 200 connections of one process to one server by a keyed hash
/// of their ports: the share on ccpd within 4.5 standard deviations of
/// 0.3 x 200, and each arm's aggregate counts exactly its own.  The same
/// connections keep their CC from connect() to the end (the hash is the
/// same at both decisions).
#[test]
fn a_share_rule_splits_one_cgroups_connections_into_arms() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &[]);
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 100.0,
        buffer_pkts: 100,
        delay_ms: 1.0,
        ..Default::default()
    });
    let cg = TestCgroup::new("ab");
    ccload_ok(&[
        "cgroup",
        "set",
        cg.path(),
        "--algo",
        "cubic",
        "--rule",
        "share 0.3 -> ccpd",
    ]);
    let srv = Helper::spawn(&["-", &link.receiver.name, "serve-many", "10.77.2.2"]);
    let port = srv.get("PORT");
    let n = 200u32;
    let cli = Helper::spawn(&[
        cg.path(),
        &link.sender.name,
        "connect-many",
        &format!("10.77.2.2:{port}"),
        &n.to_string(),
    ]);
    let mut on = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..n {
        *on.entry(cli.get("CC")).or_default() += 1;
    }
    assert_eq!(cli.get("DONE"), n.to_string());
    let (a, b) = (
        on.get("ccpd").copied().unwrap_or(0),
        on.get("cubic").copied().unwrap_or(0),
    );
    assert_eq!(a + b, n, "only the two arms' CCs: {on:?}");
    let (mean, sd) = (0.3 * n as f64, (0.3 * 0.7 * n as f64).sqrt());
    assert!(
        (a as f64 - mean).abs() <= 4.5 * sd,
        "{a} of {n} on ccpd, want {mean} +- {:.0}",
        4.5 * sd
    );
    eprintln!("share 0.3: {a} of {n} connections on ccpd, {b} on cubic");
    assert_eq!(
        rules_of(cg.path()),
        [("share 0.3 -> ccpd".to_string(), a as u64)]
    );
    let l: serde_json::Value = serde_json::from_str(&ccload_ok(&["-j", "cgroup", "list"])).unwrap();
    let bnd = l
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["cgroup"] == cg.path())
        .unwrap();
    assert_eq!(
        bnd["unmatched"]["connections"], b as u64,
        "the control arm: {bnd}"
    );
}

/// Three identical links for the A/B rollouts: each carries one of the
/// cgroup's connections at a time.
fn ab_links() -> Vec<Bottleneck> {
    (0..3).map(|_| rollout_link()).collect()
}

/// `ccload rollout --ab CG --share 0.5 ARGS --json` with three clients in
/// `cg`, one 8-MB connection after another each, on `links`: returns the
/// exit code and the JSON lines.  The clients start once the share rule is
/// bound (a connection gets its arm at connect()).
fn ab_rollout(
    cg: &TestCgroup,
    links: &[Bottleneck],
    args: &[&str],
) -> (i32, Vec<serde_json::Value>) {
    let mut all = vec!["rollout", "--ab", cg.path(), "--share", "0.5", "--json"];
    all.extend_from_slice(args);
    run_rollout(
        &all,
        || !rules_of(cg.path()).is_empty(),
        || {
            let bound = rules_of(cg.path());
            assert!(
                bound
                    .first()
                    .is_some_and(|r| r.0.starts_with("share 0.5 -> ")),
                "the arms: {bound:?}"
            );
            links
                .iter()
                .map(|l| {
                    let srv = Helper::spawn(&["-", &l.receiver.name, "serve-many", "10.77.2.2"]);
                    let port = srv.get("PORT");
                    let cli = Helper::spawn(&[
                        cg.path(),
                        &l.sender.name,
                        "connect-many",
                        &format!("10.77.2.2:{port}"),
                        "1000",
                        &(8u64 << 20).to_string(),
                    ]);
                    (srv, cli)
                })
                .collect::<Vec<_>>()
        },
    )
}

/// An A/B rollout inside one cgroup (`rollout --ab CG --share 0.5`): the
/// cgroup's connections split by the share rule between a harmful ccpd
/// profile (as in the canary test) and the cgroup's cubic, each connection
/// alone on one of three identical links (three clients one connection
/// after another, so an arm cannot hurt the other), compared every 2 s.
/// The always-valid test finds the harm and rolls back; the binding is
/// cubic alone again, and nothing of the rollout stays recorded.
#[test]
fn an_ab_rollout_rolls_back_a_harmful_arm_by_its_sequential_test() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &[]);
    harmful_profile_5();
    let cg = TestCgroup::new("abroll");
    let _r = AbortRollouts;
    ccload_ok(&["cgroup", "set", cg.path(), "--algo", "cubic"]);
    let links = ab_links();
    let (code, lines) = ab_rollout(
        &cg,
        &links,
        &[
            "--algo",
            "ccpd",
            "--profile",
            "5",
            "--guard",
            "retrans_ratio <= 2",
            "--interval",
            "2s",
            "--for",
            "90s",
        ],
    );
    for l in &lines {
        eprintln!("{l}");
    }
    assert_eq!(code, 1, "the harmful arm was not rolled back");
    let last = lines.iter().rfind(|l| l.get("n").is_some()).unwrap();
    assert_eq!(
        last["harm"], true,
        "rolled back by the sequential test: {last}"
    );
    assert!(last["harm_evidence"].as_f64().unwrap() >= 20.0, "{last}");
    assert!(lines.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("always-valid"));
    assert_eq!(cgroup_binding(cg.path()), Some(("cubic".to_string(), 0)));
    assert!(rules_of(cg.path()).is_empty(), "the share rule is gone");
    let recorded = status_json()["rollouts"].to_string();
    assert!(!recorded.contains(cg.path()), "{recorded}");
}

/// The A/B rollout's false alarms, measured: `runs` rollouts of 30 s (15
/// looks) whose two arms run the same CC (cubic against the cgroup's
/// cubic), with the harmful test's traffic.  About 6 minutes for 10 runs,
/// so not part of the test command: `cargo test -p ccload-itests --test
/// cgroup identical_arms -- --ignored --nocapture` (docs/fleet.md has the
/// count).  Each rollout may roll back with probability at most alpha =
/// 0.05 on the retransmission guard; more than a third of the runs is a
/// test that does not hold its level.
#[test]
#[ignore = "a measurement of about 6 minutes (docs/fleet.md)"]
fn identical_arms_rarely_roll_back() {
    let _s = privileged!();
    let cg = TestCgroup::new("abnull");
    let _r = AbortRollouts;
    ccload_ok(&["cgroup", "set", cg.path(), "--algo", "cubic"]);
    let links = ab_links();
    let runs = 10;
    let mut rolled = 0;
    let mut evidence = Vec::new();
    for run in 0..runs {
        let (code, lines) = ab_rollout(
            &cg,
            &links,
            &[
                "--algo",
                "cubic",
                "--guard",
                "retrans_ratio <= 1.5",
                "--interval",
                "2s",
                "--for",
                "30s",
            ],
        );
        let l = lines
            .iter()
            .rfind(|l| l.get("n").is_some())
            .and_then(|l| l["harm_evidence"].as_f64())
            .unwrap_or(0.0);
        evidence.push(l);
        if code == 1 {
            rolled += 1;
        }
        eprintln!("run {}: exit {code}, last harm evidence {l:.2}", run + 1);
        // A run that ends without rollback keeps the arms: back to cubic
        // alone for the next.
        ccload_ok(&["cgroup", "set", cg.path(), "--algo", "cubic"]);
    }
    eprintln!("identical arms: {rolled} of {runs} rollouts rolled back; evidence {evidence:.2?}");
    assert!(rolled * 3 <= runs, "{rolled} of {runs} rolled back");
}
