//! `atrium scancel ID…` or `atrium scancel -u USER`: cancel jobs. Every id is tried;
//! each failure is reported the way scancel reports it and makes the exit status 1.

use clap::Args;

use super::api::{CallError, Portal};
use super::{connect, failed, SlurmError};

const CMD: &str = "scancel";

#[derive(Debug, Clone, Default, Args)]
pub struct ScancelArgs {
    /// Cancel all active jobs of this user.
    #[arg(short = 'u', long)]
    pub user: Option<String>,
    /// Job ids (`17`, `17_3`).
    pub ids: Vec<String>,
}

/// What scancel says when cancelling `id` failed.
pub fn kill_error(id: &str, error: &CallError) -> String {
    let reason = if error.status == Some(404) {
        "Invalid job id specified"
    } else {
        error.message.as_str()
    };
    format!("Kill job error on job id {id}: {reason}")
}

/// The ids to cancel: those given, or every active job of `-u USER` (an array once).
async fn targets(portal: &Portal, args: &ScancelArgs) -> Result<Vec<String>, SlurmError> {
    let mut ids = args.ids.clone();
    if let Some(user) = &args.user {
        let jobs = portal
            .jobs(&[("user", user.clone())])
            .await
            .map_err(failed(CMD))?;
        let mut seen = std::collections::BTreeSet::new();
        for job in jobs {
            if job.user == *user && seen.insert(job.job_id) {
                ids.push(job.job_id.to_string());
            }
        }
    }
    Ok(ids)
}

pub async fn run(args: ScancelArgs) -> anyhow::Result<()> {
    if args.ids.is_empty() && args.user.is_none() {
        return Err(SlurmError::new(CMD, "No job identification provided").into());
    }
    let portal = connect(CMD)?;
    let mut errors = Vec::new();
    for id in targets(&portal, &args).await? {
        if let Err(e) = portal.cancel(&id).await {
            errors.push(kill_error(&id, &e));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SlurmError {
            command: CMD,
            messages: errors,
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_jobs_are_invalid_job_ids() {
        let missing = CallError {
            status: Some(404),
            message: "no such job".into(),
        };
        assert_eq!(
            kill_error("17", &missing),
            "Kill job error on job id 17: Invalid job id specified"
        );
        let done = CallError {
            status: Some(409),
            message: "Job/step already completing or completed".into(),
        };
        assert_eq!(
            kill_error("18_2", &done),
            "Kill job error on job id 18_2: Job/step already completing or completed"
        );
    }
}
