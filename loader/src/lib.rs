//! ccload: deploy, tune and observe eBPF struct_ops TCP congestion controllers.
//!
//! The modules are grouped by layer, each using only those below it
//! (tests/tests/module_graph.rs checks that no two reach each other):
//!
//! - [`host`]: sysctls, mounts, /proc, netlink, the state lock;
//! - [`bpf`]: the controllers' objects and maps: loading, attaching,
//!   tunables, layouts, telemetry, in-place upgrades;
//! - [`bind`]: bindings (cgroups, paths, pods, profiles), the config, the
//!   aggregates and rollouts;
//! - `serve`: the daemon;
//! - [`cli`]: the command line (clap types in [`cli::args`], one module per
//!   command in [`cli::cmd`]) and the views.
//!
//! [`error`] and `units` are leaves every layer uses.  Modules other crates
//! use (the testbed, the lab, the tests) are `pub`; the rest is
//! `pub(crate)` so dead code is flagged.  See docs/architecture.md for the
//! crates and the data path.

pub mod bind;
pub mod bpf;
pub mod cli;
pub mod error;
pub mod host;
pub(crate) mod serve;
pub(crate) mod units;

#[cfg(test)]
mod fuzz_tests;

/// The layouts of bpf/ccload_intf.h and the arithmetic cores (bindgen, in
/// crate ccload-intf).
pub use ccload_intf as intf;

/// libbpf-cargo skeletons: one per `CCL_ALGOS` row, and the cgroup binding.
pub(crate) mod skel {
    #![allow(clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/skel_gen.rs"));
}
