//! `ccload serve`: metrics scraped over HTTP move during a transfer, `watch`
//! clients get telemetry through the daemon, SIGHUP with a changed config
//! converges (a bad one is refused and the state kept), and stopping the
//! daemon keeps or removes the kernel state as the config says.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

const MB: u64 = 1 << 20;

struct Daemon {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    fn start(config: &std::path::Path) -> Daemon {
        let mut child = Command::new(ccload_bin())
            .args(["serve", "--config", config.to_str().unwrap()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l2 = log.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                l2.lock().unwrap().push(l);
            }
        });
        Daemon { child, log }
    }
    fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }
    fn logged(&self, s: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(s))
    }
    fn stop(mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        let st = self.child.wait().unwrap();
        // Let the stderr thread drain.
        std::thread::sleep(Duration::from_millis(100));
        st
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Detach everything at the end, even on failure.
struct Cleanup(std::path::PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--all"]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scrape(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    let (head, body) = r.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    Some(body.to_string())
}

/// Value of the sample `name{labels}` (exact label text) in a scrape.
fn metric(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{body}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn daemon_metrics_fanout_reload_and_exit() {
    let _s = privileged!();
    let dir = std::env::temp_dir().join(format!("ccl-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _c = Cleanup(dir.clone());
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!(
        "[algos.ccpd]\n[profiles.fast]\nalgo = \"ccpd\"\nset = {{ kp = 8 }}\n[serve]\nmetrics = \"{addr}\"\non_exit = \"keep\"\n"
    );
    let cfg = config(&dir, "serve.toml", &base);
    let d = Daemon::start(&cfg);
    assert!(
        wait_until(Duration::from_secs(15), || scrape(&addr).is_some()),
        "metrics never came up: {:?}",
        d.log.lock().unwrap()
    );
    assert!(registered("ccpd"), "the config was applied at start");
    let m0 = scrape(&addr).unwrap();
    let r0 = metric(&m0, "ccload_rounds_total{algo=\"ccpd\"}");
    assert_eq!(metric(&m0, "ccload_config_applies_total"), 1.0);

    // A transfer while a `watch` client reads through the daemon.
    let e0 = metric(&m0, "ccload_events_total{algo=\"ccpd\"}");
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
    let r1 = metric(&m1, "ccload_rounds_total{algo=\"ccpd\"}");
    let recs = metric(
        &m1,
        "ccload_telemetry_records_total{algo=\"ccpd\",profile=\"default\"}",
    );
    let srtt_n = metric(
        &m1,
        "ccload_srtt_ms_count{algo=\"ccpd\",profile=\"default\"}",
    );
    let flows = metric(&m1, "ccload_flows_total{algo=\"ccpd\"}");
    eprintln!(
        "rounds {r0} -> {r1}, telemetry records {recs}, srtt samples {srtt_n}, flows {flows}"
    );
    assert!(r1 >= r0 + 50.0, "rounds did not move: {r0} -> {r1}");
    assert!(recs >= 10.0 && srtt_n == recs, "{recs} {srtt_n}");
    assert!(flows >= 2.0);
    // The 10-ms RTT of this path lands in the le="20" bucket, not le="5".
    let le5 = metric(
        &m1,
        "ccload_srtt_ms_bucket{algo=\"ccpd\",profile=\"default\",le=\"5\"}",
    );
    let le20 = metric(
        &m1,
        "ccload_srtt_ms_bucket{algo=\"ccpd\",profile=\"default\",le=\"20\"}",
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
        .logged("<3>ccload: reload failed")));
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
    assert!(wait_until(Duration::from_secs(15), || scrape(&addr).is_some()));
    assert!(!registered("hetcp"), "the new config detached hetcp");
    let st = d2.stop();
    assert!(st.success(), "{st}");
    assert!(!registered("ccpd"), "on_exit = remove kept ccpd");
}
