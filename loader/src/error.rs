//! Error kinds the CLI tells apart (exit codes, hints).

use thiserror::Error;

#[derive(Debug, Error)]
pub enum CclError {
    #[error("unknown algorithm `{name}` (valid: {valid})")]
    UnknownAlgo { name: String, valid: String },

    #[error("unknown tunable `{name}` for {algo} (valid: {valid})")]
    UnknownTunable {
        algo: &'static str,
        name: String,
        valid: String,
    },

    #[error(
        "{algo}: `{name}` is a test-only field of the params map (the integration \
         tests write it there themselves); ccload refuses it; nothing was changed"
    )]
    TestOnlyTunable { algo: &'static str, name: String },

    #[error("{algo}: {name}={value}: {why}; nothing was changed")]
    BadTunable {
        algo: &'static str,
        name: String,
        value: String,
        why: String,
    },

    #[error("must run as root (loading BPF needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN)")]
    NotRoot,

    #[error(
        "running as root without {0}: ccload needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN \
         (or CAP_SYS_ADMIN); check the service's CapabilityBoundingSet or the container's \
         capabilities"
    )]
    MissingCaps(String),

    #[error("{0}")]
    Unsupported(String),

    #[error("{algo} is not attached")]
    NotAttached { algo: &'static str },

    #[error("the name `{0}` is already registered by another loader; detach it there first")]
    NameTaken(String),

    #[error("layout mismatch: {0}")]
    Layout(String),

    #[error(
        "another ccload is changing state (pid {pid}); waited {waited} s for it to finish \
         (/run/ccload/lock); nothing was changed"
    )]
    Busy { pid: String, waited: f64 },

    /// A BPF object the kernel or libbpf refused: one line (what failed,
    /// what to do), and libbpf's own log after it under -v.
    #[error("failed to load {what}: {summary}; {hint}; nothing was changed (-v shows libbpf's log){log}")]
    Load {
        what: String,
        summary: String,
        hint: String,
        log: String,
    },
}

impl CclError {
    /// 1 = soft failure (nothing to do), 75 (EX_TEMPFAIL) = refused by the
    /// state lock, try again; 2 = error.
    pub fn exit_code(&self) -> i32 {
        match self {
            CclError::NotAttached { .. } => 1,
            CclError::Busy { .. } => 75,
            _ => 2,
        }
    }
}
