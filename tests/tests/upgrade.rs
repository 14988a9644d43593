//! In-place upgrades across params layouts (loader/src/bpf/upgrade.rs).
//!
//! The "older release" is ccpd's object built with one tunable more
//! (tests/build.rs, CCL_FIXTURE_LAYOUT), attached as another ccload leaves
//! it.  Flows run on it (a listener set to ccpd, whose accepted sockets
//! send); this build then reads it (`status`), refuses to tune it with the
//! way out, upgrades it (`attach --replace`, and `serve` at start), and the
//! flows must keep moving bytes without a reset while they, and a
//! connection accepted after the upgrade, run the new code: telemetry is
//! off in the fixture (trace_every = 0, carried over by name) and turned on
//! in the new params map only, so a record of a flow proves the new
//! programs and maps drive it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ccload::bpf::algos::Algo;
use ccload::bpf::layout::Identity;
use ccload_itests::*;

const FIXTURE: &str = env!("CCL_FIXTURE_CCPD_OBJ");

fn fixture_identity() -> Identity {
    Identity {
        layout_id: 0x0f1f_0f1f_0f1f_0f1f,
        obj_id: 0x0e1e_0e1e_0e1e_0e1e,
        version: "0.0.9-fixture".into(),
        upgraded_unix_s: 0,
    }
}

/// Detaches ccpd on drop, whoever attached it.
struct Detach;
impl Drop for Detach {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--algo", "ccpd"]);
    }
}

/// Flows from a ccpd listener: each accepted socket sends ~80 Mbit/s, each
/// client counts what it reads; an I/O error on either side is recorded.
struct Flows {
    port: u16,
    stop: Arc<AtomicBool>,
    bytes: Vec<Arc<AtomicU64>>,
    errors: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
    listener: TcpListener,
}

fn set_cc(fd: i32, name: &str) {
    // SAFETY: setsockopt on an fd we own, with a buffer of the given length.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const _,
            name.len() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "TCP_CONGESTION {name}: {}",
        std::io::Error::last_os_error()
    );
}

impl Flows {
    fn new() -> Flows {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        set_cc(listener.as_raw_fd(), "ccpd");
        Flows {
            port: listener.local_addr().unwrap().port(),
            stop: Arc::new(AtomicBool::new(false)),
            bytes: Vec::new(),
            errors: Arc::new(AtomicU64::new(0)),
            threads: Vec::new(),
            listener,
        }
    }

    /// One more flow; returns the client's port.
    fn add(&mut self) -> u16 {
        let mut client = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let (mut server, _) = self.listener.accept().unwrap();
        let cport = client.local_addr().unwrap().port();
        let (stop, errors) = (self.stop.clone(), self.errors.clone());
        self.threads.push(std::thread::spawn(move || {
            let buf = vec![7u8; 64 << 10];
            while !stop.load(Ordering::Relaxed) {
                if server.write_all(&buf).is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(6));
            }
        }));
        let n = Arc::new(AtomicU64::new(0));
        let (stop, errors, n2) = (self.stop.clone(), self.errors.clone(), n.clone());
        client
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        self.threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            while !stop.load(Ordering::Relaxed) {
                match client.read(&mut buf) {
                    Ok(0) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Ok(k) => {
                        n2.fetch_add(k as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }));
        self.bytes.push(n);
        cport
    }

    fn totals(&self) -> Vec<u64> {
        self.bytes
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    /// Every flow moved bytes over `d`, and none saw an error.
    fn all_moving(&self, d: Duration) -> Vec<u64> {
        let a = self.totals();
        std::thread::sleep(d);
        let b = self.totals();
        assert_eq!(
            self.errors.load(Ordering::Relaxed),
            0,
            "a flow was reset or closed"
        );
        a.iter().zip(&b).map(|(x, y)| y - x).collect()
    }
}

impl Drop for Flows {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn attach_fixture() {
    ccload::bpf::attach_object_file(
        Algo::Ccpd,
        Path::new(FIXTURE),
        &fixture_identity(),
        &[
            ("kp_q10", 3 << 10),
            ("fixture_extra", 9),
            ("trace_every", 0),
        ],
    )
    .expect("attach the fixture object");
}

/// Sender-side records of flows to the client ports `ports`.
fn recorded(recs: &[serde_json::Value], lport: u16, ports: &[u16]) -> Vec<u16> {
    let mut seen: Vec<u16> = recs
        .iter()
        .filter(|r| {
            r["local"]
                .as_str()
                .unwrap_or("")
                .ends_with(&format!(":{lport}"))
        })
        .filter_map(|r| r["remote"].as_str()?.rsplit(':').next()?.parse().ok())
        .filter(|p| ports.contains(p))
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

#[test]
fn attach_replace_upgrades_another_layout_with_flows_running() {
    let _s = privileged!();
    let _d = Detach;
    attach_fixture();
    let mut flows = Flows::new();
    let before = [flows.add(), flows.add()];
    assert!(flows
        .all_moving(Duration::from_millis(500))
        .iter()
        .all(|n| *n > 0));

    // This build reads the other layout by name, and says what it is.
    let st = ccload_ok(&["status"]);
    assert!(st.contains("loaded by ccload 0.0.9-fixture"), "{st}");
    assert!(st.contains("--replace` upgrades it in place"), "{st}");
    assert!(st.contains(" kp=3 "), "{st}");
    // ... refuses to write it, in one line with the way out ...
    let o = ccload(&["tune", "--algo", "ccpd", "--set", "kd=200"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--replace") && err.lines().count() == 1,
        "{err}"
    );

    // ... and upgrades it in place.  A watch of the old ring ends, saying so.
    let mut old_watch = Watch::start(&["--algo", "ccpd"]);
    assert!(old_watch.wait_holding("ccpd"));
    let up = ccload_ok(&["attach", "--algo", "ccpd", "--replace"]);
    assert!(
        up.contains("removed tunable: fixture_extra (was 9)"),
        "{up}"
    );
    assert!(up.contains("params"), "{up}");
    let moved: u64 = up
        .lines()
        .find_map(|l| l.trim().split_once(" open socket(s) moved")?.0.parse().ok())
        .unwrap_or_else(|| panic!("{up}"));
    // the two senders and the listener (the clients are on the default CC)
    assert!(moved >= 3, "{up}");
    assert!(up.contains("events"), "the fixture's ring differs: {up}");
    assert!(
        wait_until(Duration::from_secs(5), || old_watch
            .child
            .try_wait()
            .unwrap()
            .is_some()),
        "a watch of the renewed ring kept running"
    );
    let err = old_watch.stop();
    assert!(err.contains("run `ccload watch` again"), "{err}");
    let moving = flows.all_moving(Duration::from_millis(800));
    assert!(
        moving.iter().all(|n| *n > 0),
        "a flow stalled after the upgrade: {moving:?}"
    );

    let js = status_json();
    let a = &js["attached"][0];
    assert_eq!(a["current"], true, "{a}");
    assert_eq!(a["tunables"]["kp"], 3.0, "tunables carried over: {a}");
    assert_eq!(a["tunables"]["trace_every"], 0, "{a}");

    // Telemetry on in the new params only: the old flows, and one accepted
    // after the upgrade (the listener was moved too), report from the new code.
    let mut w = Watch::start(&["--algo", "ccpd"]);
    assert!(w.wait_holding("ccpd"));
    ccload_ok(&[
        "tune",
        "--algo",
        "ccpd",
        "--set",
        "trace_every=1",
        "--set",
        "kd=200",
    ]);
    let after = flows.add();
    let mut recs = Vec::new();
    let want = [before[0], before[1], after];
    let ok = wait_until(Duration::from_secs(10), || {
        while let Ok(r) = w.rx.try_recv() {
            recs.push(r);
        }
        recorded(&recs, flows.port, &want).len() == 3
    });
    assert!(
        ok,
        "flows reporting from the new code: {:?} of {want:?} ({} records)",
        recorded(&recs, flows.port, &want),
        recs.len()
    );
    w.stop();
    assert!(flows
        .all_moving(Duration::from_millis(300))
        .iter()
        .all(|n| *n > 0));
    drop(flows);
}

#[test]
fn serve_upgrades_what_another_release_attached() {
    let _s = privileged!();
    let _d = Detach;
    attach_fixture();
    let mut flows = Flows::new();
    flows.add();
    let dir = std::env::temp_dir().join(format!("ccl-t{}-upgrade", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("serve.toml");
    std::fs::write(
        &cfg,
        "[algos.ccpd]\n[serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"keep\"\n",
    )
    .unwrap();
    let d = Daemon::start(&cfg);
    let scrape = scrape(&d.addr());
    let log = d.log.clone();
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("upgraded ccpd in place"), "{log}");
    assert!(log.contains("removed tunable: fixture_extra"), "{log}");
    let m = scrape.unwrap_or_else(|| panic!("no metrics: {log}"));
    assert!(m.lines().any(|l| l == "ccload_upgrades_total 1"), "{m}");
    let js = status_json();
    assert_eq!(js["attached"][0]["current"], true);
    assert!(flows
        .all_moving(Duration::from_millis(500))
        .iter()
        .all(|n| *n > 0));
}
