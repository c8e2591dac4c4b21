//! `atrium sacct`: jobs from the accounting records (over or not), option for option
//! as Slurm 22.05's sacct: its options read as getopt_long reads them (`-j 2 -j 3`
//! adds up), its time window (`-S`/`-E` in Slurm's time forms, by default today, or
//! all time with `-j`), its state, user, account, partition and name filters, its
//! columns (`--format` with every field, `%N` widths, `SACCT_FORMAT`, `-b`, `-l`), its
//! layouts (`--parsable`, `--parsable2`, `--delimiter`, `-n`) and its words when
//! something is wrong. Clusters (`-M`, `-L`): this portal is one cluster; `all` and
//! its own name select it.

use jiff::Timestamp;

use super::api::{JobInfo, StepInfo};
use super::getopt::{HasArg, Opt, Parser};
use super::sacct_fields::{self, Field, Layout};
use super::times::{parse_time, Clock};
use super::{connect, failed, print_lines, CommandExit};

const CMD: &str = "sacct";

/// sacct's options, in the order of its table.
const OPTIONS: &[Opt] = &[
    Opt::new("allusers", Some('a'), &["allusers"], HasArg::No),
    Opt::new("accounts", Some('A'), &["accounts"], HasArg::Required),
    Opt::new("allocations", Some('X'), &["allocations"], HasArg::No),
    Opt::new("brief", Some('b'), &["brief"], HasArg::No),
    Opt::new("batch-script", Some('B'), &["batch-script"], HasArg::No),
    Opt::new("completion", Some('c'), &["completion"], HasArg::No),
    Opt::new("constraints", Some('C'), &["constraints"], HasArg::Required),
    Opt::new("delimiter", None, &["delimiter"], HasArg::Required),
    Opt::new("duplicates", Some('D'), &["duplicates"], HasArg::No),
    Opt::new("federation", None, &["federation"], HasArg::No),
    Opt::new(
        "helpformat",
        Some('e'),
        &["helpformat", "help-fields"],
        HasArg::No,
    ),
    Opt::new("endtime", Some('E'), &["endtime"], HasArg::Required),
    Opt::new("env-vars", None, &["env-vars"], HasArg::No),
    Opt::new("file", Some('f'), &["file"], HasArg::Required),
    Opt::new("flags", Some('F'), &["flags"], HasArg::Required),
    Opt::new("group", Some('g'), &["gid", "group"], HasArg::Required),
    Opt::new("help", Some('h'), &["help"], HasArg::No),
    Opt::new("local", None, &["local"], HasArg::No),
    Opt::new("name", None, &["name"], HasArg::Required),
    Opt::new("nnodes", Some('i'), &["nnodes"], HasArg::Required),
    Opt::new("ncpus", Some('I'), &["ncpus"], HasArg::Required),
    Opt::new("jobs", Some('j'), &["jobs"], HasArg::Required),
    Opt::new(
        "timelimit-min",
        Some('k'),
        &["timelimit-min"],
        HasArg::Required,
    ),
    Opt::new(
        "timelimit-max",
        Some('K'),
        &["timelimit-max"],
        HasArg::Required,
    ),
    Opt::new("long", Some('l'), &["long"], HasArg::No),
    Opt::new("allclusters", Some('L'), &["allclusters"], HasArg::No),
    Opt::new(
        "clusters",
        Some('M'),
        &["cluster", "clusters"],
        HasArg::Required,
    ),
    Opt::new("nodelist", Some('N'), &["nodelist"], HasArg::Required),
    Opt::new("noconvert", None, &["noconvert"], HasArg::No),
    Opt::new("units", None, &["units"], HasArg::Required),
    Opt::new("noheader", Some('n'), &["noheader"], HasArg::No),
    Opt::new("format", Some('o'), &["fields", "format"], HasArg::Required),
    Opt::new("parsable", Some('p'), &["parsable"], HasArg::No),
    Opt::new("parsable2", Some('P'), &["parsable2"], HasArg::No),
    Opt::new("qos", Some('q'), &["qos"], HasArg::Required),
    Opt::new("partition", Some('r'), &["partition"], HasArg::Required),
    Opt::new("reason", None, &["reason"], HasArg::Required),
    Opt::new("state", Some('s'), &["state"], HasArg::Required),
    Opt::new("starttime", Some('S'), &["starttime"], HasArg::Required),
    Opt::new("truncate", Some('T'), &["truncate"], HasArg::No),
    Opt::new("user", Some('u'), &["uid"], HasArg::Required),
    Opt::new("use-local-uid", None, &["use-local-uid"], HasArg::No),
    Opt::new("usage", Some('U'), &["usage"], HasArg::No),
    Opt::new("user", None, &["user"], HasArg::Required),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
    Opt::new("wckeys", Some('W'), &["wckeys"], HasArg::Required),
    Opt::new("whole-hetjob", None, &["whole-hetjob"], HasArg::Optional),
    Opt::new(
        "associations",
        Some('x'),
        &["associations"],
        HasArg::Required,
    ),
    Opt::new("json", None, &["json"], HasArg::No),
    Opt::new("yaml", None, &["yaml"], HasArg::No),
    // `-t`: an old name of `-X`.
    Opt::new("allocations", Some('t'), &[], HasArg::No),
];

/// States sacct takes in `-s` (long and compact), as it accounts for them.
const STATES: &[(&str, &str)] = &[
    ("PENDING", "PD"),
    ("RUNNING", "R"),
    ("SUSPENDED", "S"),
    ("COMPLETED", "CD"),
    ("CANCELLED", "CA"),
    ("FAILED", "F"),
    ("TIMEOUT", "TO"),
    ("NODE_FAIL", "NF"),
    ("PREEMPTED", "PR"),
    ("BOOT_FAIL", "BF"),
    ("DEADLINE", "DL"),
    ("OUT_OF_MEMORY", "OOM"),
    ("REQUEUED", "RQ"),
    ("RESIZING", "RS"),
    ("REVOKED", "RV"),
];

/// One `-j` item: a job, an array task, and maybe a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub job: u64,
    pub task: Option<u32>,
    /// `batch`, `extern`, or a number.
    pub step: Option<String>,
}

impl JobSpec {
    /// `17`, `17_3`, `17.0`, `17_3.batch`; Slurm's fatal message otherwise.
    pub fn parse(item: &str) -> Result<JobSpec, String> {
        let (job_part, step) = match item.split_once('.') {
            Some((j, s)) => (j, Some(s)),
            None => (item, None),
        };
        let (job, task) = match job_part.split_once('_') {
            Some((j, t)) => (j, Some(t)),
            None => (job_part, None),
        };
        if !job.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("Bad job/step specified: {item}"));
        }
        let job: u64 = job
            .parse()
            .map_err(|_| format!("Bad job/step specified: {item}"))?;
        let task = match task {
            None => None,
            Some(t) => Some(
                t.parse::<u32>()
                    .map_err(|_| format!("Bad job array element specified: {job}"))?,
            ),
        };
        let step = match step {
            None => None,
            Some(s)
                if s.parse::<u32>().is_ok() || matches!(s, "batch" | "extern" | "interactive") =>
            {
                Some(s.to_string())
            }
            Some(_) => return Err(format!("Bad step specified: {job_part}")),
        };
        Ok(JobSpec { job, task, step })
    }

    fn matches_job(&self, job: &JobInfo) -> bool {
        self.job == job.job_id
            && self
                .task
                .is_none_or(|t| job.array_task_id == Some(t) || job.holds_task(t))
    }
}

/// What the command line and the environment ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub fields: Vec<Field>,
    pub layout: Layout,
    pub delimiter: String,
    pub header: bool,
    pub allocations: bool,
    pub all_users: bool,
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub partitions: Vec<String>,
    pub names: Vec<String>,
    pub states: Vec<&'static str>,
    pub jobs: Vec<JobSpec>,
    pub from: Timestamp,
    pub to: Timestamp,
    /// `-M`'s clusters (lower case); empty, `all` or `-1`: any.
    pub clusters: Vec<String>,
    /// What to print instead of jobs (`--help`, `--helpformat`, `--version`).
    pub early: Option<Vec<String>>,
}

fn fatal(message: String) -> CommandExit {
    CommandExit::new(vec![format!("{CMD}: fatal: {message}")], 1)
}

fn error(message: String) -> CommandExit {
    CommandExit::new(vec![format!("{CMD}: error: {message}")], 1)
}

/// sacct's list items: comma-separated, empty ones skipped; a leading quote is dropped.
fn items(values: Vec<&str>) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.trim_matches(|c| c == '"' || c == '\'').split(','))
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Read sacct's command line and environment.
pub fn read(
    args: &[String],
    var: &dyn Fn(&str) -> Option<String>,
    clock: &Clock,
) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| CommandExit::new(vec![e.line(&super::invoked_as(CMD))], 1))?;
    let mut early = None;
    if parsed.has("help") {
        early = Some(vec![USAGE.to_string()]);
    } else if parsed.has("usage") {
        early = Some(vec![
            "Usage: sacct [options]".into(),
            "\tUse --help for help".into(),
        ]);
    } else if parsed.has("version") {
        early = Some(vec![super::VERSION_LINE.to_string()]);
    } else if parsed.has("helpformat") {
        early = Some(sacct_fields::help_lines());
    }
    if !parsed.operands.is_empty() {
        let mut lines = vec![format!("{CMD}: error: Unknown arguments:")];
        lines.extend(
            parsed
                .operands
                .iter()
                .map(|o| format!("{CMD}: error:  {o}")),
        );
        return Err(CommandExit::new(lines, 1));
    }
    if parsed.has("long") && parsed.has("format") {
        return Err(fatal(
            "Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry."
                .into(),
        ));
    }
    // The columns: -o (each adds), then -b, then -l; else SACCT_FORMAT, else default.
    let mut spec: Vec<String> = parsed.all("format").iter().map(|s| s.to_string()).collect();
    if parsed.has("brief") {
        spec.push("jobid,state,exitcode".into());
    }
    if parsed.has("long") {
        spec.push(sacct_fields::LONG_FORMAT.into());
    }
    if spec.is_empty() {
        spec.push(var("SACCT_FORMAT").unwrap_or_else(|| sacct_fields::DEFAULT_FORMAT.into()));
    }
    let fields = sacct_fields::parse_format(&spec.join(",")).map_err(|e| match e {
        sacct_fields::FormatError::Invalid(item) => {
            error(format!("Invalid field requested: \"{item}\""))
        }
        sacct_fields::FormatError::Removed(message) => fatal(message),
    })?;
    let layout = if parsed.has("parsable2") {
        Layout::Parsable2
    } else if parsed.has("parsable") {
        Layout::Parsable
    } else {
        Layout::Fixed
    };
    let mut jobs = Vec::new();
    for item in items(parsed.all("jobs")) {
        jobs.push(JobSpec::parse(&item).map_err(fatal)?);
    }
    let mut states = Vec::new();
    for item in items(parsed.all("state")) {
        match STATES
            .iter()
            .find(|(l, s)| l.eq_ignore_ascii_case(&item) || s.eq_ignore_ascii_case(&item))
        {
            Some((long, _)) => states.push(*long),
            None if super::squeue::state_name(&item).is_some() => {
                return Err(fatal(format!(
                    "job state {} is not supported / accounted",
                    item.to_ascii_uppercase()
                )))
            }
            None => return Err(fatal(format!("unrecognized job state value '{item}'"))),
        }
    }
    // The window (sacct's `slurmdb_job_cond_def_start_end`).
    let now = clock.zoned_now();
    let time = |t: &str| parse_time(t, &now).map_err(|e| CommandExit::new(vec![e], 1));
    let start = parsed.last("starttime").map(time).transpose()?;
    let end = parsed.last("endtime").map(time).transpose()?;
    let midnight = parse_time("today", &now).map_err(|e| CommandExit::new(vec![e], 1))?;
    let (from, to) = match (jobs.is_empty(), states.is_empty()) {
        (true, true) => (start.unwrap_or(midnight), end.unwrap_or(clock.now)),
        (false, true) => (
            start.unwrap_or(Timestamp::UNIX_EPOCH),
            end.unwrap_or(clock.now),
        ),
        (true, false) => {
            let s = start.unwrap_or(clock.now);
            (s, end.unwrap_or(s))
        }
        (false, false) => (
            start.unwrap_or(Timestamp::UNIX_EPOCH),
            end.or(start).unwrap_or(clock.now),
        ),
    };
    if from > to {
        return Err(error(format!(
            "Start time ({}) requested is after end time ({}).",
            clock.stamp(from),
            clock.stamp(to)
        )));
    }
    let mut clusters: Vec<String> = items(parsed.all("clusters"))
        .iter()
        .map(|c| c.to_lowercase())
        .collect();
    if parsed.has("allclusters") || clusters.iter().any(|c| c == "all" || c == "-1") {
        clusters.clear();
    }
    let users = items(parsed.all("user"));
    Ok(Request {
        fields,
        layout,
        delimiter: parsed.last("delimiter").unwrap_or("|").to_string(),
        header: !parsed.has("noheader"),
        allocations: parsed.has("allocations"),
        all_users: parsed.has("allusers")
            || users.iter().any(|u| u == "-1")
            || (users.is_empty() && !jobs.is_empty()),
        users: users.into_iter().filter(|u| u != "-1").collect(),
        accounts: items(parsed.all("accounts"))
            .iter()
            .map(|a| a.to_lowercase())
            .collect(),
        partitions: items(parsed.all("partition"))
            .iter()
            .map(|a| a.to_lowercase())
            .collect(),
        names: items(parsed.all("name"))
            .iter()
            .map(|a| a.to_lowercase())
            .collect(),
        states,
        jobs,
        from,
        to,
        clusters,
        early,
    })
}

/// The portal's query: the window, the states, the users, the jobs, with the details
/// sacct's columns need.
pub fn query(r: &Request) -> Vec<(&'static str, String)> {
    let mut q = vec![
        (
            "state",
            if r.states.is_empty() {
                "all".to_string()
            } else {
                r.states.join(",")
            },
        ),
        ("detail", "true".into()),
    ];
    if r.from > Timestamp::UNIX_EPOCH {
        q.push(("from", r.from.as_second().to_string()));
    }
    q.push(("to", r.to.as_second().saturating_add(1).to_string()));
    if !r.all_users {
        if r.users.is_empty() {
            q.push(("me", "true".into()));
        } else {
            q.push(("user", r.users.join(",")));
        }
    }
    if !r.jobs.is_empty() {
        let mut ids: Vec<u64> = r.jobs.iter().map(|j| j.job).collect();
        ids.sort_unstable();
        ids.dedup();
        q.push((
            "ids",
            ids.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        ));
    }
    q
}

/// Whether `job` is selected by what the query could not say. Without `-j`, a job is
/// in the window only once eligible (Slurm's selection by `EligibleTime`): not while
/// held or waiting on a dependency, nor before its begin time.
fn keeps(r: &Request, job: &JobInfo) -> bool {
    let eligible = || {
        job.eligible_time
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok())
            .is_some_and(|t| t <= r.to)
    };
    (!r.jobs.is_empty() || eligible())
        && (r.accounts.is_empty() || r.accounts.contains(&job.account.to_lowercase()))
        && (r.partitions.is_empty() || r.partitions.contains(&job.partition.to_lowercase()))
        && (r.names.is_empty() || r.names.contains(&job.name.to_lowercase()))
        && (r.jobs.is_empty() || r.jobs.iter().any(|s| s.matches_job(job)))
        && (r.clusters.is_empty()
            || r.clusters
                .contains(&job.cluster.as_deref().unwrap_or("").to_lowercase()))
}

/// The lines of a job: itself, then (unless `-X`) its batch step and its steps; with
/// `-j N.S`, only the steps named.
fn rows<'a>(r: &Request, job: &'a JobInfo) -> Vec<Row<'a>> {
    let named_steps: Vec<&str> = r
        .jobs
        .iter()
        .filter(|s| s.matches_job(job))
        .filter_map(|s| s.step.as_deref())
        .collect();
    let whole = r.jobs.is_empty()
        || r.jobs
            .iter()
            .any(|s| s.matches_job(job) && s.step.is_none());
    let mut out = Vec::new();
    if whole {
        out.push(Row::Job(job));
    }
    if r.allocations && named_steps.is_empty() {
        return out;
    }
    let shown = |name: &str| whole || named_steps.contains(&name);
    if job.start_time.is_some() && shown("batch") {
        out.push(Row::Batch(job));
    }
    for step in &job.steps {
        if shown(&step.step_id.to_string()) {
            out.push(Row::Step(job, step));
        }
    }
    // `-s` selects steps by their own state too.
    if !r.states.is_empty() {
        out.retain(|row| match row {
            Row::Job(_) => true,
            Row::Batch(j) => r
                .states
                .contains(&super::sacct_fields::batch_state(j).as_str()),
            Row::Step(_, s) => r.states.contains(&s.state.as_str()),
        });
    }
    out
}

/// One line of sacct's output.
#[derive(Debug, Clone, Copy)]
pub enum Row<'a> {
    Job(&'a JobInfo),
    /// The batch script's own step (`17.batch`).
    Batch(&'a JobInfo),
    Step(&'a JobInfo, &'a StepInfo),
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let (clock, warning) = Clock::from_env(CMD);
    let r = read(&args, &var, &clock)?;
    if let Some(early) = &r.early {
        print_lines(early.iter())?;
        return Ok(());
    }
    if let Some(w) = warning {
        eprintln!("{w}");
    }
    let portal = connect(CMD)?;
    let mut jobs: Vec<JobInfo> = portal.jobs(&query(&r)).await.map_err(failed(CMD))?;
    jobs.retain(|j| keeps(&r, j));
    // Oldest first, as sacct lists them (the portal lists the newest first).
    jobs.sort_by(|a, b| {
        (a.submit_time.as_str(), a.job_id, a.array_task_id).cmp(&(
            b.submit_time.as_str(),
            b.job_id,
            b.array_task_id,
        ))
    });
    let mut lines = Vec::new();
    if r.header {
        lines.extend(sacct_fields::header(&r.fields, r.layout, &r.delimiter));
    }
    for job in &jobs {
        for row in rows(&r, job) {
            lines.push(sacct_fields::line(
                &r.fields,
                row,
                &clock,
                r.layout,
                &r.delimiter,
            ));
        }
    }
    print_lines(lines.iter())?;
    Ok(())
}

const USAGE: &str = "sacct [<OPTION>]
    Valid <OPTION> values are:
     -a, --allusers:
	           Display jobs for all users. By default, only the
                   current user's jobs are displayed.  If ran by user root
                   this is the default.
     -A, --accounts:
	           Use this comma separated list of accounts to select jobs
                   to display.  By default, all accounts are selected.
     -b, --brief:
	           Equivalent to '--format=jobstep,state,error'.
     -D, --duplicates:
	           If Slurm job ids are reset, some job numbers will
	           probably appear more than once referring to different jobs.
	           Without this option only the most recent jobs will be
                   displayed.
     --delimiter:
	           ASCII characters used to separate the fields when
	           specifying the  -p  or  -P options. The default delimiter
	           is a '|'. This options is ignored if -p or -P options
	           are not specified.
     -e, --helpformat:
	           Print a list of fields that can be specified with the
	           '--format' option
     -E, --endtime:
                   Select jobs eligible before this time.  If states are
                   given with the -s option then only jobs in this state before
                   this period will be returned.
     -h, --help:   Print this description of use.
     -j, --jobs:
	           Format is <job(.step)>. Display information about this
                   job or comma-separated list of jobs. The default is all
                   jobs. Adding .step will display the specific job step of
                   that job. (A step id of 'batch' will display the
                   information about the batch step.)
     -l, --long:
	           Equivalent to specifying
	           '--format=jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,
                             maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,
                             averss,maxpages,maxpagesnode,maxpagestask,avepages,
                             mincpu,mincpunode,mincputask,avecpu,ntasks,alloccpus,
                             elapsed,state,exitcode,avecpufreq,reqcpufreqmin,
                             reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,
                             maxdiskread,maxdiskreadnode,maxdiskreadtask,
                             avediskread,maxdiskwrite,maxdiskwritenode,
                             maxdiskwritetask,avediskwrite,reqtres,alloctres,
                             tresusageinave,tresusageinmax,tresusageinmaxn,
                             tresusageinmaxt,tresusageinmin,tresusageinminn,
                             tresusageinmint,tresusageintot,tresusageoutmax,
                             tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,
                             tresusageouttot
     -M, --clusters:
                   Only send data about these clusters. -1 for all clusters.
     --name:
                   Display jobs that have any of these name(s).
     -n, --noheader:
	           No header will be added to the beginning of output.
                   The default is to print a header.
     -o, --format:
	           Comma separated list of fields. (use \"--helpformat\"
                   for a list of available fields).
     -p, --parsable: output will be '|' delimited with a '|' at the end
     -P, --parsable2: output will be '|' delimited without a '|' at the end
     -r, --partition:
                   Comma separated list of partitions to select jobs and
                   job steps from. The default is all partitions.
     -s, --state:
                   Select jobs based on their current state or the state
                   they were in during the time period given: running (r),
                   completed (cd), failed (f), timeout (to), resizing (rs),
                   deadline (dl) and node_fail (nf).
     -S, --starttime:
                   Select jobs eligible after this time.  Default is
                   00:00:00 of the current day, unless '-s' is set then
                   the default is 'now'.
     -u, --uid, --user:
	           Use this comma separated list of uids or user names
                   to select jobs to display.  By default, the running
                   user's uid is used.
     --units=[KMGTP]:
                   Display values in specified unit type. Takes precedence
                   over --noconvert option.
     --usage:      Display brief usage message.
     -V, --version: Print version.
     -X, --allocations:
	           Only show statistics relevant to the job allocation
	           itself, not taking steps into consideration.";

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::tz::TimeZone;

    fn clock() -> Clock {
        Clock {
            tz: TimeZone::UTC,
            now: "2026-11-27T17:34:10Z".parse().expect("now"),
            format: super::super::times::TimeFormat::Standard,
        }
    }

    fn read_words(words: &[&str]) -> Result<Request, CommandExit> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        read(&args, &|_| None, &clock())
    }

    fn q(words: &[&str]) -> Vec<(&'static str, String)> {
        query(&read_words(words).expect("read"))
    }

    #[test]
    fn submitits_poll_reads_every_job_and_only_what_it_asked() {
        let r = read_words(&[
            "-o",
            "JobID,State,NodeList",
            "--parsable2",
            "-j",
            "2",
            "-j",
            "3",
        ])
        .expect("read");
        assert_eq!(r.jobs.len(), 2);
        assert_eq!(r.layout, Layout::Parsable2);
        assert!(r.all_users, "-j without -u lists every user's");
        let query = query(&r);
        assert!(query.contains(&("ids", "2,3".to_string())), "{query:?}");
        assert!(
            !query.iter().any(|(k, _)| *k == "from"),
            "all time: {query:?}"
        );
    }

    #[test]
    fn snakemakes_poll_reads_too() {
        let r = read_words(&[
            "-X",
            "--parsable2",
            "--clusters",
            "all",
            "--noheader",
            "--format=JobIdRaw,State",
            "--starttime",
            "2026-11-25T17:00",
            "--endtime",
            "now",
            "--name",
            "d2f7c1e0",
        ])
        .expect("read");
        assert!(r.allocations && !r.header && r.clusters.is_empty());
        assert_eq!(r.names, ["d2f7c1e0"]);
        assert_eq!(r.from.to_string(), "2026-11-25T17:00:00Z");
        assert_eq!(
            read_words(&["-M", "Elsewhere"]).expect("read").clusters,
            ["elsewhere"]
        );
    }

    #[test]
    fn the_default_window_is_today_and_with_states_an_instant() {
        let today = q(&[]);
        assert!(
            today.contains(&("from", "1795737600".to_string())),
            "{today:?}"
        );
        assert!(today.contains(&("me", "true".to_string())), "{today:?}");
        let r = read_words(&["-s", "CD,f"]).expect("read");
        assert_eq!(r.states, ["COMPLETED", "FAILED"]);
        assert_eq!(r.from, r.to);
    }

    #[test]
    fn mistakes_are_saccts_own() {
        let lines = |words: &[&str]| read_words(words).expect_err("refused").stderr;
        assert_eq!(lines(&["-Z"]), ["sacct: invalid option -- 'Z'"]);
        assert_eq!(
            lines(&["--all"])[0].split(';').next(),
            Some("sacct: option '--all' is ambiguous")
        );
        assert_eq!(
            lines(&["extra"]),
            ["sacct: error: Unknown arguments:", "sacct: error:  extra"]
        );
        assert_eq!(
            lines(&["-j", "x7"]),
            ["sacct: fatal: Bad job/step specified: x7"]
        );
        assert_eq!(
            lines(&["-j", "7.x"]),
            ["sacct: fatal: Bad step specified: 7"]
        );
        assert_eq!(
            lines(&["-s", "bogus"]),
            ["sacct: fatal: unrecognized job state value 'bogus'"]
        );
        assert_eq!(
            lines(&["-s", "CG"]),
            ["sacct: fatal: job state CG is not supported / accounted"]
        );
        assert_eq!(
            lines(&["-o", "bogus"]),
            ["sacct: error: Invalid field requested: \"bogus\""]
        );
        assert_eq!(
            lines(&["-S", "now-1h"]),
            ["Invalid time specification (pos=4): now-1h"]
        );
        assert_eq!(
            lines(&["-S", "now", "-E", "now-1hour"]),
            ["sacct: error: Start time (2026-11-27T17:34:10) requested is after end time (2026-11-27T16:34:10)."]
        );
    }

    #[test]
    fn job_specs_read_tasks_and_steps() {
        assert_eq!(
            JobSpec::parse("17_3.batch"),
            Ok(JobSpec {
                job: 17,
                task: Some(3),
                step: Some("batch".into())
            })
        );
        assert_eq!(JobSpec::parse("17.0").map(|s| s.step), Ok(Some("0".into())));
        assert_eq!(
            JobSpec::parse("3_[2-5]"),
            Err("Bad job array element specified: 3".into())
        );
    }
}
