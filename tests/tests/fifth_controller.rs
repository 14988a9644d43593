//! docs/architecture.md's "Adding a fifth controller" recipe, followed step
//! by step in a scratch copy of the repository: the copy builds, and its
//! `ccload attach --algo demo` registers a controller named `demo`.  The
//! program text is read from the doc itself, so the doc cannot drift.

use std::path::{Path, PathBuf};
use std::process::Command;

use ccload_itests::privileged;

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
    let registered = ccload::bpf::is_registered("demo");
    let (ok_show, show) = run(&["tune", "--algo", "demo", "--show"]);
    let (ok_detach, out_detach) = run(&["detach", "--algo", "demo"]);
    assert!(registered, "demo not in tcp_available_congestion_control");
    assert!(ok_show && show.contains("trace_every"), "{show}");
    assert!(ok_detach, "detach demo: {out_detach}");
    assert!(!ccload::bpf::is_registered("demo"), "demo still registered");
}
