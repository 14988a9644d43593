//! ccload: deploy, tune and observe eBPF struct_ops TCP congestion controllers.

pub mod algos;
pub mod bpf;
pub mod cgroup;
pub mod cli;
pub mod config;
pub mod diag;
pub mod doctor;
pub mod error;
pub mod netlink;
pub mod serve;
pub mod stats;
pub mod sysctl;
pub mod telemetry;
pub mod watch;

#[cfg(test)]
mod ccpd_loop_tests;
#[cfg(test)]
mod core_tests;

/// The layouts of bpf/ccload_intf.h and the arithmetic cores (bindgen).
pub mod intf {
    #![allow(
        non_camel_case_types,
        non_upper_case_globals,
        non_snake_case,
        dead_code
    )]
    #![allow(clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/intf.rs"));
}

/// libbpf-cargo skeletons of the controllers.
pub mod skel {
    #![allow(clippy::all)]
    pub mod ccpd {
        include!(concat!(env!("OUT_DIR"), "/ccpd.skel.rs"));
    }
    pub mod hetcp {
        include!(concat!(env!("OUT_DIR"), "/hetcp.skel.rs"));
    }
    pub mod ctcp_plus {
        include!(concat!(env!("OUT_DIR"), "/ctcp_plus.skel.rs"));
    }
    pub mod ub_reno {
        include!(concat!(env!("OUT_DIR"), "/ub_reno.skel.rs"));
    }
    pub mod cgroup {
        include!(concat!(env!("OUT_DIR"), "/cgroup.skel.rs"));
    }
}
