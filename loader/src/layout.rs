//! Layouts and identities of what ccload pins: which release loaded an
//! attached controller, and each pinned map's value layout, read from the
//! BTF the kernel keeps for it, so that one release reads what another
//! wrote by field name (crate::upgrade carries it into a new object).
//!
//! Every attachment records who loaded it (`struct ccl_meta`: the layout
//! identity, the object identity, the release).

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::algos::{Algo, Params};
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
        crate::telemetry::EVENT_SIZE,
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
            version: meta
                .version
                .iter()
                .take_while(|c| **c != 0)
                .map(|c| *c as u8 as char)
                .collect(),
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
pub(crate) fn stamp(meta: &mut intf::ccl_meta, id: &Identity) {
    meta.layout_id = id.layout_id;
    meta.obj_id = id.obj_id;
    meta.upgraded_unix_s = id.upgraded_unix_s;
    meta.version = [0; intf::CCL_VERSION_MAX as usize];
    let n = id.version.len().min(meta.version.len() - 1);
    for (d, s) in meta.version.iter_mut().zip(&id.version.as_bytes()[..n]) {
        *d = *s as _;
    }
}

// ---------------------------------------------------------------------------
// Map value layouts from BTF.

/// One member of a map's value struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// Byte offset in the value.
    pub off: usize,
    pub size: usize,
}

/// What a map holds, as its BTF describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapLayout {
    pub value_size: u32,
    pub max_entries: u32,
    /// The value struct's members; empty for a value that is not a struct
    /// (a counter) or a map without a value (a ring buffer).
    pub fields: Vec<Field>,
}

/// libbpf's btf handle of a kernel BTF object, freed on drop.
struct KernelBtf(*mut libbpf_sys::btf);

impl Drop for KernelBtf {
    fn drop(&mut self) {
        // SAFETY: a btf that btf__load_from_kernel_by_id returned.
        unsafe { libbpf_sys::btf__free(self.0) }
    }
}

const BTF_KIND_STRUCT: u32 = 4;

/// The members of struct type `tid` (after typedefs and modifiers), or
/// none when it is not a struct.
///
/// # Safety
/// `btf` is a live libbpf btf handle.
unsafe fn struct_fields(btf: *const libbpf_sys::btf, tid: u32) -> Vec<Field> {
    let resolved = libbpf_sys::btf__resolve_type(btf, tid);
    if resolved <= 0 {
        return Vec::new();
    }
    let t = libbpf_sys::btf__type_by_id(btf, resolved as u32);
    if t.is_null() {
        return Vec::new();
    }
    let info = (*t).info;
    if (info >> 24) & 0x1f != BTF_KIND_STRUCT {
        return Vec::new();
    }
    let kflag = info >> 31 != 0;
    let vlen = (info & 0xffff) as usize;
    // The members follow the type record (struct btf_member[vlen]).
    let members = t.add(1) as *const libbpf_sys::btf_member;
    (0..vlen)
        .map(|i| {
            let m = &*members.add(i);
            let name = libbpf_sys::btf__name_by_offset(btf, m.name_off);
            let name = if name.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            };
            let bits = if kflag {
                m.offset & 0xff_ffff
            } else {
                m.offset
            };
            Field {
                name,
                off: (bits / 8) as usize,
                size: libbpf_sys::btf__resolve_size(btf, m.type_).max(0) as usize,
            }
        })
        .collect()
}

/// The layout of a loaded (pinned) map, read from the kernel.
pub fn pinned_layout(map: &MapHandle) -> Result<MapLayout> {
    let info = map.info()?.info;
    let mut fields = Vec::new();
    if info.btf_id != 0 && info.btf_value_type_id != 0 {
        // SAFETY: the returned pointer is checked and owned by KernelBtf.
        let btf = unsafe { libbpf_sys::btf__load_from_kernel_by_id(info.btf_id) };
        // SAFETY: libbpf_get_error accepts any pointer libbpf returned.
        if btf.is_null() || unsafe { libbpf_sys::libbpf_get_error(btf as *const _) } != 0 {
            bail!(
                "failed to read the BTF (id {}) of a pinned map",
                info.btf_id
            );
        }
        let btf = KernelBtf(btf);
        // SAFETY: btf is live for this scope.
        fields = unsafe { struct_fields(btf.0, info.btf_value_type_id) };
    }
    Ok(MapLayout {
        value_size: info.value_size,
        max_entries: info.max_entries,
        fields,
    })
}

/// The layout of a map of an opened, not yet loaded, object.
pub(crate) fn open_layout(obj: &libbpf_rs::OpenObject, name: &str) -> Option<MapLayout> {
    use libbpf_rs::AsRawLibbpf;
    let map = obj.maps().find(|m| m.name() == name)?;
    let raw_map = map.as_libbpf_object().as_ptr();
    // SAFETY: live libbpf objects borrowed for this call.
    unsafe {
        let btf = libbpf_sys::bpf_object__btf(obj.as_libbpf_object().as_ptr());
        let tid = libbpf_sys::bpf_map__btf_value_type_id(raw_map);
        let fields = if btf.is_null() || tid == 0 {
            Vec::new()
        } else {
            struct_fields(btf, tid)
        };
        Some(MapLayout {
            value_size: libbpf_sys::bpf_map__value_size(raw_map),
            max_entries: libbpf_sys::bpf_map__max_entries(raw_map),
            fields,
        })
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

/// The meta entry of a pinned `meta` map, its fields taken by name from
/// whatever layout the attaching ccload had.
pub fn decode_meta(algo: Algo, map: &MapHandle) -> Result<intf::ccl_meta> {
    let bytes = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?
        .context("meta entry missing")?;
    let lay = pinned_layout(map)?;
    if lay.value_size as usize == std::mem::size_of::<intf::ccl_meta>()
        && lay.fields == meta_fields()
    {
        // SAFETY: ccl_meta is plain old data and the layout was checked.
        return Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const intf::ccl_meta) });
    }
    if lay.fields.is_empty() {
        bail!(CclError::Layout(format!(
            "{algo} meta: {} bytes without BTF, {} expected",
            bytes.len(),
            std::mem::size_of::<intf::ccl_meta>()
        )));
    }
    let mut meta = intf::ccl_meta::default();
    let ours = meta_fields();
    // SAFETY: ccl_meta is plain old data; each copy stays inside both the
    // struct (our field) and the value (its field).
    let dst = unsafe {
        std::slice::from_raw_parts_mut(
            &mut meta as *mut _ as *mut u8,
            std::mem::size_of::<intf::ccl_meta>(),
        )
    };
    for f in &lay.fields {
        if let (Some(o), Some(src)) = (
            ours.iter().find(|o| o.name == f.name),
            bytes.get(f.off..f.off + f.size),
        ) {
            let n = o.size.min(f.size);
            dst[o.off..o.off + n].copy_from_slice(&src[..n]);
        }
    }
    // Strings copied short may have lost their NUL.
    *meta.prev_default.last_mut().unwrap() = 0;
    *meta.version.last_mut().unwrap() = 0;
    Ok(meta)
}

/// The members of this build's `struct ccl_meta`.
fn meta_fields() -> Vec<Field> {
    use std::mem::{offset_of, size_of_val};
    let m = intf::ccl_meta::default();
    macro_rules! f {
        ($n:ident) => {
            Field {
                name: stringify!($n).into(),
                off: offset_of!(intf::ccl_meta, $n),
                size: size_of_val(&m.$n),
            }
        };
    }
    vec![
        f!(prev_default),
        f!(attached_unix_s),
        f!(default_set),
        f!(watchers),
        f!(layout_id),
        f!(obj_id),
        f!(upgraded_unix_s),
        f!(version),
    ]
}

/// Is the pinned `params` map of `algo` in this build's layout?
pub fn params_layout_is_ours(map: &MapHandle, algo: Algo) -> Result<bool> {
    let lay = pinned_layout(map)?;
    Ok(lay.value_size as usize == algo.params_size()
        && lay.fields.len() == algo.fields().len()
        && lay
            .fields
            .iter()
            .zip(algo.fields())
            .enumerate()
            .all(|(i, (f, d))| f.name == d.field && f.off == 4 * i && f.size == 4))
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
            // A test-only field (0 unless a test build set it) is no news.
            None if algo.shipped_params().iter().any(|s| s.field == d.field) => {
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
        algo.fields()
            .iter()
            .enumerate()
            .map(|(i, d)| Field {
                name: d.field.to_string(),
                off: 4 * i,
                size: 4,
            })
            .collect()
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
        stamp(&mut m, &id);
        assert_eq!(Identity::of(&m), id);
        assert!(Identity::of(&m).is_ours(Algo::Hetcp));
        assert!(!Identity::of(&m).is_ours(Algo::Ccpd));
        assert!(!Identity::of(&intf::ccl_meta::default()).is_ours(Algo::Hetcp));
        assert!(Identity::of(&intf::ccl_meta::default())
            .describe()
            .contains("without layout identities"));
    }

    #[test]
    fn meta_fields_cover_the_struct() {
        let f = meta_fields();
        let end = f.iter().map(|f| f.off + f.size).max().unwrap();
        assert!(end <= std::mem::size_of::<intf::ccl_meta>());
        let sum: usize = f.iter().map(|f| f.size).sum();
        // every byte but padding belongs to a listed field
        assert!(std::mem::size_of::<intf::ccl_meta>() - sum < 8);
    }
}
