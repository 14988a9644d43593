//! Units of the command line and the config file: durations (`30s`,
//! `500ms`, `1h 30m`: humantime's, or plain seconds) and `watch --every`.  A leaf: `cli`, `config` and
//! `watch` read them.

use std::time::Duration;

/// Seconds as a finite, positive number (no panic on -1, nan, inf or
/// 1e300, which `Duration::from_secs_f64` rejects by panicking).
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 1e9 {
        return Err(format!("`{s}`: seconds must be > 0 and at most 1e9"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// `watch --every`: rounds, or a time interval per flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Every {
    Rounds(u32),
    Ms(u32),
}

pub fn parse_every(s: &str) -> Result<Every, String> {
    let bad = || format!("`{s}`: want rounds (e.g. 4) or a time (e.g. 10ms, 1s) up to 60s");
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, Some(1))
    } else if let Some(n) = s.strip_suffix('s') {
        (n, Some(1000))
    } else {
        (s, None)
    };
    let v: u32 = num.trim().parse().map_err(|_| bad())?;
    match mult {
        None if v <= 1000 => Ok(Every::Rounds(v)),
        None => Err(format!("`{s}`: at most 1000 rounds")),
        Some(m) => match v.checked_mul(m) {
            Some(ms) if (1..=60_000).contains(&ms) => Ok(Every::Ms(ms)),
            _ => Err(bad()),
        },
    }
}

/// A duration: humantime's (`5s`, `500ms`, `10m`, `1h 30m`, `2min`) or
/// plain seconds (`2.5`); more than 0 and at most 1e9 s.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.trim().parse::<f64>().is_ok() {
        return parse_seconds(s.trim());
    }
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}`: {e}; want a duration such as 30s, 500ms, 10m"))?;
    if d.is_zero() || d > Duration::from_secs(1_000_000_000) {
        return Err(format!("`{s}`: must be > 0 and at most 1e9 s"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_takes_rounds_or_a_time() {
        assert_eq!(parse_every("4"), Ok(Every::Rounds(4)));
        assert_eq!(parse_every("0"), Ok(Every::Rounds(0)));
        assert_eq!(parse_every("10ms"), Ok(Every::Ms(10)));
        assert_eq!(parse_every("2s"), Ok(Every::Ms(2000)));
        for bad in ["", "x", "-1", "0ms", "61s", "1001", "5m", "4294967295s"] {
            assert!(parse_every(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_take_units_or_plain_seconds() {
        let ok =
            |s: &str, ms: u64| assert_eq!(parse_duration(s), Ok(Duration::from_millis(ms)), "{s}");
        ok("30s", 30_000);
        ok("500ms", 500);
        ok("10m", 600_000);
        ok("1h 30m", 5_400_000);
        ok("2min", 120_000);
        ok("2.5", 2_500);
        ok(" 7 ", 7_000);
        for bad in [
            "",
            "x",
            "-1",
            "0",
            "0s",
            "nan",
            "inf",
            "1e300",
            "5 parsecs",
            "40000y",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
