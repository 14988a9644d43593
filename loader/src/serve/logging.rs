//! The daemon's log: `tracing` events (`error!`, `warn!`, `info!`, with
//! structured fields) written to stderr as one line each, in the format the
//! host's log reader wants ([`LogFormat`]).  tracing-subscriber's own
//! formats have none of the three: journald's `<N>` priority prefix, the
//! `ccload: level: message` of `kubectl logs`, or the flat JSON object
//! (`ts`, `level`, `msg`, then the event's fields) the log collectors
//! were given before, so [`Line`] formats the event itself.  The message
//! reads whole in every format; the fields (the config, the algorithm, the
//! cgroup, the error) are there for collectors to filter on, in JSON.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How the daemon's log lines look on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// `ccload: info: ...` (a terminal, plain `kubectl logs`).
    Text,
    /// `<6>ccload: ...`: the sd-daemon priority prefix journald turns into
    /// the entry's priority.
    Journal,
    /// One JSON object per line: {"ts": unix seconds, "level", "msg", and
    /// the event's fields} (log collectors: Loki, Elasticsearch, Cloud
    /// Logging).
    Json,
}

/// `ccload -j serve` or CCLOAD_LOG_FORMAT=json|journal|text choose; else
/// journald's prefixes when systemd connected stderr to the journal
/// (`JOURNAL_STREAM`), words otherwise.
pub fn log_format(json_flag: bool) -> LogFormat {
    match std::env::var("CCLOAD_LOG_FORMAT").as_deref() {
        _ if json_flag => LogFormat::Json,
        Ok("json") => LogFormat::Json,
        Ok("journal") => LogFormat::Journal,
        Ok("text") => LogFormat::Text,
        _ if std::env::var_os("JOURNAL_STREAM").is_some() => LogFormat::Journal,
        _ => LogFormat::Text,
    }
}

/// Send ccload's own tracing events, info and above, to stderr in
/// `format` (once; a second call, as from tests, keeps the first).  The
/// libraries' events (kube, hyper, tower) stay out of the daemon's log, as
/// before it used tracing: only targets under `ccload` pass.
pub fn init(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::Layer;
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .event_format(Line(format))
        .with_filter(ours());
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer));
}

/// What the daemon logs: ccload's events at info and above.
fn ours() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new().with_target("ccload", Level::INFO)
}

/// sd-daemon priority and the level's word.
fn level(l: Level) -> (u8, &'static str) {
    match l {
        Level::ERROR => (3, "error"),
        Level::WARN => (4, "warning"),
        Level::INFO => (6, "info"),
        _ => (7, "debug"),
    }
}

/// An event's message and fields, as text.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "message" {
            self.message = v.to_string();
        } else {
            self.rest.push((f.name(), v.to_string()));
        }
    }

    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        if f.name() == "message" {
            self.message = format!("{v:?}");
        } else {
            self.rest.push((f.name(), format!("{v:?}")));
        }
    }
}

/// One event as one line, in a [`LogFormat`].
pub struct Line(pub LogFormat);

impl Line {
    /// The line for a message of `lvl` with `fields` at unix time `ts` (no
    /// newline).
    fn render(&self, lvl: Level, f: &Fields, ts: f64) -> String {
        let (prio, word) = level(lvl);
        let mut out = String::new();
        match self.0 {
            LogFormat::Journal | LogFormat::Text => {
                // the message says it all to a reader; the fields are
                // for collectors (JSON)
                if self.0 == LogFormat::Journal {
                    let _ = write!(out, "<{prio}>ccload: {}", f.message);
                } else {
                    let _ = write!(out, "ccload: {word}: {}", f.message);
                }
            }
            LogFormat::Json => {
                let mut o = serde_json::Map::new();
                o.insert("ts".into(), ((ts * 1000.0).round() / 1000.0).into());
                o.insert("level".into(), word.into());
                o.insert("msg".into(), f.message.clone().into());
                for (k, v) in &f.rest {
                    o.insert((*k).into(), v.clone().into());
                }
                out = serde_json::Value::Object(o).to_string();
            }
        }
        out
    }
}

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        ev: &Event<'_>,
    ) -> fmt::Result {
        let mut f = Fields::default();
        ev.record(&mut f);
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        writeln!(w, "{}", self.render(*ev.metadata().level(), &f, ts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ccloads_own_events_are_logged() {
        let f = ours();
        assert!(f.would_enable("ccload::serve", &Level::INFO));
        assert!(f.would_enable("ccload::serve::rollouts", &Level::ERROR));
        assert!(!f.would_enable("ccload::serve", &Level::DEBUG));
        assert!(!f.would_enable("kube_runtime::watcher", &Level::WARN));
        assert!(!f.would_enable("hyper::proto", &Level::INFO));
    }

    #[test]
    fn each_format_writes_the_message_its_level_and_fields() {
        let f = Fields {
            message: "reload failed".into(),
            rest: vec![("error", "no such file".into())],
        };
        assert_eq!(
            Line(LogFormat::Journal).render(Level::ERROR, &f, 0.0),
            "<3>ccload: reload failed"
        );
        assert_eq!(
            Line(LogFormat::Text).render(Level::WARN, &f, 0.0),
            "ccload: warning: reload failed"
        );
        let j: serde_json::Value = serde_json::from_str(&Line(LogFormat::Json).render(
            Level::INFO,
            &f,
            1_700_000_000.123_45,
        ))
        .unwrap();
        assert_eq!(j["ts"], 1_700_000_000.123);
        assert_eq!(j["level"], "info");
        assert_eq!(j["msg"], "reload failed");
        assert_eq!(j["error"], "no such file");
    }
}
