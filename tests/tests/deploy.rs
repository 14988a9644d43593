//! deploy/: the systemd unit verifies with systemd-analyze and keeps its
//! hardening; the Kubernetes DaemonSet is well-formed, grants only the
//! capabilities ccload needs, and its ConfigMap is a valid ccload config.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn systemd_unit_verifies_and_is_hardened() {
    let unit = std::fs::read_to_string(root().join("deploy/ccload.service")).unwrap();
    let keys: Vec<(&str, &str)> = unit
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect();
    let get = |k: &str| keys.iter().find(|(a, _)| *a == k).map(|(_, v)| *v);
    let caps = get("CapabilityBoundingSet").expect("bounding set");
    let mut c: Vec<&str> = caps.split_whitespace().collect();
    c.sort();
    assert_eq!(
        c,
        [
            "CAP_BPF",
            "CAP_NET_ADMIN",
            "CAP_PERFMON",
            "CAP_SYS_ADMIN",
            "CAP_SYS_RESOURCE"
        ]
    );
    for (k, v) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
        ("Restart", "on-failure"),
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
    let bin = root().join("target/debug/ccload");
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
    let o = std::process::Command::new("systemd-analyze")
        .args(["verify", p.to_str().unwrap()])
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

#[test]
fn daemonset_is_well_formed_and_least_privilege() {
    let text = std::fs::read_to_string(root().join("deploy/kubernetes/daemonset.yaml")).unwrap();
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
    assert_eq!(
        add,
        ["BPF", "NET_ADMIN", "PERFMON", "SYS_ADMIN", "SYS_RESOURCE"]
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
    assert_eq!(cmd[1..3], ["serve", "--config"]);
    // The ConfigMap's config is a valid ccload config.
    let cm = kind("ConfigMap");
    let cfg = cm["data"]["config.toml"].as_str().unwrap();
    let d = ccload::config::parse(Path::new("daemonset.yaml:config.toml"), cfg)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        d.serve.metrics.rsplit(':').next(),
        c["ports"][0]["containerPort"]
            .as_u64()
            .map(|p| p.to_string())
            .as_deref()
    );
}
