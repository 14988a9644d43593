//! The sections clap_mangen does not write: ccload(1)'s EXIT STATUS,
//! ENVIRONMENT, FILES and SEE ALSO, and ccload.toml(5), made from
//! docs/config.md (its key table and first examples) so the two never
//! disagree.

/// docs/config.md, the config reference.
const CONFIG_MD: &str = include_str!("../../docs/config.md");

/// Inline markdown to roff: `code` in bold, backslashes escaped, a line
/// that would start with a control character guarded.
fn inline(md: &str) -> String {
    let mut o = String::new();
    let mut code = false;
    for c in md.chars() {
        match c {
            '`' => {
                o.push_str(if code { "\\fR" } else { "\\fB" });
                code = !code;
            }
            '\\' => o.push_str("\\e"),
            c => o.push(c),
        }
    }
    if code {
        o.push_str("\\fR");
    }
    if o.starts_with('.') || o.starts_with('\'') {
        o.insert_str(0, "\\&");
    }
    o
}

/// A markdown paragraph on one line, single spaces.
fn words(md: &str) -> String {
    md.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn section(title: &str, items: &[(&str, &str)]) -> String {
    let mut o = if title.contains(' ') {
        format!(".SH \"{title}\"\n")
    } else {
        format!(".SH {title}\n")
    };
    for (tag, text) in items {
        o.push_str(&format!(".TP\n{}\n{}\n", inline(tag), inline(text)));
    }
    o
}

/// EXIT STATUS, ENVIRONMENT, FILES, SEE ALSO of ccload(1).
pub fn ccload_sections() -> String {
    let mut o = section(
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
    o += &section(
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
    o += &section(
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
    o += ".SH \"SEE ALSO\"\n";
    o += "\\fBccload.toml\\fR(5), \\fBccload-attach\\fR(1), \\fBccload-rollout\\fR(1), \\fBccload-serve\\fR(1), \\fBbpftool\\fR(8), \\fBtc\\fR(8), \\fBss\\fR(8)\n";
    o += ".PP\nThe README, docs/config.md, docs/metrics.md and docs/ccpd.md in /usr/share/doc/ccload or the source tree.\n";
    o
}

/// ccload(1) with the sections above, placed before VERSION.
pub fn with_sections(page: &str) -> String {
    match page.find(".SH VERSION") {
        Some(i) => format!("{}{}{}", &page[..i], ccload_sections(), &page[i..]),
        None => format!("{page}{}", ccload_sections()),
    }
}

/// ccload.toml(5), from docs/config.md.
pub fn config_page(version: &str) -> String {
    let mut o = format!(
        ".TH ccload.toml 5 \"\" \"ccload {version}\"\n.SH NAME\nccload.toml \\- the configuration of ccload apply and ccload serve\n\
         .SH SYNOPSIS\n\\fB/etc/ccload/config.toml\\fR\n.SH DESCRIPTION\n"
    );
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
                o += &format!(".IP \\(bu 2\n{}\n", inline(&t));
            }
        } else {
            o += &format!(".PP\n{}\n", inline(&words(para)));
        }
    }
    o += ".SH KEYS\n";
    let keys = CONFIG_MD.split("\n## Keys\n").nth(1).unwrap_or("");
    for l in keys
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
    {
        let c: Vec<&str> = l.split('|').map(str::trim).collect();
        if c.len() >= 5 {
            o += &format!(
                ".TP\n{} ({}; default: {})\n{}\n",
                inline(c[1]),
                inline(c[2]),
                inline(c[3]),
                inline(c[4])
            );
        }
    }
    if let Some(after) = CONFIG_MD.split("\n| `serve.request_timeout_ms`").nth(1) {
        if let Some(p) = after.split("\n\n").nth(1) {
            o += &format!(".PP\n{}\n", inline(&words(p)));
        }
    }
    o += ".SH EXAMPLES\n";
    for block in CONFIG_MD.split("```toml\n").skip(1).take(2) {
        let code = block.split("```").next().unwrap_or("");
        o += ".PP\n.nf\n";
        for l in code.lines() {
            o += &format!("{}\n", inline(&l.replace('`', "")));
        }
        o += ".fi\n";
    }
    o += ".PP\nMore examples, and every tunable with its default and range, in docs/config.md; \
          \\fBccload algos\\fR prints the tunables too.\n";
    o += ".SH \"SEE ALSO\"\n\\fBccload\\fR(1), \\fBccload-apply\\fR(1), \\fBccload-serve\\fR(1)\n";
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_page_holds_every_key_and_an_example() {
        let p = config_page("0");
        assert!(p.starts_with(".TH ccload.toml 5"));
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
        let p = with_sections(page);
        let at = |s: &str| p.find(s).unwrap_or_else(|| panic!("{s}"));
        assert!(at(".SH \"EXIT STATUS\"") < at(".SH VERSION"));
        assert!(at(".SH ENVIRONMENT") < at(".SH FILES"));
        assert!(p.contains("CCLOAD_LOCK_WAIT") && p.contains("/run/ccload/profiles.json"));
        assert_eq!(inline("`a\\b`"), "\\fBa\\eb\\fR");
        assert_eq!(inline(".x"), "\\&.x");
    }
}
