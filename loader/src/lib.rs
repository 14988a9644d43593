//! ccload: deploy, tune and observe eBPF struct_ops TCP congestion controllers.
//!
//! The `ccload` binary is [`cli`] (clap types) + [`cmd`] (one module per
//! command).  Modules other crates use (the testbed, the lab, the tests) are
//! `pub`; the rest is `pub(crate)` so dead code is flagged.  See
//! docs/architecture.md for the crates and the data path.

pub mod agg;
pub mod algos;
pub mod bench;
pub mod bpf;
pub mod cgroup;
pub mod cgroup_rules;
pub mod cli;
pub mod cmd;
pub mod config;
pub(crate) mod diag;
pub mod doctor;
pub mod error;
pub mod layout;
pub mod leftovers;
pub(crate) mod lock;
pub mod manpage;
pub mod netlink;
pub mod output;
pub mod path_rules;
pub mod pods;
pub mod procfs;
pub mod profiles;
pub mod rollout;
pub mod sequential;
pub(crate) mod serve;
pub(crate) mod stats;
pub(crate) mod stream;
pub(crate) mod sysctl;
pub mod system;
pub(crate) mod telemetry;
pub(crate) mod top;
pub(crate) mod units;
pub mod upgrade;
pub(crate) mod watch;

#[cfg(test)]
mod agg_tests;
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
