//! Slurm's text output, as pure functions: field widths and truncation, its time
//! formats, and the default `squeue` and `sinfo` lines (`sacct`'s columns are in
//! [`super::sacct_fields`]). Owns no IO.

use super::api::{JobInfo, PartitionInfo};

/// How a field is aligned in its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One field as `squeue`/`sinfo` print `%.Nx` (right) or `%Nx` (left): cut to
/// `width` characters (keeping the start) and padded to it. `width` 0: as is.
pub fn field(text: &str, width: usize, align: Align) -> String {
    if width == 0 {
        return text.to_string();
    }
    let cut: String = text.chars().take(width).collect();
    match align {
        Align::Left => format!("{cut:<width$}"),
        Align::Right => format!("{cut:>width$}"),
    }
}

/// One field as `sacct` prints it: too long values keep `width - 1` characters and
/// end with `+`.
pub fn sacct_field(text: &str, width: usize, align: Align) -> String {
    if text.chars().count() > width {
        let cut: String = text.chars().take(width.saturating_sub(1)).collect();
        return format!("{cut}+");
    }
    match align {
        Align::Left => format!("{text:<width$}"),
        Align::Right => format!("{text:>width$}"),
    }
}

/// A run time as `squeue` prints `%M`: `M:SS`, `H:MM:SS` or `D-HH:MM:SS`.
pub fn elapsed(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// A time limit as `sinfo` prints `%l`: `infinite`, `H:MM:SS` or `D-HH:MM:SS`.
pub fn time_limit(limit: Option<u64>) -> String {
    match limit {
        None => "infinite".into(),
        Some(secs) => {
            let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
            if d > 0 {
                format!("{d}-{h:02}:{m:02}:{s:02}")
            } else {
                format!("{h}:{m:02}:{s:02}")
            }
        }
    }
}

/// Reads a limit the portal wrote (`UNLIMITED`, `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS`,
/// or seconds as a number): seconds, or `None` for no limit. `Err` when unreadable.
pub fn parse_limit(value: &serde_json::Value) -> Result<Option<u64>, String> {
    let bad = || format!("unreadable time limit {value}");
    match value {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Number(n) => Ok(n.as_u64().filter(|&s| s > 0)),
        serde_json::Value::String(s) => {
            let s = s.trim();
            if s.eq_ignore_ascii_case("unlimited") || s.eq_ignore_ascii_case("infinite") {
                return Ok(None);
            }
            let (days, clock) = match s.split_once('-') {
                Some((d, rest)) => (d.parse::<u64>().map_err(|_| bad())?, rest),
                None => (0, s),
            };
            let parts = clock
                .split(':')
                .map(|p| p.parse::<u64>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| bad())?;
            let (h, m, sec) = match parts.as_slice() {
                [h, m, s] => (*h, *m, *s),
                [m, s] => (0, *m, *s),
                _ => return Err(bad()),
            };
            Ok(Some(days * 86_400 + h * 3600 + m * 60 + sec))
        }
        _ => Err(bad()),
    }
}

/// `squeue`'s `NODELIST(REASON)`: `(Reason)` for a pending job, else its nodes.
pub fn nodelist_or_reason(job: &JobInfo) -> String {
    if job.state == "PENDING" {
        format!("({})", job.reason.as_deref().unwrap_or("None"))
    } else {
        job.nodelist.clone()
    }
}

/// `squeue`'s default header: `%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R`.
pub fn squeue_header() -> String {
    squeue_row([
        "JOBID",
        "PARTITION",
        "NAME",
        "USER",
        "ST",
        "TIME",
        "NODES",
        "NODELIST(REASON)",
    ])
}

/// One job in `squeue`'s default format.
pub fn squeue_line(job: &JobInfo) -> String {
    squeue_row([
        &job.display_id,
        &job.partition,
        &job.name,
        &job.user,
        &job.state_code,
        &elapsed(job.time_used),
        &job.nodes.to_string(),
        &nodelist_or_reason(job),
    ])
}

fn squeue_row(cells: [&str; 8]) -> String {
    const WIDTHS: [usize; 8] = [18, 9, 8, 8, 2, 10, 6, 0];
    cells
        .iter()
        .zip(WIDTHS)
        .map(|(cell, width)| field(cell, width, Align::Right))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A node state as `sinfo`'s `%t` prints it (`idle`, `mix`, `alloc`, `drain`, `down`).
pub fn node_state_short(state: &str) -> String {
    match state.to_ascii_uppercase().as_str() {
        "IDLE" => "idle".into(),
        "MIXED" => "mix".into(),
        "ALLOCATED" => "alloc".into(),
        "DRAIN" | "DRAINED" => "drain".into(),
        "DRAINING" => "drng".into(),
        "DOWN" => "down".into(),
        other => other.to_ascii_lowercase(),
    }
}

/// `sinfo`'s default output (`%#P %.5a %.10l %.6D %.6t %N`): a header, then one line
/// per partition and node state; the default partition's name ends with `*`. The
/// partition column is as wide as the longest name (at least `PARTITION`).
pub fn sinfo_lines(partitions: &[PartitionInfo], header: bool) -> Result<Vec<String>, String> {
    let names: Vec<String> = partitions
        .iter()
        .map(|p| {
            if p.default {
                format!("{}*", p.name)
            } else {
                p.name.clone()
            }
        })
        .collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .chain([9])
        .max()
        .unwrap_or(9);
    let row = |cells: [&str; 6]| {
        let mut line = field(cells[0], width, Align::Left);
        for (cell, w) in cells[1..5].iter().zip([5, 10, 6, 6]) {
            line.push(' ');
            line.push_str(&field(cell, w, Align::Right));
        }
        line.push(' ');
        line.push_str(cells[5]);
        line
    };
    let mut lines = Vec::new();
    if header {
        lines.push(row([
            "PARTITION",
            "AVAIL",
            "TIMELIMIT",
            "NODES",
            "STATE",
            "NODELIST",
        ]));
    }
    for (p, name) in partitions.iter().zip(&names) {
        let limit = time_limit(parse_limit(&p.max_time)?);
        if p.nodes_by_state.is_empty() {
            lines.push(row([name, "up", &limit, "0", "n/a", ""]));
        }
        for (state, count, nodes) in &p.nodes_by_state {
            lines.push(row([
                name,
                "up",
                &limit,
                &count.to_string(),
                &node_state_short(state),
                nodes,
            ]));
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str, code: &str) -> JobInfo {
        JobInfo::sample(state, code)
    }

    #[test]
    fn fields_are_cut_to_their_width_keeping_the_start() {
        assert_eq!(field("abc", 5, Align::Right), "  abc");
        assert_eq!(field("abc", 5, Align::Left), "abc  ");
        assert_eq!(field("averylongname", 8, Align::Right), "averylon");
        assert_eq!(field("averylongname", 8, Align::Left), "averylon");
        assert_eq!(field("ünïcødé-name", 4, Align::Right), "ünïc");
        assert_eq!(field("whole", 0, Align::Right), "whole");
    }

    #[test]
    fn sacct_fields_mark_cut_values_with_a_plus() {
        assert_eq!(sacct_field("train", 10, Align::Right), "     train");
        assert_eq!(sacct_field("17", 12, Align::Left), "17          ");
        assert_eq!(
            sacct_field("a-long-job-name", 10, Align::Right),
            "a-long-jo+"
        );
        assert_eq!(sacct_field("0123456789", 10, Align::Right), "0123456789");
    }

    #[test]
    fn elapsed_times_look_like_squeue() {
        assert_eq!(elapsed(0), "0:00");
        assert_eq!(elapsed(59), "0:59");
        assert_eq!(elapsed(61), "1:01");
        assert_eq!(elapsed(3599), "59:59");
        assert_eq!(elapsed(3600), "1:00:00");
        assert_eq!(elapsed(86_399), "23:59:59");
        assert_eq!(elapsed(86_400), "1-00:00:00");
        assert_eq!(elapsed(2 * 86_400 + 3 * 3600 + 4 * 60 + 5), "2-03:04:05");
    }

    #[test]
    fn time_limits_look_like_sinfo() {
        assert_eq!(time_limit(None), "infinite");
        assert_eq!(time_limit(Some(7200)), "2:00:00");
        assert_eq!(time_limit(Some(1800)), "0:30:00");
        assert_eq!(time_limit(Some(86_400)), "1-00:00:00");
        let limit = |v: serde_json::Value| parse_limit(&v);
        assert_eq!(limit("UNLIMITED".into()), Ok(None));
        assert_eq!(limit("1-00:00:00".into()), Ok(Some(86_400)));
        assert_eq!(limit("02:00:00".into()), Ok(Some(7200)));
        assert_eq!(limit("30:00".into()), Ok(Some(1800)));
        assert_eq!(limit(serde_json::json!(60)), Ok(Some(60)));
        assert!(limit("soon".into()).is_err());
    }

    #[test]
    fn squeue_header_matches_slurm() {
        assert_eq!(
            squeue_header(),
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
        );
    }

    #[test]
    fn squeue_shows_nodes_when_running_and_the_reason_when_pending() {
        let mut running = job("RUNNING", "R");
        running.time_used = 3725;
        running.name = "a-very-long-name".into();
        assert_eq!(
            squeue_line(&running),
            "                17       gpu a-very-l    alice  R    1:02:05      1 head"
        );
        let mut pending = job("PENDING", "PD");
        pending.display_id = "17_[5-9%2]".into();
        pending.reason = Some("Priority".into());
        pending.nodelist = String::new();
        assert_eq!(
            squeue_line(&pending),
            "        17_[5-9%2]       gpu    train    alice PD       0:00      1 (Priority)"
        );
        pending.reason = None;
        assert_eq!(nodelist_or_reason(&pending), "(None)");
    }

    #[test]
    fn sinfo_lists_each_partition_state_and_marks_the_default() {
        let parts: Vec<PartitionInfo> = serde_json::from_value(serde_json::json!([
            {"name": "gpu", "default": true, "max_time": "UNLIMITED", "nodes_total": 3,
             "nodes_by_state": [["IDLE", 1, "head"], ["MIXED", 2, "n[1-2]"]]},
            {"name": "short", "default": false, "max_time": "02:00:00", "nodes_total": 0,
             "nodes_by_state": []}
        ]))
        .expect("partitions");
        assert_eq!(
            sinfo_lines(&parts, true).expect("lines"),
            [
                "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST",
                "gpu*         up   infinite      1   idle head",
                "gpu*         up   infinite      2    mix n[1-2]",
                "short        up    2:00:00      0    n/a ",
            ]
        );
    }

    #[test]
    fn sinfo_widens_the_partition_column_for_long_names() {
        let parts: Vec<PartitionInfo> = serde_json::from_value(serde_json::json!([
            {"name": "interactive-a100", "default": true, "max_time": "1-00:00:00",
             "nodes_by_state": [["ALLOCATED", 1, "head"]]}
        ]))
        .expect("partitions");
        assert_eq!(
            sinfo_lines(&parts, true).expect("lines"),
            [
                "PARTITION         AVAIL  TIMELIMIT  NODES  STATE NODELIST",
                "interactive-a100*    up 1-00:00:00      1  alloc head",
            ]
        );
    }
}
