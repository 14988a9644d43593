//! The upgrade tests' fixture: ccpd's BPF object built with one tunable
//! more (CCL_FIXTURE_LAYOUT in bpf/ccload_intf.h), so that its params layout
//! differs from this build's as another release's would.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let bpf = manifest.join("../bpf");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let obj = out.join("ccpd-fixture.bpf.o");
    libbpf_cargo::SkeletonBuilder::new()
        .source(bpf.join("ccpd.bpf.c"))
        .obj(&obj)
        .clang_args([
            "-I".into(),
            bpf.clone().into_os_string(),
            "-I".into(),
            bpf.join("vmlinux").join(arch).into_os_string(),
            "-DCCL_FIXTURE_LAYOUT".into(),
            "-Wall".into(),
            "-Wno-unused-function".into(),
        ])
        .build()
        .expect("building the ccpd fixture object");
    println!("cargo:rustc-env=CCL_FIXTURE_CCPD_OBJ={}", obj.display());
    println!("cargo:rerun-if-changed={}", bpf.display());
}
