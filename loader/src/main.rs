use clap::Parser;

use ccload::cli::args::Cli;
use ccload::cli::cmd::run;
use ccload::cli::output::{error_doc, wants_json, Out};
use ccload::error::CclError;

fn main() {
    // Die quietly on a closed pipe (`ccload tune --show | head`), as Unix
    // tools do, instead of panicking inside println!.
    // SAFETY: setting a signal disposition before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let informational = matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            match wants_json(&args) {
                // A usage error under -j is a JSON error too (help stays text).
                Some(out) if !informational => {
                    // clap's message without its "For more information" hint,
                    // on one line.
                    let detail = e.to_string();
                    let msg = detail
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    let msg = msg.trim_start_matches("error: ");
                    print_json_error(out, msg, 2, &[]);
                    std::process::exit(2);
                }
                _ => e.exit(),
            }
        }
    };
    let verbose = cli.verbose;
    let out = Out::new(cli.json, cli.pretty);
    let code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::BrokenPipe {
                    std::process::exit(0);
                }
            }
            let kind = err.chain().find_map(|e| e.downcast_ref::<CclError>());
            let code = kind.map(CclError::exit_code).unwrap_or(2);
            // One clear line: our own error if there is one, else the top context.
            let line = match kind {
                Some(k) => k.to_string(),
                None => err.to_string(),
            };
            if out.json {
                let causes: Vec<String> = if verbose {
                    err.chain().map(|e| e.to_string()).collect()
                } else {
                    vec![]
                };
                print_json_error(out, &line, code, &causes);
            } else if verbose {
                eprintln!("ccload: {err:#}");
            } else {
                eprintln!("ccload: {line}");
            }
            code
        }
    };
    std::process::exit(code);
}

fn print_json_error(out: Out, message: &str, code: i32, causes: &[String]) {
    let doc = error_doc(message, code, causes);
    match out.render(&doc) {
        Ok(s) => println!("{s}"),
        Err(_) => println!("{{\"error\":\"unprintable error\",\"exit_code\":{code}}}"),
    }
}
