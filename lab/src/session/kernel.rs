//! What a session changes in the kernel through the `ccload` CLI: our
//! controllers attached and their tunables set, undone on drop.

use super::*;

/// Our controllers this run attached (detached again on drop) and the
/// tunables it changed (reset on drop).
pub(crate) struct KernelState {
    pub(super) attached: Vec<String>,
}

impl KernelState {
    pub(crate) fn prepare(ccs: &[String]) -> Result<KernelState> {
        let mut st = KernelState { attached: vec![] };
        for spec in ccs {
            let (name, _) = parse_cc(spec);
            if KERNEL_CCS.contains(&name.as_str()) || st.attached.contains(&name) {
                continue;
            }
            if !ccload::bpf::is_registered(&name) {
                ccload(&["attach", "--algo", &name])?;
                st.attached.push(name);
            }
        }
        Ok(st)
    }

    pub(super) fn tune(spec: &str) -> Result<()> {
        let (name, sets) = parse_cc(spec);
        if sets.is_empty() {
            return Ok(());
        }
        let mut args = vec!["tune".to_string(), "--algo".into(), name];
        for (k, v) in sets {
            args.push("--set".into());
            args.push(format!("{k}={v}"));
        }
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        ccload(&a).map(|_| ())
    }

    pub(super) fn untune(spec: &str) {
        let (name, sets) = parse_cc(spec);
        if !sets.is_empty() {
            let _ = ccload(&["tune", "--algo", &name, "--reset"]);
        }
    }
}

impl Drop for KernelState {
    fn drop(&mut self) {
        for a in &self.attached {
            let _ = ccload(&["detach", "--algo", a]);
        }
    }
}
