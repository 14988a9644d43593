//! Quality tools for ccload itself (not experiments on the controllers,
//! which are the lab's):
//!
//! - `soak`: flows, concurrent and killed commands, daemon reloads and
//!   kills for a while, then the leaks and the final state judged
//!   (`cargo xtask soak`);
//! - `bench`: what the telemetry consumer keeps up with and what the
//!   datapath hooks cost (`cargo xtask bench`).

pub mod bench;
pub mod soak;
