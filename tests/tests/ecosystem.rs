//! Habits of the ecosystem: `ccload flows` lists sockets of another network
//! namespace (`-N`, as `ss -N`) with their state and `struct tcp_info`
//! (INET_DIAG_INFO); `attach --allow` lets a process without CAP_NET_ADMIN
//! select the controller, as tcp_allowed_congestion_control does.

use std::io::Write;
use std::net::TcpListener;

use ccload_itests::*;

/// A ccpd connection in `ns` whose receiver never reads: it stays ESTAB
/// with data in flight, so its window, RTT and acked bytes are there to
/// read.  Returns the sockets (kept open) and the client's port.
fn stalled_ccpd_flow(ns: &NetNs) -> (TcpListener, std::net::TcpStream, std::net::TcpStream, u16) {
    let (l, mut client, server) = ns.run(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let fd = ccload_testbed::traffic::socket_for(addr).unwrap();
        set_cc(std::os::fd::AsRawFd::as_raw_fd(&fd), "ccpd").unwrap();
        let c = ccload_testbed::traffic::connect(fd, addr).unwrap();
        let (s, _) = l.accept().unwrap();
        (l, c, s)
    });
    client.set_nonblocking(true).unwrap();
    let chunk = vec![0u8; 1 << 16];
    let mut sent = 0usize;
    while let Ok(n) = client.write(&chunk) {
        sent += n;
        if sent > 64 << 20 {
            break;
        }
    }
    assert!(sent > 0);
    let port = client.local_addr().unwrap().port();
    (l, client, server, port)
}

/// The `flows -j` entry of the socket on local port `port` in `ns`.
fn flow_entry(ns: &NetNs, port: u16) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&ccload_ok(&["-j", "flows", "-N", &ns.name])).unwrap();
    let mine: Vec<&serde_json::Value> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["local"].as_str().unwrap().ends_with(&format!(":{port}")))
        .collect();
    assert_eq!(mine.len(), 1, "the ccpd client in {}: {v}", ns.name);
    mine[0].clone()
}

#[test]
fn flows_of_another_namespace_show_state_and_tcp_info() {
    let _g = privileged!();
    let _a = Attached::new("ccpd", &[]);
    let ns = NetNs::new();
    let (_l, _client, _server, port) = stalled_ccpd_flow(&ns);
    let s = &flow_entry(&ns, port);
    assert_eq!(
        (s["cong"].as_str(), s["state_name"].as_str()),
        (Some("ccpd"), Some("ESTAB")),
        "{s}"
    );
    let i = &s["info"];
    assert_eq!(i["ca_state"], "Open", "{s}");
    assert!(i["cwnd"].as_u64().unwrap() >= 2, "{s}");
    assert!(i["mss"].as_u64().unwrap() > 500, "{s}");
    assert!(i["srtt_us"].as_u64().unwrap() > 0, "{s}");
    assert!(i["bytes_acked"].as_u64().unwrap() > 0, "{s}");
    assert!(i["total_retrans"].is_u64(), "{s}");
    // ccpd paces (pace = 1): its rate, not the kernel's ~0 ("unlimited").
    assert!(i["pacing_rate_bps"].as_u64().is_some_and(|r| r > 0), "{s}");

    // The text view has the same socket with its window and state.
    let text = ccload_ok(&["flows", "--netns", &ns.name]);
    let row = text
        .lines()
        .find(|l| l.contains(&format!(":{port} ")))
        .unwrap_or_else(|| panic!("no row for :{port}:\n{text}"));
    assert!(
        row.starts_with("ccpd") && row.contains("ESTAB") && row.contains("Open"),
        "{row}"
    );
    // --all-cc lists the listener too (on the namespace's default CC).
    let all = ccload_ok(&["flows", "-N", &ns.name, "--all-cc"]);
    assert!(all.contains("LISTEN"), "{all}");

    // This namespace does not have it.
    let here = ccload_ok(&["-j", "flows"]);
    assert!(
        !here.contains(&format!("\"cookie\":{}", s["cookie"])),
        "{here}"
    );

    // Unpaced (pace = 0), a new flow's rate is the kernel's ~0: null.
    ccload_ok(&["tune", "--algo", "ccpd", "--set", "pace=0"]);
    let (_l2, _c2, _s2, port2) = stalled_ccpd_flow(&ns);
    let s2 = flow_entry(&ns, port2);
    assert!(s2["info"]["pacing_rate_bps"].is_null(), "{s2}");

    let o = ccload(&["flows", "-N", "ccl-no-such-ns"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/run/netns/ccl-no-such-ns"), "{err}");
}

/// setsockopt(TCP_CONGESTION, name) from a thread that dropped root (raw
/// setresuid changes only the calling thread's credentials, and with them
/// its capabilities): what an unprivileged server process would get.
fn unprivileged_select(name: &'static str) -> std::io::Result<String> {
    std::thread::spawn(move || {
        // SAFETY: raw syscall on this thread only (glibc's setresuid would
        // change every thread of the test process).
        let rc = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!(rc, 0, "setresuid");
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        set_cc(std::os::fd::AsRawFd::as_raw_fd(&l), name)?;
        Ok(get_cc(std::os::fd::AsRawFd::as_raw_fd(&l)))
    })
    .join()
    .unwrap()
}

#[test]
fn attach_allow_lets_unprivileged_sockets_select_the_controller() {
    let _g = privileged!();
    let allowed =
        || std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    let listed = |n: &str| allowed().split_whitespace().any(|x| x == n);
    // Without --allow: restricted, as a kernel module CC is.
    {
        let _a = Attached::new("hetcp", &[]);
        assert!(!listed("hetcp"), "{}", allowed());
        let e = unprivileged_select("hetcp").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        assert_eq!(status_json()["attached"][0]["allowed"], false);
    }
    {
        let _a = Attached::new("hetcp", &["--allow"]);
        assert!(listed("hetcp"), "{}", allowed());
        assert_eq!(unprivileged_select("hetcp").unwrap(), "hetcp");
        assert_eq!(status_json()["attached"][0]["allowed"], true);
        // A replaced object keeps it.
        ccload_ok(&["attach", "--algo", "hetcp", "--replace"]);
        assert!(listed("hetcp"), "after --replace: {}", allowed());
        assert_eq!(unprivileged_select("hetcp").unwrap(), "hetcp");
    }
    // Detach takes the name out of the list with the controller.
    assert!(!listed("hetcp"), "after detach: {}", allowed());
}
