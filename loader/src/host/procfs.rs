//! /proc/PID/stat, read once for the rollout's owner check and the bench's
//! CPU accounting.

/// The fields of /proc/`pid`/stat after the command name, from `state`
/// (stat(5) field 3) on: stat(5) field n is index n - 3.  The command name
/// is skipped by its last ")", since it may hold spaces and parentheses.
/// None if the process is gone.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_start_at_the_state_whatever_the_signed_ones_hold() {
        let f = stat_fields(std::process::id()).expect("our own stat");
        // state is one letter; tpgid (field 8) is -1 without a terminal,
        // so an index over the numeric fields only would be off by one
        assert_eq!(f[0].len(), 1, "{f:?}");
        assert_eq!(
            f[1].parse::<u32>().ok(),
            Some(std::os::unix::process::parent_id())
        );
        for n in [14, 15, 22] {
            assert!(f[n - 3].parse::<u64>().is_ok(), "field {n}: {f:?}");
        }
        assert!(stat_fields(u32::MAX).is_none());
    }
}
