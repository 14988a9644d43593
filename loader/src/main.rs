use clap::Parser;

use ccload::cli::Cli;
use ccload::cmd::run;
use ccload::error::CclError;

fn main() {
    // Die quietly on a closed pipe (`ccload tune --show | head`), as Unix
    // tools do, instead of panicking inside println!.
    // SAFETY: setting a signal disposition before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let verbose = cli.verbose;
    let code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    std::process::exit(0);
                }
            }
            let kind = err.chain().find_map(|e| e.downcast_ref::<CclError>());
            if verbose {
                eprintln!("ccload: {err:#}");
            } else {
                // One clear line: our own error if there is one, else the top context.
                match kind {
                    Some(k) => eprintln!("ccload: {k}"),
                    None => eprintln!("ccload: {err}"),
                }
            }
            kind.map(CclError::exit_code).unwrap_or(2)
        }
    };
    std::process::exit(code);
}
