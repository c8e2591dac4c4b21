//! `srun` inside a job of atrium's own scheduler: starts `--ntasks` copies of a
//! command within the job's allocation on its one node, each with Slurm's task
//! variables and its GPUs, relays their output (with `-l`, each line prefixed
//! `N: `), forwards SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 to every task, and exits
//! like srun: with the highest exit code of its tasks. The step is recorded with
//! the portal (for `sacct`: `JOBID.0`, `JOBID.1` …) with the job's own token
//! (`ATRIUM_JOB_TOKEN`), never a user's; without one, the tasks still run.
//!
//! Runs as the user, inside the job's container: it starts the user's own
//! processes and nothing else.
//! Must not touch: anything of the server; other jobs.

pub mod options;
pub mod plan;
mod tasks;

use clap::Args;

use self::options::SrunOptions;
use self::plan::Plan;
use super::api::{Portal, Settings};
use super::SlurmError;

const CMD: &str = "srun";

/// srun's arguments, read by [`SrunOptions::parse`] (srun's own grammar).
#[derive(Debug, Clone, Default, Args)]
pub struct SrunArgs {
    /// srun's options, then the command and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// srun's exit status when it is not 0 (the highest of its tasks'); the binary
/// exits with it and prints nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepExit(pub u8);

impl std::fmt::Display for StepExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "srun exits with {}", self.0)
    }
}

impl std::error::Error for StepExit {}

/// The job this srun runs in as the portal names it: `123`, or `123_4` for an
/// array task.
pub(crate) fn job_id(var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let job = var("SLURM_JOB_ID")?;
    Some(match var("SLURM_ARRAY_TASK_ID") {
        Some(task) => format!("{job}_{task}"),
        None => job,
    })
}

/// The portal, as the job reaches it, with the job's token; `None` without one.
pub(crate) fn job_portal(var: &dyn Fn(&str) -> Option<String>) -> Option<Result<Portal, String>> {
    let token = var("ATRIUM_JOB_TOKEN").filter(|t| !t.is_empty())?;
    let url = var("ATRIUM_URL").filter(|u| !u.is_empty())?;
    let settings = Settings {
        url: url.trim_end_matches('/').to_string(),
        token,
        ca_file: var("ATRIUM_CA_FILE")
            .filter(|f| !f.is_empty())
            .map(std::path::PathBuf::from),
    };
    Some(Portal::for_job(&settings).map_err(|e| e.message))
}

pub async fn run(args: SrunArgs) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let options = SrunOptions::parse(&args.args).map_err(|e| SlurmError::new(CMD, e))?;
    if !options.ignored.is_empty() {
        eprintln!(
            "srun: note: ignoring {} (not used inside an atrium job)",
            options.ignored.join(" ")
        );
    }
    let Some(job) = job_id(&var) else {
        return Err(SlurmError::new(
            CMD,
            "no job allocation: atrium's srun runs inside a batch job (submit one with sbatch)",
        )
        .into());
    };
    if options.command.is_empty() {
        return Err(SlurmError::new(CMD, "No command given to execute.").into());
    }
    let plan = Plan::new(&options, &var).map_err(|e| SlurmError::new(CMD, e))?;
    let Some(program) = tasks::resolve(&options.command[0], options.chdir.as_deref()) else {
        eprintln!(
            "srun: error: execve(): {}: No such file or directory",
            options.command[0]
        );
        return Err(StepExit(2).into());
    };
    let portal = match job_portal(&var) {
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("srun: warning: the step is not recorded: {e}");
            None
        }
        None => None,
    };
    let body = serde_json::json!({
        "name": plan.name,
        "ntasks": plan.ntasks,
        "gpus": plan.step_gpus.join(","),
    });
    let step = match &portal {
        Some(p) => match p.start_step(&job, &body).await {
            Ok(s) => Some(s.step_id),
            Err(e) => {
                eprintln!("srun: warning: the step is not recorded: {}", e.message);
                None
            }
        },
        None => None,
    };
    let ended = tasks::run_step(&options, &plan, &program, &job, step.unwrap_or(0)).await?;
    if let (Some(p), Some(step)) = (&portal, step) {
        let body = serde_json::json!({
            "state": ended.state(),
            "exit_code": ended.exit_code,
            "signal": ended.signal,
        });
        if let Err(e) = p.end_step(&job, step, &body).await {
            eprintln!(
                "srun: warning: the step's end is not recorded: {}",
                e.message
            );
        }
    }
    match ended.status() {
        0 => Ok(()),
        code => Err(StepExit(code).into()),
    }
}
