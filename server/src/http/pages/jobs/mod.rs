//! The job pages: my queue, the submission form, one job with its live output and
//! a cancel button.
//!
//! Owns: turning the job API's answers into rows and pages. Must not touch: the
//! submission rules, who may see a job, or reading output files; the job API
//! (`api::jobs`, `api::output`) decides those, and these pages call it.

pub mod array;
pub mod chart;
pub mod detail;
pub mod filters;
pub mod happened;
pub mod new;
pub mod queue;

use scheduler::{JobId, TimeLimit};

use crate::services::jobs::{JobInfo, QueuePage};
use crate::services::reasons::{self, ClusterSlices, Explained};

/// Jobs per page of a queue.
pub const QUEUE_PAGE: usize = 100;

/// `?page=N` of a queue page (1-based; absent: the first).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    pub page: Option<usize>,
}

impl PageQuery {
    pub fn queue_page(&self) -> QueuePage {
        QueuePage {
            number: self.page.unwrap_or(1).max(1),
            per_page: QUEUE_PAGE,
        }
    }
}

/// Links between the pages of a queue (or of another long list).
pub struct Pager {
    pub path: &'static str,
    pub number: usize,
    pub pages: usize,
    pub total: u64,
    /// What the list holds, as the pager counts it: `jobs`.
    pub noun: &'static str,
    /// The pager's element id: `queue-pages`.
    pub id: &'static str,
    /// Query parameters kept on every page's link (the list's filters), each
    /// followed by `&`: `state=RUNNING&`.
    pub query: String,
}

impl Pager {
    /// The pager of a queue of jobs.
    pub fn new(path: &'static str, page: QueuePage, total: u64) -> Pager {
        Pager {
            path,
            number: page.number,
            pages: page.count(total),
            total,
            noun: "jobs",
            id: "queue-pages",
            query: String::new(),
        }
    }

    /// The same pager keeping `query` (`state=RUNNING&`) on its links.
    pub fn keeping(self, query: String) -> Pager {
        Pager { query, ..self }
    }

    /// The same pager for a list of `noun`, with the element id `id`.
    pub fn counting(self, noun: &'static str, id: &'static str) -> Pager {
        Pager { noun, id, ..self }
    }
}

/// One line of a job table.
pub struct JobRow {
    /// `123` or `123_4`: the detail page's address.
    pub id: String,
    /// As `squeue` shows it (`123_[5-9%2]`).
    pub display_id: String,
    pub user: String,
    pub name: String,
    pub partition: String,
    pub state: String,
    /// Why it is pending, in plain words with the scheduler's code.
    pub waiting: Option<Explained>,
    /// When it is expected to start (RFC 3339), or empty when unknown.
    pub expected_start: String,
    /// RFC 3339: the templates show it with the `when` filter.
    pub submit_time: String,
    pub time_used: String,
    pub time_limit: String,
    pub nodelist: String,
    pub gres: String,
    pub exit_code: String,
}

impl From<JobInfo> for JobRow {
    fn from(j: JobInfo) -> Self {
        JobRow::explained(j, &ClusterSlices::new())
    }
}

impl JobRow {
    /// The row of `j`, its pending reason worded with the cluster's `slices` in
    /// use (empty when they are not known).
    pub fn explained(j: JobInfo, slices: &ClusterSlices) -> Self {
        let waiting = (j.state == "PENDING")
            .then(|| reasons::explain(j.reason.as_deref().unwrap_or(""), &j.gres, slices));
        Self {
            waiting,
            expected_start: j.expected_start.unwrap_or_default(),
            time_used: duration(j.time_used),
            time_limit: time_limit(j.time_limit),
            exit_code: exit_text(j.exit_code, j.signal),
            id: j.id,
            display_id: j.display_id,
            user: j.user,
            name: j.name,
            partition: j.partition,
            state: j.state,
            submit_time: j.submit_time,
            nodelist: j.nodelist,
            gres: j.gres,
        }
    }
}

/// The cluster's slices by type, in use and in all, from the scheduler's node
/// views: what a pending reason's words are drawn from.
pub fn cluster_slices(nodes: &[scheduler::NodeView]) -> ClusterSlices {
    let mut out = ClusterSlices::new();
    for n in nodes {
        for s in &n.slices {
            let c = out.entry(s.r#type.clone()).or_default();
            c.total += s.total;
            c.used += s.used;
        }
    }
    out
}

/// `D-HH:MM:SS` or `HH:MM:SS`, as `squeue` prints times.
pub fn duration(secs: u64) -> String {
    TimeLimit::Seconds(secs).to_string()
}

/// A time limit as `squeue` prints it (`UNLIMITED` when there is none).
pub fn time_limit(secs: Option<u64>) -> String {
    secs.map_or(TimeLimit::Unlimited, TimeLimit::Seconds)
        .to_string()
}

/// `0`, `1`, `signal 9`, or empty while the job has not ended.
pub fn exit_text(code: Option<i64>, signal: Option<i64>) -> String {
    match (code, signal) {
        (Some(c), _) => c.to_string(),
        (None, Some(s)) => format!("signal {s}"),
        (None, None) => String::new(),
    }
}

/// Whether a job in `state` (a Slurm state name) can still be cancelled.
pub fn is_active(state: &str) -> bool {
    matches!(state, "PENDING" | "RUNNING" | "COMPLETING")
}

/// The job id in a page address; `None` (a 404 page) for anything else.
pub fn parse_id(raw: &str) -> Option<JobId> {
    raw.parse().ok()
}
