//! Project tasks cargo cannot do by itself: `cargo xtask <task>`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use ccload_lab::session as lab;

mod dist;
mod disturb;
mod install;
mod kernels;

#[derive(Parser)]
#[command(name = "xtask")]
struct Args {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Regenerate bpf/vmlinux/<arch>/vmlinux.h from a kernel's BTF (the
    /// running kernel's by default), then compile every BPF program
    /// against it for that architecture.
    Codegen {
        /// Target architecture: x86_64 or aarch64 (default: this machine's).
        #[arg(long, value_parser = ["x86_64", "aarch64"])]
        arch: Option<String>,
        /// BTF to read: /sys/kernel/btf/vmlinux of a machine of that
        /// architecture (copied here), or a vmlinux ELF with BTF.
        #[arg(long, default_value = "/sys/kernel/btf/vmlinux")]
        btf: PathBuf,
        /// Write the header under this directory instead of bpf/vmlinux.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only compile every program against the existing header of
        /// --arch (bpf/vmlinux/ARCH); regenerate nothing.
        #[arg(long, conflicts_with_all = ["btf", "out"])]
        check: bool,
    },
    /// Run every test (scripts/test.sh, the README's test command).
    Test,
    /// Run the main job (scripts/demo.sh).
    Demo,
    /// ccload under load and abuse: flows, concurrent and killed commands,
    /// daemon reloads and kills; fails on a lost flow, a failed command, a
    /// leak or state that differs from the last applied config.
    Soak {
        /// How long, in minutes.
        #[arg(long, default_value_t = 2.0)]
        minutes: f64,
        /// Seed of the random commands (a soak replays from its seed).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Results folder (default lab-results/soak-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run a command (after --) while a SCHED_FIFO 99 thread per CPU takes
    /// it for --burst-ms about every --period-ms, as a busy VM host does:
    /// how the timing tests and the lab behave on a noisy CI machine.
    /// Needs root.
    Disturb {
        /// How long each CPU is taken, ms.
        #[arg(long, default_value_t = 2.0)]
        burst_ms: f64,
        /// Mean interval between bursts, ms (each one 0.5-1.5x of it).
        #[arg(long, default_value_t = 20.0)]
        period_ms: f64,
        /// The command, e.g. `-- cargo test -p ccload-itests --test hetcp`.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// What telemetry and the controllers cost here: records/s the
    /// `watch` consumer sustains with 0 drops, loopback throughput of each
    /// controller and of tracing vs cubic, the cost of cgroup aggregates.
    /// Writes bench.md (docs/usage.md quotes it).
    Bench {
        /// Seconds per consumer rate.
        #[arg(long, default_value_t = 2.0)]
        secs: f64,
        /// Repetitions of each datapath configuration (median and spread).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// MiB per loopback transfer.
        #[arg(long, default_value_t = 2048)]
        mib: u64,
        /// Results folder (default lab-results/bench-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only one part: consumer, datapath, aggregates, cost or cpu.
        #[arg(long, value_parser = ["consumer", "datapath", "aggregates", "cost", "cpu"])]
        only: Option<String>,
        /// Measure this ccload binary (and the BPF objects it embeds)
        /// instead of building one: compares two builds.
        #[arg(long)]
        bin: Option<PathBuf>,
    },
    /// Install the binary, systemd unit, completions, man pages, docs and
    /// example configs (release build unless --bin).
    Install {
        /// Stage everything under this directory (packaging, tests).
        #[arg(long)]
        destdir: Option<PathBuf>,
        /// Where the binary and shared files go.
        #[arg(long, default_value = "/usr/local")]
        prefix: PathBuf,
        /// Install this already-built ccload instead of building one.
        #[arg(long)]
        bin: Option<PathBuf>,
    },
    /// Release artifacts: a tarball, a .deb that enables the unit, and an
    /// OCI image, from the static build (dist/ by default).
    Dist {
        /// Where the artifacts go.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Package this already-built ccload instead of the static build.
        #[arg(long)]
        bin: Option<PathBuf>,
        /// Skip the OCI image.
        #[arg(long)]
        no_image: bool,
    },
    /// Privileged tests on Debian's own kernels, each booted under qemu
    /// (TCG) with this host's filesystem: `--kernel 6.12 --kernel 6.1`.
    /// Prints per kernel which tests passed; fails when one fails or a
    /// guest does not boot.
    Kernels {
        /// A kernel series Debian 12 ships (6.12, 6.1) or a
        /// linux-image-*.deb; repeat for a matrix.
        #[arg(long = "kernel", required_unless_present = "tools")]
        kernels: Vec<String>,
        /// Only install the host tools the matrix needs (qemu, busybox,
        /// kmod, cpio, xz) where missing, and exit.
        #[arg(long)]
        tools: bool,
        /// A test to run, `binary::name` or a whole `binary` of
        /// tests/tests/ (repeat; default: the behaviour subset).
        #[arg(long = "test")]
        tests: Vec<String>,
        /// Logs per kernel (default lab-results/kernels-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Downloaded and unpacked kernel packages.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Seconds a guest may take, boot to power-off.
        #[arg(long, default_value_t = 900)]
        timeout: u64,
        /// More of the guest kernel's command line, e.g. `slub_debug=FZPU`
        /// to catch memory corruption where it happens.
        #[arg(long, default_value = "")]
        append: String,
    },
    /// Paper-style experiments on the emulated link (configs/lab/*.toml).
    Lab {
        #[command(subcommand)]
        cmd: LabCmd,
    },
}

#[derive(Subcommand)]
enum LabCmd {
    /// List the scenarios.
    List {
        /// One JSON array.
        #[arg(short = 'j', long)]
        json: bool,
    },
    /// One controller and cubic through the `demo` link (50 Mbit/s, 40 ms,
    /// 1 BDP), the controller's live state shown by `ccload watch`, then
    /// both side by side.
    Demo {
        /// One of ccload's controllers.
        #[arg(long, default_value = "ccpd")]
        algo: String,
        /// Seconds per run (default: the scenario's 12).
        #[arg(long)]
        secs: Option<f64>,
    },
    /// Run a scenario (name in configs/lab/ or a path) and write its results.
    Run {
        scenario: String,
        /// The scenario's quick variant (under 2 minutes).
        #[arg(long)]
        quick: bool,
        /// Results folder (default lab-results/<scenario>-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// List the runs and their duration; run nothing (no root needed).
        #[arg(long)]
        dry_run: bool,
        /// Finish an interrupted run in this results directory (its
        /// finished runs are kept).
        #[arg(long, conflicts_with = "out")]
        resume: Option<PathBuf>,
    },
    /// Re-draw the plots of stored results (no kernel needed).
    Plot {
        /// Results directories of `lab run`.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
    /// Two stored results side by side: every (case, cc) both ran, with
    /// goodput, p95 RTT and retransmissions and their B/A ratios.
    Compare {
        /// The reference results directory.
        a: PathBuf,
        /// The results directory compared with it.
        b: PathBuf,
        /// One JSON document.
        #[arg(short = 'j', long)]
        json: bool,
    },
    /// The verdict of a stored check as one table per controller (what
    /// docs/results.md holds for the committed grid).
    Digest {
        /// The results directory of `lab check`.
        dir: PathBuf,
    },
    /// Run a scenario and enforce its [[checks]] thresholds; exit 1 on a failure.
    Check {
        scenario: String,
        /// The scenario's quick variant.
        #[arg(long)]
        quick: bool,
        /// Results folder (default lab-results/<scenario>-<time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Finish an interrupted check in this results directory (its
        /// finished runs are kept; Ctrl-C stops a check, drops the run in
        /// progress and judges what it finished).
        #[arg(long, conflicts_with = "out")]
        resume: Option<PathBuf>,
        /// Measure every (case, cc) of the scenario, not only the runs a
        /// threshold reads (the acceptance grid: 378 runs instead of 219).
        #[arg(long)]
        all_runs: bool,
    },
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(cmd: &mut Command) -> Result<()> {
    let st = cmd
        .status()
        .with_context(|| format!("failed to run {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed: {st}");
    }
    Ok(())
}

/// A cargo command for this workspace, without the variables `cargo run`
/// set for this process (CARGO_MANIFEST_DIR, CARGO_PKG_NAME, ..., OUT_DIR):
/// build scripts re-run when those change (ring's watches them), so a
/// nested build that inherited xtask's compiled ring, rustls, kube and
/// ccload again, and the next top-level `cargo xtask` once more (23 s each
/// on 2 cores).
pub(crate) fn cargo(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.current_dir(root);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k == "OUT_DIR"
            || k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&&*k)
        {
            c.env_remove(&*k);
        }
    }
    c
}

/// The lab attaches our controllers with the ccload binary next to this
/// one: build it first.  The whole workspace, as the test command builds
/// it: `-p ccload` alone resolves the build scripts' dependencies with other
/// features (libc without extra_traits) and compiled ring, rustls, kube and
/// ccload again after a workspace build (46 s on 2 cores).
fn build_ccload(root: &Path) -> Result<()> {
    run(cargo(root).args(["build", "--locked", "-q", "--workspace"]))
}

/// Errors are one line (and their causes), never a backtrace, even when
/// RUST_BACKTRACE is set: they are for the person at the terminal.
fn main() {
    if let Err(e) = real_main() {
        eprintln!("xtask: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let root = root();
    match Args::parse().task {
        Task::Codegen {
            arch,
            btf,
            out,
            check,
        } => codegen_task(&root, arch, &btf, out, check)?,
        Task::Test => run(Command::new("bash").arg(root.join("scripts/test.sh")))?,
        Task::Demo => run(Command::new("bash").arg(root.join("scripts/demo.sh")))?,
        Task::Disturb {
            burst_ms,
            period_ms,
            cmd,
        } => disturb::run(burst_ms, period_ms, &cmd)?,
        Task::Soak { minutes, seed, out } => soak_task(&root, minutes, seed, out)?,
        Task::Bench {
            secs,
            reps,
            mib,
            out,
            only,
            bin,
        } => {
            if !(secs > 0.0 && secs <= 60.0) || reps == 0 || mib == 0 {
                bail!("--secs in (0, 60], --reps and --mib at least 1");
            }
            let bin = match bin {
                Some(b) if b.is_file() => b,
                Some(b) => bail!("--bin {}: no such file", b.display()),
                None => {
                    // Measured as shipped: the release build.
                    run(cargo(&root).args([
                        "build",
                        "--locked",
                        "-q",
                        "--release",
                        "-p",
                        "ccload",
                    ]))?;
                    root.join("target/release/ccload")
                }
            };
            std::env::set_var("CCLOAD_BIN", bin);
            let out = out.unwrap_or_else(|| stamped(&root, "bench"));
            ccload_qa::bench::run(secs, reps, mib << 20, &out, only.as_deref())?;
        }
        Task::Install {
            destdir,
            prefix,
            bin,
        } => install::run(
            &root,
            &install::Opts {
                destdir,
                prefix,
                bin,
            },
        )?,
        Task::Dist { out, bin, no_image } => {
            dist::run(
                &root,
                &dist::Opts {
                    out: out.unwrap_or_else(|| root.join("dist")),
                    bin,
                    image: !no_image,
                },
            )?;
        }
        Task::Kernels { tools: true, .. } => kernels::install_tools()?,
        Task::Kernels {
            kernels,
            tests,
            out,
            cache,
            timeout,
            append,
            tools: false,
        } => kernels::run(
            &root,
            &kernels::Opts {
                kernels,
                tests,
                out: out.unwrap_or_else(|| stamped(&root, "kernels")),
                cache: cache.unwrap_or_else(|| root.join("target/kernels")),
                timeout: std::time::Duration::from_secs(timeout),
                append,
            },
        )?,
        Task::Lab { cmd } => lab_task(&root, cmd)?,
    }
    Ok(())
}

/// `lab-results/<what>-<unix seconds>`: a run's default directory.
fn stamped(root: &Path, what: &str) -> PathBuf {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    root.join(format!("lab-results/{what}-{t}"))
}

/// `codegen`: vmlinux.h for an architecture, or (`--check`) the programs
/// compiled against the committed one.
fn codegen_task(
    root: &Path,
    arch: Option<String>,
    btf: &Path,
    out: Option<PathBuf>,
    check: bool,
) -> Result<()> {
    let arch = arch.unwrap_or_else(|| std::env::consts::ARCH.to_string());
    if check {
        return compile_all(
            root,
            &arch,
            &root.join("bpf/vmlinux").join(&arch),
            "bpf/vmlinux",
        );
    }
    if arch != std::env::consts::ARCH && btf == Path::new("/sys/kernel/btf/vmlinux") {
        bail!(
            "--arch {arch}: this machine's BTF is {}; give --btf with the BTF of an \
             {arch} kernel (>= 6.10: copy /sys/kernel/btf/vmlinux from one)",
            std::env::consts::ARCH
        );
    }
    let dir = out.unwrap_or_else(|| root.join("bpf/vmlinux")).join(&arch);
    codegen(root, &arch, btf, &dir)
}

/// `soak`: flows, commands and daemon reloads for `minutes`; exits 1 on a
/// failure.
fn soak_task(root: &Path, minutes: f64, seed: u64, out: Option<PathBuf>) -> Result<()> {
    if !(minutes > 0.0 && minutes <= 24.0 * 60.0) {
        bail!("--minutes {minutes}: give a duration in (0, 1440]");
    }
    build_ccload(root)?;
    let out = out.unwrap_or_else(|| stamped(root, "soak"));
    let r = ccload_qa::soak::run(minutes, seed, &out)?;
    println!("{}", serde_json::to_string_pretty(&r)?);
    let bad = r.failures();
    if bad.is_empty() {
        println!("soak: PASSED ({minutes} min)");
        return Ok(());
    }
    for b in &bad {
        println!("soak: FAILED: {b}");
    }
    std::process::exit(1);
}

/// `lab ...`: the lab crate's commands.
fn lab_task(root: &Path, cmd: LabCmd) -> Result<()> {
    match cmd {
        LabCmd::List { json } => lab::list(root, json)?,
        LabCmd::Plot { dirs } => {
            for d in dirs {
                ccload_lab::stored::replot(&d)?;
            }
        }
        LabCmd::Compare { a, b, json } => print!("{}", ccload_lab::stored::compare(&a, &b, json)?),
        LabCmd::Digest { dir } => print!("{}", ccload_lab::digest::digest(&dir)?),
        LabCmd::Demo { algo, secs } => {
            build_ccload(root)?;
            ccload_lab::demo::run(root, &algo, secs, true)?;
        }
        LabCmd::Run {
            scenario,
            quick,
            out,
            dry_run,
            resume,
        } => {
            if dry_run {
                return lab::dry_run(root, &scenario, quick);
            }
            build_ccload(root)?;
            lab::run_or_resume(root, &scenario, quick, out, resume)?;
        }
        LabCmd::Check {
            scenario,
            quick,
            out,
            resume,
            all_runs,
        } => {
            build_ccload(root)?;
            if let Err(e) = lab::check(root, &scenario, quick, out, resume, all_runs) {
                eprintln!("lab check: {e:#}");
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

/// vmlinux.h for `arch` from `btf` into `dir`, then every bpf/*.bpf.c
/// compiled against it with that architecture's register layout (what
/// libbpf-cargo does in loader/build.rs), so a header that lacks what the
/// programs use (an older kernel's) fails here, not in a user's build.
fn codegen(root: &Path, arch: &str, btf: &Path, dir: &Path) -> Result<()> {
    let o = Command::new("bpftool")
        .args(["btf", "dump", "file"])
        .arg(btf)
        .args(["format", "c"])
        .output()
        .context("bpftool (apt-get install bpftool)")?;
    if !o.status.success() {
        bail!(
            "bpftool btf dump {}: {}",
            btf.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    std::fs::create_dir_all(dir)?;
    let header = dir.join("vmlinux.h");
    std::fs::write(&header, &o.stdout)?;
    println!("wrote {} ({} bytes)", header.display(), o.stdout.len());
    compile_all(root, arch, dir, &btf.display().to_string())
}

/// Every bpf/*.bpf.c compiled for `arch` against the vmlinux.h in `dir`.
fn compile_all(root: &Path, arch: &str, dir: &Path, from: &str) -> Result<()> {
    if !dir.join("vmlinux.h").is_file() {
        bail!("no {}", dir.join("vmlinux.h").display());
    }
    let target_arch = match arch {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        a => bail!("unsupported arch {a}"),
    };
    let tmp = std::env::temp_dir().join(format!("ccl-codegen-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(root.join("bpf"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    srcs.sort();
    let mut failed = Vec::new();
    for src in &srcs {
        let obj = tmp.join(src.file_name().unwrap()).with_extension("o");
        let o = Command::new("clang")
            .args([
                "-g",
                "-O2",
                "-target",
                "bpf",
                "-Wall",
                "-Werror",
                "-Wno-unused-function",
            ])
            .arg(format!("-D__TARGET_ARCH_{target_arch}"))
            .arg("-I")
            .arg(root.join("bpf"))
            .arg("-I")
            .arg(dir)
            .arg("-I")
            .arg(env!("LIBBPF_INCLUDE"))
            .arg("-c")
            .arg(src)
            .arg("-o")
            .arg(&obj)
            .output()
            .context("clang (apt-get install clang)")?;
        if o.status.success() {
            println!(
                "  {} compiles for {arch}",
                src.file_name().unwrap().to_string_lossy()
            );
        } else {
            failed.push(format!(
                "{}: {}",
                src.display(),
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    if !failed.is_empty() {
        bail!(
            "the header from {} does not build ccload's programs (a kernel older than 6.10?):\n{}",
            from,
            failed.join("\n")
        );
    }
    Ok(())
}
