//! The layouts of bpf/ccload_intf.h and the controllers' arithmetic cores
//! (bpf/core/*_core.h), compiled for the host and seen through bindgen:
//! ccload reads and writes the BPF maps with these types (`ccload::intf`
//! re-exports this crate), and bpf/core-tests calls the cores' functions.

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/intf.rs"));
