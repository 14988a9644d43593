//! `ccload flows`: TCP sockets on our controllers (or on any CC), with the
//! kernel's `struct tcp_info` as `ss -ti` shows it.

use anyhow::Result;

use crate::algos::Algo;
use crate::diag;
use crate::output::Out;

pub(super) fn run(netns: Option<&str>, all_cc: bool, out: Out) -> Result<i32> {
    let names: Vec<&str> = Algo::ALL.iter().map(|a| a.name()).collect();
    let socks = match netns {
        Some(ns) => diag::tcp_sockets_in(ns)?,
        None => diag::tcp_sockets()?,
    };
    let socks: Vec<diag::TcpSock> = socks
        .into_iter()
        .filter(|s| all_cc || names.contains(&s.cong.as_str()))
        .collect();
    if out.json {
        out.emit(&socks)?;
        return Ok(0);
    }
    println!(
        "{:<9} {:<22} {:<22} {:<10} {:<8} {:>6} {:>7} {:>8} {:>9} {:>7} {:>20}",
        "cc",
        "local",
        "remote",
        "state",
        "ca",
        "cwnd",
        "ssth",
        "srtt ms",
        "rate Mb/s",
        "retx",
        "cookie"
    );
    for s in &socks {
        let (ca, cwnd, ssth, srtt, rate, retx) = match &s.info {
            Some(i) => (
                i.ca_state.to_string(),
                i.cwnd.to_string(),
                // The kernel's "infinite" ssthresh before the first loss.
                if i.ssthresh >= 0x7fff_ffff {
                    "-".into()
                } else {
                    i.ssthresh.to_string()
                },
                format!("{:.1}", i.srtt_us as f64 / 1000.0),
                format!("{:.1}", i.delivery_rate_bps as f64 / 1e6),
                i.total_retrans.to_string(),
            ),
            None => (
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        println!(
            "{:<9} {:<22} {:<22} {:<10} {:<8} {:>6} {:>7} {:>8} {:>9} {:>7} {:>20}",
            s.cong,
            s.local.to_string(),
            s.remote.to_string(),
            s.state_name,
            ca,
            cwnd,
            ssth,
            srtt,
            rate,
            retx,
            s.cookie
        );
    }
    Ok(0)
}
