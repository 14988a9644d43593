//! `ccload serve`: metrics scraped over HTTP move during a transfer, `watch`
//! clients get telemetry through the daemon, SIGHUP with a changed config
//! converges (a bad one is refused and the state kept), and stopping the
//! daemon keeps or removes the kernel state as the config says.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

/// Detach everything at the end, even on failure.
struct Cleanup(std::path::PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--all"]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scratch directory for a test's configs, and its [`Cleanup`].
fn scratch(tag: &str) -> (std::path::PathBuf, Cleanup) {
    let dir = std::env::temp_dir().join(format!("ccl-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (dir.clone(), Cleanup(dir))
}

/// GET `path`: (status line, body), or None when the connection fails.
fn get(addr: &str, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    let (head, body) = r.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

fn config(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn daemon_metrics_fanout_reload_and_exit() {
    let _s = privileged!();
    let (dir, _c) = scratch("main");
    let base = "[algos.ccpd]\n[profiles.fast]\nalgo = \"ccpd\"\nset = { kp = 8 }\n[serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"keep\"\n".to_string();
    let cfg = config(&dir, "serve.toml", &base);
    let d = Daemon::start(&cfg);
    let addr = d.addr();
    assert!(
        wait_until(Duration::from_secs(15), || scrape(&addr).is_some()),
        "metrics never came up: {:?}",
        d.log.lock().unwrap()
    );
    assert!(registered("ccpd"), "the config was applied at start");
    let m0 = scrape(&addr).unwrap();
    let r0 = metric(&m0, "ccload_rounds_total{algo=\"ccpd\"}");
    assert_eq!(metric(&m0, "ccload_config_applies_total"), 1.0);

    // A transfer while a `watch` client reads through the daemon, and a
    // plain client (what `socat - UNIX:...` would be) that says nothing
    // and so gets JSON lines.
    let e0 = metric(&m0, "ccload_events_total{algo=\"ccpd\"}");
    let plain = std::os::unix::net::UnixStream::connect(ccload::bind::config::DEFAULT_SOCKET)
        .expect("the daemon's telemetry socket");
    // Ends 5 s after the last record (the transfer starts within ~2 s).
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let plain_reader = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(plain)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let w = Watch::start(&["--algo", "ccpd"]);
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 60,
        delay_ms: 5.0,
        ..Default::default()
    });
    let t = link.transfer("ccpd", 16 * MB).expect("transfer");
    assert_eq!(t.bytes, 16 * MB);
    let mut got = 0;
    while w.rx.recv_timeout(Duration::from_secs(2)).is_ok() {
        got += 1;
    }
    let werr = w.stop();
    let m1 = scrape(&addr).unwrap();
    // Every record the kernel wrote during the transfer reached the client.
    let e1 = metric(&m1, "ccload_events_total{algo=\"ccpd\"}");
    assert!(got >= 10, "{got} records through the daemon: {werr}");
    assert_eq!(
        got as f64,
        e1 - e0,
        "records lost between kernel and client: {werr}"
    );
    assert!(werr.contains("from the daemon"), "{werr}");
    let lines = plain_reader.join().unwrap();
    assert_eq!(
        lines.len() as f64,
        e1 - e0,
        "the JSON-lines client missed records"
    );
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"));
        assert_eq!(v["algo"], "ccpd", "{l}");
        assert!(v["cwnd"].as_u64().is_some_and(|c| c > 0), "{l}");
    }
    let r1 = metric(&m1, "ccload_rounds_total{algo=\"ccpd\"}");
    let recs = metric(
        &m1,
        "ccload_telemetry_records_total{algo=\"ccpd\",profile=\"default\"}",
    );
    let srtt_n = metric(
        &m1,
        "ccload_srtt_seconds_count{algo=\"ccpd\",profile=\"default\"}",
    );
    let flows = metric(&m1, "ccload_flows_total{algo=\"ccpd\"}");
    eprintln!(
        "rounds {r0} -> {r1}, telemetry records {recs}, srtt samples {srtt_n}, flows {flows}"
    );
    assert!(r1 >= r0 + 50.0, "rounds did not move: {r0} -> {r1}");
    // The histograms come from the kernel's aggregates, not from the
    // records: the same count `ccload stats` reads (no ccpd flow is left,
    // so it no longer moves).
    let st: serde_json::Value = serde_json::from_str(&ccload_ok(&["stats", "--json"])).unwrap();
    let samples = st["algos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["algo"] == "ccpd" && a["profile"] == 0)
        .map(|a| a["counters"]["samples"].as_f64().unwrap())
        .expect("ccpd profile 0 in stats");
    assert!(recs >= 10.0 && srtt_n >= 10.0, "{recs} {srtt_n}");
    assert_eq!(srtt_n, samples, "metrics and `ccload stats` disagree");
    assert!(flows >= 2.0);
    // The 10-ms RTT of this path lands in the le="0.02" bucket, not le="0.005".
    let le5 = metric(
        &m1,
        "ccload_srtt_seconds_bucket{algo=\"ccpd\",profile=\"default\",le=\"0.005\"}",
    );
    let le20 = metric(
        &m1,
        "ccload_srtt_seconds_bucket{algo=\"ccpd\",profile=\"default\",le=\"0.02\"}",
    );
    assert!(le20 > le5, "RTT histogram: le5 {le5} le20 {le20}");

    // SIGHUP with a changed config converges.
    std::fs::write(
        &cfg,
        base.replace("kp = 8", "kp = 6")
            .replace("[profiles.fast]", "[algos.hetcp]\n[profiles.fast]"),
    )
    .unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(10), || registered("hetcp")
            && ccload_ok(&[
                "tune",
                "--algo",
                "ccpd",
                "--show",
                "--profile",
                "1"
            ])
            .lines()
            .any(|l| l.split_whitespace().take(2).eq(["kp", "6"]))),
        "reload did not converge: {:?}",
        d.log.lock().unwrap()
    );
    assert!(wait_until(Duration::from_secs(5), || scrape(&addr)
        .is_some_and(
            |m| metric(&m, "ccload_config_applies_total") == 2.0
        )));
    // A bad reload is refused; the running state stays.
    std::fs::write(&cfg, format!("{base}bogus = 1\n")).unwrap();
    d.signal(libc::SIGHUP);
    assert!(wait_until(Duration::from_secs(5), || d
        .logged("ccload: error: reload failed")));
    assert!(registered("hetcp") && registered("ccpd"));
    assert_eq!(
        metric(&scrape(&addr).unwrap(), "ccload_config_errors_total"),
        1.0
    );

    // Stop with on_exit = keep: the kernel stays as configured.
    let st = d.stop();
    assert!(st.success(), "{st}");
    assert!(
        registered("ccpd") && registered("hetcp"),
        "on_exit = keep removed state"
    );
    assert!(!std::path::Path::new("/run/ccload/telemetry.sock").exists());

    // With on_exit = remove, stopping takes ccload's state away.
    let cfg2 = config(&dir, "remove.toml", &base.replace("\"keep\"", "\"remove\""));
    let d2 = Daemon::start(&cfg2);
    let addr = d2.addr();
    assert!(wait_until(Duration::from_secs(15), || scrape(&addr).is_some()));
    assert!(!registered("hetcp"), "the new config detached hetcp");
    let st = d2.stop();
    assert!(st.success(), "{st}");
    assert!(!registered("ccpd"), "on_exit = remove kept ccpd");
}

/// A daemon with ccpd attached, metrics on an ephemeral port and the given
/// extra `[serve]` lines; detached and cleaned up on drop.
fn daemon_with(tag: &str, serve_extra: &str) -> (Daemon, String, Cleanup, std::path::PathBuf) {
    let (dir, c) = scratch(tag);
    let cfg = config(
        &dir,
        "serve.toml",
        &format!("[algos.ccpd]\n[serve]\nmetrics = \"127.0.0.1:0\"\n{serve_extra}"),
    );
    let d = Daemon::start(&cfg);
    let addr = d.addr();
    assert!(wait_until(Duration::from_secs(15), || scrape(&addr).is_some()));
    (d, addr, c, cfg)
}

/// Slowloris: silent and trickling clients fill the connection cap. Each is
/// cut at the request deadline however it trickles; connections past the
/// cap are closed at once; the daemon then answers again.
#[test]
fn slow_clients_are_cut_at_the_deadline_and_the_cap_holds() {
    let _s = privileged!();
    let (mut d, addr, _c, _) =
        daemon_with("slow", "max_connections = 8\nrequest_timeout_ms = 1500\n");
    let fds0 = d.fds();
    let t0 = std::time::Instant::now();
    let mut slow: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    // The daemon has accepted all eight (one fd each) before more arrive.
    assert!(wait_until(Duration::from_secs(5), || d.fds() >= fds0 + 8));
    // Past the cap: closed without an answer, long before the deadline.
    for _ in 0..20 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut b = [0u8; 64];
        let r = s.read(&mut b);
        assert!(
            matches!(r, Ok(0))
                || r.as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "a connection past the cap was not closed at once: {r:?}"
        );
    }
    // Four of the eight trickle a request head, one byte every 100 ms.
    let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    let mut closed_at = vec![None; slow.len()];
    let mut k = 0;
    while closed_at.iter().any(|c| c.is_none()) && t0.elapsed() < Duration::from_secs(6) {
        for (j, s) in slow.iter_mut().enumerate() {
            if closed_at[j].is_some() {
                continue;
            }
            if j % 2 == 0 && k < head.len() && s.write_all(&head[k..k + 1]).is_err() {
                closed_at[j] = Some(t0.elapsed());
                continue;
            }
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 256];
            match s.read(&mut b) {
                Ok(0) => closed_at[j] = Some(t0.elapsed()),
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => {
                    closed_at[j] = Some(t0.elapsed())
                }
                _ => {}
            }
            s.set_nonblocking(false).unwrap();
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    for (j, c) in closed_at.iter().enumerate() {
        let c = c.unwrap_or_else(|| panic!("slow client {j} still open after 6 s"));
        // Deadline 1.5 s after the accept, plus slack for the 100-ms polls.
        assert!(
            c < Duration::from_millis(3500),
            "slow client {j} cut at {c:?}"
        );
    }
    drop(slow);
    let m = scrape(&addr).expect("the daemon answers after the attack");
    assert!(metric(&m, "ccload_http_refused_total") >= 20.0, "{m}");
    assert!(metric(&m, "ccload_http_timeouts_total") >= 8.0, "{m}");
    assert!(d.alive());
    // Every connection's fd was released.
    assert!(
        wait_until(Duration::from_secs(3), || d.fds() <= fds0),
        "fds {fds0} -> {}",
        d.fds()
    );
}

/// With its fd limit reached, accept() fails with EMFILE; the daemon backs
/// off and keeps serving once fds are free again: it never exits for it.
#[test]
fn accept_errors_back_off_and_never_end_the_daemon() {
    let _s = privileged!();
    let (mut d, addr, _c, _) = daemon_with(
        "emfile",
        "max_connections = 1000\nrequest_timeout_ms = 1000\n",
    );
    let n = d.fds() as u64;
    // Room for 4 more fds: the 5th and later connections hit EMFILE.
    let lim = libc::rlimit {
        rlim_cur: n + 4,
        rlim_max: n + 4,
    };
    // SAFETY: prlimit on our own child with a valid struct.
    let rc = unsafe {
        libc::prlimit(
            d.child.id() as i32,
            libc::RLIMIT_NOFILE,
            &lim,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    let conns: Vec<TcpStream> = (0..30)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert!(
        wait_until(Duration::from_secs(5), || d.logged("metrics accept failed")),
        "no accept error with {} fds: {:?}",
        n + 4,
        d.log.lock().unwrap()
    );
    drop(conns);
    // Once the held connections time out, every later scrape is answered.
    assert!(
        wait_until(Duration::from_secs(10), || scrape(&addr).is_some()),
        "no answer after the fd storm"
    );
    let m = scrape(&addr).unwrap();
    assert!(metric(&m, "ccload_accept_errors_total") >= 1.0, "{m}");
    assert!(d.alive(), "the daemon exited on EMFILE");
}

/// SIGHUP reloads hold no fd more than before (it leaked one ring-buffer map
/// per algorithm per reload).
#[test]
fn reloads_do_not_leak_file_descriptors() {
    let _s = privileged!();
    let (d, addr, _c, _) = daemon_with("fds", "");
    // One reload first: lazily opened fds (the blocking pool) settle.
    let applies = |want: f64| {
        wait_until(Duration::from_secs(10), || {
            scrape(&addr).is_some_and(|m| metric(&m, "ccload_config_applies_total") == want)
        })
    };
    d.signal(libc::SIGHUP);
    assert!(applies(2.0));
    // The connection of the scrape that saw the reload closes just after
    // the client read its end: the baseline is the settled count.
    let settled = || {
        (0..10)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(50));
                d.fds()
            })
            .min()
            .unwrap()
    };
    let fds0 = settled();
    let list0 = d.fd_list();
    for k in 0..10 {
        d.signal(libc::SIGHUP);
        assert!(applies(3.0 + k as f64), "reload {k} not applied");
    }
    // One leaked fd per reload would leave 10 more, settled or not.
    assert_eq!(
        settled(),
        fds0,
        "fds after 10 reloads: {:?}, before: {list0:?}",
        d.fd_list()
    );
}

/// /healthz and /livez are 200 while the configured controllers are
/// attached and 503, with the reason, when one was detached behind the
/// daemon's back; a SIGHUP re-applies and heals.
#[test]
fn healthz_reports_drift_from_the_config() {
    let _s = privileged!();
    let (d, addr, _c, _) = daemon_with("health", "");
    for path in ["/healthz", "/livez"] {
        let (st, body) = get(&addr, path).unwrap();
        assert!(st.starts_with("HTTP/1.1 200"), "{path}: {st} {body}");
        assert_eq!(body, "ok\n");
    }
    let (st, _) = get(&addr, "/nope").unwrap();
    assert!(st.starts_with("HTTP/1.1 404"), "{st}");
    ccload_ok(&["detach", "--algo", "ccpd"]);
    // Readiness and liveness both fail: a restart would attach it again.
    for path in ["/healthz", "/livez"] {
        let (st, body) = get(&addr, path).unwrap();
        assert!(st.starts_with("HTTP/1.1 503"), "{path}: {st}");
        assert!(
            body.contains("configured but not attached: ccpd"),
            "{path}: {body}"
        );
    }
    d.signal(libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(10), || get(&addr, "/healthz")
            .is_some_and(|(s, _)| s.starts_with("HTTP/1.1 200"))),
        "SIGHUP did not heal: {:?}",
        d.log.lock().unwrap()
    );
}

/// A `watch` that holds a ring buffer when the daemon starts (or grabs it
/// during a reload) does not stop the daemon: the ring is reported
/// unread and taken over once the watch ends.
#[test]
fn a_ring_held_by_a_watch_is_retried_not_fatal() {
    let _s = privileged!();
    let _g = Attached::new("ccpd", &[]);
    let mut w = Watch::start(&["--algo", "ccpd"]);
    assert!(
        w.wait_holding("ccpd"),
        "the first watch never took the lock"
    );
    let (mut d, addr, _c, _) = daemon_with("ring", "");
    assert!(d.logged("ccpd telemetry not read, retrying"));
    let m = scrape(&addr).unwrap();
    assert_eq!(metric(&m, "ccload_ring_unread{algo=\"ccpd\"}"), 1.0);
    drop(w);
    assert!(
        wait_until(Duration::from_secs(10), || scrape(&addr)
            .is_some_and(|m| !m.contains("ccload_ring_unread{"))),
        "the daemon never took the ring over"
    );
    assert!(d.alive());
}

/// Under systemd (Type=notify) the daemon says READY=1 once it serves,
/// RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 on SIGTERM; its log
/// lines carry journald priorities only when stderr is the journal; `watch
/// --socket` reads a daemon whose `[serve] socket` is not the default; it
/// feeds systemd's watchdog when WatchdogSec= asks.
#[test]
fn the_daemon_notifies_systemd_logs_levels_and_serves_a_custom_socket() {
    let _s = privileged!();
    let (dir, _c) = scratch("notify");
    let ns = dir.join("notify.sock");
    let rx = std::os::unix::net::UnixDatagram::bind(&ns).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let msg = || {
        let mut b = [0u8; 512];
        let n = rx.recv(&mut b).expect("a notification");
        String::from_utf8_lossy(&b[..n]).to_string()
    };
    let tsock = dir.join("t.sock");
    let cfg = config(
        &dir,
        "n.toml",
        &format!(
            "[algos.ccpd]\n[serve]\nmetrics = \"127.0.0.1:0\"\nsocket = \"{}\"\n",
            tsock.display()
        ),
    );
    let d = Daemon::start_env(&cfg, &[("NOTIFY_SOCKET", ns.to_str().unwrap())]);
    let m = msg();
    assert!(m.starts_with("READY=1"), "{m}");
    // Ready means serving: the metrics answer at once.
    assert!(scrape(&d.addr()).is_some());
    assert!(
        d.logged("ccload: info: applied"),
        "{:?}",
        d.log.lock().unwrap()
    );
    // Through the daemon, `--every` still sets the kernel's sampling for
    // the watch's lifetime and restores it after.
    let trace_every = || status_json()["attached"][0]["tunables"]["trace_every"].clone();
    assert_eq!(trace_every(), 1);
    let w = std::process::Command::new(ccload_bin())
        .args([
            "watch",
            "--algo",
            "ccpd",
            "--format",
            "json",
            "--duration",
            "2",
            "--every",
            "3",
            "--socket",
        ])
        .arg(&tsock)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || trace_every() == 3),
        "--every through the daemon did not set trace_every: {}",
        trace_every()
    );
    let w = w.wait_with_output().unwrap();
    assert_eq!(trace_every(), 1, "restored after the watch");
    let werr = String::from_utf8_lossy(&w.stderr);
    assert!(
        w.status.success()
            && werr.contains(&format!("from the ccload daemon ({})", tsock.display())),
        "{werr}"
    );
    d.signal(libc::SIGHUP);
    let m = msg();
    assert!(m.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{m}");
    assert!(msg().starts_with("READY=1"));
    let st = d.stop();
    assert!(st.success());
    assert_eq!(msg(), "STOPPING=1");
    // Under journald: sd-daemon priority prefixes instead of words.
    let d = Daemon::start_env(&cfg, &[("JOURNAL_STREAM", "8:1234")]);
    let _ = d.addr();
    assert!(
        d.logged("<6>ccload: applied"),
        "{:?}",
        d.log.lock().unwrap()
    );
    assert!(d.stop().success());
    // For log collectors: one JSON object per line, level and message,
    // chosen by the environment (a DaemonSet) even under journald.
    let d = Daemon::start_env(
        &cfg,
        &[("CCLOAD_LOG_FORMAT", "json"), ("JOURNAL_STREAM", "8:1234")],
    );
    assert!(
        wait_until(Duration::from_secs(10), || d.logged("metrics on http://")),
        "{:?}",
        d.log.lock().unwrap()
    );
    for l in d.log.lock().unwrap().iter() {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("log line not JSON ({e}): {l}"));
        assert!(v["ts"].as_f64().unwrap() > 1.6e9, "{l}");
        assert!(
            ["info", "warning", "notice", "error"].contains(&v["level"].as_str().unwrap()),
            "{l}"
        );
    }
    assert!(
        d.logged("\"level\":\"info\",\"msg\":\"applied "),
        "{:?}",
        d.log.lock().unwrap()
    );
    assert!(d.stop().success());
    // WatchdogSec=: fed from the event loop at half the period, after
    // READY=1; not for a WATCHDOG_PID that is another process's.
    let d = Daemon::start_env(
        &cfg,
        &[
            ("NOTIFY_SOCKET", ns.to_str().unwrap()),
            ("WATCHDOG_USEC", "400000"),
        ],
    );
    assert!(msg().starts_with("READY=1"));
    let t0 = std::time::Instant::now();
    for _ in 0..3 {
        assert_eq!(msg(), "WATCHDOG=1");
    }
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(d.stop().success());
    while msg() != "STOPPING=1" {}
    let d = Daemon::start_env(
        &cfg,
        &[
            ("NOTIFY_SOCKET", ns.to_str().unwrap()),
            ("WATCHDOG_USEC", "400000"),
            ("WATCHDOG_PID", "1"),
        ],
    );
    assert!(msg().starts_with("READY=1"));
    assert!(d.stop().success());
    assert_eq!(
        msg(),
        "STOPPING=1",
        "no WATCHDOG=1 for another process's watchdog"
    );
}

/// `serve` runs a `[[rollouts]]` entry of its config: the harmful canary
/// profile is rolled back while a SIGHUP reloads the config half-way (the
/// rollout keeps running across it), `/metrics` reports the rollout's
/// state and ratios, and the canary ends unbound with the control still
/// on cubic.
#[test]
fn the_daemon_runs_a_rollout_from_its_config_across_a_reload() {
    let _s = privileged!();
    let (dir, _c) = scratch("ro");
    let (can, ctl) = (TestCgroup::new("ro-canary"), TestCgroup::new("ro-control"));
    // Dropped after the daemon (declared before it): a failure mid-rollout
    // leaves nothing recorded.
    let _r = AbortRollouts;
    let text = format!(
        "[algos.ccpd]\n[profiles.harm]\nalgo = \"ccpd\"\nset = {{ b_min = 1000, bmax_on_loss = 0 }}\n\
         [[cgroups]]\npath = \"{ctl}\"\nalgo = \"cubic\"\n\
         [[rollouts]]\nalgo = \"ccpd\"\nprofile = \"harm\"\ncanary = \"{can}\"\ncontrol = \"{ctl}\"\n\
         guards = [\"retrans_ratio <= 2\"]\ninterval = \"2s\"\nfor = \"60s\"\n\
         [serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"remove\"\n",
        can = can.path(),
        ctl = ctl.path()
    );
    let cfg = config(&dir, "serve.toml", &text);
    let d = Daemon::start(&cfg);
    d.wait_bound(can.path(), "ccpd");
    let addr = d.addr();
    let lc = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 40,
        delay_ms: 10.0,
        ..Default::default()
    });
    let lk = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 40,
        delay_ms: 10.0,
        ..Default::default()
    });
    let _fc = long_flow(&lc, can.path());
    let _fk = long_flow(&lk, ctl.path());
    let state = |s: &str| {
        scrape(&addr).is_some_and(|m| {
            m.lines().any(|l| {
                l.starts_with("ccload_rollout_state{")
                    && l.contains(&format!("state=\"{s}\""))
                    && l.ends_with(" 1")
            })
        })
    };
    assert!(state("running"), "{:?}", scrape(&addr));
    // A reload half-way: the rollout is in the new config unchanged, so it
    // keeps running (same thread, same intervals).
    std::thread::sleep(Duration::from_millis(2500));
    d.signal(libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(30), || state("rolled_back")),
        "not rolled back: {:?}\n{:?}",
        scrape(&addr),
        d.log.lock().unwrap()
    );
    let m = scrape(&addr).unwrap();
    let lbl = format!("canary=\"{}\",algo=\"ccpd\"", can.path());
    let ratio = metric(
        &m,
        &format!("ccload_rollout_ratio{{{lbl},guard=\"retrans_ratio <= 2\"}}"),
    );
    let n = metric(&m, &format!("ccload_rollout_intervals{{{lbl}}}"));
    let ev = metric(&m, &format!("ccload_rollout_harm_evidence{{{lbl}}}"));
    eprintln!("rolled back after {n} intervals, retrans ratio {ratio}, harm evidence {ev}");
    // Served (metric() panics on a missing series); the test looks from
    // its fifth interval on, so two intervals leave it at 1.
    assert_eq!(ev, 1.0, "no evidence before the test's first look");
    assert!(ratio > 2.0, "{ratio}");
    assert!(d.logged("reload applied"));
    assert_eq!(
        cgroup_binding(can.path()).map(|b| b.0),
        None,
        "canary restored (it had no binding)"
    );
    assert_eq!(
        cgroup_binding(ctl.path()).map(|b| b.0).as_deref(),
        Some("cubic")
    );
    assert!(d.stop().success());
}

/// `ccload rollout status` and `promote` reach a rollout the daemon runs
/// listed as running by `serve`, promoted early (the control
/// bound, `/metrics` says `promoted`), and not started again by a reload of
/// the same config.
#[test]
fn the_daemons_rollouts_answer_the_rollout_verbs() {
    let _s = privileged!();
    let (dir, _c) = scratch("rv");
    let (can, ctl) = (TestCgroup::new("rv-canary"), TestCgroup::new("rv-control"));
    let _r = AbortRollouts;
    let text = format!(
        "[algos.ccpd]\n[[rollouts]]\nalgo = \"ccpd\"\ncanary = \"{can}\"\ncontrol = \"{ctl}\"\n\
         interval = \"1s\"\nfor = \"60s\"\n\
         [serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"remove\"\n",
        can = can.path(),
        ctl = ctl.path()
    );
    let cfg = config(&dir, "serve.toml", &text);
    let d = Daemon::start(&cfg);
    let addr = d.addr();
    let state = |s: &str| {
        scrape(&addr).is_some_and(|m| {
            m.lines().any(|l| {
                l.starts_with("ccload_rollout_state{")
                    && l.contains(&format!("state=\"{s}\""))
                    && l.ends_with(" 1")
            })
        })
    };
    assert!(
        wait_until(Duration::from_secs(15), || ccload_ok(&[
            "rollout",
            "status",
            can.path()
        ])
        .contains("running (pid")),
        "{:?}",
        d.log.lock().unwrap()
    );
    let st = ccload_ok(&["rollout", "status", can.path()]);
    assert!(st.contains(", serve)"), "{st}");
    let r = ccload_ok(&["rollout", "promote", can.path()]);
    assert!(r.contains("promoted the running rollout of ccpd"), "{r}");
    assert!(
        wait_until(Duration::from_secs(5), || state("promoted")),
        "{:?}",
        scrape(&addr)
    );
    assert_eq!(cgroup_binding(ctl.path()), Some(("ccpd".to_string(), 0)));
    assert_eq!(cgroup_binding(can.path()), Some(("ccpd".to_string(), 0)));
    d.signal(libc::SIGHUP);
    assert!(wait_until(Duration::from_secs(10), || d.logged("reload applied")));
    assert!(state("promoted"), "{:?}", scrape(&addr));
    assert!(ccload_ok(&["rollout", "status"])
        .lines()
        .all(|l| !l.contains(can.path())));
    assert!(d.stop().success());
}

/// The daemon applies a changed config file without a signal: a
/// ConfigMap-style update (the kubelet renames a new `..data` symlink into
/// the mounted directory; the file is a symlink through it) retunes ccpd;
/// an invalid new file is reported, counted and the running state kept; the
/// next good one is applied.
/// A ConfigMap of two files, as deploy/kubernetes mounts it (the fleet's
/// controllers, the pool's profile and [serve]): a change to either file,
/// published by the kubelet's ..data swap, is applied without a signal; a
/// bad version is refused and counted.
#[test]
fn a_changed_config_file_is_applied_without_a_signal() {
    let _s = privileged!();
    let (dir, _c) = scratch("cm");
    // One ConfigMap version: its directory, then the ..data swap.
    let mut version = 0;
    let mut publish = |kp: u32, kd: u32| {
        version += 1;
        let v = dir.join(format!("..v{version}"));
        std::fs::create_dir(&v).unwrap();
        std::fs::write(
            v.join("fleet.toml"),
            format!("[algos.ccpd]\nset = {{ kp = {kp} }}\n"),
        )
        .unwrap();
        std::fs::write(
            v.join("pool.toml"),
            format!(
                "[profiles.trial]\nalgo = \"ccpd\"\nset = {{ kd = {kd} }}\n\
                 [serve]\nmetrics = \"127.0.0.1:0\"\n"
            ),
        )
        .unwrap();
        let tmp = dir.join("..data_tmp");
        std::os::unix::fs::symlink(format!("..v{version}"), &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("..data")).unwrap();
    };
    publish(3, 50);
    let files = ["fleet.toml", "pool.toml"].map(|f| {
        let p = dir.join(f);
        std::os::unix::fs::symlink(format!("..data/{f}"), &p).unwrap();
        p
    });
    let param = |profile: u32, name: &str| {
        ccload::bpf::read_params(ccload::bpf::algos::Algo::Ccpd, profile)
            .ok()
            .and_then(|p| p.get(name))
            .unwrap_or(0)
    };
    let kp = || param(0, "kp") / 1024;
    // the profile's id as serve recorded it (profiles.rs)
    let kd = || ccload::bind::profiles::resolve("ccpd", "trial").map_or(0, |id| param(id, "kd"));
    let d = Daemon::start_files(&[&files[0], &files[1]], &[]);
    let addr = d.addr();
    assert!(
        wait_until(Duration::from_secs(15), || kp() == 3 && kd() == 50),
        "start"
    );
    publish(5, 50);
    assert!(
        wait_until(Duration::from_secs(5), || kp() == 5),
        "the swap was not applied: {:?}",
        d.log.lock().unwrap()
    );
    assert!(d.logged("config file changed: reloading"));
    // The pool's file alone.
    publish(5, 70);
    assert!(
        wait_until(Duration::from_secs(5), || kd() == 70),
        "the pool's file: {:?}",
        d.log.lock().unwrap()
    );
    // kp 99 is out of range: refused, counted, kp stays 5.
    publish(99, 70);
    assert!(
        wait_until(Duration::from_secs(5), || d.logged("reload failed")),
        "{:?}",
        d.log.lock().unwrap()
    );
    assert_eq!(kp(), 5);
    let m = scrape(&addr).unwrap();
    assert_eq!(metric(&m, "ccload_config_errors_total"), 1.0);
    publish(7, 70);
    assert!(
        wait_until(Duration::from_secs(5), || kp() == 7),
        "after a bad one"
    );
    assert_eq!(
        metric(&scrape(&addr).unwrap(), "ccload_config_applies_total"),
        4.0
    );
    d.stop();
}

/// The congestion control a connection from cgroup `cg` gets (a short
/// transfer through `link`), as the client's socket reports it.
fn cc_of_a_connection(link: &Bottleneck, cg: &std::path::Path) -> String {
    let helper = ccload_bin().with_file_name("ccl-sockhelper");
    let (mut srv, port) = listener(link);
    let cli = Command::new(&helper)
        .args([
            cg.to_str().unwrap(),
            &link.sender.name,
            "connect",
            &format!("10.77.2.2:{port}"),
            "10000",
        ])
        .output()
        .unwrap();
    let _ = srv.kill();
    let _ = srv.wait();
    let text = String::from_utf8_lossy(&cli.stdout).to_string();
    text.lines()
        .find_map(|l| l.strip_prefix("CC "))
        .unwrap_or_else(|| panic!("no CC line: {text}"))
        .to_string()
}

/// Cgroups that come and go: `[[cgroups]]` entries may name
/// cgroups that do not exist yet and may be globs.  The daemon binds a
/// cgroup within 1 s of its mkdir, binds it again after an rmdir + mkdir
/// (a service restart), and binds each of three cgroups a glob matches;
/// connections in each get the configured CC; /healthz names the entry
/// still waiting and /metrics counts the states.
#[test]
fn cgroups_that_appear_or_are_made_again_are_bound() {
    let _s = privileged!();
    let (dir, _c) = scratch("cg");
    let root = ccload::host::system::cgroup2_mount().expect("cgroup2 mounted");
    let name = |s: &str| root.join(format!("ccl-t{}-{s}", std::process::id()));
    let (late, never) = (name("late"), name("never"));
    let pods: Vec<_> = (1..=3).map(|i| name(&format!("pod{i}"))).collect();
    struct Rmdir(Vec<std::path::PathBuf>);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            let _ = ccload(&["detach", "--all"]);
            for d in &self.0 {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
    let mut all = pods.clone();
    all.push(late.clone());
    let _r = Rmdir(all);
    let cfg = config(
        &dir,
        "cg.toml",
        &format!(
            "[algos.ccpd]\n[serve]\nmetrics = \"127.0.0.1:0\"\n\
             [[cgroups]]\npath = \"{}\"\nalgo = \"ccpd\"\n\
             [[cgroups]]\npath = \"{}\"\nalgo = \"reno\"\n\
             [[cgroups]]\npath = \"{}\"\nalgo = \"reno\"\n",
            late.display(),
            name("pod*").display(),
            never.display()
        ),
    );
    let d = Daemon::start(&cfg);
    let addr = d.addr();
    let (st, body) = get(&addr, "/healthz").unwrap();
    assert!(st.starts_with("HTTP/1.1 200"), "{st} {body}");
    assert!(
        body.contains(&format!("waiting for cgroup {}", late.display())),
        "{body}"
    );
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 60,
        delay_ms: 2.0,
        ..Default::default()
    });
    let bound_within = |p: &std::path::Path, cc: &str| {
        let t = std::time::Instant::now();
        let ok = wait_until(Duration::from_secs(3), || {
            cgroup_binding(p.to_str().unwrap()).is_some_and(|(a, _)| a == cc)
        });
        (ok, t.elapsed())
    };
    // Appears after the start.
    std::fs::create_dir(&late).unwrap();
    let (ok, dt) = bound_within(&late, "ccpd");
    assert!(
        ok && dt < Duration::from_secs(1),
        "late: bound {ok} after {dt:?}"
    );
    assert_eq!(cc_of_a_connection(&link, &late), "ccpd");
    // Removed and made again (a new cgroup id): bound again.
    std::fs::remove_dir(&late).unwrap();
    std::fs::create_dir(&late).unwrap();
    let (ok, dt) = bound_within(&late, "ccpd");
    assert!(
        ok && dt < Duration::from_secs(1),
        "recreated: bound {ok} after {dt:?}"
    );
    assert_eq!(cc_of_a_connection(&link, &late), "ccpd");
    // A glob: three new cgroups.
    for p in &pods {
        std::fs::create_dir(p).unwrap();
    }
    for p in &pods {
        let (ok, dt) = bound_within(p, "reno");
        assert!(
            ok && dt < Duration::from_secs(1),
            "{}: bound {ok} after {dt:?}",
            p.display()
        );
        assert_eq!(cc_of_a_connection(&link, p), "reno");
    }
    let (st, body) = get(&addr, "/healthz").unwrap();
    assert!(st.starts_with("HTTP/1.1 200"), "{st} {body}");
    assert!(
        body.contains(&format!("waiting for cgroup {}", never.display()))
            && !body.contains(&late.display().to_string()),
        "{body}"
    );
    let m = scrape(&addr).unwrap();
    assert_eq!(metric(&m, "ccload_cgroups{state=\"bound\"}"), 4.0);
    assert_eq!(metric(&m, "ccload_cgroups{state=\"missing\"}"), 1.0);
    assert!(metric(&m, "ccload_cgroup_binds_total") >= 5.0, "{m}");
    // Unbound behind the daemon's back: /healthz says so until it rebinds
    // (the reconcile period at the latest).
    ccload_ok(&["cgroup", "unset", pods[0].to_str().unwrap()]);
    let (st, body) = get(&addr, "/healthz").unwrap();
    if st.starts_with("HTTP/1.1 503") {
        assert!(body.contains("configured cgroups not bound"), "{body}");
        // Unready, but alive: a restart would not bind it any better.
        let (st, body) = get(&addr, "/livez").unwrap();
        assert!(st.starts_with("HTTP/1.1 200"), "/livez: {st} {body}");
    } else {
        // The periodic reconcile came between the unset and the request.
        assert_eq!(
            cgroup_binding(pods[0].to_str().unwrap())
                .map(|b| b.0)
                .as_deref(),
            Some("reno"),
            "/healthz said {st} while the cgroup was unbound"
        );
    }
    assert!(
        wait_until(Duration::from_secs(12), || {
            cgroup_binding(pods[0].to_str().unwrap()).is_some_and(|(a, _)| a == "reno")
        }),
        "not rebound within the reconcile period"
    );
    d.stop();
}

/// A Kubernetes API server as far as the `[[pods]]` watch needs one:
/// `GET /api/v1/pods` lists the pods it holds (recorded objects,
/// tests/fixtures/pods.json), `...&watch=true` streams what the test
/// changes afterwards as watch events; every request line is recorded.
struct MockApi {
    addr: String,
    state: Arc<Mutex<MockState>>,
}

#[derive(Default)]
struct MockState {
    pods: Vec<serde_json::Value>,
    version: u64,
    watchers: Vec<std::sync::mpsc::Sender<String>>,
    requests: Vec<String>,
}

impl MockApi {
    fn start(pods: Vec<serde_json::Value>) -> MockApi {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let state = Arc::new(Mutex::new(MockState {
            pods,
            version: 48213,
            ..Default::default()
        }));
        let st = state.clone();
        std::thread::spawn(move || {
            for c in l.incoming().map_while(Result::ok) {
                let st = st.clone();
                std::thread::spawn(move || Self::serve(c, st));
            }
        });
        MockApi { addr, state }
    }

    fn serve(c: TcpStream, st: Arc<Mutex<MockState>>) {
        let mut r = BufReader::new(c.try_clone().unwrap());
        let mut w = c;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 {
                    return;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if h == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            st.lock().unwrap().requests.push(line.trim().to_string());
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            if !path.starts_with("/api/v1/pods") {
                let _ = w.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                continue;
            }
            if path.contains("watch=true") || path.contains("watch=1") {
                let (tx, rx) = std::sync::mpsc::channel::<String>();
                st.lock().unwrap().watchers.push(tx);
                let _ = w.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                );
                let _ = w.flush();
                // Events as they come; the daemon ends the stream.
                for ev in rx {
                    let line = format!("{ev}\n");
                    let chunk = format!("{:x}\r\n{line}\r\n", line.len());
                    if w.write_all(chunk.as_bytes())
                        .and_then(|_| w.flush())
                        .is_err()
                    {
                        return;
                    }
                }
                return;
            }
            let list = {
                let s = st.lock().unwrap();
                serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "PodList",
                    "metadata": {"resourceVersion": s.version.to_string()},
                    "items": s.pods,
                })
                .to_string()
            };
            let _ = w.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{list}",
                    list.len()
                )
                .as_bytes(),
            );
        }
    }

    /// Add or change a pod (ADDED / MODIFIED to the watchers).
    fn apply(&self, mut pod: serde_json::Value) {
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        pod["metadata"]["resourceVersion"] = s.version.to_string().into();
        let uid = pod["metadata"]["uid"].clone();
        let kind = match s.pods.iter_mut().find(|p| p["metadata"]["uid"] == uid) {
            Some(p) => {
                *p = pod.clone();
                "MODIFIED"
            }
            None => {
                s.pods.push(pod.clone());
                "ADDED"
            }
        };
        let ev = serde_json::json!({"type": kind, "object": pod}).to_string();
        s.watchers.retain(|w| w.send(ev.clone()).is_ok());
    }

    fn delete(&self, uid: &str) {
        let mut s = self.state.lock().unwrap();
        s.version += 1;
        let i = s
            .pods
            .iter()
            .position(|p| p["metadata"]["uid"] == uid)
            .unwrap();
        let mut pod = s.pods.remove(i);
        pod["metadata"]["resourceVersion"] = s.version.to_string().into();
        let ev = serde_json::json!({"type": "DELETED", "object": pod}).to_string();
        s.watchers.retain(|w| w.send(ev.clone()).is_ok());
    }

    fn watching(&self) -> bool {
        !self.state.lock().unwrap().watchers.is_empty()
    }

    fn kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let p = dir.join("kubeconfig");
        std::fs::write(
            &p,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: mock\n  cluster:\n    server: http://{}\n\
                 contexts:\n- name: mock\n  context:\n    cluster: mock\n    user: mock\n\
                 current-context: mock\nusers:\n- name: mock\n  user: {{}}\n",
                self.addr
            ),
        )
        .unwrap();
        p
    }
}

/// The recorded pod objects (tests/fixtures/pods.json), a mock API
/// serving them, and where a test's kubelet tree goes (a cgroup named
/// after a tag; the test makes the pods' cgroups and removes the tree with
/// a [`Tree`]): the fixture's web, db and staging pods' cgroups (systemd
/// driver) and that of `late`, a pod the test adds.
struct RecordedPods {
    pods: Vec<serde_json::Value>,
    api: MockApi,
    root: std::path::PathBuf,
    web: std::path::PathBuf,
    db: std::path::PathBuf,
    staging: std::path::PathBuf,
    late: std::path::PathBuf,
}

const WEB_UID: &str = "5e0f8a1c-3b2d-4c6e-9f10-2a7b8c9d0e11";
const LATE_UID: &str = "77777777-0000-4000-8000-000000000001";

fn recorded_pods(tag: &str) -> RecordedPods {
    use ccload::bind::pods::{pod_cgroup, Driver, Qos};
    let fixtures: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/pods.json"))
            .unwrap(),
    )
    .unwrap();
    let pods = fixtures["items"].as_array().unwrap().clone();
    let api = MockApi::start(pods.clone());
    let root = ccload::host::system::cgroup2_mount()
        .expect("cgroup2 mounted")
        .join(format!("ccl-t{}-{tag}", std::process::id()));
    let cg = |uid: &str, qos| pod_cgroup(&root, Driver::Systemd, uid, qos);
    RecordedPods {
        web: cg(WEB_UID, Qos::Burstable),
        db: cg("a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", Qos::BestEffort),
        staging: cg("0f9e8d7c-6b5a-4938-2716-05f4e3d2c1b0", Qos::Guaranteed),
        late: cg(LATE_UID, Qos::Guaranteed),
        pods,
        api,
        root,
    }
}

impl RecordedPods {
    /// The late pod: an app=web pod of namespace shop (the staging pod's
    /// object, Guaranteed, under another uid, name and namespace).
    fn late_pod(&self) -> serde_json::Value {
        let mut new = self.pods[2].clone();
        new["metadata"]["uid"] = LATE_UID.into();
        new["metadata"]["name"] = "web-7d4b9c6f5-q9zvw".into();
        new["metadata"]["namespace"] = "shop".into();
        new
    }

    /// The test's kubelet tree with the cgroups of `present` made; the
    /// guard removes the tree.
    fn tree(&self, present: &[&std::path::Path]) -> Tree {
        let t = Tree(self.root.clone());
        for p in present {
            std::fs::create_dir_all(p).unwrap();
        }
        t
    }

    /// A config's `[serve]` for the pods: node-a, the test's kubelet tree,
    /// metrics on loopback, bindings removed on exit.
    fn serve_section(&self) -> String {
        format!(
            "[serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"remove\"\n\
             node_name = \"node-a\"\ncgroup_root = \"{}\"\n",
            self.root.display()
        )
    }

    /// The late pod, as the kubelet brings it: scheduled in the API once
    /// the daemon watches it, its cgroup made 300 ms after.
    fn schedule_late_pod(&self) {
        assert!(
            wait_until(Duration::from_secs(5), || self.api.watching()),
            "no watch"
        );
        self.api.apply(self.late_pod());
        std::thread::sleep(Duration::from_millis(300));
        std::fs::create_dir_all(&self.late).unwrap();
    }

    /// The daemon on `cfg`, asking the mock API for the pods.
    fn daemon(&self, dir: &std::path::Path, cfg: &std::path::Path) -> Daemon {
        let kc = self.api.kubeconfig(dir);
        Daemon::start_env(cfg, &[("KUBECONFIG", kc.to_str().unwrap())])
    }
}

/// A kubelet-style cgroup tree of a test: on drop, everything detached
/// and the tree removed.
struct Tree(std::path::PathBuf);
impl Drop for Tree {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--all"]);
        // Deepest first: rmdir takes empty cgroups only.
        let mut dirs = Vec::new();
        let mut stack = vec![self.0.clone()];
        while let Some(d) = stack.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Pods by label: `[[pods]]` entries select this node's pods
/// through the Kubernetes API (a mock serving recorded pod objects) and
/// the daemon binds each selected pod's cgroup (a kubelet-style tree, the
/// systemd driver, under a test cgroup): at start, a pod added later once
/// its cgroup appears, a pod whose labels change, and a deleted pod is
/// unbound; connections in a pod's cgroup get the CC; the list is asked
/// for this node only.
#[test]
fn pods_chosen_by_label_get_their_cc() {
    let _s = privileged!();
    let (dir, _c) = scratch("pods");
    let k = recorded_pods("kube");
    let (pods, api) = (&k.pods, &k.api);
    let (web, db, staging, late) = (&k.web, &k.db, &k.staging, &k.late);
    let _t = k.tree(&[web, db, staging]);
    let cfg = config(
        &dir,
        "pods.toml",
        &format!(
            "[algos.ccpd]\n\
             [[pods]]\nselector = \"app=web\"\nnamespace = \"shop\"\nalgo = \"ccpd\"\n\
             [[pods]]\nselector = \"app in (db, cache)\"\nalgo = \"reno\"\n{}",
            k.serve_section()
        ),
    );
    let d = k.daemon(&dir, &cfg);
    let addr = d.addr();
    let bound = |p: &std::path::Path| cgroup_binding(p.to_str().unwrap()).map(|b| b.0);
    let within = |secs: u64, p: &std::path::Path, want: Option<&str>| {
        wait_until(Duration::from_secs(secs), || bound(p).as_deref() == want)
    };
    assert!(
        within(15, web, Some("ccpd")) && within(2, db, Some("reno")),
        "web {:?}, db {:?}: {:?}",
        bound(web),
        bound(db),
        d.log.lock().unwrap()
    );
    assert_eq!(bound(staging), None, "another namespace's app=web");
    let link = Bottleneck::new(LinkCfg {
        rate_mbit: 20.0,
        buffer_pkts: 60,
        delay_ms: 2.0,
        ..Default::default()
    });
    assert_eq!(cc_of_a_connection(&link, web), "ccpd");
    // A new pod: its cgroup comes after the API says it is scheduled.
    k.schedule_late_pod();
    let t = std::time::Instant::now();
    assert!(
        within(3, late, Some("ccpd")),
        "the new pod: {:?}",
        bound(late)
    );
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(cc_of_a_connection(&link, late), "ccpd");
    // Relabelled: db-0 becomes app=web in shop, the first entry's.
    let mut relabel = pods[1].clone();
    relabel["metadata"]["labels"]["app"] = "web".into();
    api.apply(relabel);
    assert!(within(3, db, Some("ccpd")), "relabelled: {:?}", bound(db));
    // Deleted (its cgroup still there, as until the kubelet removes it).
    api.delete(WEB_UID);
    assert!(within(3, web, None), "deleted: {:?}", bound(web));
    let m = scrape(&addr).unwrap();
    assert_eq!(metric(&m, "ccload_pods_selected"), 2.0, "{m}");
    let reqs = api.state.lock().unwrap().requests.clone();
    assert!(
        !reqs.is_empty()
            && reqs
                .iter()
                .all(|r| r.contains("fieldSelector=spec.nodeName%3Dnode-a")),
        "{reqs:?}"
    );
    assert!(d.stop().success());
}

/// A/B rollouts that follow pods: a `[[rollouts]]` entry with `pods`
/// starts one rollout in each selected pod of this node (the pod bound
/// with a share rule over the CC `[[pods]]` gave it), one in a pod that
/// comes later once its cgroup is there, and rolls a pod's back when the
/// pod is deleted (its binding then goes as the pod's does).
#[test]
fn ab_rollouts_follow_the_pods_they_select() {
    let _s = privileged!();
    let _ab = AbortRollouts;
    let (dir, _c) = scratch("podab");
    let k = recorded_pods("kab");
    let api = &k.api;
    let (web, db, late) = (&k.web, &k.db, &k.late);
    let _t = k.tree(&[web, db]);
    let cfg = config(
        &dir,
        "podab.toml",
        &format!(
            "[algos.ccpd]\n\
             [[pods]]\nselector = \"app=web\"\nnamespace = \"shop\"\nalgo = \"reno\"\n\
             [[rollouts]]\nalgo = \"ccpd\"\npods = \"app=web\"\nnamespace = \"shop\"\nshare = 0.5\n\
             interval = \"1s\"\nfor = \"10m\"\n{}",
            k.serve_section()
        ),
    );
    let d = k.daemon(&dir, &cfg);
    let addr = d.addr();
    // (CC for the rest, the binding's rules) of a cgroup.
    let binding = |p: &std::path::Path| -> Option<(String, Vec<String>)> {
        let l: serde_json::Value =
            serde_json::from_str(&ccload_ok(&["-j", "cgroup", "list"])).unwrap();
        l.as_array()
            .unwrap()
            .iter()
            .find(|b| b["cgroup"] == p.to_str().unwrap())
            .map(|b| {
                (
                    b["algo"].as_str().unwrap().to_string(),
                    b["rules"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r["text"].as_str().unwrap().to_string())
                        .collect(),
                )
            })
    };
    let arms = Some(("reno".to_string(), vec!["share 0.5 -> ccpd".to_string()]));
    let state = |p: &std::path::Path, s: &str| {
        scrape(&addr).is_some_and(|m| {
            m.lines().any(|l| {
                l.starts_with("ccload_rollout_state{")
                    && l.contains(&format!("canary=\"{}\"", p.display()))
                    && l.contains(&format!("state=\"{s}\""))
                    && l.ends_with(" 1")
            })
        })
    };
    assert!(
        wait_until(Duration::from_secs(15), || binding(web) == arms),
        "web: {:?}: {:?}",
        binding(web),
        d.log.lock().unwrap()
    );
    assert!(state(web, "running"), "{:?}", scrape(&addr));
    assert_eq!(binding(db), None, "db is not app=web");
    // A new pod of the selector: its arms once its cgroup is there.
    k.schedule_late_pod();
    assert!(
        wait_until(Duration::from_secs(5), || binding(late) == arms),
        "the new pod: {:?}",
        binding(late)
    );
    assert!(state(late, "running"), "{:?}", scrape(&addr));
    // Deleted: its rollout is aborted (rolled back), then it is unbound.
    api.delete(WEB_UID);
    assert!(
        wait_until(Duration::from_secs(5), || state(web, "aborted")),
        "{:?}",
        scrape(&addr)
    );
    assert!(
        wait_until(Duration::from_secs(10), || binding(web).is_none()),
        "the deleted pod: {:?}",
        binding(web)
    );
    assert!(state(late, "running"), "the other pod's rollout goes on");
    assert!(d.stop().success());
    assert_eq!(binding(late), None, "on_exit = remove");
}
