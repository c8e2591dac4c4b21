//! `srun` inside a job of atrium's own scheduler: starts `--ntasks` copies of a
//! command within the job's allocation on its one node, each with Slurm's task
//! variables and its GPUs, relays their output (with `-l`, each line prefixed
//! `N: `), forwards SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 to every task, and exits
//! like srun: with the highest exit code of its tasks. The step is recorded with
//! the portal (for `sacct`: `JOBID.0`, `JOBID.1` …) with the job's own token
//! (`ATRIUM_JOB_TOKEN`), never a user's; without one, the tasks still run.
//!
//! Outside a job, srun asks for an allocation first, as Slurm's does: an interactive
//! job ([`crate::interactive`]) whose script runs the command, with `--pty` on the
//! job's terminal, else as a step of the new job through an srun inside it.
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

pub const HELP: &str = "Usage: srun [OPTIONS...] executable [args...]

Inside a job (sbatch, salloc): runs --ntasks copies of the command in the job's
allocation (-n, -c, --gpus-per-task, --gpu-bind, -l, -o/-e/-i, --export, -J, -D).
Outside a job: asks for an allocation first, with sbatch's options (-t, -p, -A, -q,
--gres, -G, --mem, -C, -w …), and runs the command in it; --pty runs it on a
terminal of its own (srun --pty bash). srun exits with the command's exit code.
";

/// The request of an allocation for `options`' command (outside a job).
pub fn allocation_request(
    options: &SrunOptions,
    environment: std::collections::BTreeMap<String, String>,
    cwd: &str,
) -> serde_json::Value {
    let mut job_options = serde_json::Map::new();
    for (name, value) in &options.allocation {
        let v = value
            .as_ref()
            .map_or(serde_json::Value::Bool(true), |v| v.as_str().into());
        job_options.insert((*name).to_string(), v);
    }
    if !job_options.contains_key("job-name") {
        job_options.insert(
            "job-name".into(),
            crate::interactive::default_name(&options.command).into(),
        );
    }
    // With --pty the command is the job's (on its terminal); else an srun in the job
    // runs it as a step of the new allocation, with the options that shape the step.
    let arguments: Vec<String> = if options.pty {
        options.command.clone()
    } else {
        std::iter::once("srun".to_string())
            .chain(options.step_words.iter().cloned())
            .chain(std::iter::once("--".into()))
            .chain(options.command.iter().cloned())
            .collect()
    };
    serde_json::json!({
        "script": crate::interactive::SCRIPT,
        "arguments": arguments,
        "options": job_options,
        "environment": environment,
        "working_directory": options.chdir.as_deref().unwrap_or(cwd),
        "interactive": true,
        "raw_terminal": !options.pty,
    })
}

pub async fn run(args: SrunArgs) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let options = SrunOptions::parse(&args.args).map_err(|e| SlurmError::new(CMD, e))?;
    if options.help {
        print!("{HELP}");
        return Ok(());
    }
    let Some(job) = job_id(&var) else {
        if options.command.is_empty() {
            return Err(SlurmError::new(CMD, "No command given to execute.").into());
        }
        let cwd = std::env::current_dir()
            .map_err(|e| SlurmError::new(CMD, format!("cannot read the current directory: {e}")))?;
        let body = allocation_request(
            &options,
            crate::sbatch::job_environment(std::env::vars_os()),
            &cwd.to_string_lossy(),
        );
        let portal = crate::connect(CMD)?;
        let (_, code) = crate::interactive::run(CMD, &portal, &body, options.pty).await?;
        // Now: a read of standard input may still wait on a thread of the runtime.
        std::process::exit(code);
    };
    if !options.ignored.is_empty() {
        eprintln!(
            "srun: note: ignoring {} (not used inside an atrium job)",
            options.ignored.join(" ")
        );
    }
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
