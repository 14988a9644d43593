//! deploy/: the systemd unit verifies with systemd-analyze and keeps its
//! hardening; the Kubernetes DaemonSet is well-formed, grants only the
//! capabilities ccload needs, and its ConfigMap is a valid ccload config.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use ccload_itests::*;

/// Removes a scratch directory, even when the test fails.
struct Rm(std::path::PathBuf);
impl Drop for Rm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn systemd_unit_verifies_and_is_hardened() {
    let unit =
        std::fs::read_to_string(ccload_itests::repo_root().join("deploy/ccload.service")).unwrap();
    let keys: Vec<(&str, &str)> = unit
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect();
    let get = |k: &str| keys.iter().find(|(a, _)| *a == k).map(|(_, v)| *v);
    let caps = get("CapabilityBoundingSet").expect("bounding set");
    let mut c: Vec<&str> = caps.split_whitespace().collect();
    c.sort();
    assert_eq!(c, ["CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"]);
    assert_eq!(get("AmbientCapabilities"), Some(caps));
    for (k, v) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        // not ProtectKernelTunables: it keeps /sys/fs/bpf read-only
        ("ReadOnlyPaths", "/sys /proc/sys"),
        ("InaccessiblePaths", "-/proc/kallsyms -/proc/kcore"),
        ("ProtectControlGroups", "yes"),
        (
            "ReadWritePaths",
            "/sys/fs/bpf /proc/sys/net/ipv4/tcp_congestion_control",
        ),
        ("IPAddressDeny", "any"),
        ("IPAddressAllow", "localhost"),
        ("LimitNOFILE", "4096"),
        ("MemoryMax", "256M"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("ExecReload", "/bin/sh -c \"kill -HUP ${MAINPID}\""),
        ("Restart", "on-failure"),
        // serve feeds it (tests/tests/serve.rs)
        ("WatchdogSec", "30s"),
    ] {
        assert_eq!(get(k), Some(v), "{k}");
    }
    assert!(get("ExecStart").unwrap().contains("ccload serve --config"));
    // systemd-analyze verify, with ExecStart pointing at the built binary.
    let Ok(o) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        eprintln!("SKIPPED systemd-analyze verify: systemd-analyze not installed");
        return;
    };
    assert!(o.status.success());
    let bin = ccload_itests::repo_root().join("target/debug/ccload");
    let bin = if bin.exists() {
        bin
    } else {
        Path::new("/bin/true").to_path_buf()
    };
    let dir = std::env::temp_dir().join(format!("ccl-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("ccload.service");
    std::fs::write(
        &p,
        unit.replace("/usr/local/bin/ccload", bin.to_str().unwrap()),
    )
    .unwrap();
    // Documentation=man:ccload(1): verify runs `man ccload`; point it at
    // freshly generated pages.
    let man = dir.join("man");
    ccload_ok(&["man", "--dir", man.to_str().unwrap()]);
    let o = std::process::Command::new("systemd-analyze")
        .args(["verify", p.to_str().unwrap()])
        .env("MANPATH", dir.join("man"))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // Lines about other units on this machine are not ours to judge.
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("ccload")).collect();
    assert!(
        o.status.success() && ours.is_empty(),
        "systemd-analyze verify:\n{err}"
    );
}

/// `cargo xtask install --destdir D`: every file where the unit, man and
/// the shells look for it; the installed unit names the installed binary
/// and verifies (systemd-analyze, no warning) with its paths under D; the
/// bash completion loads and completes a subcommand; the man page renders.
#[test]
fn install_into_a_destdir_gives_a_unit_that_verifies() {
    let bin = ccload_bin();
    let xtask = bin.with_file_name("xtask");
    assert!(
        xtask.is_file(),
        "{} not built (scripts/test.sh builds the workspace)",
        xtask.display()
    );
    let d = std::env::temp_dir().join(format!("ccl-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let _rm = Rm(d.clone());
    let o = std::process::Command::new(&xtask)
        .args(["install", "--destdir", d.to_str().unwrap(), "--bin"])
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "install: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p = d.join("usr/local");
    for f in [
        "bin/ccload",
        "share/man/man8/ccload.8",
        "share/man/man8/ccload-cgroup-set.8",
        "share/man/man5/ccload.toml.5",
        "share/bash-completion/completions/ccload",
        "share/zsh/site-functions/_ccload",
        "share/fish/vendor_completions.d/ccload.fish",
        "share/doc/ccload/README.md",
        "share/doc/ccload/docs/ccpd.md",
        "share/doc/ccload/examples/web-server.toml",
    ] {
        assert!(p.join(f).is_file(), "not installed: {f}");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(p.join("bin/ccload"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    let cfg = d.join("etc/ccload/config.toml");
    let mode = std::fs::metadata(&cfg).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the config is root's");
    ccload::bind::config::load(&cfg).expect("the installed config is valid");

    // The installed unit, checked with its paths moved under D.
    let unit = std::fs::read_to_string(d.join("etc/systemd/system/ccload.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/ccload serve --config /etc/ccload/config.toml"));
    let vdir = d.join("verify");
    std::fs::create_dir_all(&vdir).unwrap();
    let staged = unit
        .replace("/usr/local", p.to_str().unwrap())
        .replace("/etc/ccload", d.join("etc/ccload").to_str().unwrap());
    std::fs::write(vdir.join("ccload.service"), staged).unwrap();
    let o = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(vdir.join("ccload.service"))
        .env("MANPATH", p.join("share/man"))
        .output()
        .expect("systemd-analyze (systemd is part of Debian 12)");
    let err = String::from_utf8_lossy(&o.stderr);
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("ccload")).collect();
    assert!(
        o.status.success() && ours.is_empty(),
        "systemd-analyze verify:\n{err}"
    );

    // The bash completion loads and completes `ccload cg` -> cgroup.
    let script = format!(
        "source {}; COMP_WORDS=(ccload cg); COMP_CWORD=1; _ccload ccload cg ccload; echo \"${{COMPREPLY[@]}}\"",
        p.join("share/bash-completion/completions/ccload").display()
    );
    let o = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&o.stdout);
    assert!(
        words.split_whitespace().any(|w| w == "cgroup"),
        "completion gave {words:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Every page: no markdown left, a SEE ALSO, and every ccload page it
    // names written; the commands with examples have EXAMPLES.
    let man8 = p.join("share/man/man8");
    let pages: Vec<(String, String)> = std::fs::read_dir(&man8)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            (name, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect();
    assert!(pages.len() > 15, "{} pages", pages.len());
    for (name, roff) in &pages {
        assert!(!roff.contains('`'), "{name}: markdown left");
        assert!(roff.contains(".SH \"SEE ALSO\""), "{name}: no SEE ALSO");
        // (roff escapes the dashes of names: \-)
        for w in roff
            .replace("\\-", "-")
            .split(|c: char| c.is_whitespace() || c == ',')
        {
            let w = w.trim_start_matches("\\fB");
            if let Some(i) = w.find("(8)").or_else(|| w.find("\\fR(8)")) {
                let page = &w[..i].trim_end_matches("\\fR");
                if page.starts_with("ccload") {
                    assert!(
                        man8.join(format!("{page}.8")).is_file(),
                        "{name} names {page}(8)"
                    );
                }
            }
        }
    }
    for cmd in ["attach", "tune", "watch", "rollout", "cgroup-set"] {
        let (_, roff) = pages
            .iter()
            .find(|(n, _)| *n == format!("ccload-{cmd}.8"))
            .unwrap_or_else(|| panic!("no ccload-{cmd}.8"));
        assert!(roff.contains(".SH EXAMPLES"), "ccload-{cmd}.8: no EXAMPLES");
    }

    // The man page renders, and names the global JSON flag.
    let o = std::process::Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(p.join("share/man/man8/ccload.8"))
        .env("MANWIDTH", "100")
        .output();
    if let Ok(o) = o {
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("--json") && text.contains("SYNOPSIS") && text.contains("EXIT STATUS"),
            "{text}"
        );
        let o = std::process::Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(p.join("share/man/man5/ccload.toml.5"))
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("serve.request_timeout_ms") && text.contains("[algos.ccpd]"),
            "{text}"
        );
    } else {
        let roff = std::fs::read_to_string(p.join("share/man/man8/ccload.8")).unwrap();
        assert!(roff.contains(".TH ccload 8"), "{roff}");
    }
}

/// `cargo xtask dist` (of the debug build: the release build is `static`,
/// this one is not, which dist warns about): the tarball holds the install
/// tree; the .deb, installed into a scratch root by dpkg, puts the files
/// in place, records the config as a conffile and enables the unit, and
/// purging it takes them away; the OCI image unpacks (umoci) to a rootfs
/// whose ccload runs there alone, with `serve` as the image's command.
#[test]
fn dist_makes_a_tarball_a_deb_that_enables_the_unit_and_an_image() {
    let _s = privileged!();
    let bin = ccload_bin();
    let xtask = bin.with_file_name("xtask");
    let d = std::env::temp_dir().join(format!("ccl-dist-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let _rm = Rm(d.clone());
    let run = |cmd: &mut std::process::Command| -> String {
        let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(
            o.status.success(),
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = d.join("out");
    let made = run(std::process::Command::new(&xtask)
        .args(["dist", "--bin"])
        .arg(&bin)
        .arg("--out")
        .arg(&out));
    let ver = env!("CARGO_PKG_VERSION");
    let arch = run(std::process::Command::new("dpkg").arg("--print-architecture"));
    let tgz = out.join(format!("ccload-{ver}-{}.tar.gz", std::env::consts::ARCH));
    let deb = out.join(format!("ccload_{ver}_{}.deb", arch.trim()));
    let oci = out.join(format!("ccload-{ver}-oci.tar"));
    for f in [&tgz, &deb, &oci] {
        assert!(
            f.is_file() && made.contains(f.to_str().unwrap()),
            "{}: {made}",
            f.display()
        );
    }

    let list = run(std::process::Command::new("tar").arg("-tzf").arg(&tgz));
    for f in [
        "usr/local/bin/ccload",
        "etc/systemd/system/ccload.service",
        "etc/ccload/config.toml",
        "usr/local/share/man/man5/ccload.toml.5",
    ] {
        assert!(
            list.lines().any(|l| l.trim_start_matches("./") == f),
            "tarball: no {f}"
        );
    }

    // The .deb, into a scratch root (its scripts run unchrooted with
    // DPKG_ROOT set, and leave the running system alone).
    let r = d.join("root");
    for sub in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "etc/systemd/system",
    ] {
        std::fs::create_dir_all(r.join(sub)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    let dpkg = |args: &[&str]| {
        run(std::process::Command::new("dpkg")
            .arg(format!("--root={}", r.display()))
            .args([
                "--force-script-chrootless",
                "--force-depends",
                "--log=/dev/null",
            ])
            .args(args))
    };
    dpkg(&["-i", deb.to_str().unwrap()]);
    let wants = r.join("etc/systemd/system/multi-user.target.wants/ccload.service");
    assert_eq!(
        std::fs::read_link(&wants).ok(),
        Some("/usr/lib/systemd/system/ccload.service".into()),
        "the unit is enabled"
    );
    let unit = std::fs::read_to_string(r.join("usr/lib/systemd/system/ccload.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/ccload serve --config /etc/ccload/config.toml"));
    ccload::bind::config::load(&r.join("etc/ccload/config.toml")).expect("the packaged config");
    let conf = run(std::process::Command::new("dpkg-query")
        .arg(format!("--admindir={}", r.join("var/lib/dpkg").display()))
        .args(["-W", "-f", "${Conffiles}", "ccload"]));
    assert!(
        conf.contains("/etc/ccload/config.toml"),
        "conffiles: {conf}"
    );
    assert!(
        run(std::process::Command::new(r.join("usr/bin/ccload")).arg("algos")).contains("ccpd")
    );
    dpkg(&["--purge", "ccload"]);
    assert!(
        !r.join("usr/bin/ccload").exists() && wants.symlink_metadata().is_err(),
        "purged"
    );

    // The image.
    let layout = d.join("layout");
    std::fs::create_dir_all(&layout).unwrap();
    run(std::process::Command::new("tar")
        .arg("-xf")
        .arg(&oci)
        .arg("-C")
        .arg(&layout));
    let bundle = d.join("bundle");
    run(std::process::Command::new("umoci")
        .args(["unpack", "--image"])
        .arg(format!("{}:{ver}", layout.display()))
        .arg(&bundle));
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("config.json")).unwrap())
            .unwrap();
    assert_eq!(
        cfg["process"]["args"],
        serde_json::json!([
            "/usr/local/bin/ccload",
            "serve",
            "--config",
            "/etc/ccload/config.toml"
        ])
    );
    let rootfs = bundle.join("rootfs");
    assert!(rootfs.join("etc/ccload/config.toml").is_file());
    let algos = run(std::process::Command::new("chroot")
        .arg(&rootfs)
        .args(["/usr/local/bin/ccload", "algos"]));
    assert!(
        algos.contains("ccpd"),
        "the image's ccload runs in its rootfs alone"
    );
}

#[test]
fn daemonset_is_well_formed_and_least_privilege() {
    let text = std::fs::read_to_string(
        ccload_itests::repo_root().join("deploy/kubernetes/base/daemonset.yaml"),
    )
    .unwrap();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
        .collect();
    let kind = |k: &str| {
        docs.iter()
            .find(|d| d["kind"] == k)
            .unwrap_or_else(|| panic!("no {k}"))
    };
    let ds = kind("DaemonSet");
    assert_eq!(ds["apiVersion"], "apps/v1");
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"], ds["spec"]["template"]["metadata"]["labels"],
        "selector must match the pod labels"
    );
    assert_eq!(
        spec["hostNetwork"], true,
        "CC is per host: host network namespace"
    );
    let c = &spec["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    let mut add: Vec<&str> = sc["capabilities"]["add"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    add.sort();
    assert_eq!(add, ["BPF", "NET_ADMIN", "PERFMON"]);
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    let cg = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/sys/fs/cgroup")
        .expect("cgroup mount");
    assert_eq!(cg["readOnly"], true, "the cgroup tree is mounted read-only");
    // Liveness and readiness ask different questions: a cgroup that keeps
    // failing to bind makes the pod unready, never restarts it.
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/healthz")] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(c[probe]["httpGet"]["host"], "127.0.0.1", "{probe}");
    }
    // AppArmor unconfined (containerd's default profile denies writes to
    // bpffs), by the field and by the annotation older clusters read.
    assert_eq!(sc["appArmorProfile"]["type"], "Unconfined");
    let name = c["name"].as_str().unwrap();
    assert_eq!(
        ds["spec"]["template"]["metadata"]["annotations"]
            [format!("container.apparmor.security.beta.kubernetes.io/{name}").as_str()],
        "unconfined"
    );
    // Bidirectional propagation needs a privileged container.
    for m in c["volumeMounts"].as_sequence().unwrap() {
        assert_ne!(m["mountPropagation"], "Bidirectional", "{m:?}");
    }
    let vols = spec["volumes"].as_sequence().unwrap();
    let host: Vec<&str> = vols
        .iter()
        .filter_map(|v| v["hostPath"]["path"].as_str())
        .collect();
    assert!(
        host.contains(&"/sys/fs/bpf") && host.contains(&"/sys/fs/cgroup"),
        "{host:?}"
    );
    for m in c["volumeMounts"].as_sequence().unwrap() {
        assert!(
            vols.iter().any(|v| v["name"] == m["name"]),
            "mount {:?} has no volume",
            m["name"]
        );
    }
    let cmd: Vec<&str> = c["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // The fleet's file, then the pool's: the two files the ConfigMap is
    // made from, which are one valid ccload config.
    assert_eq!(
        cmd[1..],
        [
            "serve",
            "--config",
            "/etc/ccload/fleet.toml",
            "--config",
            "/etc/ccload/pool.toml"
        ]
    );
    let base = ccload_itests::repo_root().join("deploy/kubernetes/base");
    let d = ccload::bind::config::load_all(&[base.join("fleet.toml"), base.join("pool.toml")])
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        d.serve.metrics.starts_with("127.0.0.1:"),
        "metrics on loopback by default: {}",
        d.serve.metrics
    );
    assert_eq!(
        d.serve.metrics.rsplit(':').next(),
        c["ports"][0]["containerPort"]
            .as_u64()
            .map(|p| p.to_string())
            .as_deref()
    );
}

/// The capabilities the unit grants, as setpriv's bounding-set argument.
/// Run `ccload serve` under `setpriv --bounding-set`, stderr to `log`.
fn serve_with_caps(caps: &[String], cfg: &Path, log: &Path) -> std::process::Child {
    std::process::Command::new("setpriv")
        .args(["--bounding-set", &setpriv_set(caps), "--"])
        .arg(ccload_bin())
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("setpriv (util-linux)")
}

/// The daemon does its whole job (attach, profile, cgroup binding, metrics,
/// reload, remove on stop) with exactly the unit's and the DaemonSet's
/// capabilities; with one of them missing it refuses at start, naming it.
#[test]
fn the_daemon_runs_with_exactly_the_units_capabilities() {
    let _s = privileged!();
    let caps = unit_caps();
    let cg = TestCgroup::new("caps");
    let dir = std::env::temp_dir().join(format!("ccl-caps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = ccload(&["detach", "--all"]);
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _c = Cleanup(dir.clone());
    let cfg = dir.join("caps.toml");
    std::fs::write(
        &cfg,
        format!(
            "[algos.ccpd]\n[profiles.p]\nalgo = \"ccpd\"\nset = {{ kp = 4 }}\n[[cgroups]]\npath = \"{}\"\nalgo = \"ccpd\"\nprofile = \"p\"\n[serve]\nmetrics = \"127.0.0.1:0\"\non_exit = \"remove\"\nsocket = \"{}\"\n",
            cg.path(),
            dir.join("t.sock").display()
        ),
    )
    .unwrap();
    let log = dir.join("serve.log");
    let mut child = serve_with_caps(&caps, &cfg, &log);
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let up = wait_until(Duration::from_secs(15), || {
        text().contains("metrics on http://")
    });
    if !up {
        let _ = child.kill();
        let _ = child.wait();
        panic!("daemon with {caps:?} did not come up:\n{}", text());
    }
    // Its effective set is exactly the granted one.
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(eff.count_ones() as usize, caps.len(), "CapEff {eff:x}");
    assert!(registered("ccpd"));
    let list = ccload_ok(&["cgroup", "list"]);
    assert!(list.contains(cg.path()) && list.contains("ccpd"), "{list}");
    let addr = text()
        .lines()
        .find_map(|l| {
            Some(
                l.split_once("metrics on http://")?
                    .1
                    .strip_suffix("/metrics")?
                    .to_string(),
            )
        })
        .unwrap();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 200") && r.ends_with("ok\n"), "{r}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    assert!(
        wait_until(Duration::from_secs(10), || text()
            .contains("reload applied")),
        "{}",
        text()
    );
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}: {}", text());
    assert!(
        !registered("ccpd"),
        "on_exit = remove, with the same capabilities"
    );
    assert!(!ccload_ok(&["cgroup", "list"]).contains(cg.path()));

    // One capability fewer: a clear refusal that names it, nothing changed.
    for drop in &caps {
        let fewer: Vec<String> = caps.iter().filter(|c| *c != drop).cloned().collect();
        let mut child = serve_with_caps(&fewer, &cfg, &log);
        let st = child.wait().unwrap();
        assert!(!st.success());
        assert!(
            text().contains(&format!("running as root without {drop}")),
            "{}",
            text()
        );
        assert!(!registered("ccpd"));
    }
}

/// deploy/Containerfile builds the image the DaemonSet names: every path it
/// copies exists, the binary lands where the DaemonSet runs it, the build
/// uses the `static` feature the loader declares, and the config it ships
/// is valid.  (Building the image needs a container daemon; docs/install.md
/// says how.)
#[test]
fn containerfile_builds_what_the_daemonset_runs() {
    let cf =
        std::fs::read_to_string(ccload_itests::repo_root().join("deploy/Containerfile")).unwrap();
    let mut copies = 0;
    for l in cf
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let parts: Vec<&str> = l.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(
                ccload_itests::repo_root().join(src).exists(),
                "Containerfile copies missing {src}"
            );
            copies += 1;
        }
    }
    assert!(copies >= 8, "{copies} sources copied");
    assert!(cf.contains("--features static"), "static build");
    let cargo =
        std::fs::read_to_string(ccload_itests::repo_root().join("loader/Cargo.toml")).unwrap();
    let t: toml::Value = toml::from_str(&cargo).unwrap();
    assert!(
        t["features"]["static"].as_array().is_some(),
        "loader has no `static` feature"
    );
    let ds = std::fs::read_to_string(
        ccload_itests::repo_root().join("deploy/kubernetes/base/daemonset.yaml"),
    )
    .unwrap();
    assert!(ds.contains("Built from deploy/Containerfile"));
    let entry = cf
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(entry).unwrap();
    assert!(
        ds.contains(&format!("command: [\"{}\", \"serve\"", entry[0])),
        "the DaemonSet runs {} serve",
        entry[0]
    );
    ccload::bind::config::load(&ccload_itests::repo_root().join("configs/default.toml"))
        .expect("shipped config valid");
}

/// `cargo xtask codegen --btf FILE --arch A --out DIR`: a vmlinux.h from a
/// kernel's BTF that every BPF program compiles against for that
/// architecture (the path to aarch64: the BTF of an arm64 kernel >= 6.10);
/// a foreign arch without its BTF, or a file without BTF, is one clear
/// error.
#[test]
fn codegen_from_a_btf_file_builds_every_program() {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        eprintln!("SKIPPED codegen: no /sys/kernel/btf/vmlinux");
        return;
    }
    let xtask = ccload_bin().with_file_name("xtask");
    assert!(xtask.is_file(), "{} not built", xtask.display());
    let d = std::env::temp_dir().join(format!("ccl-codegen-t-{}", std::process::id()));
    let run = |args: &[&str]| {
        std::process::Command::new(&xtask)
            .arg("codegen")
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&[
        "--btf",
        "/sys/kernel/btf/vmlinux",
        "--arch",
        "x86_64",
        "--out",
        d.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let h = std::fs::read_to_string(d.join("x86_64/vmlinux.h")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&d);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        h.contains("struct tcp_congestion_ops {"),
        "header lacks tcp_congestion_ops"
    );
    for p in ["ccpd", "hetcp", "ctcp_plus", "ub_reno", "cgroup"] {
        assert!(
            out.contains(&format!("{p}.bpf.c compiles for x86_64")),
            "{out}"
        );
    }
    let o = run(&["--arch", "aarch64", "--out", d.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("give --btf"), "{e}");
    let o = run(&["--btf", "/etc/hostname", "--out", d.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("bpftool btf dump /etc/hostname"),
        "{e}"
    );
    assert!(!d.exists(), "a failed codegen wrote {}", d.display());

    // The committed aarch64 header (an arm64 6.12 kernel's BTF) builds
    // every program for arm64, with the libbpf headers the real build uses.
    let o = run(&["--arch", "aarch64", "--check"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for p in ["ccpd", "hetcp", "ctcp_plus", "ub_reno", "cgroup", "bench"] {
        assert!(
            out.contains(&format!("{p}.bpf.c compiles for aarch64")),
            "{out}"
        );
    }
}
