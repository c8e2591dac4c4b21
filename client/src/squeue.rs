//! `atrium squeue`: jobs not yet over (or in the states asked for), option for option
//! as Slurm 22.05's squeue: its options read as getopt_long reads them, its output
//! formats (`-o` with every `%` letter, `-O` with every field name, `-l`, `--start`,
//! `-s` for steps, `SQUEUE_FORMAT(2)`), its filters (`-j -u -p -t -w -A -q -n -R`,
//! `--me`), its sorting (`-S`, `SQUEUE_SORT`) and its words when something is wrong.
//! What cannot mean anything here (clusters, federations, licenses, reservations) is
//! taken and has no effect, as on a one-cluster site without them.

use std::collections::BTreeSet;

use super::api::{JobInfo, StepInfo};
use super::columns::{self, Column, Format};
use super::getopt::{HasArg, Opt, Parser};
use super::times::{squeue_secs, Clock};
use super::{connect, failed, print_lines, CommandExit, SlurmError};

const CMD: &str = "squeue";

/// squeue's options, in the order of its table (which decides ambiguities).
const OPTIONS: &[Opt] = &[
    Opt::new("accounts", Some('A'), &["accounts"], HasArg::Required),
    Opt::new("all", Some('a'), &["all"], HasArg::No),
    Opt::new("array", Some('r'), &["array"], HasArg::No),
    Opt::new("array-unique", None, &["array-unique"], HasArg::No),
    Opt::new("Format", Some('O'), &["Format"], HasArg::Required),
    Opt::new("format", Some('o'), &["format"], HasArg::Required),
    Opt::new("federation", None, &["federation"], HasArg::No),
    Opt::new("help", None, &["help"], HasArg::No),
    Opt::new("hide", None, &["hide"], HasArg::No),
    Opt::new("iterate", Some('i'), &["iterate"], HasArg::Required),
    Opt::new("jobs", Some('j'), &["jobs"], HasArg::Optional),
    Opt::new("local", None, &["local"], HasArg::No),
    Opt::new("long", Some('l'), &["long"], HasArg::No),
    Opt::new("licenses", Some('L'), &["licenses"], HasArg::Required),
    Opt::new(
        "clusters",
        Some('M'),
        &["cluster", "clusters"],
        HasArg::Required,
    ),
    Opt::new("me", None, &["me"], HasArg::No),
    Opt::new("name", Some('n'), &["name"], HasArg::Required),
    Opt::new("noconvert", None, &["noconvert"], HasArg::No),
    Opt::new(
        "nodelist",
        Some('w'),
        &["node", "nodes", "nodelist"],
        HasArg::Required,
    ),
    Opt::new("noheader", Some('h'), &["noheader"], HasArg::No),
    Opt::new("partitions", Some('p'), &["partitions"], HasArg::Required),
    Opt::new("priority", Some('P'), &["priority"], HasArg::No),
    Opt::new("qos", Some('q'), &["qos"], HasArg::Required),
    Opt::new("reservation", Some('R'), &["reservation"], HasArg::Required),
    Opt::new("sibling", None, &["sib", "sibling"], HasArg::No),
    Opt::new("sort", Some('S'), &["sort"], HasArg::Required),
    Opt::new("start", None, &["start"], HasArg::No),
    Opt::new("steps", Some('s'), &["steps"], HasArg::Optional),
    Opt::new("states", Some('t'), &["states"], HasArg::Required),
    Opt::new("usage", None, &["usage"], HasArg::No),
    Opt::new("users", Some('u'), &["user", "users"], HasArg::Required),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
    Opt::new("json", None, &["json"], HasArg::No),
    Opt::new("yaml", None, &["yaml"], HasArg::No),
    // `-U`: squeue's old short name of `-A`.
    Opt::new("accounts", Some('U'), &[], HasArg::Required),
];

/// Job states squeue takes, long and compact, in its order (its error lists them).
pub const STATES: &[(&str, &str)] = &[
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
    ("COMPLETING", "CG"),
    ("CONFIGURING", "CF"),
    ("RESIZING", "RS"),
    ("RESV_DEL_HOLD", "RD"),
    ("REQUEUED", "RQ"),
    ("REQUEUE_FED", "RF"),
    ("REQUEUE_HOLD", "RH"),
    ("REVOKED", "RV"),
    ("SIGNALING", "SI"),
    ("SPECIAL_EXIT", "SE"),
    ("STAGE_OUT", "SO"),
    ("STOPPED", "ST"),
];

/// The long name of a state given as a name or a code (any case, exactly).
pub fn state_name(word: &str) -> Option<&'static str> {
    STATES
        .iter()
        .find(|(long, short)| long.eq_ignore_ascii_case(word) || short.eq_ignore_ascii_case(word))
        .map(|(long, _)| *long)
}

/// The `%` letters of jobs, each with its header.
const JOB_LETTERS: &[(char, &str)] = &[
    ('a', "ACCOUNT"),
    ('A', "JOBID"),
    ('b', "TRES_PER_NODE"),
    ('B', "EXEC_HOST"),
    ('c', "MIN_CPUS"),
    ('C', "CPUS"),
    ('d', "MIN_TMP_DISK"),
    ('D', "NODES"),
    ('e', "END_TIME"),
    ('E', "DEPENDENCY"),
    ('f', "FEATURES"),
    ('F', "ARRAY_JOB_ID"),
    ('g', "GROUP"),
    ('G', "GROUP"),
    ('h', "OVER_SUBSCRIBE"),
    ('H', "SOCKETS_PER_NODE"),
    ('i', "JOBID"),
    ('I', "CORES_PER_SOCKET"),
    ('j', "NAME"),
    ('J', "THREADS_PER_CORE"),
    ('k', "COMMENT"),
    ('K', "ARRAY_TASK_ID"),
    ('l', "TIME_LIMIT"),
    ('L', "TIME_LEFT"),
    ('m', "MIN_MEMORY"),
    ('M', "TIME"),
    ('n', "REQ_NODES"),
    ('N', "NODELIST"),
    ('o', "COMMAND"),
    ('O', "CONTIGUOUS"),
    ('p', "PRIORITY"),
    ('P', "PARTITION"),
    ('q', "QOS"),
    ('Q', "PRIORITY"),
    ('r', "REASON"),
    ('R', "NODELIST(REASON)"),
    ('s', ""),
    ('S', "START_TIME"),
    ('t', "ST"),
    ('T', "STATE"),
    ('u', "USER"),
    ('U', "UID"),
    ('v', "RESERVATION"),
    ('V', "SUBMIT_TIME"),
    ('w', "WCKEY"),
    ('W', "LICENSES"),
    ('x', "EXC_NODES"),
    ('X', "CORE_SPEC"),
    ('y', "NICE"),
    ('Y', "SCHEDNODES"),
    ('z', "S:C:T"),
    ('Z', "WORK_DIR"),
    // `-O` only (no `%` letter): private keys outside a-z and A-Z.
    ('0', "TRES_ALLOC"),
    ('1', "STDOUT"),
    ('2', "STDERR"),
    ('3', "TASKS"),
    ('4', "CLUSTER"),
    ('5', "ELIGIBLE_TIME"),
    ('6', "EXIT_CODE"),
    ('7', "RESTART_COUNT"),
    ('8', "CPUS_PER_TASK"),
    ('9', "PENDING_TIME"),
    ('!', "STDIN"),
    ('"', "REQUEUE"),
    ('#', "TIME_MIN"),
    ('$', "DEADLINE"),
    // `-O` names of what atrium does not have (burst buffers, federation, switches,
    // power …): Slurm's values when those are not configured.
    ('\u{100}', "CONTAINER"),
    ('\u{101}', "BURST_BUFFER"),
    ('\u{102}', "BURST_BUFFER_STATE"),
    ('\u{103}', "DELAY_BOOT"),
    ('\u{104}', "CLUSTER_FEATURES"),
    ('\u{105}', "PREFER"),
    ('\u{106}', "ADMIN_COMMENT"),
    ('\u{107}', "SYSTEM_COMMENT"),
    ('\u{108}', "LAST_SCHED_EVAL"),
    ('\u{109}', "ACCRUE_TIME"),
    ('\u{10a}', "ALLOC_NODES"),
    ('\u{10b}', "ALLOC_SID"),
    ('\u{10c}', "ASSOC_ID"),
    ('\u{10d}', "BATCH_FLAG"),
    ('\u{10e}', "BOARDS_PER_NODE"),
    ('\u{10f}', "DERIVED_EC"),
    ('\u{110}', "ORIGIN"),
    ('\u{111}', "ORIGIN_RAW"),
    ('\u{112}', "ACTIVE_SIBLINGS"),
    ('\u{113}', "ACTIVE_SIBLINGS_RAW"),
    ('\u{114}', "VIABLE_SIBLINGS"),
    ('\u{115}', "VIALBLE_SIBLINGS_RAW"),
    ('\u{116}', "MAX_CPUS"),
    ('\u{117}', "MAX_NODES"),
    ('\u{118}', "NETWORK"),
    ('\u{119}', "NTASKS_PER_CORE"),
    ('\u{11a}', "NTASKS_PER_NODE"),
    ('\u{11b}', "NTASKS_PER_SOCKET"),
    ('\u{11c}', "NTASKS_PER_BOARD"),
    ('\u{11d}', "PREEMPT_TIME"),
    ('\u{11e}', "PROFILE"),
    ('\u{11f}', "REBOOT"),
    ('\u{120}', "REQ_SWITCH"),
    ('\u{121}', "RESIZE_TIME"),
    ('\u{122}', "SOCKETS_PER_BOARD"),
    ('\u{123}', "WAIT4SWITCH"),
    ('\u{124}', "CPUS_PER_TRES"),
    ('\u{125}', "MEM_PER_TRES"),
    ('\u{126}', "TRES_BIND"),
    ('\u{127}', "TRES_FREQ"),
    ('\u{128}', "TRES_PER_JOB"),
    ('\u{129}', "TRES_PER_SOCKET"),
    ('\u{12a}', "TRES_PER_TASK"),
    ('\u{12b}', "MCSLABEL"),
    ('\u{12c}', "HET_JOB_ID"),
    ('\u{12d}', "HET_JOB_OFFSET"),
    ('\u{12e}', "HET_JOB_ID_SET"),
];

/// `-O` names of jobs and their keys.
const JOB_NAMES: &[(&str, char)] = &[
    ("account", 'a'),
    ("jobid", 'A'),
    ("gres", 'b'),
    ("tres-per-node", 'b'),
    ("batchhost", 'B'),
    ("mincpus", 'c'),
    ("numcpus", 'C'),
    ("mintmpdisk", 'd'),
    ("numnodes", 'D'),
    ("endtime", 'e'),
    ("dependency", 'E'),
    ("feature", 'f'),
    ("arrayjobid", 'F'),
    ("groupname", 'g'),
    ("groupid", 'G'),
    ("oversubscribe", 'h'),
    ("shared", 'h'),
    ("sockets", 'H'),
    ("jobarrayid", 'i'),
    ("cores", 'I'),
    ("name", 'j'),
    ("threads", 'J'),
    ("comment", 'k'),
    ("arraytaskid", 'K'),
    ("timelimit", 'l'),
    ("timeleft", 'L'),
    ("minmemory", 'm'),
    ("timeused", 'M'),
    ("reqnodes", 'n'),
    ("nodelist", 'N'),
    ("command", 'o'),
    ("contiguous", 'O'),
    ("priority", 'p'),
    ("partition", 'P'),
    ("qos", 'q'),
    ("prioritylong", 'Q'),
    ("reason", 'r'),
    ("reasonlist", 'R'),
    ("selectjobinfo", 's'),
    ("starttime", 'S'),
    ("statecompact", 't'),
    ("state", 'T'),
    ("username", 'u'),
    ("userid", 'U'),
    ("reservation", 'v'),
    ("submittime", 'V'),
    ("wckey", 'w'),
    ("licenses", 'W'),
    ("corespec", 'X'),
    ("nice", 'y'),
    ("schednodes", 'Y'),
    ("sct", 'z'),
    ("workdir", 'Z'),
    ("tres-alloc", '0'),
    ("tres", '0'),
    ("stdout", '1'),
    ("stderr", '2'),
    ("numtasks", '3'),
    ("cluster", '4'),
    ("eligibletime", '5'),
    ("exit_code", '6'),
    ("restartcnt", '7'),
    ("cpuspertask", '8'),
    ("cpus-per-task", '8'),
    ("pendingtime", '9'),
    ("stdin", '!'),
    ("requeue", '"'),
    ("mintime", '#'),
    ("deadline", '$'),
    ("container", '\u{100}'),
    ("burstbuffer", '\u{101}'),
    ("burstbufferstate", '\u{102}'),
    ("delayboot", '\u{103}'),
    ("clusterfeature", '\u{104}'),
    ("prefer", '\u{105}'),
    ("admin_comment", '\u{106}'),
    ("system_comment", '\u{107}'),
    ("lastschedeval", '\u{108}'),
    ("accruetime", '\u{109}'),
    ("allocnodes", '\u{10a}'),
    ("allocsid", '\u{10b}'),
    ("associd", '\u{10c}'),
    ("batchflag", '\u{10d}'),
    ("boardspernode", '\u{10e}'),
    ("derivedec", '\u{10f}'),
    ("origin", '\u{110}'),
    ("originraw", '\u{111}'),
    ("siblingsactive", '\u{112}'),
    ("siblingsactiveraw", '\u{113}'),
    ("siblingsviable", '\u{114}'),
    ("siblingsviableraw", '\u{115}'),
    ("maxcpus", '\u{116}'),
    ("maxnodes", '\u{117}'),
    ("network", '\u{118}'),
    ("ntpercore", '\u{119}'),
    ("ntpernode", '\u{11a}'),
    ("ntpersocket", '\u{11b}'),
    ("ntperboard", '\u{11c}'),
    ("preempttime", '\u{11d}'),
    ("profile", '\u{11e}'),
    ("reboot", '\u{11f}'),
    ("reqswitch", '\u{120}'),
    ("resizetime", '\u{121}'),
    ("sperboard", '\u{122}'),
    ("wait4switch", '\u{123}'),
    ("cpus-per-tres", '\u{124}'),
    ("mem-per-tres", '\u{125}'),
    ("tres-bind", '\u{126}'),
    ("tres-freq", '\u{127}'),
    ("tres-per-job", '\u{128}'),
    ("tres-per-socket", '\u{129}'),
    ("tres-per-task", '\u{12a}'),
    ("mcslabel", '\u{12b}'),
    ("hetjobid", '\u{12c}'),
    ("hetjoboffset", '\u{12d}'),
    ("hetjobidset", '\u{12e}'),
    ("packjobid", '\u{12c}'),
    ("packjoboffset", '\u{12d}'),
    ("packjobidset", '\u{12e}'),
];

/// The `%` letters of steps (`-s`), each with its header.
const STEP_LETTERS: &[(char, &str)] = &[
    ('A', "TASKS"),
    ('b', "TRES_PER_JOB"),
    ('i', "STEPID"),
    ('j', "NAME"),
    ('l', "TIME_LIMIT"),
    ('M', "TIME"),
    ('N', "NODELIST"),
    ('P', "PARTITION"),
    ('S', "START_TIME"),
    ('U', "UID"),
    ('u', "USER"),
    ('T', "STATE"),
];

const STEP_NAMES: &[(&str, char)] = &[
    ("numtasks", 'A'),
    ("gres", 'b'),
    ("stepid", 'i'),
    ("stepname", 'j'),
    ("timelimit", 'l'),
    ("timeused", 'M'),
    ("nodes", 'N'),
    ("partition", 'P'),
    ("starttime", 'S'),
    ("userid", 'U'),
    ("username", 'u'),
    ("stepstate", 'T'),
];

const DEFAULT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
const LONG: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
const START: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";
const STEPS: &str = "%.15i %.8j %.9P %.8u %.9M %N";

fn header_of(table: &[(char, &'static str)], letter: char) -> &'static str {
    table
        .iter()
        .find(|(l, _)| *l == letter)
        .map_or("", |(_, h)| *h)
}

/// What the command line and the environment ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub format: Format,
    pub steps: bool,
    pub long: bool,
    pub header: bool,
    pub me: bool,
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub partitions: Vec<String>,
    pub qos: Vec<String>,
    pub names: Vec<String>,
    /// `-w`: the hosts named, expanded ([`super::scontrol::wanted_hosts`]).
    pub nodes: Vec<String>,
    /// Long state names; empty: not over (or `all`).
    pub states: Vec<&'static str>,
    pub all_states: bool,
    /// `ID` or `ID_TASK` (`-j`), or `ID.STEP` (`-s`).
    pub ids: Vec<String>,
    pub sort: String,
    pub array: bool,
    pub start: bool,
    /// What to print instead of the jobs (`--help`, `--version`).
    pub early: Option<Vec<String>>,
}

fn list(values: Vec<&str>) -> Vec<String> {
    super::split_lists(values)
}

/// Read squeue's command line and environment (through `var`).
pub fn read(args: &[String], var: &dyn Fn(&str) -> Option<String>) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| super::usage_error(CMD, &e))?;
    let mut r = Request {
        header: !parsed.has("noheader"),
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
    let fail = |m: String| CommandExit::new(vec![format!("{CMD}: error: {m}")], 1);
    // Operands: the list of a bare `-j` or `-s`.
    let mut operands = parsed.operands.iter();
    let jobs_given = parsed.has("jobs");
    let steps_given = parsed.has("steps");
    let mut job_list: Vec<&str> = parsed.all("jobs").last().copied().into_iter().collect();
    let mut step_list: Vec<&str> = parsed.all("steps").last().copied().into_iter().collect();
    if jobs_given && job_list.is_empty() {
        if let Some(o) = operands.next() {
            job_list.push(o);
        }
    } else if steps_given && step_list.is_empty() {
        if let Some(o) = operands.next() {
            step_list.push(o);
        }
    }
    if let Some(extra) = operands.next() {
        return Err(CommandExit::new(
            vec![format!("{CMD}: error: Unrecognized option: {extra}")],
            1,
        )
        .with_stdout(vec![USAGE_SHORT.to_string()]));
    }
    if jobs_given && steps_given && job_list.is_empty() && step_list.is_empty() {
        return Err(fail("Incompatible options --jobs and --steps".into()));
    }
    r.steps = steps_given;
    for id in list(job_list) {
        if !valid_job_id(&id) {
            return Err(fail(format!("Invalid job id: {id}")));
        }
        r.ids.push(id);
    }
    for id in list(step_list) {
        if !valid_step_id(&id) {
            return Err(fail(format!("Invalid job_step id: {id}.??")));
        }
        r.ids.push(id);
    }
    // squeue keeps the last value of each list option (a later `-u` replaces an
    // earlier one), else its variable's.
    let from_env = |key: &str, env: &str| match parsed.last(key) {
        Some(given) => list(vec![given]),
        None => var(env).map(|v| list(vec![v.as_str()])).unwrap_or_default(),
    };
    r.users = from_env("users", "SQUEUE_USERS");
    r.me = parsed.has("me");
    r.accounts = from_env("accounts", "SQUEUE_ACCOUNT");
    r.partitions = from_env("partitions", "SQUEUE_PARTITION");
    r.qos = from_env("qos", "SQUEUE_QOS");
    r.names = from_env("name", "SQUEUE_NAMES");
    r.nodes = super::scontrol::wanted_hosts(&list(parsed.last("nodelist").into_iter().collect()));
    for state in from_env("states", "SQUEUE_STATES") {
        if state.eq_ignore_ascii_case("all") {
            r.all_states = true;
            continue;
        }
        match state_name(&state) {
            Some(name) => r.states.push(name),
            None => {
                let valid: Vec<&str> = STATES.iter().map(|(l, _)| *l).collect();
                return Err(CommandExit::new(
                    vec![
                        format!("{CMD}: error: Invalid job state specified: {state}"),
                        format!(
                            "{CMD}: error: Valid job states include: {}",
                            valid.join(",")
                        ),
                        String::new(),
                    ],
                    1,
                ));
            }
        }
    }
    r.array = parsed.has("array") || var("SQUEUE_ARRAY").is_some();
    r.start = parsed.has("start");
    r.long = parsed.has("long");
    let o = parsed.last("format");
    let big_o = parsed.last("Format");
    if r.long && o.is_some() {
        return Err(CommandExit::new(
            vec![format!("{CMD}: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.")],
            1,
        ));
    }
    // Whichever of -o and -O came second is refused, as squeue does.
    let first_o = parsed.options.iter().position(|f| f.key == "format");
    let first_big = parsed.options.iter().position(|f| f.key == "Format");
    match (first_o, first_big) {
        (Some(a), Some(b)) if a > b => {
            return Err(fail(
                "-o (--format) is incompatible with -O (--Format)".into(),
            ))
        }
        (Some(_), Some(_)) => {
            return Err(fail(
                "-O (--Format) is incompatible with -o (--format)".into(),
            ))
        }
        _ => {}
    }
    type Tables = (
        &'static [(char, &'static str)],
        &'static [(&'static str, char)],
        &'static str,
    );
    let (letters, names, what): Tables = if r.steps {
        (STEP_LETTERS, STEP_NAMES, "job step")
    } else {
        (JOB_LETTERS, JOB_NAMES, "job")
    };
    let known = |c: char| c.is_ascii_alphabetic() && letters.iter().any(|(l, _)| *l == c);
    let all_letters: String = letters
        .iter()
        .map(|(l, _)| *l)
        .filter(|c| c.is_ascii_alphabetic())
        .collect();
    let percent = |spec: &str| columns::parse_percent(spec, &known, &all_letters, what);
    let named = |n: &str| names.iter().find(|(name, _)| *name == n).map(|(_, l)| *l);
    let long_names = |spec: &str| columns::parse_long(spec, &named, what);
    r.format = match (o, big_o) {
        (Some(spec), _) => percent(spec),
        (None, Some(spec)) => long_names(spec),
        (None, None) if r.steps => percent(STEPS),
        (None, None) if r.start => percent(START),
        (None, None) if r.long => percent(LONG),
        (None, None) => match (var("SQUEUE_FORMAT"), var("SQUEUE_FORMAT2")) {
            (Some(f), _) => percent(&f),
            (None, Some(f)) => long_names(&f),
            (None, None) => percent(DEFAULT),
        },
    };
    r.sort = parsed
        .last("sort")
        .map(str::to_string)
        .or_else(|| var("SQUEUE_SORT"))
        .unwrap_or_else(|| {
            if r.steps {
                "P,i".into()
            } else if r.start {
                "S".into()
            } else {
                "P,t,-p".into()
            }
        });
    if r.start && r.states.is_empty() && !r.all_states {
        r.states.push("PENDING");
    }
    if let Some(n) = parsed.last("iterate") {
        if n.trim().parse::<i64>().map_or(true, |n| n <= 0) {
            return Err(CommandExit::new(
                vec![format!("{CMD}: error: --iterate={n}"), String::new()],
                1,
            ));
        }
    }
    Ok(r)
}

/// `ID` or `ID_TASK` with positive numbers.
fn valid_job_id(id: &str) -> bool {
    let (job, task) = match id.split_once('_') {
        Some((j, t)) => (j, Some(t)),
        None => (id, None),
    };
    job.parse::<u64>().is_ok_and(|n| n > 0) && task.is_none_or(|t| t.parse::<u32>().is_ok())
}

/// `ID[_TASK].STEP`.
fn valid_step_id(id: &str) -> bool {
    id.split_once('.').is_some_and(|(job, step)| {
        valid_job_id(job) && (step.parse::<u32>().is_ok() || matches!(step, "batch" | "extern"))
    })
}

/// Whether `job` is one of `ids` (`17` matches the job and its array's tasks, `17_3`
/// that task, also inside an array's pending tasks).
pub fn job_matches(job: &JobInfo, ids: &[String]) -> bool {
    ids.iter().any(|id| {
        *id == job.id
            || *id == job.display_id
            || *id == job.job_id.to_string()
            || id.split_once('_').is_some_and(|(j, t)| {
                j == job.job_id.to_string() && t.parse().is_ok_and(|t| job.holds_task(t))
            })
    })
}

/// An array's pending tasks one per line where Slurm shows them so: all with `-r`,
/// those `-j A_T` names (and not `-j A`) without.
fn pending_tasks(jobs: Vec<JobInfo>, r: &Request) -> Vec<JobInfo> {
    // No array waits: the list as it is (not moved job by job into another).
    if !jobs
        .iter()
        .any(|j| j.array_spec.is_some() && j.array_task_id.is_none())
    {
        return jobs;
    }
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        let spec = job
            .array_spec
            .as_deref()
            .filter(|_| job.array_task_id.is_none() && job.state == "PENDING")
            .and_then(|s| s.parse::<scheduler::ArraySpec>().ok());
        let Some(spec) = spec else {
            out.push(job);
            continue;
        };
        let whole = r.ids.is_empty()
            || r.ids
                .iter()
                .any(|i| *i == job.display_id || *i == job.job_id.to_string());
        if whole && !r.array {
            out.push(job);
            continue;
        }
        for t in spec.indices() {
            let id = format!("{}_{t}", job.job_id);
            if !whole && !r.ids.contains(&id) {
                continue;
            }
            let mut task = job.clone();
            task.id.clone_from(&id);
            task.display_id = id;
            task.array_task_id = Some(t);
            task.array_spec = None;
            out.push(task);
        }
    }
    out
}

/// Whether `job` passes the filters other than ids (users, states and partitions
/// already went to the portal).
fn passes(r: &Request, job: &JobInfo) -> bool {
    let any_case = |list: &[String], value: Option<&str>| {
        list.is_empty() || value.is_some_and(|v| list.iter().any(|x| x.eq_ignore_ascii_case(v)))
    };
    any_case(&r.accounts, Some(&job.account))
        && any_case(&r.names, Some(&job.name))
        && any_case(&r.qos, Some(job.qos.as_deref().unwrap_or("normal")))
        && (r.partitions.is_empty() || r.partitions.contains(&job.partition))
        && (r.nodes.is_empty() || super::scontrol::node_overlap(&r.nodes, &job.nodelist))
        && (r.ids.is_empty() || r.steps || job_matches(job, &r.ids))
}

/// The query the portal filters on: users, states, partitions (lists), the job ids.
pub fn query(r: &Request) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    // The working directory is read only for the formats that show it.
    if r.format
        .pieces
        .iter()
        .any(|p| matches!(p, super::columns::Piece::Column(c) if c.letter == 'Z'))
    {
        q.push(("detail", "true".to_string()));
    }
    if r.me {
        q.push(("me", "true".to_string()));
    } else if !r.users.is_empty() {
        q.push(("user", r.users.join(",")));
    }
    if r.all_states || (!r.ids.is_empty() && r.states.is_empty()) {
        q.push(("state", "all".into()));
    } else if !r.states.is_empty() {
        q.push(("state", r.states.join(",")));
    }
    if !r.ids.is_empty() && !r.steps {
        let jobs: BTreeSet<String> = r
            .ids
            .iter()
            .map(|i| i.split(['_', '.']).next().unwrap_or(i).to_string())
            .collect();
        q.push(("ids", jobs.into_iter().collect::<Vec<_>>().join(",")));
    }
    q
}

/// One job's value for `letter` and whether it may be cut to its width.
fn job_value(job: &JobInfo, letter: char, clock: &Clock) -> (String, bool) {
    let null = |v: Option<&str>| v.filter(|s| !s.is_empty()).unwrap_or("(null)").to_string();
    let pending = job.state == "PENDING";
    let time = |t: Option<&str>| clock.stamp_of(t, "N/A");
    let limit = || job.time_limit.map_or("UNLIMITED".to_string(), squeue_secs);
    let v = match letter {
        'a' => null(Some(&job.account)),
        'A' => job.job_id.to_string(),
        'b' => (if job.gres.is_empty() {
            "N/A"
        } else {
            &job.gres
        })
        .to_string(),
        'B' => {
            if pending || job.nodelist.is_empty() {
                "n/a".into()
            } else {
                first_host(&job.nodelist)
            }
        }
        'c' => job.min_cpus.unwrap_or(1).to_string(),
        'C' => job.cpus.or(job.min_cpus).unwrap_or(1).to_string(),
        'd' => "0".into(),
        'D' => job.nodes.max(1).to_string(),
        // A pending job planned to start with no time limit ends never.
        'e' if pending && job.expected_start.is_some() && job.time_limit.is_none() => "NONE".into(),
        'e' => job
            .end_or_expected()
            .map_or_else(|| "N/A".into(), |t| clock.stamp(t)),
        'E' => dependency_shown(job),
        'f' => null(job.features.as_deref()),
        'F' => job.job_id.to_string(),
        'g' => job.group.clone().unwrap_or_else(|| job.user.clone()),
        'G' => job.gid.map_or_else(|| "N/A".into(), |g| g.to_string()),
        'h' => "OK".into(),
        'H' | 'I' | 'J' => "*".into(),
        'i' => job.display_id.clone(),
        'j' => job.name.clone(),
        'k' => null(job.comment.as_deref()),
        'K' => match (job.array_task_id, &job.array_spec) {
            (Some(t), _) => t.to_string(),
            (None, Some(spec)) => spec.clone(),
            (None, None) => "N/A".into(),
        },
        'l' => return (limit(), job.time_limit.is_none()),
        'L' => {
            return match job.time_limit {
                None => ("UNLIMITED".into(), true),
                Some(l) => (squeue_secs(l.saturating_sub(job.time_used)), false),
            }
        }
        'm' => job.min_memory.clone().unwrap_or_else(|| "0".into()),
        'M' => return (squeue_secs(job.time_used), false),
        'n' => job.req_nodes.clone().unwrap_or_default(),
        'N' => return (job.nodelist.clone(), false),
        'o' => null(job.command.as_deref()),
        'O' => "0".into(),
        'p' => format!(
            "{:16.14}",
            job.priority.unwrap_or(0) as f64 / f64::from(u32::MAX)
        ),
        'P' => job.partition.clone(),
        'q' => job.qos.clone().unwrap_or_else(|| "normal".into()),
        'Q' => job.priority.unwrap_or(0).to_string(),
        'r' => job.reason.clone().unwrap_or_else(|| "None".into()),
        'R' => {
            return if matches!(
                job.state.as_str(),
                "PENDING" | "FAILED" | "TIMEOUT" | "OUT_OF_MEMORY" | "DEADLINE" | "NODE_FAIL"
            ) || job.nodelist.is_empty()
            {
                (
                    format!("({})", job.reason.as_deref().unwrap_or("None")),
                    true,
                )
            } else {
                (job.nodelist.clone(), false)
            }
        }
        's' => String::new(),
        'S' => {
            let when = job.start_time.as_deref().or(job.expected_start.as_deref());
            time(when)
        }
        't' => job.state_code.clone(),
        'T' => job.state.clone(),
        'u' => job.user.clone(),
        'U' => job.uid.map_or_else(|| "N/A".into(), |u| u.to_string()),
        'v' | 'w' | 'W' => "(null)".into(),
        'V' => time(Some(&job.submit_time)),
        'x' => job.exc_nodes.clone().unwrap_or_default(),
        'X' => "N/A".into(),
        'y' => job.nice.unwrap_or(0).to_string(),
        'Y' => {
            let planned = job.expected_start.is_some() && pending;
            return (
                if planned {
                    first_host_or(&job.nodelist, "(null)")
                } else {
                    "(null)".into()
                },
                false,
            );
        }
        'z' => "*:*:*".into(),
        'Z' => null(job.workdir.as_deref()),
        '0' => tres_alloc(job),
        '1' => null(job.stdout.as_deref()),
        '2' => null(job.stderr.as_deref().or(job.stdout.as_deref())),
        '3' => job.ntasks.unwrap_or(1).to_string(),
        '4' => job.cluster.clone().unwrap_or_else(|| "cluster".into()),
        '5' => time(job.eligible_time.as_deref().or(Some(&job.submit_time))),
        '6' => job.exit_code.unwrap_or(0).to_string(),
        '7' => job.restarts.to_string(),
        '8' => job.cpus_per_task.unwrap_or(1).to_string(),
        '9' => {
            if pending {
                let submitted = job
                    .submit_time
                    .parse::<jiff::Timestamp>()
                    .map_or(0, |t| t.as_second());
                (clock.now.as_second() - submitted).max(0).to_string()
            } else {
                "0".into()
            }
        }
        '!' => "/dev/null".into(),
        '"' => "1".into(),
        '#' => "0:00".into(),
        '$' => "N/A".into(),
        '\u{100}' => null(None),
        '\u{101}' => null(None),
        '\u{102}' => null(None),
        '\u{103}' => "0:00".into(),
        '\u{104}' => null(None),
        '\u{105}' => null(None),
        '\u{106}' => null(None),
        '\u{107}' => null(None),
        '\u{108}' => time(Some(&job.submit_time)),
        '\u{109}' => time(job.eligible_time.as_deref()),
        '\u{10a}' => null(None),
        '\u{10b}' => "0".into(),
        '\u{10c}' => "0".into(),
        '\u{10d}' => "1".into(),
        '\u{10e}' => "0".into(),
        '\u{10f}' => "0".into(),
        '\u{110}' => "NA".into(),
        '\u{111}' => "NA".into(),
        '\u{112}' => "NA".into(),
        '\u{113}' => "NA".into(),
        '\u{114}' => "NA".into(),
        '\u{115}' => "NA".into(),
        '\u{116}' => job.cpus.or(job.min_cpus).unwrap_or(1).to_string(),
        '\u{117}' => job.nodes.max(1).to_string(),
        '\u{118}' => null(None),
        '\u{119}' => "N/A".into(),
        '\u{11a}' => "0".into(),
        '\u{11b}' => "N/A".into(),
        '\u{11c}' => "0".into(),
        '\u{11d}' => "N/A".into(),
        '\u{11e}' => "NotSet".into(),
        '\u{11f}' => "0".into(),
        '\u{120}' => "0".into(),
        '\u{121}' => "N/A".into(),
        '\u{122}' => "0".into(),
        '\u{123}' => "0:00".into(),
        '\u{124}' => "N/A".into(),
        '\u{125}' => "N/A".into(),
        '\u{126}' => "N/A".into(),
        '\u{127}' => "N/A".into(),
        '\u{128}' => "N/A".into(),
        '\u{129}' => "N/A".into(),
        '\u{12a}' => "N/A".into(),
        '\u{12b}' => null(None),
        '\u{12c}' => "N/A".into(),
        '\u{12d}' => "N/A".into(),
        '\u{12e}' => "N/A".into(),
        _ => String::new(),
    };
    (v, true)
}

fn first_host(nodelist: &str) -> String {
    super::scontrol::first_host(nodelist).unwrap_or_else(|| nodelist.to_string())
}

fn first_host_or(nodelist: &str, missing: &str) -> String {
    if nodelist.is_empty() {
        missing.to_string()
    } else {
        first_host(nodelist)
    }
}

/// `cpu=4,mem=8G,node=1,gres/gpu=2` of what a job holds (or asks for, pending).
pub fn tres_alloc(job: &JobInfo) -> String {
    let mut parts = vec![format!("cpu={}", job.cpus.or(job.min_cpus).unwrap_or(1))];
    if let Some(mb) = job.memory_mb {
        parts.push(format!("mem={}", super::sacct_fields::memory(mb)));
    }
    parts.push(format!("node={}", job.nodes.max(1)));
    // Billing: the CPUs, where no weights say otherwise (Slurm's default).
    parts.push(format!(
        "billing={}",
        job.cpus.or(job.min_cpus).unwrap_or(1)
    ));
    for item in job.gres.split(',').filter(|g| !g.is_empty()) {
        let mut words: Vec<&str> = item.split(':').collect();
        let per_node = match words.last().and_then(|c| c.parse::<u64>().ok()) {
            Some(c) => {
                words.pop();
                c
            }
            None => 1,
        };
        let count = per_node * u64::from(job.nodes.max(1));
        parts.push(format!("gres/{}={count}", words.join(":")));
    }
    parts.join(",")
}

/// What is left of a job's dependency as Slurm shows it: each item of a pending job
/// that waits on it marked `(unfulfilled)` (`(failed)` when it never will be);
/// `(null)` once it is met.
pub fn dependency_shown(job: &JobInfo) -> String {
    let Some(dep) = job.dependency.as_deref().filter(|d| !d.is_empty()) else {
        return "(null)".into();
    };
    let mark = match job.reason.as_deref() {
        _ if job.state != "PENDING" => return "(null)".into(),
        Some("Dependency") => "(unfulfilled)",
        Some("DependencyNeverSatisfied") => "(failed)",
        _ => return "(null)".into(),
    };
    let mut out = String::new();
    for (i, item) in dep.split([',', '?']).enumerate() {
        if i > 0 {
            // The separator as written (`,` all, `?` any: one kind per dependency).
            out.push(if dep.contains('?') { '?' } else { ',' });
        }
        out.push_str(item);
        out.push_str(mark);
    }
    out
}

/// The batch step of `job` (`N.batch`, named `batch`), as long as it runs.
fn batch_step(job: &JobInfo) -> StepInfo {
    StepInfo {
        id: format!("{}.batch", job.display_id),
        step_id: u32::MAX,
        name: "batch".into(),
        state: job.state.clone(),
        ntasks: 1,
        gpus: String::new(),
        exit_code: None,
        signal: None,
        start_time: job.start_time.clone().unwrap_or_default(),
        end_time: None,
        time_used: job.time_used,
    }
}

fn step_value(job: &JobInfo, step: &StepInfo, letter: char, clock: &Clock) -> (String, bool) {
    let v = match letter {
        'A' => step.ntasks.max(1).to_string(),
        'b' => (if step.gpus.is_empty() {
            "(null)"
        } else {
            &step.gpus
        })
        .to_string(),
        'i' => return (step.id.clone(), true),
        'j' => step.name.clone(),
        'l' => "UNLIMITED".into(),
        'M' => return (squeue_secs(step.time_used), false),
        'N' => return (job.nodelist.clone(), false),
        'P' => job.partition.clone(),
        'S' => clock.stamp_of(Some(&step.start_time), "N/A"),
        'U' => job.uid.map_or_else(|| "N/A".into(), |u| u.to_string()),
        'u' => job.user.clone(),
        'T' => step.state.clone(),
        _ => String::new(),
    };
    (v, true)
}

/// Sort `jobs` by squeue's `-S` keys: the specification is read from its end, each
/// letter a stable sort (`-` before a letter: descending). `Err`: an unknown letter.
/// Sort `jobs` (values or references: a large queue is sorted by reference, without
/// moving its records) by squeue's `-S` spec.
pub fn sort_jobs<J: std::borrow::Borrow<JobInfo>>(
    jobs: &mut [J],
    spec: &str,
) -> Result<(), String> {
    let chars: Vec<char> = spec.chars().collect();
    let mut i = chars.len();
    while i > 0 {
        i -= 1;
        let c = chars[i];
        if c == ',' || c == '+' || c == '-' {
            continue;
        }
        let descending = i > 0 && chars[i - 1] == '-';
        if matches!(sort_key(&JobInfo::default(), c), SortKey::Bad) {
            if spec[..].to_ascii_lowercase().contains("cluster") {
                continue;
            }
            return Err(format!("Invalid sort specification: {c}"));
        }
        jobs.sort_by(|a, b| {
            let o = sort_key(a.borrow(), c).cmp(&sort_key(b.borrow(), c));
            if descending {
                o.reverse()
            } else {
                o
            }
        });
    }
    Ok(())
}

/// What `-S`'s letter `c` sorts a job by ([`SortKey::Bad`]: not a sort letter).
fn sort_key(j: &JobInfo, c: char) -> SortKey<'_> {
    match c {
        'i' => SortKey::Id(j.job_id, j.array_task_id.map_or(-1, i64::from)),
        'A' | 'F' => SortKey::Num(j.job_id as i64),
        'P' => SortKey::Text(&j.partition),
        't' => SortKey::Text(&j.state_code),
        'T' => SortKey::Text(&j.state),
        'p' | 'Q' => SortKey::Num(j.priority.unwrap_or(0)),
        'j' => SortKey::Text(&j.name),
        'u' => SortKey::Text(&j.user),
        'U' => SortKey::Num(i64::from(j.uid.unwrap_or(0))),
        'g' => SortKey::Text(j.group.as_deref().unwrap_or_default()),
        'G' => SortKey::Num(i64::from(j.gid.unwrap_or(0))),
        'M' => SortKey::Num(j.time_used as i64),
        'l' => SortKey::Num(j.time_limit.map_or(i64::MAX, |l| l as i64)),
        'L' => SortKey::Num(
            j.time_limit
                .map_or(i64::MAX, |l| l.saturating_sub(j.time_used) as i64),
        ),
        'D' => SortKey::Num(i64::from(j.nodes)),
        'C' => SortKey::Num(j.cpus.or(j.min_cpus).unwrap_or(1) as i64),
        'N' => SortKey::Text(&j.nodelist),
        'S' => SortKey::Text(
            j.start_time
                .as_deref()
                .or(j.expected_start.as_deref())
                .unwrap_or_default(),
        ),
        'e' => SortKey::Text(j.end_time.as_deref().unwrap_or_default()),
        'V' => SortKey::Text(&j.submit_time),
        'm' | 'd' | 'B' | 'H' | 'I' | 'J' | 'v' | 'z' => SortKey::Num(0),
        'c' | 'f' | 'h' | 'n' | 'O' | 'b' => SortKey::Num(0),
        _ => SortKey::Bad,
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SortKey<'a> {
    Id(u64, i64),
    Num(i64),
    Text(&'a str),
    Bad,
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let r = read(&args, &var)?;
    if let Some(early) = &r.early {
        print_lines(early.iter())?;
        return Ok(());
    }
    let (clock, warning) = Clock::from_env(CMD);
    let portal = connect(CMD)?;
    let mut jobs = portal.jobs(&query(&r)).await.map_err(failed(CMD))?;
    jobs.retain(|j| passes(&r, j));
    let jobs = pending_tasks(jobs, &r);
    // squeue asked for one job that is not there: an error, as Slurm's.
    if r.ids.len() == 1 && !r.steps && jobs.is_empty() {
        return Err(CommandExit::new(
            vec!["slurm_load_jobs error: Invalid job id specified".into()],
            1,
        )
        .into());
    }
    let mut warnings: Vec<String> = r
        .format
        .warnings
        .iter()
        .map(|w| format!("{CMD}: error: {w}"))
        .collect();
    warnings.extend(warning);
    for w in &warnings {
        eprintln!("{w}");
    }
    let mut lines = Vec::new();
    if r.long && r.header {
        lines.push(
            clock
                .zoned_now()
                .strftime("%a %b %d %H:%M:%S %Y")
                .to_string(),
        );
    }
    let table = if r.steps { STEP_LETTERS } else { JOB_LETTERS };
    if r.header {
        lines.push(columns::render(&r.format, |c: &Column| {
            let header = header_of(table, c.letter).to_string();
            let cut = !matches!(c.letter, 'N' | 'R' | 'Y');
            (header, cut)
        }));
    }
    let mut jobs: Vec<&JobInfo> = jobs.iter().collect();
    if let Err(e) = sort_jobs(&mut jobs, &r.sort) {
        print_lines(lines.iter())?;
        return Err(SlurmError::new(CMD, e).into());
    }
    if r.steps {
        // A running job's batch script is its step `N.batch`, as Slurm lists it.
        let batches: Vec<StepInfo> = jobs.iter().map(|j| batch_step(j)).collect();
        let mut steps: Vec<(&JobInfo, &StepInfo)> = jobs
            .iter()
            .copied()
            .zip(&batches)
            .flat_map(|(j, b)| {
                let batch = (j.state == "RUNNING").then_some((j, b));
                j.steps.iter().map(move |s| (j, s)).chain(batch)
            })
            .filter(|(_, s)| s.end_time.is_none())
            .filter(|(j, s)| {
                r.ids.is_empty()
                    || r.ids.iter().any(|id| {
                        *id == s.id
                            || *id == j.id
                            || *id == j.display_id
                            || *id == format!("{}.{}", j.id, s.step_id)
                    })
            })
            .collect();
        steps.sort_by(|a, b| {
            (a.0.partition.as_str(), a.1.id.as_str())
                .cmp(&(b.0.partition.as_str(), b.1.id.as_str()))
        });
        for (job, step) in steps {
            lines.push(columns::render(&r.format, |c| {
                step_value(job, step, c.letter, &clock)
            }));
        }
    } else {
        for job in &jobs {
            lines.push(columns::render(&r.format, |c| {
                job_value(job, c.letter, &clock)
            }));
        }
    }
    print_lines(lines.iter())?;
    Ok(())
}

const USAGE_SHORT: &str = "Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]
              [-n name] [-o format] [--only-job-state] [-p partitions]
              [--qos qos] [--reservation reservation] [--sort fields] [--start]
              [--step step_id] [-t states] [-u user_name] [--usage]
              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]
              [--expand-patterns] [--json=data_parser] [--yaml=data_parser]
              [-ahjlrsv]";

const USAGE: &str = "Usage: squeue [OPTIONS]
  -A, --account=account(s)        comma separated list of accounts
                                  to view, default is all accounts
  -a, --all                       display jobs in hidden partitions
  -h, --noheader                  no headers on output
  -i, --iterate=seconds           specify an interation period
  -j, --job=job(s)                comma separated list of jobs IDs
                                  to view, default is all
  -l, --long                      long report
  -M, --clusters=cluster_name     cluster to issue commands to.  Default is
                                  current cluster.  cluster with no name will
                                  reset to default.
  --me                            equivalent to --user=<my username>
  -n, --name=job_name(s)          comma separated list of job names to view
  --noconvert                     don't convert units from their original type
                                  (e.g. 2048M won't be converted to 2G).
  -o, --format=format             format specification
  -O, --Format=format             format specification
  -p, --partition=partition(s)    comma separated list of partitions
                                  to view, default is all partitions
  -q, --qos=qos(s)                comma separated list of qos's
                                  to view, default is all qos's
  -r, --array                     display one job array element per line
  -S, --sort=fields               comma separated list of fields to sort on
      --start                     print expected start times of pending jobs
  -s, --steps                     comma separated list of job steps
                                  to view, default is all
  -t, --states=states             comma separated list of states to view,
                                  default is pending and running,
                                  '--states=all' reports all states
  -u, --user=user_name(s)         comma separated list of users to view
  -v, --verbose                   verbosity level
  -V, --version                   output version information and exit
  -w, --nodelist=hostlist         list of nodes to view, default is
                                  all nodes

Help options:
  --help                          show this help message
  --usage                         display a brief summary of squeue options";

#[cfg(test)]
mod tests {
    use super::*;

    fn read_words(words: &[&str]) -> Result<Request, CommandExit> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        read(&args, &|_| None)
    }

    fn render_job(r: &Request, job: &JobInfo) -> String {
        let clock = Clock {
            tz: jiff::tz::TimeZone::UTC,
            now: "2026-11-27T17:34:10Z".parse().expect("now"),
            format: super::super::times::TimeFormat::Standard,
        };
        columns::render(&r.format, |c| job_value(job, c.letter, &clock))
    }

    fn header(r: &Request) -> String {
        columns::render(&r.format, |c| {
            (
                header_of(JOB_LETTERS, c.letter).to_string(),
                !matches!(c.letter, 'N' | 'R' | 'Y'),
            )
        })
    }

    #[test]
    fn the_default_lines_are_squeues() {
        let r = read_words(&[]).expect("read");
        assert_eq!(
            header(&r),
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
        );
        let mut job = JobInfo::sample("RUNNING", "R");
        job.time_used = 3725;
        job.name = "a-very-long-name".into();
        assert_eq!(
            render_job(&r, &job),
            "                17       gpu a-very-l    alice  R    1:02:05      1 head"
        );
        let mut pending = JobInfo::sample("PENDING", "PD");
        pending.display_id = "17_[5-9%2]".into();
        pending.array_spec = Some("5-9%2".into());
        pending.reason = Some("Priority".into());
        pending.nodelist = String::new();
        assert_eq!(
            render_job(&r, &pending),
            "        17_[5-9%2]       gpu    train    alice PD       0:00      1 (Priority)"
        );
    }

    #[test]
    fn programs_formats_print_as_they_expect() {
        // snakemake: `squeue --format=%i|%T --states=all --noheader --name UUID`.
        let r = read_words(&[
            "--format=%i|%T",
            "--states=all",
            "--noheader",
            "--name",
            "abc",
        ])
        .expect("read");
        assert!(!r.header && r.all_states);
        assert_eq!(r.names, ["abc"]);
        assert_eq!(
            render_job(&r, &JobInfo::sample("RUNNING", "R")),
            "17|RUNNING"
        );
        // simple_slurm: quoted CSV.
        let r = read_words(&["--me", "-o", "\"%i\",\"%j\",\"%t\""]).expect("read");
        assert!(r.me);
        assert_eq!(
            render_job(&r, &JobInfo::sample("PENDING", "PD")),
            "\"17\",\"train\",\"PD\""
        );
        // -O with widths and the default of 20.
        let r = read_words(&["-O", "jobid:5,name,state:"]).expect("read");
        assert_eq!(header(&r), "JOBIDNAME                STATE");
    }

    #[test]
    fn options_read_as_getopt_reads_them() {
        assert_eq!(
            read_words(&["--job=17,18_2"]).expect("read").ids,
            ["17", "18_2"]
        );
        assert_eq!(read_words(&["-j", "17"]).expect("read").ids, ["17"]);
        assert_eq!(
            read_words(&["-j17", "-j", "-u", "a"]).expect("read").ids,
            ["17"]
        );
        assert_eq!(
            read_words(&["--us", "a,b"]).map(|r| r.users),
            Err(CommandExit::new(
                vec![
                    "squeue: option '--us' is ambiguous; possibilities: '--usage' '--user' '--users'"
                        .into(),
                    "Try \"squeue --help\" for more information".into()
                ],
                1
            ))
        );
        assert_eq!(
            read_words(&["--user", "a", "-u", "b"]).expect("read").users,
            ["b"]
        );
        let r = read_words(&["-t", "pd,R"]).expect("read");
        assert_eq!(r.states, ["PENDING", "RUNNING"]);
    }

    #[test]
    fn mistakes_are_squeues_own() {
        let lines = |words: &[&str]| read_words(words).expect_err("refused").stderr;
        assert_eq!(
            lines(&["--bogus"]),
            [
                "squeue: unrecognized option '--bogus'",
                "Try \"squeue --help\" for more information"
            ]
        );
        assert_eq!(
            lines(&["-t", "XX"])[0],
            "squeue: error: Invalid job state specified: XX"
        );
        assert_eq!(
            lines(&["-j", "abc"]),
            ["squeue: error: Invalid job id: abc"]
        );
        assert_eq!(
            lines(&["extra"]),
            ["squeue: error: Unrecognized option: extra"]
        );
        assert_eq!(
            lines(&["-l", "-o", "%i"]),
            ["squeue: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry."]
        );
        assert_eq!(
            lines(&["-O", "jobid", "-o", "%i"]),
            ["squeue: error: -o (--format) is incompatible with -O (--Format)"]
        );
    }

    #[test]
    fn sorting_reads_its_keys_from_the_end() {
        let job = |id: u64, part: &str, code: &str, prio: i64| JobInfo {
            id: id.to_string(),
            job_id: id,
            partition: part.into(),
            state_code: code.into(),
            priority: Some(prio),
            ..JobInfo::default()
        };
        let mut jobs = vec![
            job(1, "b", "R", 5),
            job(2, "a", "R", 1),
            job(3, "a", "PD", 9),
            job(4, "a", "PD", 10),
        ];
        sort_jobs(&mut jobs, "P,t,-p").expect("sorted");
        let order: Vec<u64> = jobs.iter().map(|j| j.job_id).collect();
        assert_eq!(order, [4, 3, 2, 1]);
        assert_eq!(
            sort_jobs(&mut jobs, "Xi"),
            Err("Invalid sort specification: X".into())
        );
    }

    #[test]
    fn ids_match_jobs_array_tasks_and_pending_tasks() {
        let mut parent = JobInfo::sample("PENDING", "PD");
        parent.display_id = "17_[5-9]".into();
        parent.array_spec = Some("5-9".into());
        assert!(job_matches(&parent, &["17".into()]));
        assert!(job_matches(&parent, &["17_7".into()]));
        assert!(!job_matches(&parent, &["17_4".into()]));
        let array = JobInfo {
            array_spec: Some("1,3,7-11:2%2".into()),
            ..JobInfo::default()
        };
        assert!(array.holds_task(9));
        assert!(!array.holds_task(8));
    }
}
