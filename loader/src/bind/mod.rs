//! Bindings and their config: which controller and profile each cgroup,
//! path and pod gets (cgroup, cgroup_rules, path_rules, pods, profiles),
//! the config files that say so (config), the per-cgroup aggregates the
//! rollouts judge (agg, sequential, rollout), and the repair of what a
//! killed command left half-built (leftovers).  Above bpf/, below the
//! daemon and the commands.

pub mod agg;
#[cfg(test)]
mod agg_tests;
pub mod cgroup;
pub mod cgroup_rules;
pub mod config;
pub mod leftovers;
pub mod path_rules;
pub mod pods;
pub mod profiles;
pub mod rollout;
pub mod sequential;
