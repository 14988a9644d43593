//! `cargo xtask install [--destdir D] [--prefix P] [--bin PATH]`: the
//! binary, the systemd unit, shell completions, man pages, the README and
//! example configs, where the unit and the shells look for them.
//!
//! Layout (prefix /usr/local, the default):
//!   P/bin/ccload
//!   /etc/systemd/system/ccload.service   (P = /usr: /usr/lib/systemd/system)
//!   /etc/ccload/config.toml              (configs/default.toml, only if absent)
//!   P/share/man/man8/ccload.8, ccload-COMMAND.8, man5/ccload.toml.5
//!   P/share/bash-completion/completions/ccload
//!   P/share/zsh/site-functions/_ccload
//!   P/share/fish/vendor_completions.d/ccload.fish
//!   P/share/doc/ccload/{README.md,docs/*.md,examples/*.toml}
//! The unit's paths are rewritten for the prefix.  Everything is put under
//! D when given (packaging, tests), as `make install DESTDIR=` does.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

pub struct Opts {
    pub destdir: Option<PathBuf>,
    pub prefix: PathBuf,
    /// A built ccload to install instead of a fresh release build.
    pub bin: Option<PathBuf>,
}

/// `dest` + an absolute path.
fn under(dest: &Path, abs: &Path) -> PathBuf {
    dest.join(abs.strip_prefix("/").unwrap_or(abs))
}

fn put(src: &Path, dst: &Path, mode: u32) -> Result<()> {
    if let Some(d) = dst.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    std::fs::copy(src, dst)
        .with_context(|| format!("copy {} -> {}", src.display(), dst.display()))?;
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode))?;
    println!("  {}", dst.display());
    Ok(())
}

pub(crate) fn write(dst: &Path, data: &[u8], mode: u32) -> Result<()> {
    if let Some(d) = dst.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    std::fs::write(dst, data).with_context(|| format!("write {}", dst.display()))?;
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode))?;
    println!("  {}", dst.display());
    Ok(())
}

fn output_of(bin: &Path, args: &[&str]) -> Result<Vec<u8>> {
    let o = Command::new(bin)
        .args(args)
        .output()
        .with_context(|| format!("run {}", bin.display()))?;
    if !o.status.success() {
        bail!(
            "{} {args:?}: {}",
            bin.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(o.stdout)
}

/// The unit with its paths moved to `prefix`.
pub fn unit_for(template: &str, prefix: &Path) -> String {
    let p = prefix.display().to_string();
    template
        .replace("/usr/local/bin/ccload", &format!("{p}/bin/ccload"))
        .replace(
            "file:///usr/local/share/doc/ccload/",
            &format!("file://{p}/share/doc/ccload/"),
        )
}

pub fn run(root: &Path, o: &Opts) -> Result<()> {
    if !o.prefix.is_absolute() {
        bail!("--prefix {}: must be an absolute path", o.prefix.display());
    }
    let bin = match &o.bin {
        Some(b) if b.is_file() => b.clone(),
        Some(b) => bail!("--bin {}: no such file", b.display()),
        None => {
            crate::run(crate::cargo(root).args([
                "build",
                "--release",
                "--locked",
                "-q",
                "-p",
                "ccload",
            ]))?;
            root.join("target/release/ccload")
        }
    };
    let dest = o.destdir.clone().unwrap_or_else(|| PathBuf::from("/"));
    let p = under(&dest, &o.prefix);
    println!("installing into {}", dest.display());
    put(&bin, &p.join("bin/ccload"), 0o755)?;

    let unit_dir = if o.prefix == Path::new("/usr") {
        "/usr/lib/systemd/system"
    } else {
        "/etc/systemd/system"
    };
    let unit = std::fs::read_to_string(root.join("deploy/ccload.service"))?;
    write(
        &under(&dest, Path::new(unit_dir)).join("ccload.service"),
        unit_for(&unit, &o.prefix).as_bytes(),
        0o644,
    )?;
    let cfg = under(&dest, Path::new("/etc/ccload/config.toml"));
    if cfg.exists() {
        println!("  {} exists; kept", cfg.display());
    } else {
        put(&root.join("configs/default.toml"), &cfg, 0o600)?;
    }

    let man = p.join("share/man");
    std::fs::create_dir_all(&man)?;
    let pages = output_of(
        &bin,
        &["man", "--dir", man.to_str().context("non-UTF-8 path")?],
    )?;
    println!(
        "  {} man pages in {}",
        String::from_utf8_lossy(&pages).lines().count(),
        man.display()
    );

    for (shell, path) in [
        ("bash", "share/bash-completion/completions/ccload"),
        ("zsh", "share/zsh/site-functions/_ccload"),
        ("fish", "share/fish/vendor_completions.d/ccload.fish"),
    ] {
        write(
            &p.join(path),
            &output_of(&bin, &["completions", shell])?,
            0o644,
        )?;
    }

    let doc = p.join("share/doc/ccload");
    put(&root.join("README.md"), &doc.join("README.md"), 0o644)?;
    for dir in ["docs", "configs"] {
        let sub = if dir == "configs" { "examples" } else { "docs" };
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.is_file())
            .collect();
        files.sort();
        for f in files {
            put(&f, &doc.join(sub).join(f.file_name().unwrap()), 0o644)?;
        }
    }
    println!(
        "done; as root: systemctl daemon-reload && systemctl enable --now ccload \
         (edit /etc/ccload/config.toml first)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_paths_follow_the_prefix() {
        let t = "ExecStart=/usr/local/bin/ccload serve\nDocumentation=man:ccload(8) file:///usr/local/share/doc/ccload/README.md\n";
        let u = unit_for(t, Path::new("/usr"));
        assert!(u.contains("ExecStart=/usr/bin/ccload serve"), "{u}");
        assert!(u.contains("file:///usr/share/doc/ccload/README.md"), "{u}");
        assert_eq!(unit_for(t, Path::new("/usr/local")), t);
    }
}
