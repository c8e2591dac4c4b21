//! Job steps: what a running job's `srun` records (its start, its end) and what
//! `sacct` lists (`JOBID.0`, `JOBID.1` …, with the job's rows).
//!
//! Owns: the job token's reach (one job, while it runs, its own steps and its own
//! requeue (`Jobs::requeue_itself`) only: the
//! token is checked here and nowhere else), the bounds on what a step reports (each
//! refusal names its field and changes nothing), and how a step that never reported
//! its end shows once its job is over (CANCELLED: it ended with the job).
//! Must not touch: HTTP types, SQL (the store), the scheduler.

use scheduler::{JobId, JobState};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ServiceError;
use crate::sched::JobTokens;
use crate::store::{NewStep, StepEnd, StepRecord, Store, StoreError};
use crate::util::rfc3339;

/// Slurm's `MaxStepCount` default: the most steps one job may have.
pub const MAX_STEPS: i64 = 40_000;
/// The most tasks one step may start (Slurm's `MAX_TASKS_PER_NODE` on one node).
pub const MAX_STEP_TASKS: u32 = 512;
/// A step's name, as a job's (`-J`).
pub const MAX_STEP_NAME_BYTES: usize = 256;
/// `SLURM_STEP_GPUS`: GPU indices or MIG UUIDs, comma-separated.
pub const MAX_STEP_GPUS_BYTES: usize = 4096;

/// A step that starts (`POST /jobs/{id}/steps`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartStep {
    /// The step's name (srun's `-J`, else its command's).
    pub name: String,
    /// How many tasks it starts.
    pub ntasks: u32,
    /// The step's GPUs as `SLURM_STEP_GPUS` lists them.
    #[serde(default)]
    pub gpus: String,
}

/// How a step ended (`PUT /jobs/{id}/steps/{step}`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndStep {
    /// `COMPLETED`, `FAILED` or `CANCELLED`.
    pub state: String,
    /// The highest exit code of its tasks (0 to 255).
    pub exit_code: i64,
    /// The signal that ended a task, if one did.
    #[serde(default)]
    pub signal: Option<i64>,
}

/// A step as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StepInfo {
    /// `123.0`, or `123_4.0` for an array task's.
    pub id: String,
    pub step_id: u32,
    pub name: String,
    /// `RUNNING`, `COMPLETED`, `FAILED` or `CANCELLED`.
    pub state: String,
    pub ntasks: u32,
    pub gpus: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i64>,
    pub start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Seconds run so far (or in all).
    pub time_used: u64,
}

fn task_of(job: JobId) -> i64 {
    job.task.map_or(-1, i64::from)
}

fn invalid(field: &'static str, message: impl Into<String>) -> ServiceError {
    ServiceError::Invalid {
        field,
        message: message.into(),
    }
}

impl StartStep {
    /// Every field within its bounds, or the first refused.
    fn check(&self) -> Result<(), ServiceError> {
        if self.name.is_empty() || self.name.len() > MAX_STEP_NAME_BYTES {
            return Err(invalid(
                "name",
                format!("a step's name has 1 to {MAX_STEP_NAME_BYTES} bytes"),
            ));
        }
        if self.name.chars().any(char::is_control) {
            return Err(invalid("name", "a step's name has no control characters"));
        }
        if !(1..=MAX_STEP_TASKS).contains(&self.ntasks) {
            return Err(invalid(
                "ntasks",
                format!("a step has 1 to {MAX_STEP_TASKS} tasks"),
            ));
        }
        let gpu_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, ',' | '-' | '/');
        if self.gpus.len() > MAX_STEP_GPUS_BYTES || !self.gpus.chars().all(gpu_char) {
            return Err(invalid(
                "gpus",
                format!(
                    "a step's GPUs are indices or MIG UUIDs separated by commas, at most {MAX_STEP_GPUS_BYTES} bytes"
                ),
            ));
        }
        Ok(())
    }
}

impl EndStep {
    fn check(&self) -> Result<(), ServiceError> {
        if !matches!(self.state.as_str(), "COMPLETED" | "FAILED" | "CANCELLED") {
            return Err(invalid(
                "state",
                "a step ends COMPLETED, FAILED or CANCELLED",
            ));
        }
        if !(0..=255).contains(&self.exit_code) {
            return Err(invalid("exit_code", "an exit code is 0 to 255"));
        }
        if self.signal.is_some_and(|s| !(1..=64).contains(&s)) {
            return Err(invalid("signal", "a signal is 1 to 64"));
        }
        Ok(())
    }
}

/// The state a step shows: one still `RUNNING` when its job is over ended with it.
pub fn shown_state(step_state: &str, job_state: &str) -> String {
    let job_over = JobState::parse(job_state).is_some_and(|s| s.is_terminal());
    if step_state == "RUNNING" && job_over {
        "CANCELLED".into()
    } else {
        step_state.into()
    }
}

/// A stored step as the API shows it, under its job (`job`, in `job_state`).
pub fn step_info(job: &str, job_state: &str, r: &StepRecord) -> StepInfo {
    let end = r.end_time.unwrap_or_else(crate::util::now_ms);
    StepInfo {
        id: format!("{job}.{}", r.step_id),
        step_id: r.step_id.max(0) as u32,
        name: r.name.clone(),
        state: shown_state(&r.state, job_state),
        ntasks: r.ntasks.max(0) as u32,
        gpus: r.gpus.clone(),
        exit_code: r.exit_code,
        signal: r.exit_signal,
        start_time: rfc3339(r.start_time),
        end_time: r.end_time.map(rfc3339),
        time_used: ((end - r.start_time).max(0) / 1000) as u64,
    }
}

/// The job steps service. Cheap to clone; the jobs service holds it.
#[derive(Debug, Clone)]
pub struct JobSteps {
    store: Store,
    tokens: JobTokens,
}

impl JobSteps {
    pub fn new(store: Store, tokens: JobTokens) -> JobSteps {
        JobSteps { store, tokens }
    }

    /// The owner of the running job `job` when `token` is the job token of its
    /// current run: the one check of a job token. A job that is not there has no
    /// token: told apart from a wrong one by nothing.
    pub(super) async fn job_of_token(
        &self,
        job: JobId,
        token: &str,
    ) -> Result<String, ServiceError> {
        let wrong = || {
            ServiceError::Forbidden(format!(
                "Atrium-Job-Token: not the token of job {job}'s current run"
            ))
        };
        let row = match self.store.job(job.job as i64, task_of(job)).await {
            Ok(row) => row,
            Err(StoreError::NotFound) => return Err(wrong()),
            Err(e) => return Err(e.into()),
        };
        // A run that has not started has no token yet; a token of an earlier run of
        // this id (a requeue, a restored backup) is not this run's.
        if !row
            .start_time
            .is_some_and(|started| self.tokens.verify(job, started, token))
        {
            return Err(wrong());
        }
        if row.state != JobState::Running.name() {
            return Err(ServiceError::Conflict(format!(
                "job {job} is not running ({})",
                row.state
            )));
        }
        Ok(row.user_name)
    }

    /// Record a step of `job` that starts, for the job itself (its `token`); its
    /// number is the next free one.
    pub async fn start(
        &self,
        job: JobId,
        token: &str,
        body: StartStep,
    ) -> Result<StepInfo, ServiceError> {
        self.job_of_token(job, token).await?;
        body.check()?;
        let now = crate::util::now_ms();
        let step = NewStep {
            job_id: job.job as i64,
            task: task_of(job),
            name: &body.name,
            ntasks: i64::from(body.ntasks),
            gpus: &body.gpus,
            start_time: now,
        };
        let step_id = self
            .store
            .insert_step(&step, MAX_STEPS)
            .await?
            .ok_or_else(|| {
                ServiceError::Conflict(format!("job {job} has {MAX_STEPS} steps (MaxStepCount)"))
            })?;
        let record = StepRecord {
            job_id: step.job_id,
            task: step.task,
            step_id,
            name: body.name.clone(),
            ntasks: step.ntasks,
            gpus: body.gpus.clone(),
            state: "RUNNING".into(),
            exit_code: None,
            exit_signal: None,
            start_time: now,
            end_time: None,
        };
        Ok(step_info(&job.to_string(), "RUNNING", &record))
    }

    /// Record how a running step of `job` ended, for the job itself (its `token`).
    pub async fn end(
        &self,
        job: JobId,
        step_id: u32,
        token: &str,
        body: EndStep,
    ) -> Result<(), ServiceError> {
        self.job_of_token(job, token).await?;
        body.check()?;
        let end = StepEnd {
            state: &body.state,
            exit_code: body.exit_code,
            exit_signal: body.signal,
            end_time: crate::util::now_ms(),
        };
        let ended = self
            .store
            .end_step(job.job as i64, task_of(job), i64::from(step_id), &end)
            .await?;
        if !ended {
            return Err(ServiceError::NotFound);
        }
        Ok(())
    }

    /// The steps of these jobs (`(job_id, task)`; task -1: none), one query.
    pub async fn of_jobs(&self, jobs: &[(i64, i64)]) -> Result<Vec<StepRecord>, ServiceError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.store.steps_of(jobs).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(name: &str, ntasks: u32, gpus: &str) -> StartStep {
        StartStep {
            name: name.into(),
            ntasks,
            gpus: gpus.into(),
        }
    }

    fn field(checked: Result<(), ServiceError>) -> &'static str {
        match checked {
            Err(ServiceError::Invalid { field, .. }) => field,
            other => panic!("not a field's refusal: {other:?}"),
        }
    }

    #[test]
    fn what_a_step_reports_is_bounded_and_named() {
        assert!(start("python3", 4, "0,1,2,3").check().is_ok());
        assert!(
            start("train", 1, "MIG-6a6f7a5c-2b1e-5c3d-9f0a-1b2c3d4e5f60")
                .check()
                .is_ok()
        );
        assert_eq!(field(start("", 1, "").check()), "name");
        assert_eq!(field(start(&"x".repeat(257), 1, "").check()), "name");
        assert_eq!(field(start("a\nb", 1, "").check()), "name");
        assert_eq!(field(start("a", 0, "").check()), "ntasks");
        assert_eq!(field(start("a", 100_000, "").check()), "ntasks");
        assert_eq!(field(start("a", 1, "0;rm").check()), "gpus");
        assert_eq!(field(start("a", 1, &"0,".repeat(3000)).check()), "gpus");
        let end = |state: &str, exit_code: i64, signal: Option<i64>| EndStep {
            state: state.into(),
            exit_code,
            signal,
        };
        assert!(end("FAILED", 3, None).check().is_ok());
        assert_eq!(field(end("RUNNING", 0, None).check()), "state");
        assert_eq!(field(end("FAILED", 256, None).check()), "exit_code");
        assert_eq!(field(end("FAILED", 1, Some(0)).check()), "signal");
    }

    #[test]
    fn a_step_still_running_when_its_job_is_over_ended_with_it() {
        assert_eq!(shown_state("RUNNING", "RUNNING"), "RUNNING");
        assert_eq!(shown_state("RUNNING", "CANCELLED"), "CANCELLED");
        assert_eq!(shown_state("RUNNING", "COMPLETED"), "CANCELLED");
        assert_eq!(shown_state("FAILED", "COMPLETED"), "FAILED");
    }
}
