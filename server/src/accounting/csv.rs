//! Accounting answers as CSV (RFC 4180): a header row, then one line per job or
//! per user, group, account or bucket.
//!
//! Text that a spreadsheet would take for a formula (`=`, `+`, `-`, `@` first) is
//! written with a leading `'`: job names are chosen by users.

use std::borrow::Cow;

use crate::csv::field as text;

use super::answer::{Accounting, JobUsage, KeyUsage};

const JOB_HEADER: [&str; 24] = [
    "job_id",
    "kind",
    "name",
    "user",
    "account",
    "partition",
    "state",
    "exit_code",
    "signal",
    "submit_time",
    "start_time",
    "end_time",
    "time_limit",
    "elapsed_seconds",
    "wall_seconds",
    "nodelist",
    "gres",
    "gpus",
    "gpu_seconds",
    "cpus",
    "cpu_seconds",
    "memory_mb",
    "gpu_hours",
    "cpu_hours",
];

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

fn push_line(out: &mut String, fields: &[Cow<'_, str>]) {
    out.push_str(&fields.join(","));
    out.push_str("\r\n");
}

fn job_line(out: &mut String, j: &JobUsage) {
    push_line(
        out,
        &[
            text(&j.id),
            text(&j.kind),
            text(&j.name),
            text(&j.user),
            text(&j.account),
            text(&j.partition),
            text(&j.state),
            opt(j.exit_code).into(),
            opt(j.signal).into(),
            text(&j.submit_time),
            text(&j.start_time),
            opt(j.end_time.as_deref()).into(),
            opt(j.time_limit).into(),
            j.elapsed_seconds.to_string().into(),
            j.wall_seconds.to_string().into(),
            text(&j.nodelist),
            text(&j.gres),
            j.gpus.to_string().into(),
            j.gpu_seconds.to_string().into(),
            j.cpus.to_string().into(),
            j.cpu_seconds.to_string().into(),
            j.memory_mb.to_string().into(),
            j.gpu_hours.to_string().into(),
            j.cpu_hours.to_string().into(),
        ],
    );
}

fn row_line(out: &mut String, r: &KeyUsage) {
    let t = &r.totals;
    push_line(
        out,
        &[
            text(&r.key),
            t.jobs.to_string().into(),
            t.gpu_hours.to_string().into(),
            t.cpu_hours.to_string().into(),
            t.gpu_seconds.to_string().into(),
            t.cpu_seconds.to_string().into(),
            t.wall_seconds.to_string().into(),
        ],
    );
}

/// The answer as CSV: its jobs, or its rows under a header naming the grouping.
pub fn render(answer: &Accounting) -> String {
    let mut out = String::new();
    if let Some(jobs) = &answer.jobs {
        push_line(&mut out, &JOB_HEADER.map(Cow::Borrowed));
        for j in jobs {
            job_line(&mut out, j);
        }
    } else {
        let header = [
            answer.group_by,
            "jobs",
            "gpu_hours",
            "cpu_hours",
            "gpu_seconds",
            "cpu_seconds",
            "wall_seconds",
        ];
        push_line(&mut out, &header.map(Cow::Borrowed));
        for r in answer.rows.iter().flatten() {
            row_line(&mut out, r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::GroupBy;
    use crate::store::{Usage, UsageKey, UsageRecord, UsageRow};

    #[test]
    fn jobs_have_a_header_and_a_line_each() {
        let usage = Usage {
            jobs: 1,
            gpu_seconds: 7200.0,
            cpu_seconds: 3600.0,
            wall_seconds: 3600.0,
        };
        let mut answer = Accounting::new(0, 3_600_000, GroupBy::Job);
        answer.totals = usage.into();
        let record = UsageRecord {
            id: 17,
            task: 2,
            user_name: "alice".into(),
            name: "train, big".into(),
            kind: "job".into(),
            state: "COMPLETED".into(),
            exit_code: Some(0),
            start_time: 0,
            end_time: Some(3_600_000),
            gpu_milli: 2000,
            cpus: 1,
            used_ms: 3_600_000,
            ..UsageRecord::default()
        };
        answer.jobs = Some(vec![JobUsage::of(&record, 0)]);
        let csv = render(&answer);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 2, "{csv}");
        assert!(lines[0].starts_with("job_id,kind,name,user,"), "{csv}");
        assert!(
            lines[1]
                .starts_with("17_2,job,\"train, big\",alice,,,COMPLETED,0,,1970-01-01T00:00:00Z,"),
            "{csv}"
        );
        assert!(lines[1].ends_with(",2,7200,1,3600,0,2,1"), "{csv}");

        let mut by_user = Accounting::new(0, 1, GroupBy::Key(UsageKey::User));
        by_user.rows = Some(vec![KeyUsage::of_row(UsageRow {
            key: "alice".into(),
            usage,
        })]);
        assert_eq!(
            render(&by_user),
            "user,jobs,gpu_hours,cpu_hours,gpu_seconds,cpu_seconds,wall_seconds\r\nalice,1,2,1,7200,3600,3600\r\n"
        );
    }
}
