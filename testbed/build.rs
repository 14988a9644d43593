//! The kernel's `struct tcp_info` from the system's uapi header
//! (<linux/tcp.h>), so the testbed never hand-copies it.  The `libc`
//! crate's copy stops before `tcpi_delivered`, which the lab reads.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    bindgen::Builder::default()
        .header_contents("tcp_info.h", "#include <linux/tcp.h>\n")
        .allowlist_type("tcp_info")
        .derive_default(true)
        .generate()
        .expect("bindgen <linux/tcp.h> (apt-get install linux-libc-dev libclang-dev)")
        .write_to_file(out.join("tcp_info.rs"))
        .expect("write tcp_info.rs");
}
