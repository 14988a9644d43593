//! net.ipv4.tcp_congestion_control of the current network namespace.

use anyhow::{Context, Result};

const DEFAULT_CC: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

pub fn default_cc() -> Result<String> {
    Ok(std::fs::read_to_string(DEFAULT_CC)
        .with_context(|| format!("failed to read {DEFAULT_CC}"))?
        .trim()
        .to_string())
}

pub fn set_default_cc(name: &str) -> Result<()> {
    std::fs::write(DEFAULT_CC, name)
        .with_context(|| format!("failed to set net.ipv4.tcp_congestion_control = {name}"))
}
