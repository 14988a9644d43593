//! Machine output: the global `-j/--json` (compact, one document per line)
//! and `-p/--pretty` (indented) of every command, as bpftool does.  Numbers
//! are JSON numbers in the units `ccload algos` states; errors under `-j`
//! are `{"error": "...", "exit_code": N}` on stdout (see `main`).

use anyhow::Result;
use serde::Serialize;
use serde_json::{json, Value};

use crate::bpf::algos::ParamDesc;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Out {
    /// JSON instead of text.
    pub json: bool,
    /// Indented JSON (implies `json`).
    pub pretty: bool,
}

impl Out {
    pub fn new(json: bool, pretty: bool) -> Out {
        Out {
            json: json || pretty,
            pretty,
        }
    }

    /// Print one JSON document (compact or indented) and a newline.
    pub fn emit<T: Serialize + ?Sized>(&self, v: &T) -> Result<()> {
        println!("{}", self.render(v)?);
        Ok(())
    }

    pub fn render<T: Serialize + ?Sized>(&self, v: &T) -> Result<String> {
        Ok(if self.pretty {
            serde_json::to_string_pretty(v)?
        } else {
            serde_json::to_string(v)?
        })
    }
}

/// A tunable's stored value in user units, as a JSON number: an integer
/// when the tunable has no scale, else the decimal `tune --show` prints
/// (1.02, not the 1.0200042724609375 a Q16 field stores).
pub fn user_value(d: &ParamDesc, raw: u32) -> Value {
    if d.scale == 1 {
        json!(raw)
    } else {
        let v = d
            .display(raw)
            .parse::<f64>()
            .unwrap_or(raw as f64 / d.scale as f64);
        json!(v)
    }
}

/// The error document of `-j`: the message `main` would print, the exit
/// code, and under `--verbose` the whole cause chain.
pub fn error_doc(message: &str, exit_code: i32, causes: &[String]) -> Value {
    let mut v = json!({ "error": message, "exit_code": exit_code });
    if !causes.is_empty() {
        v["causes"] = json!(causes);
    }
    v
}

/// Did the raw command line ask for JSON?  For errors clap raises before
/// the parsed flags exist.
pub fn wants_json(args: &[std::ffi::OsString]) -> Option<Out> {
    let mut json = false;
    let mut pretty = false;
    for a in args.iter().skip(1) {
        let Some(a) = a.to_str() else { continue };
        if a == "--" {
            break;
        }
        match a {
            "--json" => json = true,
            "--pretty" => pretty = true,
            s if s.starts_with('-') && !s.starts_with("--") => {
                json |= s.contains('j');
                pretty |= s.contains('p');
            }
            _ => {}
        }
    }
    (json || pretty).then(|| Out::new(json, pretty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<std::ffi::OsString> {
        v.iter().map(|s| s.into()).collect()
    }

    #[test]
    fn json_flags_are_found_before_clap_parses() {
        assert_eq!(wants_json(&os(&["ccload", "status"])), None);
        assert_eq!(
            wants_json(&os(&["ccload", "-j", "status"])),
            Some(Out::new(true, false))
        );
        assert_eq!(
            wants_json(&os(&["ccload", "tune", "--pretty"])),
            Some(Out::new(false, true))
        );
        assert_eq!(
            wants_json(&os(&["ccload", "-vj", "x"])),
            Some(Out::new(true, false))
        );
        assert_eq!(wants_json(&os(&["ccload", "watch", "--", "-j"])), None);
        assert!(Out::new(false, true).json);
    }

    #[test]
    fn compact_is_one_line_and_pretty_is_indented() {
        let v = json!({"a": [1, 2], "b": {"c": 0.5}});
        let c = Out::new(true, false).render(&v).unwrap();
        assert!(!c.contains('\n') && c.contains("\"c\":0.5"), "{c}");
        let p = Out::new(false, true).render(&v).unwrap();
        assert!(p.contains("\n  \"a\""), "{p}");
        let e = error_doc("boom", 2, &[]);
        assert_eq!(e["error"], "boom");
        assert_eq!(e["exit_code"], 2);
        assert!(e.get("causes").is_none());
    }
}
