//! The host around the kernel's BPF: the sysctls, mounts and kernel
//! version ccload reads (system, sysctl), /proc (procfs), netlink and the
//! sockets it lists (netlink, diag), and ccload's own state lock (lock).
//! Below every other layer: nothing here uses the rest of the crate.

pub(crate) mod diag;
pub(crate) mod lock;
pub mod netlink;
pub mod procfs;
pub(crate) mod sysctl;
pub mod system;
