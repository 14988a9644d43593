//! The lab: paper-style experiments on the emulated link of
//! `ccload-testbed`.
//!
//! - [`scenario`]: the TOML schema (`configs/lab/*.toml`), its grid of
//!   cases, the paper's rows and the `[[checks]]` thresholds.
//! - [`run`]: one (case, cc, repetition) through a fresh bottleneck.
//! - [`summary`]: what a run measured, and aggregates over repetitions.
//! - [`arrivals`]: a short-flow mix's flows and their completion times.
//! - [`session`]: a whole scenario: attach, run, write, check.
//! - [`report`], [`plot`]: report.md and the PNG/SVG plots.
//!
//! `cargo xtask lab list|run|check` is the front end.  The soak and the
//! bench test ccload itself, not the controllers: they are `ccload-qa`.

pub mod arrivals;
pub mod checks;
pub mod demo;
pub mod digest;
pub mod plot;
pub mod report;
pub mod run;
pub mod scenario;
pub mod session;
pub mod stored;
pub mod summary;
