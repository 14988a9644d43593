//! A controller's params struct with some tunables set, by the names users
//! type, from the descriptor tables host_core.c emits (the same tables
//! ccload validates `--set` against): each field's default, scale and range.

use ccload_intf as intf;

/// The four controllers, as far as their host tests need them.
#[derive(Clone, Copy, Debug)]
pub enum Algo {
    Ccpd,
    Hetcp,
    CtcpPlus,
    UbReno,
}

impl Algo {
    fn descs(self) -> &'static [intf::ccl_param_desc] {
        // SAFETY: immutable C arrays (host_core.c) and their lengths.
        unsafe {
            let (table, n) = match self {
                Algo::Ccpd => (
                    intf::ccl_ccpd_param_desc.as_ptr(),
                    intf::ccl_ccpd_param_count,
                ),
                Algo::Hetcp => (
                    intf::ccl_hetcp_param_desc.as_ptr(),
                    intf::ccl_hetcp_param_count,
                ),
                Algo::CtcpPlus => (
                    intf::ccl_ctcp_plus_param_desc.as_ptr(),
                    intf::ccl_ctcp_plus_param_count,
                ),
                Algo::UbReno => (
                    intf::ccl_ub_reno_param_desc.as_ptr(),
                    intf::ccl_ub_reno_param_count,
                ),
            };
            std::slice::from_raw_parts(table, n as usize)
        }
    }

    /// The params struct `T` (`intf::ccl_<algo>_params`) with its defaults
    /// and `sets` (name, value) applied as `--set name=value` stores them:
    /// round(value x scale), within the field's range.  Panics on a name
    /// the controller does not have or a value out of range.
    pub fn params_struct<T: Default>(self, sets: &[(&str, &str)]) -> T {
        let descs = self.descs();
        let cstr = |p: *const std::os::raw::c_char| {
            // SAFETY: NUL-terminated C strings (host_core.c).
            unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy()
        };
        let mut raw: Vec<u32> = descs.iter().map(|d| d.def).collect();
        for (name, value) in sets {
            let i = descs
                .iter()
                .position(|d| cstr(d.name) == *name)
                .unwrap_or_else(|| panic!("{self:?} has no tunable {name}"));
            let d = &descs[i];
            let v: f64 = value
                .parse()
                .unwrap_or_else(|e| panic!("{name}={value}: {e}"));
            let stored = (v * d.scale as f64).round();
            assert!(
                stored >= d.min as f64 && stored <= d.max as f64,
                "{name}={value}: out of range"
            );
            raw[i] = stored as u32;
        }
        assert_eq!(
            std::mem::size_of::<T>(),
            raw.len() * 4,
            "{self:?}: not its params struct"
        );
        let mut out = T::default();
        // SAFETY: the params structs are C structs of u32 fields in table
        // order (CCL_PARAM_FIELD), and the size was checked just above.
        unsafe {
            std::ptr::copy_nonoverlapping(raw.as_ptr(), &mut out as *mut T as *mut u32, raw.len())
        };
        out
    }
}
