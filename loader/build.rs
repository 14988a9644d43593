//! Builds the BPF controllers into libbpf-rs skeletons, generates the Rust view
//! of the shared C layouts with bindgen, and compiles the controllers'
//! arithmetic cores for the host unit tests.

use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// Every controller in `bpf/`, one struct_ops each.
const ALGOS: &[&str] = &["ccpd", "hetcp", "ctcp_plus", "ub_reno"];
/// Other BPF objects: the per-cgroup sock_ops binding.
const OTHERS: &[&str] = &["cgroup"];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let bpf_dir = manifest.join("../bpf");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let vmlinux = bpf_dir.join("vmlinux").join(&arch);

    for algo in ALGOS.iter().chain(OTHERS) {
        let src = bpf_dir.join(format!("{algo}.bpf.c"));
        let skel = out.join(format!("{algo}.skel.rs"));
        let obj = out.join(format!("{algo}.bpf.o"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(&obj)
            .clang_args([
                OsStr::new("-I"),
                bpf_dir.as_os_str(),
                OsStr::new("-I"),
                vmlinux.as_os_str(),
                OsStr::new("-Wall"),
                OsStr::new("-Werror"),
                OsStr::new("-Wno-unused-function"),
            ])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    }

    bindgen::Builder::default()
        .header(bpf_dir.join("core/host_api.h").to_string_lossy())
        .allowlist_type("ccl_.*|ccpd_.*|hetcp_.*|ctcp_.*|ubl_.*")
        .allowlist_function("ccl_.*|ccpd_.*|hetcp_.*|ctcp_.*|ubl_.*")
        .allowlist_var("ccl_.*")
        .derive_default(true)
        .prepend_enum_name(false)
        .generate()
        .expect("bindgen of bpf/core/host_api.h")
        .write_to_file(out.join("intf.rs"))
        .expect("write intf.rs");

    cc::Build::new()
        .file(bpf_dir.join("core/host_core.c"))
        .include(&bpf_dir)
        .warnings(true)
        .extra_warnings(true)
        .flag_if_supported("-Wno-type-limits")
        .compile("ccload_core");

    rerun_dir(&bpf_dir);
}

fn rerun_dir(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name() != Some(OsStr::new("vmlinux")) {
                rerun_dir(&path);
            }
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
