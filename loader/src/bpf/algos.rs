//! The controllers ccload knows, and their tunables.
//!
//! Names, scales, defaults and ranges of every tunable come from the X-macro
//! tables in `bpf/ccload_intf.h` (compiled into `ccl_*_param_desc` by
//! `bpf/core/host_core.c`): the CLI, config files, `tune --show` and the BPF
//! clamps all read that one table.

use std::ffi::CStr;
use std::fmt;
use std::str::FromStr;

use crate::error::CclError;
use crate::intf;

// `enum Algo`, `Algo::ALL`, `name`, `id`, `params_size`, the descriptor
// tables and `with_skel!`, generated from `CCL_ALGOS` (bpf/ccload_intf.h).
include!(concat!(env!("OUT_DIR"), "/algos_gen.rs"));

impl Algo {
    pub fn from_id(id: u32) -> Option<Algo> {
        Algo::ALL.into_iter().find(|a| a.id() == id)
    }

    /// Every field of the params struct, in layout order, from the shared
    /// descriptor table: the tunables of every build, then the test-only
    /// ones (`CCL_TEST_PARAMS` in bpf/ccload_intf.h, the last rows).  The
    /// layout is the same in every build; what differs is [`Algo::params`].
    pub fn fields(self) -> &'static [ParamDesc] {
        use std::sync::OnceLock;
        static TABLES: [OnceLock<Vec<ParamDesc>>; Algo::ALL.len()] =
            [const { OnceLock::new() }; Algo::ALL.len()];
        TABLES[self.id() as usize].get_or_init(|| {
            let raw = self.param_desc_raw();
            raw.iter().map(ParamDesc::from_c).collect()
        })
    }

    /// The tunables ccload accepts and shows: [`Algo::fields`] without the
    /// test-only rows, so an index into it is an index into
    /// [`Params::raw`].  The integration tests write the test-only rows
    /// into the params map themselves.
    pub fn params(self) -> &'static [ParamDesc] {
        let all = self.fields();
        &all[..all.len() - intf::CCL_NR_TEST_PARAMS as usize]
    }

    /// The tunables as the Markdown table of docs/<algo>.md: name, default,
    /// range, unit and meaning, from the descriptor table of
    /// bpf/ccload_intf.h (a test holds the page to it); the test-only rows
    /// are not in it.
    pub fn tunables_markdown(self) -> String {
        let mut t =
            String::from("| tunable | default | range | unit | meaning |\n|---|---|---|---|---|\n");
        for pd in self.params() {
            let unit = if pd.unit.is_empty() { "-" } else { pd.unit };
            t += &format!(
                "| `{}` | {} | {} | {unit} | {} |\n",
                pd.name,
                pd.display(pd.def),
                pd.range(),
                pd.help.replace('|', "\\|")
            );
        }
        t
    }

    /// Default tunables.
    pub fn defaults(self) -> Params {
        Params {
            algo: self,
            raw: self.fields().iter().map(|p| p.def).collect(),
        }
    }

    /// The C params struct `T` (`intf::ccl_<algo>_params`) with the defaults
    /// and `sets` applied, for the host tests of the arithmetic cores
    /// (bpf/core-tests).
    #[doc(hidden)]
    pub fn params_struct<T: Default>(self, sets: &[(&str, &str)]) -> T {
        let mut p = self.defaults();
        let sets: Vec<(String, String)> = sets
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        p.apply(&sets).expect("valid tunables");
        let mut out = T::default();
        assert_eq!(
            std::mem::size_of::<T>(),
            p.raw.len() * 4,
            "{self}: not its params struct"
        );
        // SAFETY: the params structs are C structs of u32 fields in table
        // order (CCL_PARAM_FIELD), and the size was checked just above.
        unsafe {
            std::ptr::copy_nonoverlapping(
                p.raw.as_ptr(),
                &mut out as *mut T as *mut u32,
                p.raw.len(),
            )
        };
        out
    }
}

impl fmt::Display for Algo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algo {
    type Err = CclError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algo::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| CclError::UnknownAlgo {
                name: s.to_string(),
                valid: Algo::ALL
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// One tunable: a u32 field of the params struct.
#[derive(Clone, Debug)]
pub struct ParamDesc {
    /// C field name (`kp_q10`).
    pub field: &'static str,
    /// Name users type (`kp`).
    pub name: &'static str,
    /// Stored value = user value x scale.
    pub scale: u32,
    pub def: u32,
    pub min: u32,
    pub max: u32,
    pub unit: &'static str,
    pub help: &'static str,
}

fn cstr(p: *const std::os::raw::c_char) -> &'static str {
    // SAFETY: pointers to string literals in host_core.c (static lifetime).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .expect("descriptor strings are ASCII")
}

impl ParamDesc {
    fn from_c(d: &intf::ccl_param_desc) -> ParamDesc {
        ParamDesc {
            field: cstr(d.field),
            name: cstr(d.name),
            scale: d.scale,
            def: d.def,
            min: d.min,
            max: d.max,
            unit: cstr(d.unit),
            help: cstr(d.help),
        }
    }

    /// Stored value -> user value text (`2048` -> `2` for a Q10 field).
    pub fn display(&self, raw: u32) -> String {
        if self.scale == 1 {
            raw.to_string()
        } else {
            let v = raw as f64 / self.scale as f64;
            let s = format!("{v:.4}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    }

    /// "0..16" in user units.
    pub fn range(&self) -> String {
        format!("{}..{}", self.display(self.min), self.display(self.max))
    }

    /// Parse a user value and check it against the range.
    pub fn parse(&self, algo: Algo, text: &str) -> Result<u32, CclError> {
        let bad = |why: String| CclError::BadTunable {
            algo: algo.name(),
            name: self.name.to_string(),
            value: text.to_string(),
            why,
        };
        let v: f64 = text
            .trim()
            .parse()
            .map_err(|_| bad("not a number".to_string()))?;
        if !v.is_finite() {
            return Err(bad("not a finite number".to_string()));
        }
        let raw = (v * self.scale as f64).round();
        if self.scale == 1 && v.fract() != 0.0 {
            return Err(bad(format!("must be a whole number in {}", self.range())));
        }
        if raw < self.min as f64 || raw > self.max as f64 {
            let unit = if self.unit.is_empty() {
                String::new()
            } else {
                format!(" {}", self.unit)
            };
            return Err(bad(format!("out of range {}{unit}", self.range())));
        }
        Ok(raw as u32)
    }
}

/// A full set of tunables for one algorithm (stored values, field order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub algo: Algo,
    pub raw: Vec<u32>,
}

impl Params {
    /// Decode the params struct as stored in the map.
    pub fn from_bytes(algo: Algo, bytes: &[u8]) -> Result<Params, CclError> {
        if bytes.len() != algo.params_size() || bytes.len() != 4 * algo.fields().len() {
            return Err(CclError::Layout(format!(
                "{algo} params: {} bytes in the map, {} expected",
                bytes.len(),
                algo.params_size()
            )));
        }
        let raw = bytes
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        Ok(Params { algo, raw })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        self.raw.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    pub fn get(&self, name: &str) -> Option<u32> {
        let i = self.algo.params().iter().position(|p| p.name == name)?;
        Some(self.raw[i])
    }

    /// Apply `name=value` assignments; validates all before changing any.
    pub fn apply(&mut self, sets: &[(String, String)]) -> Result<(), CclError> {
        let mut staged = self.raw.clone();
        for (name, value) in sets {
            let descs = self.algo.params();
            let found = descs.iter().position(|p| p.name == name || p.field == name);
            if found.is_none()
                && self
                    .algo
                    .fields()
                    .iter()
                    .any(|p| p.name == name || p.field == name)
            {
                return Err(CclError::TestOnlyTunable {
                    algo: self.algo.name(),
                    name: name.clone(),
                });
            }
            let i = found.ok_or_else(|| CclError::UnknownTunable {
                algo: self.algo.name(),
                name: name.clone(),
                valid: descs.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
            })?;
            staged[i] = descs[i].parse(self.algo, value)?;
        }
        self.raw = staged;
        Ok(())
    }

    /// Fields that differ from `other`, as (name, old, new) in user units.
    pub fn diff(&self, other: &Params) -> Vec<(String, String, String)> {
        self.algo
            .params()
            .iter()
            .enumerate()
            .filter(|(i, _)| self.raw[*i] != other.raw[*i])
            .map(|(i, d)| {
                (
                    d.name.to_string(),
                    d.display(self.raw[i]),
                    d.display(other.raw[i]),
                )
            })
            .collect()
    }
}

/// Parse `--set name=value`.
pub fn parse_assignment(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got `{s}`"))?;
    if k.trim().is_empty() {
        return Err(format!("expected NAME=VALUE, got `{s}`"));
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// `--algo` on the command line: clap lists the names in `--help`, in the
/// completions and in its error for an unknown one.
impl clap::ValueEnum for Algo {
    fn value_variants<'a>() -> &'a [Self] {
        &Algo::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

#[cfg(test)]
mod tests {

    /// fault_skip is a field of every controller's params (one layout in
    /// every build), last in its table, a tunable ccload refuses by name,
    /// and never in the tables the docs show.
    #[test]
    fn test_tunables_are_in_every_layout_but_never_set_by_ccload() {
        for a in Algo::ALL {
            let has = |ps: &[ParamDesc]| ps.iter().any(|d| d.name == "fault_skip");
            assert!(has(a.fields()), "{a}");
            assert_eq!(a.fields().last().map(|d| d.name), Some("fault_skip"), "{a}");
            assert_eq!(a.fields().len() * 4, a.params_size(), "{a}");
            assert!(!has(a.params()), "{a}");
            assert!(!a.tunables_markdown().contains("fault_skip"), "{a}");
            let mut p = a.defaults();
            let e = p
                .apply(&[("fault_skip".into(), "1".into())])
                .unwrap_err()
                .to_string();
            assert!(e.contains("test-only"), "{a}: {e}");
            assert_eq!(p, a.defaults(), "{a}: a refused set changed nothing");
        }
    }

    /// docs/<algo>.md shows the tunables table of bpf/ccload_intf.h between
    /// its markers, row for row.
    #[test]
    fn each_controllers_page_shows_its_tunables_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let begin = "<!-- tunables: generated from bpf/ccload_intf.h -->\n";
        let end = "<!-- end of tunables -->";
        for a in Algo::ALL {
            let path = root.join(format!("docs/{}.md", a.name()));
            let page = std::fs::read_to_string(&path).unwrap();
            let want = a.tunables_markdown();
            let at = page
                .find(begin)
                .unwrap_or_else(|| panic!("{}: no `{}`", path.display(), begin.trim()))
                + begin.len();
            let stop = page[at..].find(end).expect("the closing marker") + at;
            assert_eq!(
                page[at..stop].trim(),
                want.trim(),
                "{}: the tunables table differs from ccload_intf.h; it should read:\n{want}",
                path.display()
            );
        }
    }

    use super::*;

    #[test]
    fn tables_match_struct_layouts() {
        for a in Algo::ALL {
            assert_eq!(a.fields().len() * 4, a.params_size(), "{a}");
            for p in a.fields() {
                assert!(
                    p.min <= p.def && p.def <= p.max,
                    "{a}.{}: default out of range",
                    p.name
                );
                assert!(p.scale >= 1);
            }
        }
    }

    #[test]
    fn spec_defaults() {
        let d = Algo::Ccpd.defaults();
        assert_eq!(d.get("kp"), Some(2048));
        assert_eq!(d.get("kd"), Some(100));
        assert_eq!(d.get("mode"), Some(1));
        let u = Algo::UbReno.defaults();
        assert_eq!(u.get("alpha"), Some(66847)); // 1.02 in Q16
        assert_eq!(u.get("beta"), Some(63570)); // 0.97
        assert_eq!(u.get("a"), Some(72090)); // 1.1
        let c = Algo::CtcpPlus.defaults();
        assert_eq!(c.get("gamma"), Some(30));
        assert_eq!(c.get("alpha"), Some(128));
    }

    #[test]
    fn parse_scaled_values() {
        let mut p = Algo::Ccpd.defaults();
        p.apply(&[("kp".into(), "4".into()), ("kd".into(), "50".into())])
            .unwrap();
        assert_eq!(p.get("kp"), Some(4096));
        assert_eq!(p.get("kd"), Some(50));
        let mut u = Algo::UbReno.defaults();
        u.apply(&[("beta".into(), "0.95".into())]).unwrap();
        assert_eq!(u.get("beta"), Some(62259)); // round(0.95 * 65536)
    }

    #[test]
    fn out_of_range_changes_nothing() {
        let mut p = Algo::Ccpd.defaults();
        let before = p.clone();
        let err = p
            .apply(&[("kd".into(), "20".into()), ("kp".into(), "100".into())])
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("kp") && msg.contains("0.25..16"), "{msg}");
        assert_eq!(p, before, "a rejected batch must not apply its valid part");
    }

    #[test]
    fn unknown_names_and_garbage() {
        let mut p = Algo::Ccpd.defaults();
        let e = p
            .apply(&[("kq".into(), "1".into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown tunable `kq`") && e.contains("kp"),
            "{e}"
        );
        assert!(p.apply(&[("kd".into(), "abc".into())]).is_err());
        assert!(p.apply(&[("kd".into(), "1.5".into())]).is_err());
        assert!(p.apply(&[("kd".into(), "NaN".into())]).is_err());
        let e = "bbr2".parse::<Algo>().unwrap_err().to_string();
        assert!(e.contains("ccpd, hetcp, ctcp_plus, ub_reno"), "{e}");
    }

    #[test]
    fn bytes_roundtrip() {
        let p = Algo::Hetcp.defaults();
        let b = p.to_bytes();
        assert_eq!(Params::from_bytes(Algo::Hetcp, &b).unwrap(), p);
        assert!(Params::from_bytes(Algo::Hetcp, &b[1..]).is_err());
    }

    #[test]
    fn assignment_syntax() {
        assert_eq!(parse_assignment("kp=4").unwrap(), ("kp".into(), "4".into()));
        assert!(parse_assignment("kp").is_err());
        assert!(parse_assignment("=4").is_err());
    }
}
