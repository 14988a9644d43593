//! TCP_INFO of a socket, as the kernel's uapi `struct tcp_info` (bindgen).

mod uapi {
    #![allow(
        non_camel_case_types,
        non_upper_case_globals,
        non_snake_case,
        dead_code
    )]
    #![allow(clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/tcp_info.rs"));
}

pub use uapi::tcp_info as TcpInfo;

/// getsockopt(TCP_INFO); `None` if the socket is gone.
pub fn tcp_info(fd: i32) -> Option<TcpInfo> {
    let mut ti = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as u32;
    // SAFETY: out-buffer of the given length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut TcpInfo).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(ti)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_of_a_connected_loopback_socket_is_read() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let ti = tcp_info(c.as_raw_fd()).expect("TCP_INFO");
        assert_eq!(ti.tcpi_state, 1, "TCP_ESTABLISHED");
        assert!(ti.tcpi_snd_cwnd >= 1 && ti.tcpi_snd_mss > 0, "{ti:?}");
    }
}
