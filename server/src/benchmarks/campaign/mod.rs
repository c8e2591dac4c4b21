//! Benchmark campaigns, their pure core: a template (a job script whose `#CAMPAIGN`
//! lines declare its parameters) times a matrix (GPU counts, parameter values,
//! repetitions) planned into job arrays, one per GPU count; then the report that
//! compares each point of the matrix with the published reference figures, and its
//! CSV and self-contained HTML.
//!
//! - `template`: `#CAMPAIGN` lines read into a [`Template`]; the built-in ones.
//! - `matrix`: a [`MatrixSpec`] checked and expanded into [`Point`]s.
//! - `jobs`: the points as job arrays ([`PlannedJob`]: the script with its
//!   prologue, Slurm's `--array`), and the GPU-hours they may take.
//! - `report`: the [`Report`] of the runs recorded so far; `closest`: the published
//!   configuration nearest each point; `scaling`: efficiency across GPU counts;
//!   `storage`: what each GPU read and the storage nodes that would take.
//! - `export`, `svg`: the report as CSV, and as one HTML document with inline SVG
//!   charts (its markup in `templates/web/benchmarks/campaign_report.html`).
//!
//! Owns: the rules of templates, matrices, the prologue and the report's arithmetic.
//! Must not touch: IO, SQL, HTTP or the clock (times are parameters); submitting
//! the jobs and storing the campaign are the service's.

mod closest;
pub mod export;
pub mod jobs;
pub mod matrix;
mod point;
pub mod report;
mod scaling;
mod storage;
mod svg;
pub mod template;

pub use export::{csv, html};
pub use jobs::{gpu_hours, plan, GpuHours, Plan, PlannedJob};
pub use matrix::{Limits, MatrixSpec, Point};
pub use report::{report, JobCounts, PointRun, Report, ReportInput};
pub use template::{builtin, Param, Template};

/// A refused field of a template or a matrix, named as the API reports it
/// (`script`, `matrix.params.BATCH`, `matrix.points` …), and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// The error of `field`.
fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}
