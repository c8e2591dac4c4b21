//! `atrium scancel`: cancel or signal jobs, option for option as Slurm 22.05's
//! scancel: job ids (`17`, `17_3`, `17_[1-3,5]`, comma lists), the filters that pick
//! jobs by themselves or narrow the ids (`-u`, `--me`, `-n`, `-p`, `-t`, `-A`, `-q`,
//! `-w`), `--signal` (a job's processes get it; the job goes on) with `--batch` and
//! `--full`, and scancel's words and exit status: with ids alone, a job already over
//! or unknown is no error (as Slurm's `scancel ID` says nothing); with a signal or a
//! filter, it is.

use std::collections::BTreeMap;

use super::api::{CallError, JobInfo};
use super::getopt::{HasArg, Opt, Parser};
use super::{connect, failed, split_list, CommandExit};

const CMD: &str = "scancel";

const OPTIONS: &[Opt] = &[
    Opt::new("account", Some('A'), &["account"], HasArg::Required),
    Opt::new("batch", Some('b'), &["batch"], HasArg::No),
    Opt::new("ctld", None, &["ctld"], HasArg::No),
    Opt::new("full", Some('f'), &["full"], HasArg::No),
    Opt::new("help", None, &["help"], HasArg::No),
    Opt::new("hurry", Some('H'), &["hurry"], HasArg::No),
    Opt::new("interactive", Some('i'), &["interactive"], HasArg::No),
    Opt::new(
        "clusters",
        Some('M'),
        &["cluster", "clusters"],
        HasArg::Required,
    ),
    Opt::new("name", Some('n'), &["jobname"], HasArg::Required),
    Opt::new("me", None, &["me"], HasArg::No),
    Opt::new("name", None, &["name"], HasArg::Required),
    Opt::new("nodelist", Some('w'), &["nodelist"], HasArg::Required),
    Opt::new("partition", Some('p'), &["partition"], HasArg::Required),
    Opt::new("qos", Some('q'), &["qos"], HasArg::Required),
    Opt::new("quiet", Some('Q'), &["quiet"], HasArg::No),
    Opt::new("reservation", Some('R'), &["reservation"], HasArg::Required),
    Opt::new("sibling", None, &["sibling"], HasArg::Required),
    Opt::new("signal", Some('s'), &["signal"], HasArg::Required),
    Opt::new("state", Some('t'), &["state"], HasArg::Required),
    Opt::new("usage", None, &["usage"], HasArg::No),
    Opt::new("user", Some('u'), &["user"], HasArg::Required),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
    Opt::new("wckey", None, &["wckey"], HasArg::Required),
];

/// A signal as scancel reads `--signal`: a name or a number from 1 to 64.
pub use scheduler::parse::scancel_signal as parse_signal;

/// One job id scancel was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub job: u64,
    /// Array tasks (`17_3`, `17_[1-3]`); empty: the whole job.
    pub tasks: Vec<u32>,
    /// `17.0`: a step (atrium ends or signals whole jobs, not steps).
    pub step: Option<u32>,
    /// As typed, for messages.
    pub text: String,
}

impl Target {
    /// `17`, `17_3`, `17_[1-3,5]`, `17_*`, `17.0`; `None` when scancel would say
    /// "Invalid job id".
    pub fn parse(text: &str) -> Option<Target> {
        let (job_part, step) = match text.split_once('.') {
            Some((j, s)) => (j, Some(s.parse::<u32>().ok()?)),
            None => (text, None),
        };
        let (job, tasks) = match job_part.split_once('_') {
            None => (job_part, Vec::new()),
            Some((j, "*")) => (j, Vec::new()),
            Some((j, t)) if t.starts_with('[') => {
                let inner = t.strip_prefix('[')?.strip_suffix(']')?;
                if step.is_some() {
                    return None;
                }
                let mut tasks = Vec::new();
                for range in inner.split(',') {
                    let (a, b) = range.split_once('-').unwrap_or((range, range));
                    let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                    if b < a || b - a > 100_000 {
                        return None;
                    }
                    tasks.extend(a..=b);
                }
                (j, tasks)
            }
            Some((j, t)) => (j, vec![t.parse().ok()?]),
        };
        let job: u64 = job.parse().ok().filter(|n| *n > 0)?;
        Some(Target {
            job,
            tasks,
            step,
            text: text.to_string(),
        })
    }

    /// The ids the portal knows: `17`, or `17_3` for each task.
    fn ids(&self) -> Vec<String> {
        if self.tasks.is_empty() {
            vec![self.job.to_string()]
        } else {
            self.tasks
                .iter()
                .map(|t| format!("{}_{t}", self.job))
                .collect()
        }
    }
}

/// What the command line and environment ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub targets: Vec<Target>,
    pub signal: Option<i32>,
    /// `steps` (default), `batch` or `full`.
    pub whom: &'static str,
    pub users: Vec<String>,
    pub me: bool,
    pub names: Vec<String>,
    pub partitions: Vec<String>,
    pub accounts: Vec<String>,
    pub qos: Vec<String>,
    pub states: Vec<&'static str>,
    /// `-w`: the hosts named, expanded ([`super::scontrol::wanted_hosts`]).
    pub nodes: Vec<String>,
    pub verbose: bool,
    pub quiet: bool,
    pub early: Option<Vec<String>>,
}

impl Request {
    fn filtered(&self) -> bool {
        self.me
            || !self.users.is_empty()
            || !self.names.is_empty()
            || !self.partitions.is_empty()
            || !self.accounts.is_empty()
            || !self.qos.is_empty()
            || !self.states.is_empty()
            || !self.nodes.is_empty()
    }
}

fn env_list(var: &dyn Fn(&str) -> Option<String>, name: &str) -> Vec<String> {
    var(name).map_or_else(Vec::new, |v| split_list(&v))
}

pub fn read(args: &[String], var: &dyn Fn(&str) -> Option<String>) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| super::usage_error(CMD, &e))?;
    let mut r = Request {
        whom: if parsed.has("full") {
            "full"
        } else if parsed.has("batch") {
            "batch"
        } else {
            "steps"
        },
        me: parsed.has("me"),
        verbose: parsed.has("verbose"),
        quiet: parsed.has("quiet"),
        ..Request::default()
    };
    if parsed.has("help") || parsed.has("usage") {
        r.early = Some(vec![USAGE.to_string()]);
        return Ok(r);
    }
    if parsed.has("version") {
        r.early = Some(vec![super::VERSION_LINE.to_string()]);
        return Ok(r);
    }
    let given = |key: &str, env: &str| {
        let values: Vec<String> = parsed.all(key).iter().map(|s| s.to_string()).collect();
        if values.is_empty() {
            env_list(var, env)
        } else {
            values
        }
    };
    r.users = given("user", "SCANCEL_USER");
    r.names = given("name", "SCANCEL_NAME");
    r.partitions = given("partition", "SCANCEL_PARTITION");
    r.accounts = given("account", "SCANCEL_ACCOUNT")
        .iter()
        .map(|a| a.to_lowercase())
        .collect();
    r.qos = given("qos", "SCANCEL_QOS")
        .iter()
        .map(|a| a.to_lowercase())
        .collect();
    let nodes: Vec<String> = parsed
        .all("nodelist")
        .iter()
        .map(|s| s.to_string())
        .collect();
    r.nodes = super::scontrol::wanted_hosts(&nodes);
    if let Some(state) = parsed
        .last("state")
        .map(str::to_string)
        .or_else(|| var("SCANCEL_STATE"))
    {
        match super::squeue::state_name(&state) {
            Some(s @ ("PENDING" | "RUNNING" | "SUSPENDED")) => r.states.push(s),
            _ => {
                return Err(CommandExit::new(
                    vec![
                        format!("Invalid job state specified: {state}"),
                        "Valid job states are PENDING, RUNNING, and SUSPENDED".into(),
                    ],
                    1,
                ))
            }
        }
    }
    if let Some(text) = parsed.last("signal") {
        r.signal = Some(
            parse_signal(text)
                .ok_or_else(|| CommandExit::new(vec![format!("Unknown job signal: {text}")], 1))?,
        );
    }
    for operand in &parsed.operands {
        for item in split_outside_brackets(operand) {
            let target = Target::parse(item).ok_or_else(|| {
                CommandExit::new(vec![format!("{CMD}: error: Invalid job id {item}")], 1)
            })?;
            r.targets.push(target);
        }
    }
    if r.targets.is_empty() && !r.filtered() {
        return Err(CommandExit::new(
            vec![format!("{CMD}: error: No job identification provided")],
            1,
        ));
    }
    Ok(r)
}

/// Comma-separated items, a comma inside brackets (`19_[1-3,5]`) kept in its item.
fn split_outside_brackets(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                if i > start {
                    out.push(&text[start..i]);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Whether `job` passes every filter given.
fn passes(r: &Request, job: &JobInfo) -> bool {
    let lower_in = |list: &[String], v: &str| list.is_empty() || list.contains(&v.to_lowercase());
    (r.users.is_empty() || r.users.contains(&job.user))
        && (r.names.is_empty() || r.names.contains(&job.name))
        && (r.partitions.is_empty() || r.partitions.contains(&job.partition))
        && lower_in(&r.accounts, &job.account)
        && lower_in(&r.qos, job.qos.as_deref().unwrap_or("normal"))
        && (r.states.is_empty() || r.states.contains(&job.state.as_str()))
        && (r.nodes.is_empty() || super::scontrol::node_overlap(&r.nodes, &job.nodelist))
}

fn kill_error(id: &str, step: bool, reason: &str) -> String {
    let what = if step { "job step id" } else { "job id" };
    format!("{CMD}: error: Kill job error on {what} {id}: {reason}")
}

fn reason_of(e: &CallError) -> String {
    match e.status {
        Some(404) => "Invalid job id specified".into(),
        Some(409) => "Job/step already completing or completed".into(),
        _ => e.message.clone(),
    }
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let r = read(&args, &var)?;
    if let Some(early) = &r.early {
        super::print_lines(early.iter())?;
        return Ok(());
    }
    let portal = connect(CMD)?;
    let mut errors = Vec::new();
    let mut status = 0u8;
    // `waiting`: only what of an array waits (its running tasks were filtered out).
    let act = |id: String, waiting: bool| {
        let portal = &portal;
        let signal = r.signal;
        let whom = r.whom;
        async move {
            match signal {
                Some(s) => portal.signal(&id, s, whom).await,
                None if waiting => portal.cancel_waiting(&id).await,
                None => portal.cancel(&id).await,
            }
        }
    };
    if r.filtered() || r.targets.iter().any(|t| t.step.is_some()) {
        // Jobs are looked up first; ids not among the active ones are errors.
        let mut q = vec![];
        if r.me {
            q.push(("me", "true".to_string()));
        } else if !r.users.is_empty() {
            q.push(("user", r.users.join(",")));
        }
        let jobs = portal.jobs(&q).await.map_err(failed(CMD))?;
        // Each record that passes: a task by its own id, an array's record of
        // waiting tasks as those only (an array's running tasks that did not pass
        // are left alone), a job by its id.
        let mut chosen: BTreeMap<String, bool> = BTreeMap::new();
        if r.targets.is_empty() {
            for job in jobs.iter().filter(|j| passes(&r, j)) {
                let (id, waiting) = match (job.array_task_id, job.array_tasks()) {
                    (Some(t), _) => (format!("{}_{t}", job.job_id), false),
                    (None, Some(_)) => (job.job_id.to_string(), true),
                    (None, None) => (job.job_id.to_string(), false),
                };
                let entry = chosen.entry(id).or_insert(waiting);
                *entry &= waiting;
            }
        }
        for target in &r.targets {
            let matching: Vec<&JobInfo> = jobs
                .iter()
                .filter(|j| j.job_id == target.job)
                .filter(|j| {
                    target.tasks.is_empty()
                        || j.array_task_id.is_some_and(|t| target.tasks.contains(&t))
                        || j.array_tasks()
                            .is_some_and(|spec| target.tasks.iter().any(|&t| spec.contains(t)))
                })
                .filter(|j| passes(&r, j))
                .collect();
            if target.step.is_some() {
                // A step of a job is ended or signalled with its job here: refused.
                errors.push(kill_error(&target.text, true, "Invalid job id specified"));
                status = 1;
                continue;
            }
            if matching.is_empty() {
                if !r.filtered() || !r.quiet {
                    errors.push(kill_error(&target.text, false, "Invalid job id specified"));
                    status = 1;
                }
                continue;
            }
            // The whole array named, and only its waiting tasks passed: those.
            let waiting = target.tasks.is_empty()
                && matching
                    .iter()
                    .all(|j| j.array_task_id.is_none() && j.array_tasks().is_some())
                && jobs
                    .iter()
                    .any(|j| j.job_id == target.job && j.array_task_id.is_some());
            for id in target.ids() {
                chosen.insert(id, waiting);
            }
        }
        for (id, waiting) in chosen {
            if let Err(e) = act(id.clone(), waiting).await {
                errors.push(kill_error(&id, false, &reason_of(&e)));
                status = 1;
            }
        }
    } else {
        for target in &r.targets {
            for id in target.ids() {
                if r.verbose {
                    match r.signal {
                        Some(s) => eprintln!("{CMD}: Signal {s} to job {id}"),
                        None => eprintln!("{CMD}: Terminating job {id}"),
                    }
                }
                if let Err(e) = act(id.clone(), false).await {
                    let reason = reason_of(&e);
                    // Ended or unknown jobs are no error for a plain cancel.
                    let harmless = r.signal.is_none() && matches!(e.status, Some(404 | 409));
                    if !harmless {
                        status = 1;
                    }
                    if (!harmless || r.verbose) && !r.quiet {
                        errors.push(kill_error(&id, false, &reason));
                    }
                }
            }
        }
    }
    if status == 0 {
        for line in &errors {
            eprintln!("{line}");
        }
        return Ok(());
    }
    Err(CommandExit::new(errors, status).into())
}

const USAGE: &str = "Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]
  -A, --account=account           act only on jobs charging this account
  -b, --batch                     signal batch shell for specified job
  -f, --full                      signal batch shell and all steps for specified job
  -H, --hurry                     avoid burst buffer stage out
  -i, --interactive               require response from user for each job
  -M, --clusters                  clusters to issue commands to.
                                  NOTE: SlurmDBD must be up.
  -n, --name=job_name             act only on jobs with this name
  -p, --partition=partition       act only on jobs in this partition
  -Q, --quiet                     disable warnings
  -q, --qos=qos                   act only on jobs with this quality of service
  -R, --reservation=reservation   act only on jobs with this reservation
      --sibling=cluster_name      remove an active sibling job from a federated job
  -s, --signal=name | integer     signal to send to job, default is SIGKILL
  -t, --state=states              act only on jobs in this state.  Valid job
                                  states are PENDING, RUNNING and SUSPENDED
  -u, --user=user_name            act only on jobs of this user
  -V, --version                   output version information and exit
  -v, --verbose                   verbosity level
  -w, --nodelist                  act only on jobs on these nodes
      --wckey=wckey               act only on jobs with this workload
                                  charactization key

Help options:
  --help                          show this help message
  --usage                         display brief usage message";

#[cfg(test)]
mod tests {
    use super::*;

    fn read_words(words: &[&str]) -> Result<Request, CommandExit> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        read(&args, &|_| None)
    }

    #[test]
    fn ids_arrays_and_lists_as_scancel_reads_them() {
        let r = read_words(&["17", "18_2,19_[1-3,5]", "20_*"]).expect("read");
        let ids: Vec<Vec<String>> = r.targets.iter().map(Target::ids).collect();
        assert_eq!(
            ids,
            [
                vec!["17".to_string()],
                vec!["18_2".into()],
                vec!["19_1".into(), "19_2".into(), "19_3".into(), "19_5".into()],
                vec!["20".into()],
            ]
        );
        for bad in ["abc", "0", "12x", "3_[1-3", "8.batch"] {
            assert_eq!(
                read_words(&[bad]).expect_err(bad).stderr,
                [format!("scancel: error: Invalid job id {bad}")]
            );
        }
    }

    #[test]
    fn signals_by_name_or_number_and_after_the_id() {
        // snakemake: `scancel <id> --signal SIGTERM`; simple_slurm: `--signal=TERM`.
        let r = read_words(&["17", "--signal", "SIGTERM"]).expect("read");
        assert_eq!(r.signal, Some(15));
        assert_eq!(
            read_words(&["--signal=usr1", "17"]).expect("read").signal,
            Some(10)
        );
        assert_eq!(
            read_words(&["-s", "12", "-b", "17"]).expect("read").whom,
            "batch"
        );
        assert_eq!(
            read_words(&["-s", "0", "17"]).expect_err("0").stderr,
            ["Unknown job signal: 0"]
        );
    }

    #[test]
    fn filters_pick_jobs_and_nothing_is_no_identification() {
        assert!(read_words(&["--me"]).expect("read").me);
        assert_eq!(
            read_words(&["-u", "alice", "-t", "pd"])
                .expect("read")
                .states,
            ["PENDING"]
        );
        assert_eq!(
            read_words(&[]).expect_err("nothing").stderr,
            ["scancel: error: No job identification provided"]
        );
        assert_eq!(
            read_words(&["-t", "CD", "1"]).expect_err("state").stderr,
            [
                "Invalid job state specified: CD",
                "Valid job states are PENDING, RUNNING, and SUSPENDED"
            ]
        );
        assert_eq!(
            read_words(&["--jo", "x"]).map(|r| r.names),
            Ok(vec!["x".to_string()]),
            "--jobname's prefix"
        );
    }
}
