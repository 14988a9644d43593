//! docs/architecture.md's "Adding a fifth controller" recipe, followed step
//! by step in a scratch copy of the repository: the copy builds, its
//! `ccload attach --algo demo` registers a controller named `demo`, and the
//! guard that the hook wrappers put around every controller repairs the
//! faults injected into `demo`'s ssthresh().  The program text is read from
//! the doc itself, so the doc cannot drift.  And every controller of the
//! repository (and the recipe's) writes the hooks the guard needs with the
//! wrappers.

use std::path::{Path, PathBuf};
use std::process::Command;

use ccload_itests::link::{Bottleneck, LinkCfg};
use ccload_itests::{privileged, stat_in};

/// The hooks the guard needs, with the wrapper each must be written with
/// (bpf/ccload_maps.bpf.h).  cong_avoid and cong_control: one of the two.
const GUARDED: &[(&str, &str)] = &[
    ("init", "CCL_INIT"),
    ("pkts_acked", "CCL_PKTS_ACKED"),
    ("set_state", "CCL_SET_STATE"),
    ("ssthresh", "CCL_SSTHRESH"),
    ("cong_avoid", "CCL_CONG_AVOID"),
    ("cong_control", "CCL_CONG_CONTROL"),
];

/// The problems of one controller's source: a guarded hook missing from
/// its `tcp_congestion_ops`, or one not defined with its wrapper.
fn unguarded(src: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(ops) = src.find("struct tcp_congestion_ops") else {
        return vec!["no struct tcp_congestion_ops".into()];
    };
    let ops = &src[ops..];
    let ops = &ops[..ops.find("};").unwrap_or(ops.len())];
    let prog_of = |hook: &str| {
        let key = format!(".{hook} = (void *)");
        ops.find(&key).map(|i| {
            let rest = &ops[i + key.len()..];
            rest[..rest.find(',').unwrap_or(rest.len())]
                .trim()
                .to_string()
        })
    };
    for (hook, wrapper) in GUARDED {
        match prog_of(hook) {
            Some(prog) if !src.contains(&format!("{wrapper}({prog})")) => {
                bad.push(format!("{hook} = {prog}: not defined with {wrapper}"))
            }
            Some(_) => {}
            None if matches!(*hook, "cong_avoid" | "cong_control") => {}
            None => bad.push(format!("no {hook} (the guard needs it)")),
        }
    }
    if prog_of("cong_avoid").is_none() && prog_of("cong_control").is_none() {
        bad.push("neither cong_avoid nor cong_control".into());
    }
    bad
}

#[test]
fn every_controller_writes_the_guarded_hooks_with_the_wrappers() {
    let root = ccload_itests::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut sources = vec![(
        "the recipe's demo.bpf.c".to_string(),
        block(&doc, "**The program**", "c"),
    )];
    for f in ccload_itests::repo_files() {
        let name = f.clone();
        if name.starts_with("bpf/") && name.ends_with(".bpf.c") {
            let src = std::fs::read_to_string(root.join(&f)).unwrap();
            if src.contains("struct tcp_congestion_ops") {
                sources.push((name, src));
            }
        }
    }
    assert!(sources.len() >= 5, "{} controllers found", sources.len());
    let mut bad = Vec::new();
    for (name, src) in &sources {
        bad.extend(unguarded(src).into_iter().map(|b| format!("{name}: {b}")));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The check itself: a hook written with plain BPF_PROG is found.
    let plain = sources[0].1.replace(
        "CCL_SSTHRESH(demo_ssthresh)",
        "SEC(\"struct_ops\")\nu32 BPF_PROG(demo_ssthresh, struct sock *sk)",
    );
    assert_eq!(
        unguarded(&plain),
        ["ssthresh = demo_ssthresh: not defined with CCL_SSTHRESH"]
    );
}

/// The fenced block of `lang` that follows `after` in the doc.
fn block(doc: &str, after: &str, lang: &str) -> String {
    let i = doc
        .find(after)
        .unwrap_or_else(|| panic!("doc lost `{after}`"));
    let open = format!("```{lang}\n");
    let s = i + doc[i..].find(&open).expect("code block") + open.len();
    let e = s + doc[s..].find("```").expect("block end");
    // The recipe's blocks are indented under list items.
    doc[s..e]
        .lines()
        .map(|l| l.strip_prefix("   ").unwrap_or(l))
        .map(|l| l.strip_prefix("  ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn edit(path: &Path, anchor: &str, insert_before: &str) {
    let s = std::fs::read_to_string(path).unwrap();
    let i = s
        .find(anchor)
        .unwrap_or_else(|| panic!("{}: no `{anchor}`", path.display()));
    let out = format!("{}{insert_before}{}", &s[..i], &s[i..]);
    std::fs::write(path, out).unwrap();
}

struct Scratch(PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A new target dir for the copy, seeded with the suite's compiled
/// dependencies: the registry crates' artifacts do not depend on the
/// workspace's path, so cargo reuses them and compiles only the copy's own
/// crates (45 s instead of 220 s here).  Artifacts are hard links (rustc
/// replaces an output by renaming a new file over it, which leaves the
/// suite's file as it was); the fingerprints, which cargo rewrites in
/// place, are copies.
fn seed_target(target: &Path) {
    let debug = target.join("debug");
    if debug.join("deps").exists() {
        return;
    }
    // This test's binary is <target>/debug/deps/fifth_controller-<hash>.
    let exe = std::env::current_exe().unwrap();
    let Some(suite) = exe.parent().and_then(Path::parent) else {
        return;
    };
    std::fs::create_dir_all(&debug).unwrap();
    // deps hard-linked (rustc replaces an output, it never writes into
    // one); build copied: a build script that runs again here writes its
    // out/ in place, and through a hard link that rewrote the suite's --
    // ring's objects, after which the suite's next cargo command rebuilt
    // ring, rustls, kube and ccload (24 s of test.sh).  Both copies keep
    // their timestamps (-a), so the crates this build shares are fresh.
    for (flags, dir) in [("-al", "deps"), ("-a", "build"), ("-a", ".fingerprint")] {
        if suite.join(dir).is_dir() {
            let ok = Command::new("cp")
                .arg(flags)
                .arg(suite.join(dir))
                .arg(&debug)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "seeding {} from {}", debug.display(), suite.display());
        }
    }
}

#[test]
fn the_recipe_builds_and_registers_a_fifth_controller() {
    let _g = privileged!();
    let src = ccload_itests::repo_root();
    let doc = std::fs::read_to_string(src.join("docs/architecture.md")).unwrap();
    let dir = std::env::temp_dir().join(format!("ccl-fifth-{}", std::process::id()));
    let _clean = Scratch(dir.clone());
    for f in ccload_itests::repo_files() {
        let (from, to) = (src.join(&f), dir.join(&f));
        if from.is_file() {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&from, &to).unwrap();
        }
    }
    // Step 1: the CCL_ALGOS row, the tunables, the telemetry fields.
    let intf = dir.join("bpf/ccload_intf.h");
    let s = std::fs::read_to_string(&intf).unwrap();
    let s = s.replace(
        "\tX(ub_reno, UB_RENO, ubl)\n",
        "\tX(ub_reno, UB_RENO, ubl)       \\\n\tX(demo, DEMO, demo)\n",
    );
    std::fs::write(&intf, s).unwrap();
    edit(
        &intf,
        "CCL_ALGOS(CCL_PARAMS_STRUCT)",
        &(block(&doc, "its\n     tunables", "c") + "\n"),
    );
    edit(
        &intf,
        "CCL_ALGOS(CCL_TEL_STRUCT)",
        &(block(&doc, "its telemetry fields", "c") + "\n"),
    );
    // Step 2: the host descriptor line.
    edit(
        &dir.join("bpf/core/host_core.c"),
        "#define ubl_DESC",
        "#define demo_DESC(type, field, unit, help) CCL_TEL_DESC(demo, type, field, unit, help)\n",
    );
    // Step 3: the program.
    std::fs::write(
        dir.join("bpf/demo.bpf.c"),
        block(&doc, "**The program**", "c"),
    )
    .unwrap();
    // Step 4: build (own target dir: the suite's is locked by cargo test).
    let target = std::env::var_os("CCLOAD_FIFTH_TARGET")
        .map(PathBuf::from)
        .unwrap_or_else(|| ccload_itests::repo_root().join("target/fifth-controller"));
    seed_target(&target);
    let b = Command::new(env!("CARGO"))
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "--locked", "-q", "-p", "ccload"])
        .output()
        .expect("cargo build");
    assert!(
        b.status.success(),
        "the recipe's copy does not build:\n{}",
        String::from_utf8_lossy(&b.stderr)
    );
    let bin = target.join("debug/ccload");
    let run = |args: &[&str]| {
        let o = Command::new(&bin).args(args).output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
        )
    };
    let (ok, out) = run(&["watch", "--help-fields", "--algo", "demo"]);
    assert!(ok && out.contains("acked"), "{out}");
    let (ok, out) = run(&["attach", "--algo", "demo"]);
    assert!(ok, "attach demo: {out}");
    let faulted = ccload_itests::set_test_param("demo", "fault_skip", 1);
    let registered = ccload::bpf::is_registered("demo");
    let (ok_show, show) = run(&["tune", "--algo", "demo", "--show"]);
    // The guard: every ssthresh() of demo returns what a skipped one
    // returns (the garbage of the trampoline's return slot) and leaves no
    // mark; the wrappers' guard repairs each on the next ACK.  A lossy
    // 4-packet buffer, as the_guard_repairs_what_a_skipped_ssthresh_leaves.
    let guarded = (registered && faulted.is_ok()).then(|| {
        let l = Bottleneck::new(LinkCfg {
            rate_mbit: 20.0,
            delay_ms: 5.0,
            buffer_pkts: 4,
            loss: 0.002,
            ..Default::default()
        });
        let t = l.transfer("demo", 2 << 20);
        let (_, st) = run(&["status", "--json"]);
        (t.map(|t| t.bytes), st)
    });
    let (ok_detach, out_detach) = run(&["detach", "--algo", "demo"]);
    assert!(registered, "demo not in tcp_available_congestion_control");
    faulted.expect("fault_skip = 1 into demo's params");
    assert!(ok_show && show.contains("trace_every"), "{show}");
    assert!(ok_detach, "detach demo: {out_detach}");
    assert!(!ccload::bpf::is_registered("demo"), "demo still registered");
    let (bytes, st) = guarded.unwrap();
    let st: serde_json::Value = serde_json::from_str(&st).expect("status --json");
    let (losses, fixed) = (
        stat_in(&st, "demo", "loss_events"),
        stat_in(&st, "demo", "ssth_repaired"),
    );
    eprintln!(
        "demo with fault_skip = 1: {bytes:?} bytes, {losses} loss events, {fixed} ssthresh repairs"
    );
    assert_eq!(bytes.expect("transfer on demo"), 2 << 20);
    assert!(losses >= 2, "{losses} loss events");
    assert!(
        fixed * 2 >= losses,
        "{fixed} repairs for {losses} loss events"
    );
}
