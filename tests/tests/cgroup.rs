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
    let w = Watch::start(&["--algo", "ccpd"]);
    std::thread::sleep(Duration::from_millis(300));
    let (ca, sb, n) = connection(&link, a.path(), b.path(), 24 * MB);
    assert_eq!((ca.as_str(), sb.as_str(), n), ("ccpd", "cubic", 24 * MB));
    let mut recs_a = Vec::new();
    while let Ok(r) = w.rx.recv_timeout(Duration::from_millis(300)) {
        recs_a.push(r);
    }
    let (cb, sa, _) = connection(&link, b.path(), a.path(), MB);
    assert_eq!((cb.as_str(), sa.as_str()), ("cubic", "ccpd"));
    // C (ccpd, profile 0) to a server outside any bound cgroup ("-": the
    // test's own cgroup): the server keeps the namespace default.
    let (cc, so, _) = connection(&link, c.path(), "-", 24 * MB);
    assert_eq!(cc, "ccpd");
    assert_ne!(so, "ccpd", "a socket outside bound cgroups was changed");
    let mut recs_c = Vec::new();
    while let Ok(r) = w.rx.recv_timeout(Duration::from_millis(300)) {
        recs_c.push(r);
    }
    w.stop();
    // The profile reached only A's sockets: A's sender records say profile
    // 3 and the kernel's law used Kp = 8; C's say profile 0 and Kp = 2.
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
    let kps = |v: &[serde_json::Value]| -> Vec<i64> {
        v.iter()
            .filter_map(|r| ccpd_kp_used(r, &[2048, 8192]))
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
        kc.len() >= 3 && kc.iter().all(|&k| k == 2048),
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
