//! The sections clap_mangen does not write: ccload(8)'s EXIT STATUS,
//! ENVIRONMENT, FILES and SEE ALSO, and ccload.toml(5), made from
//! docs/config.md (its key table and first examples) so the two never
//! disagree.  The roff is the `roff` crate's, as clap_mangen re-exports it.

use clap_mangen::roff::{bold, roman, Inline, Roff};

/// docs/config.md, the config reference.
const CONFIG_MD: &str = include_str!("../../../docs/config.md");

/// Inline markdown as roff inlines: `code` in bold, the rest roman (the
/// roff crate escapes backslashes and dashes, and guards a line that would
/// start with a control character).
fn inline(md: &str) -> Vec<Inline> {
    md.split('`')
        .enumerate()
        .filter(|(_, t)| !t.is_empty())
        .map(|(i, t)| if i % 2 == 1 { bold(t) } else { roman(t) })
        .collect()
}

/// A markdown paragraph on one line, single spaces.
fn words(md: &str) -> String {
    md.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A section of tagged paragraphs.
fn section(o: &mut Roff, title: &str, items: &[(&str, &str)]) {
    o.control("SH", [title]);
    for (tag, text) in items {
        o.control("TP", []).text(inline(tag)).text(inline(text));
    }
}

/// EXIT STATUS, ENVIRONMENT, FILES, SEE ALSO of ccload(1).
pub fn ccload_sections() -> String {
    let mut o = Roff::new();
    section(
        &mut o,
        "EXIT STATUS",
        &[
            ("0", "Success; a rollout that ran its course or was promoted."),
            (
                "1",
                "Nothing to do or a check failed: the controller is not attached, `doctor` found a failing check, a rollout was rolled back by its guards, a rollout verb could not be carried out.",
            ),
            (
                "2",
                "Error: bad input (usage, an unknown algorithm or tunable, a value out of range, an invalid config), not root, a kernel without what is needed, the verifier's refusal. Nothing was changed.",
            ),
            (
                "75",
                "Another ccload held the state lock (`/run/ccload/lock`) past the wait; nothing was changed; try again.",
            ),
            (
                "130",
                "A rollout stopped by SIGINT/SIGTERM or `ccload rollout abort`, rolled back.",
            ),
        ],
    );
    section(
        &mut o,
        "ENVIRONMENT",
        &[
            (
                "CCLOAD_LOCK_WAIT",
                "Seconds a command that changes kernel state waits for the state lock (default 10).",
            ),
            (
                "CCLOAD_LOG_FORMAT",
                "`serve`'s log lines: `json`, `journal` (priority prefixes) or `text`; default journal when stderr is the journal (`JOURNAL_STREAM`), else text.",
            ),
            (
                "NOTIFY_SOCKET",
                "Set by systemd for `Type=notify`: `serve` reports READY=1 and RELOADING=1.",
            ),
            (
                "WATCHDOG_USEC",
                "Set by systemd for `WatchdogSec=`: `serve` sends WATCHDOG=1 from its event loop at half the period.",
            ),
        ],
    );
    section(
        &mut o,
        "FILES",
        &[
            (
                "/sys/fs/bpf/ccload/",
                "Pins: each attached controller's struct_ops link and maps (`<algo>/`), the cgroup bindings and their aggregates. They keep a controller registered after ccload exits; `ccload detach --all` removes them.",
            ),
            ("/run/ccload/lock", "The state lock."),
            (
                "/run/ccload/profiles.json",
                "The stable ids of named profiles, per controller (ccload.toml(5)).",
            ),
            (
                "/run/ccload/rollout-ID.json, rollout-ID.cmd",
                "A rollout's record and progress (ID: the canary's cgroup id), and a request of `rollout abort|promote` to it.",
            ),
            (
                "/run/ccload/telemetry.sock",
                "Where `serve` fans telemetry out to `ccload watch` (`[serve] socket`).",
            ),
            (
                "/etc/ccload/config.toml",
                "The config the installed systemd unit runs `serve` with (ccload.toml(5)).",
            ),
        ],
    );
    o.control("SH", ["SEE ALSO"]).text(see_also(&[
        ("ccload.toml", "5"),
        ("ccload-attach", SECTION),
        ("ccload-rollout", SECTION),
        ("ccload-serve", SECTION),
        ("bpftool", "8"),
        ("tc", "8"),
        ("ss", "8"),
    ]));
    o.control("PP", []).text([roman(
        "The README, docs/config.md, docs/metrics.md and docs/ccpd.md in /usr/share/doc/ccload or the source tree.",
    )]);
    // A part of clap_mangen's page, which has the preamble that defines
    // the straight apostrophe (\*(Aq) these lines use: without a second.
    let r = o.render();
    r[r.find(".SH").unwrap_or(0)..].to_string()
}

/// `page(section), ...` with the pages in bold.
fn see_also(pages: &[(&str, &str)]) -> Vec<Inline> {
    let mut v = Vec::new();
    for (i, (page, sec)) in pages.iter().enumerate() {
        v.push(bold(*page));
        let sep = if i + 1 < pages.len() { ", " } else { "" };
        v.push(roman(format!("({sec}){sep}")));
    }
    v
}

/// `page` with `sections` placed before its VERSION (or at its end).
fn insert_before_version(page: &str, sections: &str) -> String {
    match page.find(".SH VERSION") {
        Some(i) => format!("{}{}{}", &page[..i], sections, &page[i..]),
        None => format!("{page}{sections}"),
    }
}

/// The manual section of ccload's command pages: administration commands
/// (they need root and change the kernel's state).
pub const SECTION: &str = "8";

/// `cmd` and its subcommands without clap's `help` subcommand: a page would
/// list ccload-help(8), which is never written.
pub fn without_help(cmd: clap::Command) -> clap::Command {
    cmd.disable_help_subcommand(true)
        .mut_subcommands(without_help)
}

/// The page of `cmd` (named `name`: ccload, ccload-attach,
/// ccload-cgroup-set, ...), section 8: clap_mangen's NAME, SYNOPSIS,
/// DESCRIPTION, OPTIONS and SUBCOMMANDS; the command's `Examples:` help as
/// EXAMPLES (its indented lines as commands, the rest as prose); SEE ALSO;
/// ccload(8)'s own sections; and no markdown: a `code` span is bold.
pub fn command_page(cmd: clap::Command, name: &str) -> std::io::Result<String> {
    let after = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(|s| s.to_string());
    let parent = name.rsplit_once('-').map(|(p, _)| p.to_string());
    let page = cmd
        .name(name.to_string())
        .after_help(None::<&'static str>)
        .after_long_help(None::<&'static str>);
    let mut buf = Vec::new();
    clap_mangen::Man::new(page)
        .section(SECTION)
        .render(&mut buf)?;
    let page = String::from_utf8_lossy(&buf).to_string();
    let mut o = Roff::new();
    if let Some(after) = after {
        examples(&mut o, &after);
    }
    if name == "ccload" {
        return Ok(demarkdown(&insert_before_version(
            &page,
            &(render_tail(o) + &ccload_sections()),
        )));
    }
    let mut pages: Vec<(&str, &str)> = vec![("ccload", SECTION)];
    if let Some(p) = parent.as_deref().filter(|p| *p != "ccload") {
        pages.push((p, SECTION));
    }
    pages.push(("ccload.toml", "5"));
    o.control("SH", ["SEE ALSO"]).text(see_also(&pages));
    Ok(demarkdown(&insert_before_version(&page, &render_tail(o))))
}

/// Sections rendered alone, without the roff crate's preamble (the page
/// has one).
fn render_tail(o: Roff) -> String {
    let r = o.render();
    match r.find(".SH") {
        Some(i) => r[i..].to_string(),
        None => String::new(),
    }
}

/// EXAMPLES from a command's `Examples:` help: indented lines are commands
/// (kept as written, in bold), the others prose.
fn examples(o: &mut Roff, after: &str) {
    let body = after.strip_prefix("Examples:\n").unwrap_or(after);
    o.control("SH", ["EXAMPLES"]);
    let mut in_code = false;
    for l in body.lines() {
        let code = l.starts_with("  ");
        if code && !in_code {
            o.control("PP", []).control("nf", []);
        } else if !code && in_code {
            o.control("fi", []);
        }
        in_code = code;
        if code {
            o.text([bold(l.trim_start())]);
        } else {
            o.control("PP", []).text(inline(&words(l)));
        }
    }
    if in_code {
        o.control("fi", []);
    }
}

/// Markdown code spans left in text lines (clap's help) as bold; control
/// lines are left alone, a line with an unpaired backtick loses it.
pub fn demarkdown(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for l in page.lines() {
        if l.starts_with('.') || l.starts_with('\'') || !l.contains('`') {
            out.push_str(l);
        } else if l.matches('`').count() % 2 == 0 {
            for (i, part) in l.split('`').enumerate() {
                if i % 2 == 1 {
                    out.push_str("\\fB");
                    out.push_str(part);
                    out.push_str("\\fR");
                } else {
                    out.push_str(part);
                }
            }
        } else {
            out.push_str(&l.replace('`', ""));
        }
        out.push('\n');
    }
    out
}

/// ccload.toml(5), from docs/config.md.
pub fn config_page(version: &str) -> String {
    let mut o = Roff::new();
    let source = format!("ccload {version}");
    o.control("TH", ["ccload.toml", "5", "\"\"", &source]);
    o.control("SH", ["NAME"]).text([roman(
        "ccload.toml - the configuration of ccload apply and ccload serve",
    )]);
    o.control("SH", ["SYNOPSIS"])
        .text([bold("/etc/ccload/config.toml")]);
    o.control("SH", ["DESCRIPTION"]);
    // After the title line, up to the first section.
    let intro = CONFIG_MD
        .split_once('\n')
        .map_or("", |(_, rest)| rest)
        .split("\n## ")
        .next()
        .unwrap_or("");
    for para in intro.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        if para.starts_with("- ") {
            // (the source tree's own test is no business of the page's)
            for item in para.split("\n- ").filter(|i| !i.contains("cargo test")) {
                let t = words(item.trim_start_matches("- "));
                o.control("IP", ["\\(bu", "2"]).text(inline(&t));
            }
        } else {
            o.control("PP", []).text(inline(&words(para)));
        }
    }
    o.control("SH", ["KEYS"]);
    let keys = CONFIG_MD.split("\n## Keys\n").nth(1).unwrap_or("");
    for l in keys
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
    {
        let c: Vec<&str> = l.split('|').map(str::trim).collect();
        if c.len() >= 5 {
            let mut tag = inline(c[1]);
            tag.push(roman(" ("));
            tag.extend(inline(c[2]));
            tag.push(roman("; default: "));
            tag.extend(inline(c[3]));
            tag.push(roman(")"));
            o.control("TP", []).text(tag).text(inline(c[4]));
        }
    }
    if let Some(after) = CONFIG_MD.split("\n| `serve.request_timeout_ms`").nth(1) {
        if let Some(p) = after.split("\n\n").nth(1) {
            o.control("PP", []).text(inline(&words(p)));
        }
    }
    o.control("SH", ["EXAMPLES"]);
    for block in CONFIG_MD.split("```toml\n").skip(1).take(2) {
        let code = block.split("```").next().unwrap_or("");
        o.control("PP", []).control("nf", []);
        for l in code.lines() {
            o.text([roman(l.replace('`', ""))]);
        }
        o.control("fi", []);
    }
    o.control("PP", []).text([
        roman("More examples, and every tunable with its default and range, in docs/config.md; "),
        bold("ccload algos"),
        roman(" prints the tunables too."),
    ]);
    o.control("SH", ["SEE ALSO"]).text(see_also(&[
        ("ccload", SECTION),
        ("ccload-apply", SECTION),
        ("ccload-serve", SECTION),
    ]));
    o.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_page_holds_every_key_and_an_example() {
        let p = config_page("0");
        // (after the roff crate's preamble, which keeps apostrophes straight)
        assert_eq!(
            p.lines().find(|l| l.starts_with(".TH")),
            Some(".TH ccload.toml 5 \"\" \"ccload 0\"")
        );
        for key in [
            "default_cc",
            "cgroups[].path",
            "rollouts[].fail_after",
            "serve.request_timeout_ms",
        ] {
            assert!(p.contains(&format!("\\fB{key}\\fR (")), "{key}:\n{p}");
        }
        assert!(p.contains(".nf\n[algos.ccpd]\n"), "{p}");
        let desc = &p[p.find(".SH DESCRIPTION").unwrap()..p.find(".SH KEYS").unwrap()];
        assert!(desc.contains("Unknown keys are errors"), "{desc}");
        // No markdown left: code spans became bold.
        assert!(!p.contains('`'), "{p}");
    }

    #[test]
    fn ccload_sections_come_before_version() {
        let page = ".TH ccload 1\n.SH NAME\nccload\n.SH VERSION\nv0\n";
        let p = insert_before_version(page, &ccload_sections());
        let at = |s: &str| p.find(s).unwrap_or_else(|| panic!("{s}"));
        assert!(at(".SH \"EXIT STATUS\"") < at(".SH VERSION"));
        assert!(at(".SH ENVIRONMENT") < at(".SH FILES"));
        assert!(p.contains("CCLOAD_LOCK_WAIT") && p.contains("/run/ccload/profiles.json"));
        let line = |md: &str| Roff::new().text(inline(md)).to_roff();
        assert_eq!(line("`a\\b` c"), "\\fBa\\\\b\\fR c\n");
        assert_eq!(line(".x"), "\\&.x\n");
    }
}
