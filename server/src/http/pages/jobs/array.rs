//! `GET /jobs/{id}` of an array: the array as one thing. Its tasks with their state,
//! exit code, run time and output; counts by state; "Cancel waiting tasks" (its
//! pending tasks only, `scancel --state=PENDING`) and "Cancel all". The tasks still
//! waiting in the array's own record are one row per range, however many they are.

use std::collections::BTreeMap;

use askama::Template;

use super::filters::encode;
use super::{duration, exit_text, is_active};
use crate::http::pages::when::filters;
use crate::http::pages::Nav;
use crate::services::jobs::JobInfo;

/// One line of the task table: a task, or a range of tasks still waiting.
pub struct TaskRow {
    /// `13_4`, or `13_[5-7]` for those still in the array's record.
    pub display_id: String,
    /// The task's own page (none for a range that waits).
    pub link: Option<String>,
    pub state: String,
    pub reason: String,
    pub exit: String,
    pub run_time: String,
    pub output_link: Option<String>,
}

#[derive(Template)]
#[template(path = "jobs/array.html")]
pub struct ArrayPage {
    pub nav: Nav,
    pub job: JobInfo,
    /// Tasks in all, and by state (`RUNNING 2`), the states in Slurm's order.
    pub total: u64,
    pub counts: Vec<(String, u64)>,
    pub rows: Vec<TaskRow>,
    /// Tasks that wait, and that run.
    pub waiting: u64,
    pub running: u64,
    pub owner: bool,
    pub notice: Option<String>,
}

/// Tasks still waiting in the array's record are a row each up to this many.
const MAX_EXPANDED: u64 = 200;

/// The order states are counted in.
const STATE_ORDER: [&str; 9] = [
    "PENDING",
    "RUNNING",
    "COMPLETING",
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "CANCELLED",
    "NODE_FAIL",
];

/// The page of array `job` from its listed records (its tasks and the record of
/// those still waiting), tasks in index order.
pub fn page(
    nav: Nav,
    job: JobInfo,
    records: Vec<JobInfo>,
    owner: bool,
    notice: Option<String>,
) -> ArrayPage {
    let mut rows: Vec<(u32, TaskRow)> = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for r in &records {
        match r.array_task_id {
            Some(t) => {
                *counts.entry(r.state.clone()).or_default() += 1;
                rows.push((
                    t,
                    TaskRow {
                        display_id: r.id.clone(),
                        link: Some(format!("/jobs/{}", r.id)),
                        state: r.state.clone(),
                        reason: if r.state == "PENDING" {
                            r.reason.clone().unwrap_or_default()
                        } else {
                            String::new()
                        },
                        exit: exit_text(r.exit_code, r.signal),
                        run_time: if r.start_time.is_some() {
                            duration(r.time_used)
                        } else {
                            String::new()
                        },
                        output_link: r
                            .stdout
                            .as_deref()
                            .filter(|_| r.start_time.is_some())
                            .map(|f| format!("/files/download?path={}", encode(f))),
                    },
                ));
            }
            None => {
                let Some(spec) = r
                    .array_spec
                    .as_deref()
                    .and_then(|s| s.parse::<scheduler::ArraySpec>().ok())
                else {
                    continue;
                };
                let n: u64 = spec
                    .ranges
                    .iter()
                    .map(|&(a, b, s)| u64::from((b - a) / s.max(1) + 1))
                    .sum();
                if n == 0 || !is_active(&r.state) {
                    // Ended while waiting (cancelled): counted as such.
                    if n > 0 {
                        *counts.entry(r.state.clone()).or_default() += n;
                    }
                } else {
                    *counts.entry("PENDING".into()).or_default() += n;
                }
                // Few enough: a row each, as the tasks that ran; else a row a range.
                let ranges: Vec<(u32, u32, u32)> = if n <= MAX_EXPANDED {
                    spec.ranges
                        .iter()
                        .flat_map(|&(a, b, s)| (a..=b).step_by(s.max(1) as usize))
                        .map(|t| (t, t, 1))
                        .collect()
                } else {
                    spec.ranges.clone()
                };
                for &(a, b, s) in &ranges {
                    let range = if a == b {
                        a.to_string()
                    } else if s > 1 {
                        format!("{a}-{b}:{s}")
                    } else {
                        format!("{a}-{b}")
                    };
                    let state = if is_active(&r.state) {
                        "PENDING".to_string()
                    } else {
                        r.state.clone()
                    };
                    rows.push((
                        a,
                        TaskRow {
                            display_id: if a == b {
                                format!("{}_{a}", job.job_id)
                            } else {
                                format!("{}_[{range}]", job.job_id)
                            },
                            link: None,
                            reason: if state == "PENDING" {
                                r.reason.clone().unwrap_or_default()
                            } else {
                                String::new()
                            },
                            state,
                            exit: String::new(),
                            run_time: String::new(),
                            output_link: None,
                        },
                    ));
                }
            }
        }
    }
    rows.sort_by_key(|(t, _)| *t);
    // A task that waits again after a requeue has its own record and is in the
    // array's too: once.
    rows.dedup_by_key(|(t, _)| *t);
    let total = counts.values().sum();
    let waiting = counts.get("PENDING").copied().unwrap_or(0);
    let running = counts.get("RUNNING").copied().unwrap_or(0)
        + counts.get("COMPLETING").copied().unwrap_or(0);
    let mut counted: Vec<(String, u64)> = STATE_ORDER
        .iter()
        .filter_map(|s| Some((s.to_string(), counts.remove(*s)?)))
        .collect();
    counted.extend(counts);
    ArrayPage {
        nav,
        job,
        total,
        counts: counted,
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        waiting,
        running,
        owner,
        notice,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    fn task(t: u32, state: &str, exit: Option<i64>) -> JobInfo {
        JobInfo {
            id: format!("13_{t}"),
            job_id: 13,
            array_task_id: Some(t),
            state: state.into(),
            exit_code: exit,
            start_time: Some("2026-01-01T00:00:00Z".into()),
            time_used: 61,
            stdout: Some(format!("/home/ann/slurm-13_{t}.out")),
            ..JobInfo::default()
        }
    }

    #[test]
    fn an_array_of_eight_lists_its_tasks_counts_them_and_offers_both_cancels() {
        let parent = || JobInfo {
            id: "13".into(),
            job_id: 13,
            display_id: "13_[4-7%2]".into(),
            name: "sweep".into(),
            state: "PENDING".into(),
            reason: Some("JobArrayTaskLimit".into()),
            array_spec: Some("4-7%2".into()),
            ..JobInfo::default()
        };
        let records = vec![
            parent(),
            task(3, "RUNNING", None),
            task(2, "RUNNING", None),
            task(1, "FAILED", Some(3)),
            task(0, "COMPLETED", Some(0)),
        ];
        let p = page(nav(), parent(), records, true, None);
        assert_eq!(p.total, 8);
        assert_eq!((p.waiting, p.running), (4, 2));
        let counts: Vec<(&str, u64)> = p.counts.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        assert_eq!(
            counts,
            [
                ("PENDING", 4),
                ("RUNNING", 2),
                ("COMPLETED", 1),
                ("FAILED", 1)
            ]
        );
        let ids: Vec<&str> = p.rows.iter().map(|r| r.display_id.as_str()).collect();
        assert_eq!(
            ids,
            ["13_0", "13_1", "13_2", "13_3", "13_4", "13_5", "13_6", "13_7"]
        );
        assert_eq!(p.rows[1].exit, "3");
        assert_eq!(p.rows[4].reason, "JobArrayTaskLimit");
        assert_eq!(p.rows[4].link, None, "a task that waits has no page yet");
        let html = p.render().expect("render");
        assert!(html.contains("id=\"array-cancel-waiting\""), "{html}");
        assert!(html.contains("id=\"array-cancel-all\""), "{html}");
        assert!(html.contains("href=\"/jobs/13_1\""), "{html}");
        assert!(
            html.contains("href=\"/files/download?path=%2Fhome%2Fann%2Fslurm-13_1.out\""),
            "{html}"
        );
    }
}
