//! What a user types and sees: the command line's clap types (args), one
//! module per command (cmd), the long-running views (watch, top), doctor,
//! the man pages and the output modes.  The top layer: it uses every other.

pub mod args;
pub mod cmd;
pub mod doctor;
pub mod manpage;
pub mod output;
pub(crate) mod top;
pub(crate) mod watch;
