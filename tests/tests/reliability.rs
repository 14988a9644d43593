//! Concurrency and crashes: the state lock and crash-consistent
//! pins.  Each test failed before the fix it guards.

use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use ccload_itests::*;

/// Removes everything on drop, also when the test panics.
struct CleanAll;
impl Drop for CleanAll {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--all"]);
    }
}

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(ccload_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ccload")
}

/// Before the lock, 2-3 of 4 simultaneous attaches failed with "failed to
/// pin .../params" (15 of 15 rounds).  Now one loads and the others find it
/// attached.
#[test]
fn simultaneous_attaches_all_succeed_and_one_loads() {
    let _s = privileged!();
    let _c = CleanAll;
    for round in 0..5 {
        let kids: Vec<_> = (0..4)
            .map(|_| spawn(&["attach", "--algo", "ccpd"]))
            .collect();
        let outs: Vec<_> = kids
            .into_iter()
            .map(|k| k.wait_with_output().unwrap())
            .collect();
        for o in &outs {
            assert!(
                o.status.success(),
                "round {round}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let loaded = outs
            .iter()
            .filter(|o| String::from_utf8_lossy(&o.stdout).starts_with("attached ccpd"))
            .count();
        assert_eq!(loaded, 1, "round {round}: exactly one attach loads ccpd");
        ccload_ok(&["detach", "--algo", "ccpd"]);
        assert!(!registered("ccpd"));
    }
}

/// A command that cannot get the lock waits, then says who holds it, exits
/// 75 (EX_TEMPFAIL) and changes nothing.
#[test]
fn a_command_refused_by_the_lock_names_the_holder_and_changes_nothing() {
    let _s = privileged!();
    let _c = CleanAll;
    std::fs::create_dir_all("/run/ccload").unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open("/run/ccload/lock")
        .unwrap();
    // SAFETY: flock on an fd we own; released when `f` is dropped.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    f.set_len(0).unwrap();
    std::fs::write("/run/ccload/lock", std::process::id().to_string()).unwrap();
    let o = Command::new(ccload_bin())
        .args(["attach", "--algo", "hetcp"])
        .env("CCLOAD_LOCK_WAIT", "0.3")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(75), "{err}");
    assert!(
        err.contains(&format!(
            "another ccload is changing state (pid {})",
            std::process::id()
        )),
        "{err}"
    );
    assert!(!registered("hetcp"), "nothing was attached");
    // Read-only commands do not wait for the lock.
    let o = Command::new(ccload_bin())
        .args(["status", "--json"])
        .env("CCLOAD_LOCK_WAIT", "0.3")
        .output()
        .unwrap();
    assert!(o.status.success());
    drop(f);
    ccload_ok(&["attach", "--algo", "hetcp"]);
}

/// `tune` is read-modify-write: without the lock two at once can each undo
/// the other's field.  Under the lock both land, every round.
#[test]
fn simultaneous_tunes_of_different_fields_both_land() {
    let _s = privileged!();
    let _c = CleanAll;
    let _a = Attached::new("ccpd", &[]);
    for round in 0..8u32 {
        let kd = format!("kd={}", 100 + round);
        let bmin = format!("b_min={}", 5 + round);
        let a = spawn(&["tune", "--algo", "ccpd", "--set", &kd]);
        let b = spawn(&["tune", "--algo", "ccpd", "--set", &bmin]);
        assert!(a.wait_with_output().unwrap().status.success());
        assert!(b.wait_with_output().unwrap().status.success());
        let st = status_json();
        let t = &st["attached"][0]["tunables"];
        assert_eq!(t["kd"], 100 + round, "round {round}: {t}");
        assert_eq!(t["b_min"], 5 + round, "round {round}: {t}");
    }
}

/// `watch --every N` restores only trace_every (and trace_ms) on exit, so
/// a `tune` made while it ran stays; a SIGTERM (timeout(1), systemd) ends
/// it with the restore done too.
#[test]
fn watch_every_restores_only_trace_every() {
    let _s = privileged!();
    let _c = CleanAll;
    let _a = Attached::new("ccpd", &[]);
    let w = Watch::start(&["--algo", "ccpd", "--every", "5"]);
    assert!(wait_until(Duration::from_secs(5), || {
        status_json()["attached"][0]["tunables"]["trace_every"] == 5
    }));
    ccload_ok(&["tune", "--algo", "ccpd", "--set", "kd=321"]);
    w.stop();
    let t = status_json()["attached"][0]["tunables"].clone();
    assert_eq!(t["trace_every"], 1, "restored: {t}");
    assert_eq!(t["kd"], 321, "the concurrent tune survives: {t}");

    let mut w = Watch::start(&["--algo", "ccpd", "--every", "7"]);
    assert!(wait_until(Duration::from_secs(5), || {
        status_json()["attached"][0]["tunables"]["trace_every"] == 7
    }));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(w.child.id() as i32, libc::SIGTERM) };
    let _ = w.child.wait();
    let t = status_json()["attached"][0]["tunables"].clone();
    assert_eq!(t["trace_every"], 1, "restored after SIGTERM: {t}");
}

/// SIGKILL at a random point of `attach` and of `cgroup set`, 30 rounds.
/// Before: a kill could leave an empty binding directory after which
/// `cgroup list`, `apply` and `serve` failed with a bare ENOENT, or map pins
/// that made the next attach fail with EEXIST.  Now every round ends with
/// `cgroup list` and `status` working, a fresh attach and bind succeeding,
/// and `detach --all` leaving nothing.
#[test]
fn sigkill_at_random_points_leaves_state_that_the_next_command_repairs() {
    let _s = privileged!();
    let _c = CleanAll;
    let cg = TestCgroup::new("kill");
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut left_behind = 0;
    let _a = Attached::new("hetcp", &[]); // the cgroup rounds bind hetcp
    for round in 0..30 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = Duration::from_micros(rng % 120_000);
        let args: Vec<&str> = if round % 2 == 0 {
            vec!["attach", "--algo", "ccpd"]
        } else {
            vec!["cgroup", "set", cg.path(), "--algo", "hetcp"]
        };
        let mut k = spawn(&args);
        std::thread::sleep(delay);
        let _ = k.kill();
        let _ = k.wait();
        let st = status_json();
        left_behind += st["leftovers"].as_array().map_or(0, |v| v.len());
        // Commands that do not need the broken leftover ignore it.
        ccload_ok(&["cgroup", "list", "--json"]);
        // The next state-changing command repairs and succeeds.
        ccload_ok(&["attach", "--algo", "ccpd"]);
        ccload_ok(&["cgroup", "set", cg.path(), "--algo", "hetcp"]);
        let st = status_json();
        assert_eq!(st["leftovers"], serde_json::json!([]), "round {round}");
        let list = ccload_ok(&["cgroup", "list", "--json"]);
        assert!(list.contains("hetcp"), "round {round}: {list}");
        ccload_ok(&["cgroup", "unset", cg.path()]);
        ccload_ok(&["detach", "--algo", "ccpd"]);
        assert!(
            wait_until(Duration::from_secs(5), || !registered("ccpd")),
            "round {round}: ccpd still registered after detach"
        );
    }
    eprintln!("30 killed commands left {left_behind} leftovers; all repaired");
}

/// bpffs is often mounted 1777: a pin root someone else created (or made
/// writable, or replaced by a symlink) is refused with the fix, and
/// nothing is loaded or pinned.
#[test]
fn a_pin_root_others_could_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let _s = privileged!();
    let _c = CleanAll;
    let root = std::path::Path::new("/sys/fs/bpf/ccload");
    assert!(!root.exists(), "a previous test left {}", root.display());
    struct RmRoot;
    impl Drop for RmRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir("/sys/fs/bpf/ccload");
            let _ = std::fs::remove_file("/sys/fs/bpf/ccload");
        }
    }
    let _r = RmRoot;
    // Made by us, then opened to everyone.
    std::fs::create_dir(root).unwrap();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let o = ccload(&["attach", "--algo", "ccpd"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("refusing to use /sys/fs/bpf/ccload") && e.contains("mode 1777"),
        "{e}"
    );
    assert!(!registered("ccpd"));
    assert_eq!(
        std::fs::read_dir(root).unwrap().count(),
        0,
        "nothing pinned"
    );
    // Owned by someone else.
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(root, Some(65534), None).unwrap();
    let e = String::from_utf8_lossy(&ccload(&["attach", "--algo", "ccpd"]).stderr).to_string();
    assert!(e.contains("owned by uid 65534"), "{e}");
    let doc = ccload(&["doctor"]);
    let d = String::from_utf8_lossy(&doc.stdout);
    assert!(
        d.contains("pin root") && d.contains("owned by uid 65534"),
        "{d}"
    );
    // A fresh one is created 0700 and used.
    std::fs::remove_dir(root).unwrap();
    ccload_ok(&["attach", "--algo", "ccpd"]);
    let mode = std::fs::metadata(root).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700);
}

/// A cgroup path is opened once (O_NOFOLLOW) and recorded as the real
/// absolute path: a symlink is refused, a relative path is resolved, and
/// two spellings of one cgroup in a config are one cgroup.
#[test]
fn cgroup_paths_are_resolved_once_and_symlinks_refused() {
    let _s = privileged!();
    let _c = CleanAll;
    let cg = TestCgroup::new("paths");
    ccload_ok(&["attach", "--algo", "ccpd"]);
    let link = std::env::temp_dir().join(format!("ccl-cglink-{}", std::process::id()));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&cg.0, &link).unwrap();
    struct Rm(std::path::PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _l = Rm(link.clone());
    let o = ccload(&["cgroup", "set", link.to_str().unwrap(), "--algo", "ccpd"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("goes through a symlink"),
        "{e}"
    );
    assert!(!ccload_ok(&["cgroup", "list"]).contains(cg.path()));
    // Relative to the working directory: recorded as the real path.
    let parent = cg.0.parent().unwrap();
    let name = cg.0.file_name().unwrap().to_str().unwrap();
    let o = std::process::Command::new(ccload_bin())
        .current_dir(parent)
        .args(["cgroup", "set", name, "--algo", "ccpd"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list = ccload_ok(&["cgroup", "list"]);
    assert!(list.contains(cg.path()), "{list}");
    // One cgroup under two spellings in a config.
    let cfg = std::env::temp_dir().join(format!("ccl-cg2-{}.toml", std::process::id()));
    let _f = Rm(cfg.clone());
    std::fs::write(
        &cfg,
        format!(
            "[algos.ccpd]\n[[cgroups]]\npath = \"{name}\"\nalgo = \"ccpd\"\n[[cgroups]]\npath = \"{}\"\nalgo = \"ccpd\"\n",
            cg.path()
        ),
    )
    .unwrap();
    let o = std::process::Command::new(ccload_bin())
        .current_dir(parent)
        .args(["apply", "--dry-run", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("cgroup listed twice"),
        "{e}"
    );
}

/// A test process killed outright (SIGKILL, a machine restart) runs no drop
/// and left its namespaces behind (three, once, after an environment
/// restart).  They carry their pid: the next process reaps those of dead
/// pids, and never one of a live process.
#[test]
fn namespaces_of_a_dead_process_are_reaped_and_live_ones_kept() {
    let _s = privileged!();
    let exists = |n: &str| std::path::Path::new(&format!("/run/netns/{n}")).exists();
    // First: a process's first namespace reaps once, and this test's own
    // call below must be the one that finds the orphan.
    let live = NetNs::new();
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{dead}")).exists());
    let orphan = format!("ccl-t{dead}-0");
    run_ok("ip", &["netns", "add", &orphan]);
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            ccload_testbed::netns::delete(&self.0);
        }
    }
    let _orphan = Del(orphan.clone());
    assert!(exists(&orphan) && exists(&live.name));
    let gone = ccload_testbed::netns::reap_dead();
    assert!(gone.contains(&orphan), "{gone:?}");
    assert!(!exists(&orphan), "{orphan} still there");
    assert!(
        exists(&live.name),
        "the live process's {} was reaped",
        live.name
    );
}
