//! Layouts and identities of what ccload pins, so that one release reads
//! what another wrote (crate::bpf::upgrade carries it into a new object).
//!
//! Every attachment records who loaded it in its `meta` entry (`struct
//! ccl_meta`): the layout identity, the object identity, the release, and
//! the C names of its params fields in order.  The meta struct only grows
//! at its end, so any release reads another's entry as the prefix they
//! share; the params are then read by field name.  Nothing here needs more
//! than CAP_BPF (a map's BTF would need CAP_SYS_ADMIN to read back).

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::bpf::algos::{Algo, Params};
use crate::error::CclError;
use crate::intf;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// This build's layout identity for `algo`: its params fields (C names, in
/// order), and the sizes of the meta, aggregate and telemetry records, the
/// number of counters and of profiles.  Two builds with the same identity
/// read each other's maps byte for byte.
pub fn layout_id(algo: Algo) -> u64 {
    let mut h = fnv1a(0xcbf2_9ce4_8422_2325, algo.name().as_bytes());
    for f in algo.fields() {
        h = fnv1a(h, f.field.as_bytes());
        h = fnv1a(h, b";");
    }
    for n in [
        algo.params_size(),
        std::mem::size_of::<intf::ccl_meta>(),
        std::mem::size_of::<intf::ccl_agg>(),
        crate::bpf::telemetry::EVENT_SIZE,
        intf::CCL_NR_STATS as usize,
        intf::CCL_NR_PROFILES as usize,
    ] {
        h = fnv1a(h, &(n as u64).to_le_bytes());
    }
    h.max(1)
}

/// Who loaded an attached controller, from its meta entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Identity {
    /// 0 = unknown (a ccload from before layout identities).
    pub layout_id: u64,
    /// 0 = unknown, or an upgrade in change.
    pub obj_id: u64,
    /// "" = unknown.
    pub version: String,
    pub upgraded_unix_s: u64,
}

impl Identity {
    /// What this build records when it loads `algo`.
    pub fn ours(algo: Algo) -> Identity {
        Identity {
            layout_id: layout_id(algo),
            obj_id: algo.obj_id(),
            version: VERSION.to_string(),
            upgraded_unix_s: 0,
        }
    }

    pub fn of(meta: &intf::ccl_meta) -> Identity {
        Identity {
            layout_id: meta.layout_id,
            obj_id: meta.obj_id,
            version: c_text(&meta.version),
            upgraded_unix_s: meta.upgraded_unix_s,
        }
    }

    /// Is the attached object the one this binary embeds?
    pub fn is_ours(&self, algo: Algo) -> bool {
        self.obj_id == algo.obj_id() && self.layout_id == layout_id(algo)
    }

    /// One line for `status`: `0.1.0, layout 1a2b3c4d, object 5e6f7a8b`.
    pub fn describe(&self) -> String {
        let v = if self.version.is_empty() {
            "a ccload without layout identities".to_string()
        } else {
            format!("ccload {}", self.version)
        };
        let hex = |x: u64| {
            if x == 0 {
                "unknown".to_string()
            } else {
                format!("{:08x}", x >> 32)
            }
        };
        format!(
            "{v}, layout {}, object {}",
            hex(self.layout_id),
            hex(self.obj_id)
        )
    }
}

/// Write `identity` into a meta record.
pub(crate) fn stamp(meta: &mut intf::ccl_meta, algo: Algo, id: &Identity) {
    set_c_text(&mut meta.params_fields, &fields_text(algo));
    meta.layout_id = id.layout_id;
    meta.obj_id = id.obj_id;
    meta.upgraded_unix_s = id.upgraded_unix_s;
    set_c_text(&mut meta.version, &id.version);
}

// ---------------------------------------------------------------------------
// Field layouts.

/// One u32 field of a params value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// Byte offset in the value.
    pub off: usize,
    pub size: usize,
}

/// `mode,kp_q10,...`: this build's params fields, as meta records them.
fn fields_text(algo: Algo) -> String {
    algo.fields()
        .iter()
        .map(|d| d.field)
        .collect::<Vec<_>>()
        .join(",")
}

/// The params fields named in order, u32 each, as a layout.
fn fields_of_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<Field> {
    names
        .enumerate()
        .map(|(i, n)| Field {
            name: n.to_string(),
            off: 4 * i,
            size: 4,
        })
        .collect()
}

/// The layout of the params an attachment holds, from its meta entry; an
/// attachment by a ccload from before meta recorded it has the fields of
/// its release, which a value of the shipped size names.
pub fn params_fields(algo: Algo, meta: &intf::ccl_meta, value_size: usize) -> Result<Vec<Field>> {
    let text = c_text(&meta.params_fields);
    if !text.is_empty() {
        let f = fields_of_names(text.split(','));
        if 4 * f.len() != value_size {
            bail!(CclError::Layout(format!(
                "{algo} params: meta names {} fields, the map holds {value_size} bytes",
                f.len()
            )));
        }
        return Ok(f);
    }
    let shipped = algo.params();
    if value_size == 4 * shipped.len() {
        return Ok(fields_of_names(shipped.iter().map(|d| d.field)));
    }
    if value_size == algo.params_size() {
        return Ok(fields_of_names(algo.fields().iter().map(|d| d.field)));
    }
    bail!(CclError::Layout(format!(
        "{algo} params: {value_size} bytes in the map, attached by a ccload that did not record \
         its layout; detach and attach it again"
    )))
}

/// A NUL-terminated C char array as text.
pub fn c_text(b: &[std::os::raw::c_char]) -> String {
    b.iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8 as char)
        .collect()
}

/// Fill a C char array with `s`, cut to leave room for the NUL, the rest 0.
pub(crate) fn set_c_text(dst: &mut [std::os::raw::c_char], s: &str) {
    dst.fill(0);
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = *b as _;
    }
}

/// A u32 member `name` of a value laid out as `fields`.
fn get_u32(bytes: &[u8], fields: &[Field], name: &str) -> Option<u32> {
    let f = fields.iter().find(|f| f.name == name && f.size == 4)?;
    let b = bytes.get(f.off..f.off + 4)?;
    Some(u32::from_ne_bytes(b.try_into().unwrap()))
}

// ---------------------------------------------------------------------------
// Reading what another release wrote.

/// The meta entry of a pinned `meta` map: the prefix this build and the
/// writer's share (fields this build has and the writer had not read 0).
pub fn decode_meta(algo: Algo, map: &MapHandle) -> Result<intf::ccl_meta> {
    let bytes = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
        .context("meta entry missing")?;
    meta_from_bytes(algo, &bytes)
}

/// [`decode_meta`] of the entry's bytes.
pub fn meta_from_bytes(algo: Algo, bytes: &[u8]) -> Result<intf::ccl_meta> {
    // The oldest meta there was: prev_default, attached_unix_s,
    // default_set, watchers.
    if bytes.len() < 32 {
        bail!(CclError::Layout(format!(
            "{algo} meta: {} bytes, not a ccload meta entry",
            bytes.len()
        )));
    }
    let mut meta = intf::ccl_meta::default();
    let n = bytes.len().min(std::mem::size_of::<intf::ccl_meta>());
    // SAFETY: ccl_meta is plain old data; n is within both.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), &mut meta as *mut _ as *mut u8, n);
    }
    // Strings copied short may have lost their NUL.
    *meta.prev_default.last_mut().unwrap() = 0;
    *meta.version.last_mut().unwrap() = 0;
    *meta.params_fields.last_mut().unwrap() = 0;
    Ok(meta)
}

/// Does an attachment hold its params in this build's layout?
pub fn params_are_ours(algo: Algo, meta: &intf::ccl_meta, value_size: usize) -> bool {
    value_size == algo.params_size()
        && (meta.layout_id == layout_id(algo) || c_text(&meta.params_fields) == fields_text(algo))
}

/// The u32 fields of a struct type in an opened object's BTF (no kernel
/// involved): for [`crate::bpf::attach_object_file`], which writes a
/// foreign object's params by name.
pub(crate) fn open_params_fields(obj: &libbpf_rs::OpenObject) -> Option<Vec<Field>> {
    use libbpf_rs::AsRawLibbpf;
    const BTF_KIND_STRUCT: u32 = 4;
    let map = obj.maps().find(|m| m.name() == "params")?;
    let raw_map = map.as_libbpf_object().as_ptr();
    // SAFETY: live libbpf objects borrowed for this call; the members
    // follow their struct's record (struct btf_member[vlen]).
    unsafe {
        let btf = libbpf_sys::bpf_object__btf(obj.as_libbpf_object().as_ptr());
        let tid = libbpf_sys::bpf_map__btf_value_type_id(raw_map);
        if btf.is_null() || tid == 0 {
            return None;
        }
        let resolved = libbpf_sys::btf__resolve_type(btf, tid);
        let t = libbpf_sys::btf__type_by_id(btf, resolved.max(0) as u32);
        if t.is_null() || ((*t).info >> 24) & 0x1f != BTF_KIND_STRUCT {
            return None;
        }
        let members = t.add(1) as *const libbpf_sys::btf_member;
        let names: Vec<String> = (0..((*t).info & 0xffff) as usize)
            .map(|i| {
                let n = libbpf_sys::btf__name_by_offset(btf, (*members.add(i)).name_off);
                std::ffi::CStr::from_ptr(n).to_string_lossy().into_owned()
            })
            .collect();
        Some(fields_of_names(names.iter().map(String::as_str)))
    }
}

/// What carrying one set of tunables across layouts did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Carried {
    /// Tunables this build has that the old object did not: their defaults.
    pub added: Vec<String>,
    /// (name, value) the old object had and this build does not.
    pub removed: Vec<(String, u32)>,
    /// (name, value) outside this build's range: reset to the default.
    pub reset: Vec<(String, u32)>,
}

/// The tunables in `bytes` (laid out as `fields`) by C field name, into
/// this build's params; what did not carry over is reported.
pub fn carry_params(algo: Algo, bytes: &[u8], fields: &[Field]) -> (Params, Carried) {
    let mut p = algo.defaults();
    let mut c = Carried::default();
    for (i, d) in algo.fields().iter().enumerate() {
        match get_u32(bytes, fields, d.field) {
            Some(v) if (d.min..=d.max).contains(&v) => p.raw[i] = v,
            Some(v) => c.reset.push((d.name.to_string(), v)),
            // A test-only field (0 unless a test wrote it) is no news.
            None if algo.params().iter().any(|s| s.field == d.field) => {
                c.added.push(d.name.to_string())
            }
            None => {}
        }
    }
    for f in fields {
        if !algo.fields().iter().any(|d| d.field == f.name) {
            let v = get_u32(bytes, fields, &f.name).unwrap_or(0);
            c.removed.push((f.name.clone(), v));
        }
    }
    (p, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout_of(algo: Algo) -> Vec<Field> {
        fields_of_names(algo.fields().iter().map(|d| d.field))
    }

    /// Tunables travel by name: a field inserted before others moves their
    /// offsets and is reported as removed; a field the old layout lacks
    /// gets its default; an out-of-range value is reset and reported.
    #[test]
    fn tunables_carry_over_by_name() {
        let a = Algo::Ccpd;
        let mut p = a.defaults();
        p.apply(&[("kp".into(), "3".into()), ("kd".into(), "250".into())])
            .unwrap();
        let mut fields = layout_of(a);
        // An older release: `extra` in second place, no `trace_ms`.
        let mut bytes = p.to_bytes();
        let trace_ms = fields.iter().position(|f| f.name == "trace_ms").unwrap();
        let trace_ms_off = fields[trace_ms].off;
        bytes.drain(trace_ms_off..trace_ms_off + 4);
        fields.remove(trace_ms);
        for f in fields.iter_mut().filter(|f| f.off > trace_ms_off) {
            f.off -= 4;
        }
        bytes.splice(4..4, 41u32.to_ne_bytes());
        for f in fields.iter_mut().skip(1) {
            if f.off >= 4 {
                f.off += 4;
            }
        }
        fields.insert(
            1,
            Field {
                name: "extra".into(),
                off: 4,
                size: 4,
            },
        );
        let (q, c) = carry_params(a, &bytes, &fields);
        assert_eq!(q.get("kp"), p.get("kp"));
        assert_eq!(q.get("kd"), Some(250));
        assert_eq!(q.get("trace_ms"), a.defaults().get("trace_ms"));
        assert_eq!(c.added, vec!["trace_ms".to_string()]);
        assert_eq!(c.removed, vec![("extra".to_string(), 41)]);
        assert!(c.reset.is_empty());

        // kd beyond its range in the old object: default, reported.
        let kd = fields.iter().find(|f| f.name == "kd_ms").unwrap().off;
        bytes[kd..kd + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        let (q, c) = carry_params(a, &bytes, &fields);
        assert_eq!(q.get("kd"), a.defaults().get("kd"));
        assert_eq!(c.reset, vec![("kd".to_string(), u32::MAX)]);
    }

    #[test]
    fn same_layout_carries_everything() {
        for a in Algo::ALL {
            let mut p = a.defaults();
            for (i, d) in a.fields().iter().enumerate() {
                p.raw[i] = d.max;
            }
            let (q, c) = carry_params(a, &p.to_bytes(), &layout_of(a));
            assert_eq!(q, p, "{a}");
            assert_eq!(c, Carried::default(), "{a}");
        }
    }

    #[test]
    fn identities_differ_per_controller_and_are_stamped_whole() {
        let ids: std::collections::BTreeSet<u64> =
            Algo::ALL.iter().map(|a| layout_id(*a)).collect();
        assert_eq!(ids.len(), Algo::ALL.len());
        let objs: std::collections::BTreeSet<u64> = Algo::ALL.iter().map(|a| a.obj_id()).collect();
        assert_eq!(objs.len(), Algo::ALL.len());
        let mut m = intf::ccl_meta::default();
        let id = Identity::ours(Algo::Hetcp);
        stamp(&mut m, Algo::Hetcp, &id);
        assert_eq!(Identity::of(&m), id);
        assert!(Identity::of(&m).is_ours(Algo::Hetcp));
        assert!(!Identity::of(&m).is_ours(Algo::Ccpd));
        assert!(!Identity::of(&intf::ccl_meta::default()).is_ours(Algo::Hetcp));
        assert!(Identity::of(&intf::ccl_meta::default())
            .describe()
            .contains("without layout identities"));
    }

    /// The meta entry of a release from before layout identities (its
    /// first four fields, 32 bytes) reads as what it says and no identity;
    /// its params are the shipped fields in order.
    #[test]
    fn an_older_meta_reads_as_its_prefix() {
        let a = Algo::Ccpd;
        let mut m = intf::ccl_meta {
            attached_unix_s: 1234,
            default_set: 1,
            ..Default::default()
        };
        set_c_text(&mut m.prev_default, "cubic");
        stamp(&mut m, a, &Identity::ours(a));
        // SAFETY: reading a plain-old-data struct as bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(&m as *const _ as *const u8, std::mem::size_of_val(&m))
        };
        let old = meta_from_bytes(a, &bytes[..32]).unwrap();
        assert_eq!((old.attached_unix_s, old.default_set), (1234, 1));
        assert_eq!(c_text(&old.prev_default), "cubic");
        assert_eq!(Identity::of(&old).layout_id, 0);
        assert!(!params_are_ours(a, &old, a.params_size()));
        let f = params_fields(a, &old, 4 * a.params().len()).unwrap();
        assert_eq!(f.len(), a.params().len());
        assert!(params_fields(a, &old, 4 * a.params().len() + 12).is_err());
        assert!(meta_from_bytes(a, &bytes[..31]).is_err());
        // This build's whole entry: ours, and the fields it names.
        let new = meta_from_bytes(a, bytes).unwrap();
        assert!(params_are_ours(a, &new, a.params_size()));
        assert_eq!(
            params_fields(a, &new, a.params_size()).unwrap().len(),
            a.fields().len()
        );
        assert!(Identity::of(&new).is_ours(a));
    }
}
