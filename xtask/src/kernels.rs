//! `cargo xtask kernels`: ccload's privileged tests on Debian's own kernels.
//!
//! Each `--kernel` names a kernel Debian 12 ships (`6.12`: the
//! `linux-image-6.12-amd64` series; `6.1`: the default `linux-image-amd64`,
//! 6.1 LTS), or a `linux-image-*.deb` file.  The package is fetched with apt
//! (as scripts/setup.sh fetches its tools), unpacked under the cache
//! (`target/kernels`), and its kernel booted under qemu with TCG (KVM cannot
//! run stock kernels on this project's machines): `-cpu max`, 2 vCPUs,
//! 2 GiB, the host's root filesystem shared read-only over 9p under a tmpfs
//! overlay (so the guest runs this checkout's test binaries and the host's
//! tools at their own paths), and a second, writable share for the results.
//! A busybox initramfs (`guest/init.sh`) loads the kernel's own virtio, 9p
//! and overlay modules; `guest/stage2.sh` mounts what the tests expect and
//! runs the job this module writes: `ccload doctor`, then each named test
//! alone (`--exact`, `CCLOAD_REQUIRE_PRIVILEGED=1`: a test that would skip
//! fails), each with its own log.
//!
//! TCG runs about 10-30x slower than the host: enough for behaviour
//! (attach, replace, detach, tune, watch, cgroup bindings, a transfer per
//! controller), not for timing.  The verdict per kernel is printed as one
//! table; the command fails when a test fails, a guest does not boot, or a
//! guest does not finish in `--timeout` (never a silent skip).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The behaviour subset CI runs on every kernel of the matrix: attach,
/// replace and detach, bad input, live tuning, telemetry, cgroup bindings,
/// and one transfer per controller through the testbed's link.
pub const SUBSET: &[&str] = &[
    "foundation::ccpd_attach_transfer_detach",
    "foundation::attach_twice_is_a_noop_and_detach_twice_is_soft",
    "foundation::bad_tunable_is_rejected_and_pinned_values_unchanged",
    "foundation::replace_swaps_objects_under_a_running_flow",
    "tune_watch::tune_during_a_transfer_changes_the_law_within_rounds",
    "tune_watch::watch_json_is_well_formed_and_plausible_and_every_restores",
    "cgroup::cgroups_get_their_own_controller_and_profile_on_both_ends",
    "controllers::every_built_controller_runs_a_bottleneck_transfer",
];

const INIT: &str = include_str!("../guest/init.sh");
const STAGE2: &str = include_str!("../guest/stage2.sh");

/// Modules the initramfs loads (with their dependencies) before it can
/// mount the host's root; built-in ones are skipped.
const BOOT_MODULES: &[&str] = &["virtio_pci", "9pnet_virtio", "9p", "overlay"];

/// Host tools the matrix needs, as (command, Debian package).
const TOOLS: &[(&str, &str)] = &[
    ("qemu-system-x86_64", "qemu-system-x86"),
    ("busybox", "busybox-static"),
    ("modinfo", "kmod"),
    ("cpio", "cpio"),
    ("xz", "xz-utils"),
];

pub struct Opts {
    pub kernels: Vec<String>,
    /// `binary::test` or `binary` (every test of it); empty: [`SUBSET`].
    pub tests: Vec<String>,
    pub out: PathBuf,
    pub cache: PathBuf,
    pub timeout: Duration,
    /// More of the guest kernel's command line (e.g. `slub_debug=FZPU`).
    pub append: String,
}

/// One test's verdict in one guest.
#[derive(Debug, PartialEq)]
pub struct Verdict {
    pub test: String,
    pub passed: bool,
    pub secs: f64,
}

pub fn run(root: &Path, o: &Opts) -> Result<()> {
    if o.kernels.is_empty() {
        bail!("name at least one --kernel (e.g. --kernel 6.12 --kernel 6.1)");
    }
    let mut seen = BTreeSet::new();
    if let Some(k) = o.kernels.iter().find(|k| !seen.insert(k.as_str())) {
        bail!("--kernel {k} named twice");
    }
    if unsafe { libc::geteuid() } != 0 {
        bail!("cargo xtask kernels needs root (apt, and the guest runs the privileged tests)");
    }
    let tests: Vec<String> = if o.tests.is_empty() {
        SUBSET.iter().map(|s| s.to_string()).collect()
    } else {
        o.tests.clone()
    };
    let bins: BTreeSet<&str> = tests.iter().map(|t| binary_of(t)).collect();
    install_tools()?;
    // The guest runs what the host built, at the same paths, and mounts
    // its own /run, /proc, /sys and /dev (guest/stage2.sh).
    if ["/run/", "/proc/", "/sys/", "/dev/"]
        .iter()
        .any(|p| root.starts_with(p))
    {
        bail!(
            "{}: a checkout under /run, /proc, /sys or /dev is hidden from the guest",
            root.display()
        );
    }
    let job = guest_job(root, &tests, &bins)?;

    // One guest at a time: two side by side took 351 s where one after the
    // other took about 400, and slowed each guest's delay line enough to
    // put 37 ms on a path the tests read as under 30.
    let t0 = Instant::now();
    let outcomes: Vec<Result<(String, Vec<Verdict>)>> = o
        .kernels
        .iter()
        .map(|k| one_kernel(k, o, &kernel_dir(&o.out, k), &job))
        .collect();
    let (mut table, failed) = report(o, &tests, outcomes)?;
    writeln!(table, "the matrix took {:.0} s", t0.elapsed().as_secs_f64())?;
    print!("{table}");
    println!("kernels: logs in {}", o.out.display());
    std::fs::write(o.out.join("summary.txt"), &table)?;
    if !failed.is_empty() {
        bail!("kernels: failed on {}", failed.join(", "));
    }
    Ok(())
}

/// Install the host tools the matrix needs (qemu, busybox, ...) that are
/// missing, with apt (`cargo xtask kernels --tools`: scripts/test.sh does
/// before its unit tests, so the boot-failure test below runs for real).
pub fn install_tools() -> Result<()> {
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(cmd, _)| !have(cmd))
        .map(|(_, pkg)| *pkg)
        .collect();
    if !missing.is_empty() {
        eprintln!("kernels: installing {}", missing.join(" "));
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "-qq", "--no-install-recommends"])
                .args(&missing)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !install() {
            apt_update()?;
            if !install() {
                bail!("apt-get install {} failed", missing.join(" "));
            }
        }
    }
    Ok(())
}

/// The guest's job: build what it runs on the host (ccload and the named
/// test binaries), then one line per test that runs it and records its
/// verdict and times in the results share.
fn guest_job(root: &Path, tests: &[String], bins: &BTreeSet<&str>) -> Result<String> {
    // The guest runs what the host built: ccload and the test binaries.
    crate::run(crate::cargo(root).args(["build", "--locked", "-q", "-p", "ccload"]))?;
    let exes = test_binaries(root, bins)?;
    let mut job = String::from(
        "# written by cargo xtask kernels\nexport CCLOAD_REQUIRE_PRIVILEGED=1 RUST_BACKTRACE=1\n",
    );
    writeln!(
        job,
        "{} doctor > /ccl-out/doctor.txt 2>&1",
        root.join("target/debug/ccload").display()
    )?;
    writeln!(job, "cd {}", root.join("tests").display())?;
    for t in tests {
        let exe = &exes[binary_of(t)];
        let filter = match t.split_once("::") {
            Some((_, name)) => format!("--exact {name}"),
            None => String::new(),
        };
        let log = log_name(t);
        writeln!(
            job,
            "s=$(cut -d' ' -f1 /proc/uptime)\n\
             {} {filter} --test-threads=1 --nocapture > /ccl-out/{log}.log 2>&1\n\
             echo \"result {t} $? $s $(cut -d' ' -f1 /proc/uptime)\" >> /ccl-out/results",
            exe.display()
        )?;
    }
    Ok(job)
}

/// Each kernel's verdicts as the table the matrix prints, and the kernels
/// that failed (a test, or an oops, a BUG or a panic on the console).
fn report(
    o: &Opts,
    tests: &[String],
    outcomes: Vec<Result<(String, Vec<Verdict>)>>,
) -> Result<(String, Vec<String>)> {
    let mut failed = Vec::new();
    let mut table = String::new();
    for (k, outcome) in o.kernels.iter().zip(outcomes) {
        match outcome {
            Ok((release, verdicts)) => {
                let n_ok = verdicts.iter().filter(|v| v.passed).count();
                let secs: f64 = verdicts.iter().map(|v| v.secs).sum();
                writeln!(
                    table,
                    "{k} ({release}): {n_ok} of {} passed ({secs:.0} s of tests)",
                    tests.len(),
                )?;
                let share = kernel_dir(&o.out, k).join("share");
                for t in tests {
                    let line = match verdicts.iter().find(|v| &v.test == t) {
                        Some(v) if v.passed => format!("  ok    {t} ({:.0} s)", v.secs),
                        Some(v) => format!("  FAIL  {t} ({:.0} s)", v.secs),
                        None => format!("  FAIL  {t} (did not run)"),
                    };
                    writeln!(table, "{line}")?;
                    // why, from its log: the logs go with --out (a CI's
                    // temporary directory), the summary stays in its output
                    if line.starts_with("  FAIL") {
                        let log = share.join(format!("{}.log", log_name(t)));
                        for l in why_failed(&std::fs::read_to_string(log).unwrap_or_default()) {
                            writeln!(table, "          {l}")?;
                        }
                    }
                }
                // An oops, a BUG or a panic fails the kernel whatever the
                // tests read: the console says what the kernel did.
                let console = kernel_dir(&o.out, k).join("console.log");
                let trouble = kernel_trouble(&String::from_utf8_lossy(&std::fs::read(&console)?));
                if let Some(t) = &trouble {
                    writeln!(table, "  KERNEL {t} ({})", console.display())?;
                }
                if n_ok < tests.len() || trouble.is_some() {
                    failed.push(k.clone());
                }
            }
            Err(e) => {
                writeln!(table, "{k}: FAIL: {e:#}")?;
                failed.push(k.clone());
            }
        }
    }
    Ok((table, failed))
}

fn apt_update() -> Result<()> {
    crate::run(Command::new("apt-get").args(["update", "-qq"]))
}

fn binary_of(test: &str) -> &str {
    test.split_once("::").map_or(test, |(b, _)| b)
}

/// Where `cmd` is on PATH, as the shell finds it.
fn which(cmd: &str) -> Option<PathBuf> {
    let o = Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
    (o.status.success() && !p.is_empty()).then(|| PathBuf::from(p))
}

fn have(cmd: &str) -> bool {
    which(cmd).is_some()
}

/// The directory of `kernel`'s guest under `out`.
fn kernel_dir(out: &Path, kernel: &str) -> PathBuf {
    out.join(kernel.replace('/', "_"))
}

/// The name of `test`'s log in the results share, without `.log`.
fn log_name(test: &str) -> String {
    test.replace("::", "-")
}

/// The executables of the named test binaries of ccload-itests, built now.
fn test_binaries(
    root: &Path,
    bins: &BTreeSet<&str>,
) -> Result<std::collections::BTreeMap<String, PathBuf>> {
    let mut c = crate::cargo(root);
    c.args([
        "test",
        "--locked",
        "-q",
        "-p",
        "ccload-itests",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    for b in bins {
        c.args(["--test", b]);
    }
    let out = c
        .stderr(Stdio::inherit())
        .output()
        .context("cargo test --no-run")?;
    if !out.status.success() {
        bail!("cargo test --no-run failed");
    }
    let mut exes = std::collections::BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let (Some(name), Some(exe)) = (v["target"]["name"].as_str(), v["executable"].as_str()) {
            if bins.contains(name) {
                exes.insert(name.to_string(), PathBuf::from(exe));
            }
        }
    }
    for b in bins {
        if !exes.contains_key(*b) {
            bail!("no test binary {b} in ccload-itests (tests/tests/{b}.rs)");
        }
    }
    Ok(exes)
}

/// The versioned image package of `kernel` from `apt-cache depends` of its
/// meta package's output, e.g. `linux-image-6.12.118+deb12-amd64`.
pub fn depends_image(apt_depends: &str) -> Option<String> {
    apt_depends.lines().find_map(|l| {
        let dep = l.trim().strip_prefix("Depends: ")?.trim();
        dep.starts_with("linux-image-").then(|| dep.to_string())
    })
}

/// The meta packages that may carry `kernel` ("6.12" -> the series' own,
/// then Debian's default), and whether a versioned package is that kernel.
fn meta_packages(kernel: &str) -> [String; 2] {
    [
        format!("linux-image-{kernel}-amd64"),
        "linux-image-amd64".into(),
    ]
}

pub fn is_series(image_pkg: &str, kernel: &str) -> bool {
    image_pkg
        .strip_prefix("linux-image-")
        .and_then(|v| v.strip_prefix(kernel))
        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
}

/// The .deb of `kernel`, downloaded into `cache` (once).
fn fetch(kernel: &str, cache: &Path) -> Result<PathBuf> {
    if kernel.ends_with(".deb") {
        let p = PathBuf::from(kernel);
        if !p.is_file() {
            bail!("{kernel}: no such file");
        }
        return Ok(p);
    }
    let find = || -> Result<Option<String>> {
        for meta in meta_packages(kernel) {
            let out = Command::new("apt-cache")
                .args(["depends", &meta])
                .output()?;
            if let Some(dep) = depends_image(&String::from_utf8_lossy(&out.stdout)) {
                if is_series(&dep, kernel) {
                    return Ok(Some(dep));
                }
            }
        }
        Ok(None)
    };
    let mut image = find()?;
    if image.is_none() {
        // a fresh machine may have no package lists yet
        apt_update()?;
        image = find()?;
    }
    let Some(image) = image else {
        bail!(
            "no Debian package of kernel {kernel} (tried {})",
            meta_packages(kernel).join(", ")
        );
    };
    std::fs::create_dir_all(cache)?;
    let have_deb = |c: &Path| -> Result<Option<PathBuf>> {
        Ok(std::fs::read_dir(c)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{image}_")) && n.ends_with(".deb"))
            }))
    };
    if let Some(deb) = have_deb(cache)? {
        return Ok(deb);
    }
    eprintln!("kernels: downloading {image}");
    // apt's sandbox user cannot write root's cache: the warning is noise
    crate::run(
        Command::new("apt-get")
            .args(["download", "-qq", &image])
            .current_dir(cache)
            .stderr(Stdio::null()),
    )?;
    have_deb(cache)?.with_context(|| format!("apt-get download {image} left no .deb"))
}

/// A kernel package unpacked under the cache.
struct Unpacked {
    /// Where the package's tree starts (modinfo's and depmod's `-b`).
    root: PathBuf,
    vmlinuz: PathBuf,
    /// `lib/modules/<release>`.
    modules: PathBuf,
    release: String,
}

/// Unpacks `deb` under `cache` (once).
fn unpack(deb: &Path, cache: &Path) -> Result<Unpacked> {
    let stem = deb.file_stem().unwrap().to_string_lossy().to_string();
    let root = cache.join(&stem);
    let done = root.join(".unpacked");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&root);
        crate::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root))?;
    }
    let mods = root.join("lib/modules");
    let release = std::fs::read_dir(&mods)
        .with_context(|| format!("{}: no lib/modules", deb.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .next()
        .with_context(|| format!("{}: no kernel release", deb.display()))?;
    if !done.exists() {
        // the package's modules.dep is made at install time
        crate::run(Command::new("depmod").arg("-b").arg(&root).arg(&release))?;
        std::fs::write(&done, "")?;
    }
    let vmlinuz = root.join(format!("boot/vmlinuz-{release}"));
    if !vmlinuz.is_file() {
        bail!("{}: no boot/vmlinuz-{release}", deb.display());
    }
    Ok(Unpacked {
        modules: mods.join(&release),
        root,
        vmlinuz,
        release,
    })
}

/// What modinfo says of a module: its file (None if built in) and the
/// modules it depends on.
type ModInfo = (Option<PathBuf>, Vec<String>);

/// Modules to load for `want`, dependencies first, each once; built-in
/// ones are left out.
pub fn load_order(
    want: &[&str],
    info: &mut dyn FnMut(&str) -> Result<ModInfo>,
) -> Result<Vec<PathBuf>> {
    fn visit(
        m: &str,
        info: &mut dyn FnMut(&str) -> Result<ModInfo>,
        seen: &mut BTreeSet<String>,
        out: &mut Vec<PathBuf>,
    ) -> Result<()> {
        if !seen.insert(m.to_string()) {
            return Ok(());
        }
        let (path, deps) = info(m)?;
        for d in &deps {
            visit(d, info, seen, out)?;
        }
        if let Some(p) = path {
            out.push(p);
        }
        Ok(())
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for m in want {
        visit(m, info, &mut seen, &mut out)?;
    }
    Ok(out)
}

/// The initramfs: a static busybox, /init, and the boot modules
/// (decompressed: busybox's insmod reads plain .ko).
fn initramfs(unpacked: &Path, release: &str, out: &Path) -> Result<()> {
    let base = out.parent().unwrap().join("initramfs");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("bin"))?;
    std::fs::create_dir_all(base.join("mod"))?;
    let busybox = which("busybox").context("no busybox (busybox-static)")?;
    std::fs::copy(&busybox, base.join("bin/busybox")).context("copy busybox")?;
    std::fs::write(base.join("init"), INIT)?;
    set_exec(&base.join("init"))?;
    let mut modinfo = |m: &str| -> Result<ModInfo> {
        let q = |field: &str| -> Result<String> {
            let o = Command::new("modinfo")
                .arg("-b")
                .arg(unpacked)
                .args(["-k", release, "-F", field, m])
                .output()?;
            if !o.status.success() {
                bail!(
                    "modinfo {m} ({release}): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
            }
            Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let file = q("filename")?;
        let path = file.starts_with('/').then(|| PathBuf::from(file));
        let deps = q("depends")?
            .split(',')
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect();
        Ok((path, deps))
    };
    let order = load_order(BOOT_MODULES, &mut modinfo)?;
    let mut names = String::new();
    for p in &order {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let plain = name
            .trim_end_matches(".xz")
            .trim_end_matches(".zst")
            .to_string();
        let dst = base.join("mod").join(&plain);
        if name.ends_with(".xz") {
            let o = Command::new("xz").arg("-dc").arg(p).output()?;
            if !o.status.success() {
                bail!("xz -dc {}", p.display());
            }
            std::fs::write(&dst, o.stdout)?;
        } else if name.ends_with(".ko") {
            std::fs::copy(p, &dst)?;
        } else {
            bail!(
                "{}: a module compression this initramfs cannot read",
                p.display()
            );
        }
        names.push_str(&plain);
        names.push('\n');
    }
    std::fs::write(base.join("modules.order"), names)?;
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "find . | cpio -o -H newc --quiet > '{}'",
            out.display()
        ))
        .current_dir(&base)
        .status()?;
    if !o.success() {
        bail!("cpio failed");
    }
    Ok(())
}

fn set_exec(p: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The lines of a failed test's log that say why: each panic's location
/// and the message line after it (at most 6 lines).
pub fn why_failed(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("panicked at") {
            out.push(l.trim().to_string());
            if let Some(next) = lines.get(i + 1) {
                out.push(next.trim().to_string());
            }
        }
    }
    out.truncate(6);
    out
}

/// Parses the guest's results file: `result TEST RC START END` lines.
pub fn parse_results(s: &str) -> Vec<Verdict> {
    s.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 5 || f[0] != "result" {
                return None;
            }
            let t0: f64 = f[3].parse().ok()?;
            let t1: f64 = f[4].parse().ok()?;
            Some(Verdict {
                test: f[1].to_string(),
                passed: f[2] == "0",
                secs: t1 - t0,
            })
        })
        .collect()
}

/// Boots `kernel`, runs `job` in it; returns the guest's release and the
/// verdicts.
fn one_kernel(kernel: &str, o: &Opts, dir: &Path, job: &str) -> Result<(String, Vec<Verdict>)> {
    let deb = fetch(kernel, &o.cache)?;
    let k = unpack(&deb, &o.cache)?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let initrd = dir.join("initrd.cpio");
    initramfs(&k.root, &k.release, &initrd)?;
    boot(&k, &initrd, dir, job, o)
}

/// What went wrong in the kernel, from its console: the first oops, BUG,
/// warning or panic line, with the function it happened in.
fn kernel_trouble(console: &str) -> Option<String> {
    let mut lines = console.lines().map(|l| {
        // "[   42.334863] Oops: ..." -> "Oops: ..."
        match l.trim_start().strip_prefix('[') {
            Some(r) => r.split_once("] ").map_or(l, |(_, m)| m),
            None => l,
        }
    });
    let first = lines.by_ref().find(|m| {
        [
            "Oops:",
            "BUG:",
            "WARNING:",
            "Kernel panic",
            "general protection fault",
        ]
        .iter()
        .any(|p| m.starts_with(p))
    })?;
    let rip = lines
        .take(12)
        .find_map(|m| m.strip_prefix("RIP: 0010:"))
        .map(|r| format!(" at {r}"))
        .unwrap_or_default();
    Some(format!("{first}{rip}"))
}

/// Boots the unpacked kernel `k` with `initrd`, runs `job` in it; returns
/// the guest's release and the verdicts, or why the guest did not boot or
/// finish.
fn boot(
    k: &Unpacked,
    initrd: &Path,
    dir: &Path,
    job: &str,
    o: &Opts,
) -> Result<(String, Vec<Verdict>)> {
    let timeout = o.timeout;
    let share = dir.join("share");
    let _ = std::fs::remove_dir_all(&share);
    std::fs::create_dir_all(&share)?;
    std::fs::write(share.join("stage2.sh"), STAGE2)?;
    std::fs::write(share.join("job.sh"), job)?;
    std::fs::write(
        share.join("modules-dir"),
        k.modules.to_string_lossy().as_bytes(),
    )?;
    let console = std::fs::File::create(dir.join("console.log"))?;
    eprintln!("kernels: booting {} under qemu (TCG)", k.release);
    let mut child = Command::new("qemu-system-x86_64")
        .args(["-machine", "q35", "-accel", "tcg", "-cpu", "max"])
        .args([
            "-smp",
            "2",
            "-m",
            "2048",
            "-nographic",
            "-no-reboot",
            "-nic",
            "none",
        ])
        .arg("-kernel")
        .arg(&k.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(format!("console=ttyS0 panic=-1 quiet {}", o.append).trim_end())
        .args([
            "-virtfs",
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        ])
        .arg("-virtfs")
        .arg(format!(
            "local,path={},mount_tag=cclout,security_model=none",
            share.display()
        ))
        .stdin(Stdio::null())
        .stdout(console.try_clone()?)
        .stderr(console)
        .spawn()
        .context("qemu-system-x86_64")?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let booted = std::fs::read_to_string(share.join("booted")).ok();
    let verdicts =
        parse_results(&std::fs::read_to_string(share.join("results")).unwrap_or_default());
    let Some(booted) = booted else {
        bail!(
            "the guest did not boot ({}; {})",
            match status {
                Some(s) => format!("qemu {s}"),
                None => format!("killed after {} s", timeout.as_secs()),
            },
            dir.join("console.log").display()
        );
    };
    if status.is_none() {
        bail!(
            "the guest did not finish in {} s ({} tests ran; {})",
            timeout.as_secs(),
            verdicts.len(),
            dir.join("console.log").display()
        );
    }
    let release = booted
        .split_whitespace()
        .next()
        .unwrap_or(&k.release)
        .to_string();
    Ok((release, verdicts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 6.12 guest's console after slab corruption (its first lines):
    /// the summary names the oops and where it happened; a clean console
    /// has nothing to say.
    #[test]
    fn a_kernel_oops_is_read_from_the_console() {
        let console = "ccl-guest: 6.12.118+deb12-amd64 up after 4.13 s\n\
[   42.334863] Oops: general protection fault, probably for non-canonical address 0xfa3601a8feae93ea: 0000 [#1] PREEMPT SMP NOPTI\n\
[   42.335796] CPU: 1 UID: 0 PID: 227 Comm: every_built_con Not tainted 6.12.118+deb12-amd64 #1\n\
[   42.336193] RIP: 0010:kmem_cache_alloc_node_noprof+0xc3/0x330\n\
[   46.321207] Kernel panic - not syncing: Fatal exception in interrupt\n";
        assert_eq!(
            kernel_trouble(console).as_deref(),
            Some(
                "Oops: general protection fault, probably for non-canonical address \
                 0xfa3601a8feae93ea: 0000 [#1] PREEMPT SMP NOPTI at \
                 kmem_cache_alloc_node_noprof+0xc3/0x330"
            )
        );
        assert_eq!(
            kernel_trouble("ccl-guest: up\n[    1.0] tun: Universal TUN/TAP\n"),
            None
        );
    }

    #[test]
    fn the_image_package_is_read_from_apt_cache_depends() {
        let out = "linux-image-6.12-amd64\n  Depends: linux-image-6.12.118+deb12-amd64\n";
        assert_eq!(
            depends_image(out).as_deref(),
            Some("linux-image-6.12.118+deb12-amd64")
        );
        assert_eq!(depends_image("linux-image-amd64\n  Recommends: x\n"), None);
        // a series matches its own releases only: 6.1 is not 6.12
        assert!(is_series("linux-image-6.1.0-57-amd64", "6.1"));
        assert!(!is_series("linux-image-6.12.118+deb12-amd64", "6.1"));
        assert!(is_series("linux-image-6.12.118+deb12-amd64", "6.12"));
    }

    #[test]
    fn modules_load_after_their_dependencies_once_and_builtins_are_left_out() {
        let dep = |m: &str| -> Vec<String> {
            match m {
                "9p" => vec!["9pnet".into(), "netfs".into()],
                "9pnet_virtio" => vec!["9pnet".into(), "virtio".into()],
                "9pnet" => vec!["netfs".into()],
                _ => vec![],
            }
        };
        let mut info = |m: &str| -> Result<ModInfo> {
            let path = (m != "virtio").then(|| PathBuf::from(format!("{m}.ko")));
            Ok((path, dep(m)))
        };
        let order = load_order(&["9pnet_virtio", "9p"], &mut info).unwrap();
        let names: Vec<String> = order.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(names, ["netfs.ko", "9pnet.ko", "9pnet_virtio.ko", "9p.ko"]);
    }

    #[test]
    fn a_failed_tests_panic_is_quoted() {
        let log = "running 1 test\ntest x ... FAILED\nthread 'x' (141) panicked at tests/tests/tune_watch.rs:9:5:\nrtt_max 37063 us beyond queue + 20 ms\nstack backtrace:\n";
        assert_eq!(
            why_failed(log),
            [
                "thread 'x' (141) panicked at tests/tests/tune_watch.rs:9:5:",
                "rtt_max 37063 us beyond queue + 20 ms"
            ]
        );
        assert!(why_failed("test x ... ok\n").is_empty());
    }

    #[test]
    fn results_are_read_per_test_and_a_torn_line_is_ignored() {
        let v = parse_results(
            "result foundation::a 0 5.60 11.96\nresult cgroup::b 101 12.0 15.5\nresult tor",
        );
        assert_eq!(v.len(), 2);
        assert!(v[0].passed && !v[1].passed);
        assert!((v[0].secs - 6.36).abs() < 1e-9);
        assert_eq!(v[1].test, "cgroup::b");
    }

    /// A guest that cannot boot fails the matrix with the reason, never a
    /// silent skip (here: a kernel image qemu cannot load).
    #[test]
    fn a_guest_that_does_not_boot_is_a_failure() {
        if !have("qemu-system-x86_64") {
            // (`cargo xtask kernels --tools` installs qemu; the unit tests
            // do not, and under .ci/run a test that cannot run fails)
            assert!(
                std::env::var_os("CCLOAD_REQUIRE_PRIVILEGED").is_none_or(|v| v != "1"),
                "no qemu-system-x86_64 (cargo xtask kernels --tools installs it)"
            );
            eprintln!("SKIPPED a_guest_that_does_not_boot_is_a_failure: no qemu-system-x86_64");
            return;
        }
        let dir = std::env::temp_dir().join(format!("ccl-kernels-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let k = Unpacked {
            root: dir.clone(),
            vmlinuz: dir.join("vmlinuz"),
            modules: dir.clone(),
            release: "0.0.0-broken".into(),
        };
        std::fs::write(&k.vmlinuz, b"not a kernel").unwrap();
        std::fs::write(dir.join("initrd.cpio"), b"").unwrap();
        let r = boot(
            &k,
            &dir.join("initrd.cpio"),
            &dir,
            "true\n",
            &Opts {
                kernels: vec![],
                tests: vec![],
                out: dir.clone(),
                cache: dir.clone(),
                timeout: Duration::from_secs(60),
                append: String::new(),
            },
        );
        let _ = std::fs::remove_dir_all(&dir);
        let e = format!("{:#}", r.expect_err("a broken kernel booted"));
        assert!(e.contains("did not boot"), "{e}");
    }

    #[test]
    fn every_test_of_the_subset_names_a_test_that_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        for t in SUBSET {
            let (bin, name) = t.split_once("::").unwrap();
            let src = std::fs::read_to_string(root.join(format!("tests/tests/{bin}.rs")))
                .unwrap_or_else(|e| panic!("{t}: {e}"));
            assert!(src.contains(&format!("fn {name}()")), "{t}: no such test");
        }
    }
}
