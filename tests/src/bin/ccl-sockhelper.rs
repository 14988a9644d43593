//! Test helper: joins a cgroup and a network namespace, then opens one TCP
//! connection (active or passive) and reports the congestion control the
//! kernel gave the socket.  Used by the cgroup binding tests, which need
//! processes in different cgroups (membership is per process).
//!
//!   ccl-sockhelper CGROUP NETNS listen IP        -> "PORT p", "CC name", "BYTES n"
//!   ccl-sockhelper CGROUP NETNS connect IP:PORT N [CC] -> "CC name", then sends N bytes
//!     (on CC when given, else on what the kernel chose)
//!   ccl-sockhelper CGROUP NETNS serve-many IP   -> "PORT p"; accepts and drains connections
//!     until killed
//!   ccl-sockhelper CGROUP NETNS connect-many IP:PORT K [BYTES] -> K connections one after
//!     another, each sending BYTES (1 KiB): "CC name" for each, then "DONE K"
//! CGROUP may be "-" (stay where started).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: ccl-sockhelper CGROUP NETNS listen IP | connect IP:PORT BYTES");
        std::process::exit(2);
    }
    if a[1] != "-" {
        std::fs::write(
            format!("{}/cgroup.procs", a[1]),
            std::process::id().to_string(),
        )
        .expect("join cgroup");
    }
    let ns = std::fs::File::open(format!("/run/netns/{}", a[2])).expect("open netns");
    // SAFETY: setns on the (only) main thread with an fd we own.
    assert_eq!(
        unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
        0,
        "setns"
    );
    let out = std::io::stdout();
    match a[3].as_str() {
        "listen" => {
            let l = TcpListener::bind((a[4].parse::<std::net::IpAddr>().unwrap(), 0)).unwrap();
            println!("PORT {}", l.local_addr().unwrap().port());
            out.lock().flush().unwrap();
            let (mut s, _) = l.accept().unwrap();
            println!("CC {}", ccload_itests::get_cc(s.as_raw_fd()));
            out.lock().flush().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut n = 0u64;
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k as u64,
                }
            }
            println!("BYTES {n}");
        }
        "connect" => {
            let addr: SocketAddr = a[4].parse().unwrap();
            let mut s = TcpStream::connect(addr).unwrap();
            if let Some(cc) = a.get(6) {
                ccload_itests::set_cc(s.as_raw_fd(), cc).expect("TCP_CONGESTION");
            }
            // Retransmissions before the connection was established (a
            // lost SYN): TCP_INFO counts them, a sock_ops aggregate that
            // starts at establishment does not.
            let syn = ccload_itests::tcpinfo::tcp_info(s.as_raw_fd()).unwrap();
            println!("CC {}", ccload_itests::get_cc(s.as_raw_fd()));
            out.lock().flush().unwrap();
            let n: u64 = a[5].parse().unwrap();
            let chunk = vec![0x5au8; 1 << 16];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                if s.write_all(&chunk[..k]).is_err() {
                    // The peer is gone: a test that ends a long flow drops
                    // its listener first (a reset), and kills this process
                    // next.  A test that waits for TCPINFO sees none.
                    std::process::exit(3);
                }
                left -= k as u64;
            }
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut sink = [0u8; 64];
            while matches!(s.read(&mut sink), Ok(k) if k > 0) {}
            // The peer closed after our FIN: the counters are final.
            let ti = ccload_itests::tcpinfo::tcp_info(s.as_raw_fd()).unwrap();
            println!(
                "TCPINFO {} {} {} {}",
                ti.tcpi_data_segs_out,
                ti.tcpi_total_retrans,
                ti.tcpi_bytes_acked,
                syn.tcpi_total_retrans
            );
            out.lock().flush().unwrap();
        }
        "serve-many" => {
            let l = TcpListener::bind((a[4].parse::<std::net::IpAddr>().unwrap(), 0)).unwrap();
            println!("PORT {}", l.local_addr().unwrap().port());
            out.lock().flush().unwrap();
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while matches!(s.read(&mut buf), Ok(k) if k > 0) {}
                });
            }
        }
        "connect-many" => {
            let addr: SocketAddr = a[4].parse().unwrap();
            let k: u32 = a[5].parse().unwrap();
            let bytes: usize = a.get(6).map_or(1024, |b| b.parse().unwrap());
            let chunk = vec![0x5au8; bytes.min(1 << 16)];
            for _ in 0..k {
                let mut s = TcpStream::connect(addr).unwrap();
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(chunk.len());
                    s.write_all(&chunk[..n]).unwrap();
                    left -= n;
                }
                s.shutdown(std::net::Shutdown::Write).unwrap();
                let mut sink = [0u8; 64];
                while matches!(s.read(&mut sink), Ok(k) if k > 0) {}
                println!("CC {}", ccload_itests::get_cc(s.as_raw_fd()));
            }
            println!("DONE {k}");
            out.lock().flush().unwrap();
        }
        m => panic!("unknown mode {m}"),
    }
}
