//! `cargo xtask dist [--out DIR] [--bin PATH] [--no-image]`: what a fleet
//! installs, from one static build.
//!
//!   ccload-VERSION-ARCH.tar.gz   `xtask install`'s tree (prefix /usr/local,
//!                                /etc/ccload, the unit in /etc/systemd);
//!                                `tar -C / -xzf` it, then enable the unit
//!   ccload_VERSION_DEBARCH.deb   the same under /usr; installing it enables
//!                                and starts the unit (deb-systemd-helper);
//!                                /etc/ccload/config.toml is a conffile
//!   ccload-VERSION-oci.tar       an OCI image layout (umoci): the binary,
//!                                the C libraries it links, the default
//!                                config; `podman load -i`, or
//!                                `skopeo copy oci-archive:FILE docker://...`
//!
//! The build is `cargo build --release -p ccload --features static`
//! (libbpf, libelf and zlib linked in: the binary needs only glibc).
//! `--bin` packages a build made elsewhere; one that links more than glibc
//! is packaged with a warning, the image then carrying those libraries too.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::install::write;

pub struct Opts {
    pub out: PathBuf,
    pub bin: Option<PathBuf>,
    pub image: bool,
}

/// The shared libraries glibc itself is made of: a static build links
/// only these.
const GLIBC: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
];

fn out_of(cmd: &mut Command) -> Result<String> {
    let o = cmd.output().with_context(|| format!("run {cmd:?}"))?;
    if !o.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The NEEDED entries of an ELF file (readelf -d).
pub fn needed(bin: &Path) -> Result<Vec<String>> {
    let d = out_of(Command::new("readelf").arg("-d").arg(bin))?;
    Ok(d.lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next().map(str::to_string))
        .collect())
}

/// The files `ldd` resolves for `bin`: (path it is loaded from, real file).
fn libraries(bin: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
    let l = out_of(Command::new("ldd").arg(bin))?;
    let mut v = Vec::new();
    for line in l.lines() {
        let path = match line.split_once("=>") {
            Some((_, r)) => r.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        let Some(p) = path.filter(|p| p.starts_with('/')) else {
            continue; // linux-vdso
        };
        let p = PathBuf::from(p);
        let real = std::fs::canonicalize(&p).with_context(|| format!("{}", p.display()))?;
        v.push((p, real));
    }
    Ok(v)
}

fn version(root: &Path) -> Result<String> {
    let t: toml::Value = toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml"))?)?;
    t["workspace"]["package"]["version"]
        .as_str()
        .map(str::to_string)
        .context("workspace.package.version")
}

fn build(root: &Path) -> Result<PathBuf> {
    let arch = out_of(Command::new("gcc").arg("-print-multiarch"))?;
    crate::run(
        crate::cargo(root)
            .env(
                "LIBBPF_SYS_LIBRARY_PATH",
                format!("/usr/lib/{}", arch.trim()),
            )
            .args([
                "build",
                "--release",
                "--locked",
                "-p",
                "ccload",
                "--features",
                "static",
            ]),
    )?;
    Ok(root.join("target/release/ccload"))
}

/// An archive of `dir`'s `what`, owned by root, in name order.
fn archive(file: &Path, flags: &str, dir: &Path, what: &[&str]) -> Result<()> {
    crate::run(
        Command::new("tar")
            .args([
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "--sort=name",
                flags,
            ])
            .arg(file)
            .arg("-C")
            .arg(dir)
            .args(what),
    )
}

/// Disk usage of a tree, KiB (the control file's Installed-Size).
fn kib(dir: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                n += kib(&p);
            } else if let Ok(m) = p.metadata() {
                n += m.len().div_ceil(1024);
            }
        }
    }
    n
}

/// The maintainer scripts: what debhelper's systemd addon writes for a
/// unit enabled and started on install, stopped on removal.
pub const POSTINST: &str = "#!/bin/sh
set -e
if [ \"$1\" = configure ] || [ \"$1\" = abort-upgrade ] || [ \"$1\" = abort-deconfigure ] || [ \"$1\" = abort-remove ]; then
    deb-systemd-helper unmask ccload.service >/dev/null || true
    deb-systemd-helper enable ccload.service >/dev/null || true
    # (DPKG_ROOT: installed into another root; the running system is not its)
    if [ -z \"${DPKG_ROOT:-}\" ] && [ -d /run/systemd/system ]; then
        systemctl --system daemon-reload >/dev/null || true
        # A kernel without BTF or struct_ops fails the start: the package
        # stays installed, `ccload doctor` says what is missing.
        deb-systemd-invoke restart ccload.service >/dev/null || true
    fi
fi
";
pub const PRERM: &str = "#!/bin/sh
set -e
if [ -z \"${DPKG_ROOT:-}\" ] && [ -d /run/systemd/system ] && [ \"$1\" = remove ]; then
    deb-systemd-invoke stop ccload.service >/dev/null || true
fi
";
pub const POSTRM: &str = "#!/bin/sh
set -e
if [ -z \"${DPKG_ROOT:-}\" ] && [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi
if [ \"$1\" = remove ]; then
    deb-systemd-helper mask ccload.service >/dev/null || true
fi
if [ \"$1\" = purge ]; then
    deb-systemd-helper purge ccload.service >/dev/null || true
    deb-systemd-helper unmask ccload.service >/dev/null || true
    rm -rf \"${DPKG_ROOT:-}/run/ccload\"
fi
";

/// `xtask install`'s tree for `prefix`, under `tree`.
fn staged(root: &Path, bin: &Path, tree: &Path, prefix: &str) -> Result<()> {
    crate::install::run(
        root,
        &crate::install::Opts {
            destdir: Some(tree.to_path_buf()),
            prefix: PathBuf::from(prefix),
            bin: Some(bin.to_path_buf()),
        },
    )
}

fn deb(root: &Path, bin: &Path, ver: &str, stage: &Path, out: &Path) -> Result<PathBuf> {
    let tree = stage.join("deb");
    staged(root, bin, &tree, "/usr")?;
    let arch = out_of(Command::new("dpkg").arg("--print-architecture"))?;
    let arch = arch.trim();
    let ctl = tree.join("DEBIAN");
    let size = kib(&tree);
    let control = format!(
        "Package: ccload\nVersion: {ver}\nArchitecture: {arch}\n\
             Maintainer: ccload developers <ccload@localhost>\n\
             Depends: libc6 (>= 2.34), init-system-helpers (>= 1.54)\n\
             Section: net\nPriority: optional\nInstalled-Size: {size}\n\
             Description: TCP congestion controllers as eBPF struct_ops, and their tool\n \
             Four research TCP congestion controllers (CCPD, HE-TCP, Compound TCP+,\n \
             Reno for under-buffered links) as eBPF struct_ops, and the ccload tool\n \
             that attaches, tunes, observes and rolls them out per cgroup. The\n \
             ccload service applies /etc/ccload/config.toml.\n"
    );
    write(&ctl.join("control"), control.as_bytes(), 0o644)?;
    write(
        &ctl.join("conffiles"),
        "/etc/ccload/config.toml\n".as_bytes(),
        0o644,
    )?;
    write(&ctl.join("postinst"), POSTINST.as_bytes(), 0o755)?;
    write(&ctl.join("prerm"), PRERM.as_bytes(), 0o755)?;
    write(&ctl.join("postrm"), POSTRM.as_bytes(), 0o755)?;
    let deb = out.join(format!("ccload_{ver}_{arch}.deb"));
    crate::run(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zgzip", "--build"])
            .arg(&tree)
            .arg(&deb),
    )?;
    Ok(deb)
}

fn tarball(root: &Path, bin: &Path, ver: &str, stage: &Path, out: &Path) -> Result<PathBuf> {
    let tree = stage.join("tar");
    staged(root, bin, &tree, "/usr/local")?;
    let arch = std::env::consts::ARCH;
    let tgz = out.join(format!("ccload-{ver}-{arch}.tar.gz"));
    archive(&tgz, "-czf", &tree, &["etc", "usr"])?;
    Ok(tgz)
}

/// The image: an OCI layout made with umoci, archived.
fn image(root: &Path, bin: &Path, ver: &str, stage: &Path, out: &Path) -> Result<PathBuf> {
    let layout = stage.join("oci");
    let bundle = stage.join("bundle");
    let img = format!("{}:{ver}", layout.display());
    let umoci = |args: &[&str]| -> Result<()> {
        crate::run(Command::new("umoci").args(args))
            .context("umoci (Debian's umoci; scripts/setup.sh installs it)")
    };
    umoci(&["init", "--layout", layout.to_str().context("path")?])?;
    umoci(&["new", "--image", &img])?;
    let mut unpack = vec!["unpack"];
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        unpack.push("--rootless");
    }
    unpack.extend(["--image", &img, bundle.to_str().context("path")?]);
    umoci(&unpack)?;
    let rootfs = bundle.join("rootfs");
    let put = |from: &Path, to: &Path, mode: u32| -> Result<()> {
        let dst = rootfs.join(to.strip_prefix("/").unwrap_or(to));
        std::fs::create_dir_all(dst.parent().unwrap())?;
        std::fs::copy(from, &dst)
            .with_context(|| format!("{} -> {}", from.display(), dst.display()))?;
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    put(bin, Path::new("/usr/local/bin/ccload"), 0o755)?;
    put(
        &root.join("configs/default.toml"),
        Path::new("/etc/ccload/config.toml"),
        0o600,
    )?;
    for (at, real) in libraries(bin)? {
        put(&real, &at, 0o755)?;
    }
    std::fs::create_dir_all(rootfs.join("run/ccload"))?;
    std::fs::create_dir_all(rootfs.join("tmp"))?;
    umoci(&["repack", "--image", &img, bundle.to_str().context("path")?])?;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    };
    let version_label = format!("org.opencontainers.image.version={ver}");
    umoci(&[
        "config",
        "--image",
        &img,
        "--os",
        "linux",
        "--architecture",
        arch,
        "--config.user",
        "0",
        "--config.entrypoint",
        "/usr/local/bin/ccload",
        "--config.cmd",
        "serve",
        "--config.cmd",
        "--config",
        "--config.cmd",
        "/etc/ccload/config.toml",
        "--config.label",
        "org.opencontainers.image.title=ccload",
        "--config.label",
        &version_label,
    ])?;
    umoci(&["gc", "--layout", layout.to_str().context("path")?])?;
    let tar = out.join(format!("ccload-{ver}-oci.tar"));
    archive(&tar, "-cf", &layout, &["."])?;
    Ok(tar)
}

pub fn run(root: &Path, o: &Opts) -> Result<Vec<PathBuf>> {
    let bin = match &o.bin {
        Some(b) if b.is_file() => std::fs::canonicalize(b)?,
        Some(b) => bail!("--bin {}: no such file", b.display()),
        None => build(root)?,
    };
    let extra: Vec<String> = needed(&bin)?
        .into_iter()
        .filter(|n| !GLIBC.contains(&n.as_str()) && !n.starts_with("ld-linux"))
        .collect();
    if !extra.is_empty() {
        if o.bin.is_none() {
            bail!("the static build links {extra:?}: only glibc was expected");
        }
        eprintln!(
            "warning: {} links {extra:?} besides glibc (not the `static` build); \
             the .deb and the tarball need them on the host",
            bin.display()
        );
    }
    let ver = version(root)?;
    std::fs::create_dir_all(&o.out)?;
    let stage = o.out.join(".stage");
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage)?;
    // The release profile keeps debug info (profiling): the packages
    // carry the binary without it (symbols stay, for backtraces).
    let packed = stage.join("ccload");
    std::fs::copy(&bin, &packed)?;
    crate::run(Command::new("strip").arg("--strip-debug").arg(&packed))?;
    let bin = packed;
    let mut made = vec![
        tarball(root, &bin, &ver, &stage, &o.out)?,
        deb(root, &bin, &ver, &stage, &o.out)?,
    ];
    if o.image {
        made.push(image(root, &bin, &ver, &stage, &o.out)?);
    }
    std::fs::remove_dir_all(&stage)?;
    for m in &made {
        println!("{}", m.display());
    }
    Ok(made)
}
