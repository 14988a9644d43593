//! Kernel side: load a controller's skeleton, register it as struct_ops, pin it
//! so it outlives ccload, and read/write its pinned maps.
//!
//! Layout under bpffs, one directory per attached algorithm:
//!
//! ```text
//! /sys/fs/bpf/ccload/<algo>/link     struct_ops link (keeps the CC registered)
//!                          /params   ARRAY[CCL_NR_PROFILES] of struct ccl_<algo>_params
//!                          /stats    PERCPU_ARRAY[CCL_NR_STATS] of u64
//!                          /events   RINGBUF of struct ccl_event
//!                          /meta     ARRAY[1] of struct ccl_meta
//!                          /agg      PERCPU_ARRAY[CCL_NR_PROFILES] of struct ccl_agg
//! ```
//!
//! kernel.rs: what the running kernel supports, and root; log.rs: libbpf's
//! log and load errors in ccload's words; load.rs: loading and registering;
//! attach.rs: attach and detach; maps.rs: the pinned maps.  Beside them:
//! the controllers and their tunables (algos), the maps' layouts (layout),
//! telemetry records and the ring's consumer (telemetry, stream), the
//! counters (stats), in-place upgrades (upgrade) and the synthetic
//! producer of `cargo xtask bench` (bench).

use std::mem::MaybeUninit;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, MapType, Object, OpenObject, PrintLevel};

use crate::bpf::algos::{Algo, Params};
use crate::error::CclError;
use crate::host::sysctl;
use crate::intf;

pub mod algos;
mod attach;
pub mod bench;
mod kernel;
pub mod layout;
mod load;
mod log;
mod maps;
pub(crate) mod stats;
pub(crate) mod stream;
pub(crate) mod telemetry;
pub mod upgrade;
pub use attach::*;
pub use kernel::*;
pub use load::*;
pub(crate) use log::*;
pub use maps::*;

/// Proof that what a killed ccload left under the pin root is gone
/// (`leftovers::sweep`, with the state lock held): a leftover `tmp-*` link
/// still registers its controller's name.
pub struct Swept(());

/// What pins takes the sweep to run once its input is checked (bad input
/// changes nothing): `&crate::bind::leftovers::sweep`.
pub type Sweep<'a> = &'a dyn Fn() -> Result<Swept>;

impl Swept {
    /// Only for `leftovers::sweep`, after it removed the leftovers.
    pub(crate) fn after_sweep() -> Swept {
        Swept(())
    }
}

/// Where ccload pins its objects.
pub const PIN_ROOT: &str = "/sys/fs/bpf/ccload";

/// The maps every controller object has (see bpf/ccload_maps.bpf.h).
pub const MAPS: [&str; 5] = ["params", "stats", "events", "meta", "agg"];

/// The lock file a `watch` (or the daemon) holds while it consumes
/// `algo`'s ring buffer; it holds the consumer's pid.
pub fn watch_lock_path(algo: &str) -> PathBuf {
    Path::new(crate::host::lock::RUN_DIR).join(format!("watch-{algo}.lock"))
}

pub fn pin_dir(algo: Algo) -> PathBuf {
    Path::new(PIN_ROOT).join(algo.name())
}

pub fn link_pin(algo: Algo) -> PathBuf {
    pin_dir(algo).join("link")
}

pub fn map_pin(algo: Algo, map: &str) -> PathBuf {
    pin_dir(algo).join(map)
}

/// Where a controller registered without a struct_ops link (kernels
/// before 6.4) pins its struct_ops map: the registered map holds the
/// registration (the kernel keeps a reference until the map's element is
/// deleted), the pin is how `detach` and `status` find it.
pub fn reg_map_pin(algo: Algo) -> PathBuf {
    pin_dir(algo).join("struct_ops")
}

/// Is `algo` attached by ccload (its link, or its registered struct_ops
/// map, pinned)?
pub fn is_attached(algo: Algo) -> bool {
    link_pin(algo).exists() || reg_map_pin(algo).exists()
}

/// What keeps an attached controller registered after ccload exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// A pinned struct_ops link (Linux >= 6.4): `attach --replace` swaps
    /// the object under it atomically.
    Link,
    /// The registered struct_ops map, pinned (kernels without struct_ops
    /// links).
    Map,
}

impl Holder {
    pub fn describe(self) -> &'static str {
        match self {
            Holder::Link => "a pinned struct_ops link",
            Holder::Map => "its pinned struct_ops map (this kernel has no struct_ops links)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_cong_control_picks_the_struct_ops_map() {
        let both: Vec<String> = vec!["ccpd".into(), "ccpd_sk_rs".into()];
        assert_eq!(chosen_ops_map(&both, false).unwrap(), "ccpd");
        assert_eq!(chosen_ops_map(&both, true).unwrap(), "ccpd_sk_rs");
        // an object with one map gets it on every kernel
        let one: Vec<String> = vec!["hetcp".into()];
        assert_eq!(chosen_ops_map(&one, true).unwrap(), "hetcp");
        assert_eq!(chosen_ops_map(&one, false).unwrap(), "hetcp");
        assert!(chosen_ops_map(&[], false).is_none());
    }

    #[test]
    fn per_cpu_sums_reject_short_values() {
        let ok = vec![5u64.to_ne_bytes().to_vec(), 7u64.to_ne_bytes().to_vec()];
        assert_eq!(sum_percpu_u64(&ok).unwrap(), 12);
        let short = vec![vec![1u8, 2, 3, 4]];
        let e = sum_percpu_u64(&short).unwrap_err().to_string();
        assert!(e.contains("4 bytes"), "{e}");
    }

    #[test]
    fn skeleton_and_bindgen_agree_on_layouts() {
        use crate::skel::ccpd::types as sk;
        assert_eq!(
            std::mem::size_of::<sk::ccl_ccpd_params>(),
            std::mem::size_of::<intf::ccl_ccpd_params>()
        );
        assert_eq!(
            std::mem::size_of::<sk::ccl_meta>(),
            std::mem::size_of::<intf::ccl_meta>()
        );
    }

    #[test]
    fn needed_capabilities_are_read_from_capeff() {
        let st = |eff: u64| format!("Name:\tx\nCapEff:\t{eff:016x}\n");
        assert!(missing_caps(&st(u64::MAX)).is_empty());
        assert!(
            missing_caps(&st(1 << 21)).is_empty(),
            "CAP_SYS_ADMIN covers all"
        );
        assert_eq!(
            missing_caps(&st((1 << 39) | (1 << 12))),
            vec!["CAP_PERFMON"]
        );
        assert_eq!(missing_caps(&st(0)).len(), 3);
        assert!(missing_caps("no such line").is_empty());
    }

    #[test]
    fn pin_layout() {
        assert_eq!(
            link_pin(Algo::Ccpd),
            Path::new("/sys/fs/bpf/ccload/ccpd/link")
        );
        assert_eq!(
            map_pin(Algo::UbReno, "params"),
            Path::new("/sys/fs/bpf/ccload/ub_reno/params")
        );
    }
}
