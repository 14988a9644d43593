//! The shipped monitoring on a real Prometheus (Debian's `prometheus` and
//! `promtool`, unpacked by scripts/setup.sh): the PrometheusRule's groups
//! pass `promtool check rules` and the unit tests of
//! tests/fixtures/prometheusrule.test.yaml (every alert fires on the series
//! that should trip it and stays silent on a healthy one); a scrape of
//! `ccload serve` passes `promtool check metrics`; and a Prometheus that
//! scrapes a daemon carrying flows answers every query of the dashboard,
//! the rules and the AnalysisTemplate with a non-empty result.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::*;

/// `name` on PATH, or None after a printed reason (a failure under
/// CCLOAD_REQUIRE_PRIVILEGED=1, where setup.sh has run).
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    if found.is_none() {
        let why = format!("no {name} on PATH (scripts/setup.sh unpacks Debian's prometheus)");
        if std::env::var_os("CCLOAD_REQUIRE_PRIVILEGED").is_some_and(|v| v == "1") {
            panic!("{why} and CCLOAD_REQUIRE_PRIVILEGED=1");
        }
        eprintln!("SKIPPED {}: {why}", module_path!());
    }
    found
}

fn monitoring() -> PathBuf {
    repo_root().join("deploy/kubernetes/monitoring")
}

/// A YAML file of the repository, parsed.
fn yaml(path: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The shipped PrometheusRule.
fn prometheus_rule() -> serde_yaml::Value {
    yaml(&monitoring().join("prometheusrule.yaml"))
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);
impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("ccl-prom-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The PrometheusRule's `spec` (its rule groups), as a rules file.
fn rules_file(dir: &Path) -> PathBuf {
    let rule = prometheus_rule();
    assert_eq!(rule["kind"], "PrometheusRule");
    let p = dir.join("ccload.rules.yaml");
    std::fs::write(&p, serde_yaml::to_string(&rule["spec"]).unwrap()).unwrap();
    p
}

/// (alert name, expression) of every rule.
fn alerts() -> Vec<(String, String)> {
    let rule = prometheus_rule();
    let mut out = Vec::new();
    for g in rule["spec"]["groups"].as_sequence().unwrap() {
        for r in g["rules"].as_sequence().unwrap() {
            out.push((
                r["alert"]
                    .as_str()
                    .expect("alerting rules only")
                    .to_string(),
                r["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    assert!(out.len() >= 5, "{} alerts", out.len());
    out
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut c = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    if let Some(s) = stdin {
        c.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    }
    drop(c.stdin.take());
    let o = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text)
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    if tool("promtool").is_none() {
        return;
    }
    let dir = Scratch::new("rules");
    let rules = rules_file(&dir.0);
    let (ok, out) = promtool(&["check", "rules", rules.to_str().unwrap()], None);
    assert!(ok, "promtool check rules:\n{out}");

    // Every alert has a case that fires and one that stays silent.
    let fixture = repo_root().join("tests/fixtures/prometheusrule.test.yaml");
    let t = yaml(&fixture);
    let cases: Vec<&serde_yaml::Value> = t["tests"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|c| c["alert_rule_test"].as_sequence().unwrap())
        .collect();
    for (name, _) in alerts() {
        let of = |fires: bool| {
            cases.iter().any(|c| {
                c["alertname"] == name.as_str()
                    && c["exp_alerts"].as_sequence().unwrap().is_empty() != fires
            })
        };
        assert!(of(true), "no unit test in which {name} fires");
        assert!(of(false), "no unit test in which {name} stays silent");
    }
    std::fs::copy(&fixture, dir.0.join("rules.test.yaml")).unwrap();
    let (ok, out) = promtool(
        &[
            "test",
            "rules",
            dir.0.join("rules.test.yaml").to_str().unwrap(),
        ],
        None,
    );
    assert!(ok, "promtool test rules:\n{out}");
}

/// A query as the HTTP API answers it: the result's series, or the error.
fn query(addr: &str, q: &str) -> Result<Vec<serde_json::Value>, String> {
    let qs: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("query", q)
        .finish();
    let v = api(addr, &format!("/api/v1/query?{qs}"))?;
    if v["status"] != "success" {
        return Err(format!("{}: {}", v["errorType"], v["error"]));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// GET `path` of the Prometheus at `addr`: the JSON body, or why not.
fn api(addr: &str, path: &str) -> Result<serde_json::Value, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    // HTTP/1.0: the answer is whole and unchunked, and the server closes.
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut r = String::new();
    s.read_to_string(&mut r).map_err(|e| e.to_string())?;
    let (_, json) = r.split_once("\r\n\r\n").ok_or("no HTTP body")?;
    serde_json::from_str(json).map_err(|e| format!("{e}: {json}"))
}

/// An alert's expression with its comparisons made `bool`: it returns a
/// series whether or not the alert fires, so an empty result means a
/// selector that matches nothing.
fn as_bool(expr: &str) -> String {
    let mut out = String::new();
    let (mut depth, mut quoted) = (0, false);
    let mut i = 0;
    while i < expr.len() {
        let rest = &expr[i..];
        let c = rest.chars().next().unwrap();
        match c {
            '"' => quoted = !quoted,
            '{' if !quoted => depth += 1,
            '}' if !quoted => depth -= 1,
            _ => {}
        }
        // Outside label matchers and strings, a comparison operator.
        let op = ["==", "!=", ">=", "<=", ">", "<"]
            .into_iter()
            .find(|op| depth == 0 && !quoted && rest.starts_with(op));
        if let Some(op) = op {
            out.push_str(op);
            out.push_str(" bool");
            i += op.len();
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Every query the shipped monitoring runs, with where it comes from
/// (a dashboard panel's title, an alert, an AnalysisTemplate metric).  The
/// dashboard's variables take "all" and a rate window of five scrapes.
fn shipped_queries() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let d: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(monitoring().join("ccload-dashboard.json")).unwrap(),
    )
    .unwrap();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let e = t["expr"]
                .as_str()
                .unwrap()
                .replace("$pool", ".*")
                .replace("$instance", ".*")
                .replace("$__rate_interval", "5s");
            out.push((
                format!("dashboard panel \"{}\"", p["title"].as_str().unwrap()),
                e,
            ));
        }
    }
    for (name, e) in alerts() {
        out.push((format!("alert {name}"), as_bool(&e)));
    }
    let at = yaml(&repo_root().join("deploy/kubernetes/examples/analysistemplate.yaml"));
    for m in at["spec"]["metrics"].as_sequence().unwrap() {
        let q = m["provider"]["prometheus"]["query"].as_str().unwrap();
        out.push((
            format!("AnalysisTemplate metric {}", m["name"].as_str().unwrap()),
            q.replace("[10m]", "[5s]"),
        ));
    }
    out
}

/// A Prometheus child on a loopback port, killed when dropped.
struct Prometheus {
    child: std::process::Child,
    addr: String,
}
impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Started with `config` and a data directory under `dir`, ready.
    fn start(bin: &Path, dir: &Path, config: &Path) -> Prometheus {
        // Prometheus does not say which port :0 got: take a free one, and
        // take another if it is gone before Prometheus binds it.
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let addr = format!("127.0.0.1:{port}");
            let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
            let child = Command::new(bin)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("prometheus");
            let mut p = Prometheus { child, addr };
            let ready = wait_until(Duration::from_secs(20), || {
                p.child.try_wait().unwrap().is_some()
                    || api(&p.addr, "/api/v1/status/runtimeinfo").is_ok()
            });
            if ready && p.child.try_wait().unwrap().is_none() {
                return p;
            }
        }
        panic!(
            "prometheus never came up:\n{}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
    }
}

/// A Prometheus scrapes `ccload serve` every second while it carries a
/// rollout (ccpd on a canary cgroup against cubic on a control cgroup,
/// a long flow through each), under two jobs that label it as the canary
/// and the stable pool as the PodMonitor's `ccload-pool` label does.  Every
/// shipped query then answers with a non-empty result, every rule loaded
/// into Prometheus evaluates without error, and the scrape passes
/// `promtool check metrics`.
#[test]
fn prometheus_answers_every_shipped_query_from_a_live_daemon() {
    let _s = privileged!();
    let (Some(prom), Some(_)) = (tool("prometheus"), tool("promtool")) else {
        return;
    };
    let dir = Scratch::new("live");
    let (can, ctl) = (TestCgroup::new("pm-canary"), TestCgroup::new("pm-control"));
    // Dropped after the daemon: nothing stays recorded.
    let _r = AbortRollouts;
    let cfg = dir.0.join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "[algos.ccpd]\n[[cgroups]]\npath = \"{ctl}\"\nalgo = \"cubic\"\n\
             [[rollouts]]\nalgo = \"ccpd\"\ncanary = \"{can}\"\ncontrol = \"{ctl}\"\n\
             guards = [\"retrans_ratio <= 1000\"]\ninterval = \"1s\"\nfor = \"600s\"\n\
             [serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"remove\"\n",
            can = can.path(),
            ctl = ctl.path()
        ),
    )
    .unwrap();
    let d = Daemon::start(&cfg);
    let addr = d.addr();
    d.wait_bound(can.path(), "ccpd");
    let link = || {
        Bottleneck::new(LinkCfg {
            rate_mbit: 20.0,
            buffer_pkts: 40,
            delay_ms: 10.0,
            ..Default::default()
        })
    };
    let (lc, lk) = (link(), link());
    let _fc = long_flow(&lc, can.path());
    let _fk = long_flow(&lk, ctl.path());

    let rules = rules_file(&dir.0);
    let pcfg = dir.0.join("prometheus.yml");
    std::fs::write(
        &pcfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {rules}\n\
             scrape_configs:\n\
             \x20 - job_name: ccload-canary\n    static_configs:\n      - targets: [\"{addr}\"]\n        labels: {{ ccload_pool: canary }}\n\
             \x20 - job_name: ccload-stable\n    static_configs:\n      - targets: [\"{addr}\"]\n        labels: {{ ccload_pool: stable }}\n",
            rules = rules.display()
        ),
    )
    .unwrap();
    let p = Prometheus::start(&prom, &dir.0, &pcfg);

    // Each query answers once the scrapes have a rate window of data and
    // the rollout its first ratios; a query that never does is named.
    let queries = shipped_queries();
    let mut empty: Vec<String> = Vec::new();
    let answered = wait_until(Duration::from_secs(45), || {
        empty = queries
            .iter()
            .filter_map(|(what, q)| match query(&p.addr, q) {
                Ok(r) if !r.is_empty() => None,
                Ok(_) => Some(format!("{what}: no series for {q}")),
                Err(e) => Some(format!("{what}: {e} in {q}")),
            })
            .collect();
        empty.is_empty()
    });
    assert!(
        answered,
        "{} of {} shipped queries answer nothing:\n{}",
        empty.len(),
        queries.len(),
        empty.join("\n")
    );
    for (what, q) in &queries {
        let r = query(&p.addr, q).unwrap();
        eprintln!("{what}: {} series, first {}", r.len(), r[0]["value"]);
    }

    // The rules as Prometheus evaluates them: all loaded, none in error.
    let groups = api(&p.addr, "/api/v1/rules").expect("/api/v1/rules");
    let loaded: Vec<&serde_json::Value> = groups["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert_eq!(loaded.len(), alerts().len(), "{groups}");
    for r in &loaded {
        assert_eq!(r["health"], "ok", "{r}");
    }

    let scrape = scrape(&addr).expect("a scrape");
    let (ok, out) = promtool(&["check", "metrics"], Some(&scrape));
    assert!(ok, "promtool check metrics:\n{out}");
    drop(p);
    assert!(d.stop().success());
}

#[test]
fn alert_expressions_keep_their_matchers_when_made_bool() {
    assert_eq!(
        as_bool("up{job=~\".*ccload.*\"} == 0"),
        "up{job=~\".*ccload.*\"} == bool 0"
    );
    assert_eq!(
        as_bool("ccload_cgroups{state=\"unbound\"} > 0"),
        "ccload_cgroups{state=\"unbound\"} > bool 0"
    );
    assert_eq!(
        as_bool("(a / b) > 0.05\nand c{x!=\"y\"} >= 100"),
        "(a / b) > bool 0.05\nand c{x!=\"y\"} >= bool 100"
    );
}
