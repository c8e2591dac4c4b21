//! What an accounting answer holds: job records, sums per user, group, account or
//! bucket, and the totals, as JSON shapes built from the store's rows.

use serde::Serialize;
use utoipa::ToSchema;

use super::{bucket_text, hours, seconds, time_text, GroupBy};
use crate::store::{BucketUsage, Usage, UsageRecord, UsageRow};

/// What the jobs of the answer used inside the range, in all.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Totals {
    pub jobs: i64,
    pub gpu_hours: f64,
    pub cpu_hours: f64,
    pub gpu_seconds: f64,
    pub cpu_seconds: f64,
    /// Seconds run inside the range, summed over the jobs.
    pub wall_seconds: f64,
}

impl From<Usage> for Totals {
    fn from(u: Usage) -> Self {
        Totals {
            jobs: u.jobs,
            gpu_hours: hours(u.gpu_seconds),
            cpu_hours: hours(u.cpu_seconds),
            gpu_seconds: seconds(u.gpu_seconds),
            cpu_seconds: seconds(u.cpu_seconds),
            wall_seconds: seconds(u.wall_seconds),
        }
    }
}

/// One job, array task or session that ran during the range.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobUsage {
    /// `123`, or `123_4` for an array task.
    pub id: String,
    pub job_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<i64>,
    /// `job` or `session`.
    pub kind: String,
    pub name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i64>,
    pub submit_time: String,
    pub start_time: String,
    /// Absent while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Seconds; absent: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<i64>,
    /// Seconds run in all (until now while it runs).
    pub elapsed_seconds: f64,
    /// Seconds run inside the range.
    pub wall_seconds: f64,
    pub nodelist: String,
    /// Generic resources as requested (`gpu:2`).
    pub gres: String,
    /// GPUs given, MIG instances and shards counted by their fraction.
    pub gpus: f64,
    pub gpu_seconds: f64,
    pub gpu_hours: f64,
    pub cpus: i64,
    pub cpu_seconds: f64,
    pub cpu_hours: f64,
    /// Memory reserved.
    pub memory_mb: i64,
}

impl JobUsage {
    pub fn of(r: &UsageRecord, now: i64) -> JobUsage {
        let end = r.end_time.unwrap_or(now);
        JobUsage {
            id: if r.task >= 0 {
                format!("{}_{}", r.id, r.task)
            } else {
                r.id.to_string()
            },
            job_id: r.id,
            array_task_id: (r.task >= 0).then_some(r.task),
            kind: r.kind.clone(),
            name: r.name.clone(),
            user: r.user_name.clone(),
            account: r.account.clone(),
            partition: r.partition.clone(),
            state: r.state.clone(),
            exit_code: r.exit_code,
            signal: r.exit_signal,
            submit_time: time_text(r.submit_time),
            start_time: time_text(r.start_time),
            end_time: r.end_time.map(time_text),
            time_limit: r.time_limit,
            elapsed_seconds: seconds((end - r.start_time).max(0) as f64 / 1e3),
            wall_seconds: seconds(r.wall_seconds()),
            nodelist: r.nodelist.clone(),
            gres: r.gres.clone(),
            gpus: r.gpu_milli as f64 / 1e3,
            gpu_seconds: seconds(r.gpu_seconds()),
            gpu_hours: hours(r.gpu_seconds()),
            cpus: r.cpus,
            cpu_seconds: seconds(r.cpu_seconds()),
            cpu_hours: hours(r.cpu_seconds()),
            memory_mb: r.memory_mb,
        }
    }
}

/// The usage of one user, group, account or bucket.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KeyUsage {
    /// The user, group or account name, or the bucket's first day (`2025-03-01`).
    pub key: String,
    #[serde(flatten)]
    pub totals: Totals,
}

impl KeyUsage {
    pub fn of_row(row: UsageRow) -> KeyUsage {
        KeyUsage {
            key: row.key,
            totals: row.usage.into(),
        }
    }

    pub fn of_bucket(bucket: BucketUsage) -> KeyUsage {
        KeyUsage {
            key: bucket_text(bucket.start),
            totals: bucket.usage.into(),
        }
    }
}

/// `GET /api/v1/accounting`'s answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Accounting {
    pub from: String,
    /// The end of the range (not included).
    pub to: String,
    /// `job`, `user`, `group`, `account`, `day`, `week` or `month`.
    pub group_by: &'static str,
    /// Over every job of the range that the filters select (never capped).
    pub totals: Totals,
    /// One per job (`group_by=job`), by start time, at most `limit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<JobUsage>>,
    /// One per user, group, account or bucket (other `group_by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<Vec<KeyUsage>>,
    /// The `offset` of the next page of jobs, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<i64>,
}

impl Accounting {
    /// An answer without jobs, rows or totals yet.
    pub fn new(from: i64, to: i64, group_by: GroupBy) -> Accounting {
        Accounting {
            from: time_text(from),
            to: time_text(to),
            group_by: group_by.name(),
            totals: Usage::default().into(),
            jobs: None,
            rows: None,
            next: None,
        }
    }
}
