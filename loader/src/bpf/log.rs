//! libbpf log capture: libbpf never prints to the terminal itself; a failed
//! load is one line in ccload's words, and libbpf's log (with the verifier's)
//! follows it under -v.

use super::*;

pub(super) static LOG: Mutex<String> = Mutex::new(String::new());

pub(super) fn capture_log(_level: PrintLevel, msg: String) {
    LOG.lock().unwrap().push_str(&msg);
}

pub(super) fn capture_warn(level: PrintLevel, msg: String) {
    if level != PrintLevel::Debug {
        LOG.lock().unwrap().push_str(&msg);
    }
}

/// Collect libbpf's messages from here on (all of them when `verbose`).
pub(crate) fn start_capture(verbose: bool) {
    LOG.lock().unwrap().clear();
    if verbose {
        libbpf_rs::set_print(Some((PrintLevel::Debug, capture_log)));
    } else {
        libbpf_rs::set_print(Some((PrintLevel::Info, capture_warn)));
    }
}

pub(super) fn take_log() -> String {
    std::mem::take(&mut *LOG.lock().unwrap())
}

/// What libbpf's log says failed, in a few words, and what to do about it.
pub(crate) fn explain_load_failure(log: &str, errno: Option<i32>) -> (String, String) {
    let kernel = crate::host::system::kernel_release();
    let find = |pat: &str| {
        log.lines().find_map(|l| {
            let i = l.find(pat)?;
            let rest = &l[i + pat.len()..];
            let end = rest.find('\'')?;
            Some((rest[..end].to_string(), l.to_string()))
        })
    };
    let errtext = errno
        .map(|e| std::io::Error::from_raw_os_error(e).to_string())
        .unwrap_or_else(|| "error".into());
    if let Some((prog, line)) = find("prog '") {
        if line.contains("BPF program is too large") || log.contains("BPF program is too large") {
            return (
                format!("the kernel's verifier gave up on program `{prog}` (too many instructions to check)"),
                format!("kernel {kernel} has a smaller verifier limit than ccload needs; `ccload doctor` says what this kernel supports"),
            );
        }
        if line.contains("load failed") || line.contains("failed to load") {
            return (
                format!("the kernel refused program `{prog}` ({errtext})"),
                format!(
                    "kernel {kernel} may lack a feature ccload needs (Linux >= 6.10 with BTF), or \
                     the pinned maps it reuses have another layout; `ccload doctor` checks the \
                     kernel, and `ccload attach --replace` upgrades an older attachment"
                ),
            );
        }
    }
    if let Some((map, _)) = find("map '") {
        return (
            format!("the kernel refused to create map `{map}` ({errtext})"),
            format!("kernel {kernel} may be too old for it (struct_ops links need Linux >= 6.4); `ccload doctor` checks the kernel"),
        );
    }
    (
        format!("libbpf failed ({errtext})"),
        "`ccload doctor` checks what the kernel supports".into(),
    )
}

/// A failed open or load of `what`, as one line; libbpf's log is added
/// under -v.
pub(crate) fn load_error(what: &str, err: libbpf_rs::Error, verbose: bool) -> anyhow::Error {
    let log = take_log();
    // libbpf-rs keeps the errno in its message ("... (os error 13)").
    let errno = {
        let m = format!("{err:#}");
        m.rfind("os error ").and_then(|i| {
            m[i + 9..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        })
    };
    let (summary, hint) = explain_load_failure(&log, errno);
    let log = if verbose {
        format!("\nlibbpf's log:\n{}", log.trim_end())
    } else {
        String::new()
    };
    anyhow::Error::new(err).context(CclError::Load {
        what: what.to_string(),
        summary,
        hint,
        log,
    })
}
