//! The Rust view of the shared C layouts (bindgen of bpf/core/host_api.h)
//! and the controllers' arithmetic cores compiled for the host
//! (bpf/core/host_core.c): what ccload reads the BPF maps with, and what
//! the cores' host tests call.

use std::env;
use std::path::{Path, PathBuf};

include!("../build_rows.rs");

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let bpf_dir = manifest.join("..");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let rows = algos_of(&bpf_dir.join("ccload_intf.h"));

    // The cores' types and functions carry their row's `tel` prefix
    // (docs/architecture.md, "Names").
    let prefixes: String = std::iter::once("ccl_.*".to_string())
        .chain(rows.iter().map(|r| format!("{}_.*", r.tel)))
        .collect::<Vec<_>>()
        .join("|");
    bindgen::Builder::default()
        .header(bpf_dir.join("core/host_api.h").to_string_lossy())
        .allowlist_type(&prefixes)
        .allowlist_function(&prefixes)
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
