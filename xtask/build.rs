//! The libbpf headers (bpf/bpf_helpers.h, ...) that libbpf-sys installs,
//! for `cargo xtask codegen`'s compile check: the same ones loader/build.rs
//! builds the programs with (via libbpf-cargo).
fn main() {
    if let Ok(inc) = std::env::var("DEP_BPF_INCLUDE") {
        println!("cargo:rustc-env=LIBBPF_INCLUDE={inc}");
    }
}
