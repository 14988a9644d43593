//! Host tests of the controllers' arithmetic cores: the same C headers the
//! BPF objects inline (`bpf/core/*_core.h`), compiled for the host by
//! crate ccload-intf and reached through its bindgen layouts, checked
//! against f64 models of the papers' equations.  The product crate is no
//! dependency: tunables are set from the descriptor tables (`params`).
//!
//! - `core_tests`: each core's functions, one section per controller.
//! - `ccpd_loop_tests`: ccpd's hooks in a closed loop with a packet-level
//!   model of a drop-tail bottleneck (queue, SACK, RTO, hook order).
//! - `machine_tests`: hetcp's and ctcp_plus's state machines (one core
//!   function per hook) in a closed loop with a fluid bottleneck.
//! - `params`: a params struct with tunables set by name.

#[cfg(test)]
mod ccpd_loop_tests;
#[cfg(test)]
mod core_tests;
#[cfg(test)]
mod machine_tests;
#[cfg(test)]
mod params;
