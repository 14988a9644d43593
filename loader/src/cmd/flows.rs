//! `ccload flows`: TCP sockets of this network namespace on our controllers.

use anyhow::Result;

use crate::algos::Algo;
use crate::diag;
use crate::output::Out;

pub(super) fn run(out: Out) -> Result<i32> {
    let names: Vec<&str> = Algo::ALL.iter().map(|a| a.name()).collect();
    let socks: Vec<diag::TcpSock> = diag::tcp_sockets()?
        .into_iter()
        .filter(|s| names.contains(&s.cong.as_str()))
        .collect();
    if out.json {
        out.emit(&socks)?;
    } else {
        println!(
            "{:<10} {:<24} {:<24} {:>6} {:>20}",
            "cc", "local", "remote", "state", "cookie"
        );
        for s in &socks {
            println!(
                "{:<10} {:<24} {:<24} {:>6} {:>20}",
                s.cong,
                s.local.to_string(),
                s.remote.to_string(),
                s.state,
                s.cookie
            );
        }
    }
    Ok(0)
}
