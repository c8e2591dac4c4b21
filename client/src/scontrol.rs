//! `atrium scontrol`: Slurm 22.05's scontrol for what users and programs ask of it:
//! `show job|node|partition|config|step` in its `Key=Value` records (`-o`: one line
//! each), `show hostnames|hostlist|hostlistsorted`, `hold`, `uhold`, `release`,
//! `requeue` (a job's own `scontrol requeue $SLURM_JOB_ID` with the job's token),
//! `top`, `update JobId=… TimeLimit=…|Partition=…|Dependency=…|NumNodes=…|Nice=…` for
//! pending jobs, `ping` and `version`; keywords as scontrol matches them (prefixes
//! with their minimum lengths), its messages and exit status. `suspend` and `resume`
//! are refused as Slurm refuses them to users: atrium's scheduler does not suspend.
//! Must not touch: anything of the server.

use super::api::{JobInfo, PartitionInfo};
use super::getopt::{HasArg, Opt, Parser};
use super::sinfo::NodeInfo;
use super::times::{secs2time, Clock};
use super::{connect, failed, print_lines, split_list, CommandExit};

const CMD: &str = "scontrol";
/// The most host names one list expands to (as sbatch's `--nodelist`).
const MAX_HOSTS: usize = 8192;

const OPTIONS: &[Opt] = &[
    Opt::new("all", Some('a'), &["all"], HasArg::No),
    Opt::new(
        "cluster",
        Some('M'),
        &["cluster", "clusters"],
        HasArg::Required,
    ),
    Opt::new("details", Some('d'), &["details"], HasArg::No),
    Opt::new("federation", None, &["federation"], HasArg::No),
    Opt::new("future", Some('F'), &["future"], HasArg::No),
    Opt::new("help", Some('h'), &["help", "usage"], HasArg::No),
    Opt::new("hide", None, &["hide"], HasArg::No),
    Opt::new("local", None, &["local"], HasArg::No),
    Opt::new("oneliner", Some('o'), &["oneliner"], HasArg::No),
    Opt::new("quiet", Some('Q'), &["quiet"], HasArg::No),
    Opt::new("sibling", None, &["sibling"], HasArg::No),
    Opt::new("uid", Some('u'), &["uid"], HasArg::Required),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
];

/// The hosts that `-w`/`--nodelist` values name, expanded once (`n[1-2]`: `n1`, `n2`);
/// `localhost` also names this machine (its host name read once).
pub fn wanted_hosts(values: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = values
        .iter()
        // An unreadable list stays as it is: it names no job's host.
        .flat_map(|v| expand_hostlist(v).unwrap_or_else(|_| vec![v.clone()]))
        .collect();
    if hosts.iter().any(|h| h == "localhost") {
        if let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            hosts.push(name.trim().to_string());
        }
    }
    hosts
}

/// Whether the host list `nodelist` (a job's) holds any of `wanted` (expanded hosts).
pub fn node_overlap(wanted: &[String], nodelist: &str) -> bool {
    expand_hostlist(nodelist)
        .unwrap_or_default()
        .iter()
        .any(|h| wanted.contains(h))
}

/// The first host of a host list (`n[1-3]`: `n1`); `None` for an empty or unreadable
/// list.
pub fn first_host(list: &str) -> Option<String> {
    expand_hostlist(list).ok()?.into_iter().next()
}

/// Expand a Slurm host list (`head`, `gpu[01-03,7],cpu1`) within [`MAX_HOSTS`].
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let bad = || format!("invalid host list: {list}");
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // One item: up to a comma outside brackets.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let item = &rest[..end];
        rest = rest[end..].strip_prefix(',').unwrap_or("");
        match item.split_once('[') {
            None if !item.is_empty() => out.push(item.to_string()),
            None => {}
            Some((prefix, ranges)) => {
                let (ranges, suffix) = ranges.split_once(']').ok_or_else(bad)?;
                for range in ranges.split(',') {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    let width = lo.len();
                    let lo: u64 = lo.parse().map_err(|_| bad())?;
                    let hi: u64 = hi.parse().map_err(|_| bad())?;
                    if hi < lo || (hi - lo) as usize >= MAX_HOSTS {
                        return Err(bad());
                    }
                    for n in lo..=hi {
                        out.push(format!("{prefix}{n:0width$}{suffix}"));
                        if out.len() > MAX_HOSTS {
                            return Err(format!("the host list names more than {MAX_HOSTS} hosts"));
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// scontrol's keywords and the fewest letters each needs, in the order it tries them.
const KEYWORDS: &[(&str, usize)] = &[
    ("abort", 5),
    ("all", 2),
    ("cancel_reboot", 3),
    ("completing", 2),
    ("cluster", 2),
    ("create", 2),
    ("details", 1),
    ("errnumstr", 2),
    ("exit", 2),
    ("help", 2),
    ("hide", 2),
    ("oneliner", 1),
    ("pidinfo", 3),
    ("ping", 3),
    ("quiet", 4),
    ("quit", 4),
    ("reboot_nodes", 3),
    ("reconfigure", 3),
    ("requeuehold", 11),
    ("requeue", 3),
    ("release", 3),
    ("suspend", 2),
    ("resume", 3),
    ("top", 3),
    ("token", 3),
    ("wait_job", 2),
    ("setdebugflags", 9),
    ("setdebug", 2),
    ("schedloglevel", 3),
    ("show", 3),
    ("write", 5),
    ("takeover", 8),
    ("shutdown", 8),
    ("update", 1),
    ("delete", 1),
    ("verbose", 4),
    ("version", 4),
    ("listpids", 1),
    ("getent", 6),
    ("notify", 1),
    ("callerid", 3),
];

/// The keyword `word` means: `hold`, `uhold`, `holdu` when it begins with one;
/// otherwise the first keyword it is a prefix of, with at least its fewest letters.
fn keyword(word: &str) -> Option<&'static str> {
    let lower = word.to_ascii_lowercase();
    for hold in ["holdu", "uhold", "hold"] {
        if lower.starts_with(hold) {
            return Some(hold);
        }
    }
    KEYWORDS
        .iter()
        .find(|(k, min)| lower.len() >= *min && k.starts_with(&lower))
        .map(|(k, _)| *k)
}

/// The entities `show` takes and their fewest letters.
const ENTITIES: &[(&str, usize, &str)] = &[
    ("config", 1, "config"),
    ("hostnames", 5, "hostnames"),
    ("hostlistsorted", 9, "hostlistsorted"),
    ("hostlist", 5, "hostlist"),
    ("jobs", 1, "job"),
    ("jobid", 1, "job"),
    ("nodes", 1, "node"),
    ("partitions", 2, "partition"),
    ("partitionname", 2, "partition"),
    ("steps", 2, "step"),
];

fn entity(word: &str) -> Option<&'static str> {
    let lower = word.to_ascii_lowercase();
    ENTITIES
        .iter()
        .find(|(e, min, _)| lower.len() >= *min && e.starts_with(&lower))
        .map(|(_, _, e)| *e)
}

fn failure(lines: Vec<String>) -> CommandExit {
    CommandExit::new(lines, 1)
}

/// A record printed as scontrol does: its first line, then the others indented by
/// three blanks; with `-o`, all on one line.
fn record(lines: &[Vec<String>], oneliner: bool, job: bool) -> Vec<String> {
    if oneliner {
        let mut all: Vec<String> = lines.iter().flatten().cloned().collect();
        if job {
            all.push(String::new());
        }
        return vec![all.join(" ")];
    }
    let mut out: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, items)| {
            let text = items.join(" ");
            if i == 0 {
                text
            } else {
                format!("   {text}")
            }
        })
        .collect();
    if job {
        out.push("   ".into());
    }
    out.push(String::new());
    out
}

fn or_null(v: Option<&str>) -> String {
    v.filter(|s| !s.is_empty()).unwrap_or("(null)").to_string()
}

/// `scontrol show job`'s record of one job.
pub fn job_record(j: &JobInfo, clock: &Clock) -> Vec<Vec<String>> {
    let stamp = |t: Option<&str>| clock.stamp_of(t, "Unknown");
    let pending = j.state == "PENDING";
    let held = j
        .reason
        .as_deref()
        .is_some_and(|r| r.starts_with("JobHeld"));
    let mut first = vec![format!("JobId={}", j.id)];
    if let Some(task) = j.array_task_id {
        first.push(format!("ArrayJobId={}", j.job_id));
        first.push(format!("ArrayTaskId={task}"));
    } else if let Some(spec) = &j.array_spec {
        first.push(format!("ArrayJobId={}", j.job_id));
        first.push(format!("ArrayTaskId={spec}"));
    }
    first.push(format!("JobName={}", j.name));
    let user = match j.uid {
        Some(uid) => format!("{}({uid})", j.user),
        None => j.user.clone(),
    };
    let group = match (j.group.as_deref(), j.gid) {
        (Some(g), Some(gid)) => format!("{g}({gid})"),
        (None, Some(gid)) => format!("{gid}({gid})"),
        _ => "(null)".into(),
    };
    let limit = j.time_limit.map_or("UNLIMITED".to_string(), secs2time);
    let end = j
        .end_or_expected()
        .map_or_else(|| "Unknown".into(), |t| clock.stamp(t));
    let mut lines = vec![
        first,
        vec![
            format!("UserId={user}"),
            format!("GroupId={group}"),
            "MCS_label=N/A".into(),
        ],
        vec![
            format!(
                "Priority={}",
                if held { 0 } else { j.priority.unwrap_or(0) }
            ),
            format!("Nice={}", j.nice.unwrap_or(0)),
            format!("Account={}", or_null(Some(&j.account))),
            format!("QOS={}", j.qos.clone().unwrap_or_else(|| "normal".into())),
        ],
        vec![
            format!("JobState={}", j.state),
            format!(
                "Reason={}",
                j.reason.clone().unwrap_or_else(|| "None".into())
            ),
            format!("Dependency={}", super::squeue::dependency_shown(j)),
        ],
        vec![
            "Requeue=1".into(),
            format!("Restarts={}", j.restarts),
            "BatchFlag=1".into(),
            "Reboot=0".into(),
            format!(
                "ExitCode={}:{}",
                j.exit_code.unwrap_or(0),
                j.signal.unwrap_or(0)
            ),
        ],
        vec![
            format!("RunTime={}", secs2time(j.time_used)),
            format!("TimeLimit={limit}"),
            "TimeMin=N/A".into(),
        ],
        vec![
            format!("SubmitTime={}", stamp(Some(&j.submit_time))),
            format!("EligibleTime={}", stamp(j.eligible_time.as_deref())),
        ],
        // Priority accrues from eligibility: not before it, nor before the begin time.
        vec![format!(
            "AccrueTime={}",
            stamp(
                j.eligible_time
                    .as_deref()
                    .filter(|t| { t.parse::<jiff::Timestamp>().is_ok_and(|t| t <= clock.now) })
            )
        )],
        vec![
            format!(
                "StartTime={}",
                stamp(j.start_time.as_deref().or(j.expected_start.as_deref()))
            ),
            format!("EndTime={end}"),
            "Deadline=N/A".into(),
        ],
        vec![
            "SuspendTime=None".into(),
            "SecsPreSuspend=0".into(),
            format!("LastSchedEval={}", stamp(Some(&j.submit_time))),
            "Scheduler=Main".into(),
        ],
        vec![
            format!("Partition={}", j.partition),
            "AllocNode:Sid=(null)".into(),
        ],
        vec![
            format!("ReqNodeList={}", or_null(j.req_nodes.as_deref())),
            format!("ExcNodeList={}", or_null(j.exc_nodes.as_deref())),
        ],
        vec![format!(
            "NodeList={}",
            if pending { "" } else { &j.nodelist }
        )],
    ];
    if !pending && !j.nodelist.is_empty() {
        let host = first_host(&j.nodelist).unwrap_or_default();
        lines.push(vec![format!("BatchHost={host}")]);
    }
    let cpus = j.cpus.or(j.min_cpus).unwrap_or(1);
    lines.extend([
        vec![
            format!("NumNodes={}", j.nodes.max(1)),
            format!("NumCPUs={cpus}"),
            format!("NumTasks={}", j.ntasks.unwrap_or(1)),
            format!("CPUs/Task={}", j.cpus_per_task.unwrap_or(1)),
            "ReqB:S:C:T=0:0:*:*".into(),
        ],
        vec![format!("TRES={}", super::squeue::tres_alloc(j))],
        vec![
            "Socks/Node=*".into(),
            "NtasksPerN:B:S:C=0:0:*:*".into(),
            "CoreSpec=*".into(),
        ],
        vec![
            format!("MinCPUsNode={}", j.cpus_per_task.unwrap_or(1)),
            format!(
                "MinMemoryNode={}",
                j.min_memory.clone().unwrap_or_else(|| "0".into())
            ),
            "MinTmpDiskNode=0".into(),
        ],
        vec![
            format!("Features={}", or_null(j.features.as_deref())),
            "DelayBoot=00:00:00".into(),
        ],
        vec![
            "OverSubscribe=OK".into(),
            "Contiguous=0".into(),
            "Licenses=(null)".into(),
            "Network=(null)".into(),
        ],
        vec![format!("Command={}", or_null(j.command.as_deref()))],
        vec![format!("WorkDir={}", or_null(j.workdir.as_deref()))],
        vec![format!(
            "StdErr={}",
            or_null(j.stderr.as_deref().or(j.stdout.as_deref()))
        )],
        vec!["StdIn=/dev/null".into()],
        vec![format!("StdOut={}", or_null(j.stdout.as_deref()))],
        vec!["Power=".into()],
    ]);
    lines
}

/// A partition's trackable resources, as Slurm sums its nodes': CPUs, memory, nodes,
/// billing (its CPUs), GPUs in all and by type.
fn partition_tres(p: &PartitionInfo, nodes: &[NodeInfo]) -> String {
    let mine: Vec<&NodeInfo> = nodes
        .iter()
        .filter(|n| n.partitions.contains(&p.name))
        .collect();
    let cpus: u64 = mine.iter().map(|n| u64::from(n.cpus_total)).sum();
    let mem: u64 = mine.iter().map(|n| n.memory_mb_total).sum();
    let mut typed: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
    for s in mine.iter().flat_map(|n| &n.slices) {
        *typed.entry(s.r#type.as_str()).or_default() += s.total;
    }
    let mut tres = format!("cpu={cpus},mem={mem}M,node={},billing={cpus}", mine.len());
    let gpus: u32 = typed.values().sum();
    if gpus > 0 {
        tres.push_str(&format!(",gres/gpu={gpus}"));
        for (t, count) in typed {
            tres.push_str(&format!(",gres/gpu:{t}={count}"));
        }
    }
    tres
}

/// `scontrol show node`'s record. A node described by its CPUs alone has, as in
/// Slurm, a socket per CPU. The machine's facts (OS, boot, load, free memory) are
/// there where the portal runs on the node; power and sensors are not measured.
pub fn node_record(n: &NodeInfo, clock: &Clock) -> Vec<Vec<String>> {
    let alloc_mem = n.memory_mb_total - n.memory_mb_free;
    let gres: Vec<String> = n
        .slices
        .iter()
        .map(|s| format!("gpu:{}:{}", s.r#type, s.total))
        .collect();
    let gpus: u32 = n.slices.iter().map(|s| s.total).sum();
    let mut tres = format!(
        "cpu={},mem={}M,billing={}",
        n.cpus_total, n.memory_mb_total, n.cpus_total
    );
    if gpus > 0 {
        tres.push_str(&format!(",gres/gpu={gpus}"));
        let mut typed: Vec<(String, u32)> = n
            .slices
            .iter()
            .map(|s| (s.r#type.clone(), s.total))
            .collect();
        typed.sort();
        for (t, count) in typed {
            tres.push_str(&format!(",gres/gpu:{t}={count}"));
        }
    }
    let state = match n.state.state.as_str() {
        "DRAIN" if n.cpus_free < n.cpus_total => "MIXED+DRAIN".to_string(),
        other => other.to_string(),
    };
    let host = n.host.as_ref();
    let stamp = |t: Option<i64>| {
        t.and_then(|s| jiff::Timestamp::from_second(s).ok())
            .map_or_else(|| "None".into(), |t| clock.stamp(t))
    };
    let mut lines = vec![
        vec![
            format!("NodeName={}", n.name),
            "Arch=x86_64".into(),
            "CoresPerSocket=1 ".into(),
        ],
        vec![
            format!("CPUAlloc={}", n.cpus_total - n.cpus_free),
            format!("CPUEfctv={}", n.cpus_total),
            format!("CPUTot={}", n.cpus_total),
            format!("CPULoad={}", n.cpu_load()),
        ],
        vec![format!(
            "AvailableFeatures={}",
            or_null(Some(&n.features.join(",")))
        )],
        vec![format!(
            "ActiveFeatures={}",
            or_null(Some(&n.features.join(",")))
        )],
        vec![format!("Gres={}", or_null(Some(&gres.join(","))))],
        vec![
            format!("NodeAddr={}", n.name),
            format!("NodeHostName={}", n.name),
            format!("Version={}", env!("CARGO_PKG_VERSION")),
        ],
    ];
    if let Some(h) = host.filter(|h| !h.os.is_empty()) {
        lines.push(vec![format!("OS={} ", h.os)]);
    }
    lines.extend([
        vec![
            format!("RealMemory={}", n.memory_mb_total),
            format!("AllocMem={alloc_mem}"),
            format!("FreeMem={}", n.free_memory()),
            format!("Sockets={}", n.cpus_total),
            "Boards=1".into(),
        ],
        vec![
            format!("State={state}"),
            "ThreadsPerCore=1".into(),
            "TmpDisk=0".into(),
            "Weight=1".into(),
            "Owner=N/A".into(),
            "MCS_label=N/A".into(),
        ],
        vec![format!("Partitions={} ", n.partitions.join(","))],
    ]);
    if let Some(h) = host {
        lines.push(vec![
            format!("BootTime={}", stamp(h.boot_time)),
            format!("SlurmdStartTime={}", stamp(h.started)),
        ]);
    }
    lines.extend([
        vec![format!("CfgTRES={tres}")],
        vec![format!("AllocTRES=cpu={}", n.cpus_total - n.cpus_free)],
        vec!["CapWatts=n/a".into()],
        vec!["CurrentWatts=0".into(), "AveWatts=0".into()],
        vec![
            "ExtSensorsJoules=n/s".into(),
            "ExtSensorsWatts=0".into(),
            "ExtSensorsTemp=n/s".into(),
        ],
    ]);
    if let Some(reason) = n.state.reason.as_deref().filter(|r| !r.is_empty()) {
        lines.push(vec![format!("Reason={reason}")]);
    }
    lines
}

/// `scontrol show partition`'s record.
pub fn partition_record(p: &PartitionInfo, nodes: &[NodeInfo]) -> Vec<Vec<String>> {
    let names: Vec<&str> = nodes
        .iter()
        .filter(|n| n.partitions.contains(&p.name))
        .map(|n| n.name.as_str())
        .collect();
    let cpus: u64 = nodes
        .iter()
        .filter(|n| n.partitions.contains(&p.name))
        .map(|n| u64::from(n.cpus_total))
        .sum();
    let max_time = super::times::parse_limit(&p.max_time)
        .ok()
        .flatten()
        .map_or("UNLIMITED".to_string(), secs2time);
    vec![
        vec![format!("PartitionName={}", p.name)],
        vec![
            "AllowGroups=ALL".into(),
            "AllowAccounts=ALL".into(),
            "AllowQos=ALL".into(),
        ],
        vec![
            "AllocNodes=ALL".into(),
            format!("Default={}", if p.default { "YES" } else { "NO" }),
            "QoS=N/A".into(),
        ],
        vec![
            "DefaultTime=NONE".into(),
            "DisableRootJobs=NO".into(),
            "ExclusiveUser=NO".into(),
            "GraceTime=0".into(),
            "Hidden=NO".into(),
        ],
        vec![
            "MaxNodes=UNLIMITED".into(),
            format!("MaxTime={max_time}"),
            "MinNodes=0".into(),
            "LLN=NO".into(),
            "MaxCPUsPerNode=UNLIMITED".into(),
        ],
        vec![format!("Nodes={}", scheduler::compress_hostlist(&names))],
        vec![
            "PriorityJobFactor=1".into(),
            "PriorityTier=1".into(),
            "RootOnly=NO".into(),
            "ReqResv=NO".into(),
            "OverSubscribe=NO".into(),
        ],
        vec!["OverTimeLimit=NONE".into(), "PreemptMode=OFF".into()],
        vec![
            "State=UP".into(),
            format!("TotalCPUs={cpus}"),
            format!("TotalNodes={}", names.len()),
            "SelectTypeParameters=NONE".into(),
        ],
        vec!["JobDefaults=(null)".into()],
        vec![
            "DefMemPerNode=UNLIMITED".into(),
            "MaxMemPerNode=UNLIMITED".into(),
        ],
        vec![format!("TRES={}", partition_tres(p, nodes))],
    ]
}

/// What scontrol was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub oneliner: bool,
    pub details: bool,
    pub quiet: bool,
    pub words: Vec<String>,
    pub early: Option<Vec<String>>,
}

pub fn read(args: &[String]) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| super::usage_error(CMD, &e))?;
    let early = if parsed.has("help") {
        Some(vec![USAGE.to_string()])
    } else if parsed.has("version") {
        Some(vec![super::VERSION_LINE.to_string()])
    } else {
        None
    };
    Ok(Request {
        oneliner: parsed.has("oneliner"),
        details: parsed.has("details"),
        quiet: parsed.has("quiet"),
        words: parsed.operands,
        early,
    })
}

/// `JobId=17` / `Job=17` / `17` as the job a hold, release or requeue names.
fn job_arg(word: &str) -> &str {
    match word.split_once('=') {
        Some((k, v)) if k.eq_ignore_ascii_case("jobid") || k.eq_ignore_ascii_case("job") => v,
        _ => word,
    }
}

/// `requeue`, `hold`, `uhold`, `release` or `top` of the jobs named: a job's own
/// requeue with its token, the rest with the user's.
async fn act(action: &str, words: &[String]) -> anyhow::Result<()> {
    if words.is_empty() {
        return Err(failure(vec![format!("too few arguments for keyword:{action}")]).into());
    }
    if action == "top" && words.len() > 1 {
        return Err(failure(vec!["too many arguments for keyword:top".into()]).into());
    }
    let var = |k: &str| std::env::var(k).ok();
    let own = super::srun::job_id(&var);
    let mut errors = Vec::new();
    let portal_action = match action {
        "holdu" | "uhold" | "hold" => "hold",
        other => other,
    };
    // One client for every id, made when the first needs it.
    let mut user_portal = None;
    for word in words {
        for id in split_list(job_arg(word)) {
            if action == "requeue" && own.as_deref() == Some(id.as_str()) {
                if let Some(portal) = super::srun::job_portal(&var) {
                    let portal = portal.map_err(|e| super::SlurmError::new(CMD, e))?;
                    portal.requeue_itself(&id).await.map_err(failed(CMD))?;
                    continue;
                }
            }
            let portal = match &mut user_portal {
                Some(p) => p,
                None => user_portal.insert(connect(CMD)?),
            };
            if let Err(e) = portal.act(&id, portal_action).await {
                // Slurm's own words for what its controller answers.
                let reason = match e.status {
                    Some(404) => "Invalid job id specified".to_string(),
                    Some(403) => "Access/permission denied".to_string(),
                    Some(409) if action != "requeue" => {
                        "Job is no longer pending execution".to_string()
                    }
                    _ => e.message,
                };
                errors.push(format!("{reason} for job {id}"));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(failure(errors).into())
    }
}

/// `update JobId=17 TimeLimit=2:00:00 …` for a pending job of the caller's.
async fn update(words: &[String]) -> anyhow::Result<()> {
    if words.is_empty() {
        return Err(failure(vec!["too few arguments for update keyword".into()]).into());
    }
    let mut job = None;
    let mut changes = serde_json::Map::new();
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return Err(failure(vec![
                format!("Invalid input: {word}"),
                "Request aborted".into(),
            ])
            .into());
        };
        let lower = key.to_ascii_lowercase();
        let is = |name: &str, min: usize| lower.len() >= min && name.starts_with(&lower);
        if is("jobid", 3) {
            job = Some(value.to_string());
        } else if is("timelimit", 5) {
            changes.insert("time_limit".into(), value.into());
        } else if is("partition", 2) {
            changes.insert("partition".into(), value.into());
        } else if is("dependency", 1) {
            changes.insert("dependency".into(), value.into());
        } else if is("numnodes", 8) || is("reqnodes", 8) {
            changes.insert("nodes".into(), value.into());
        } else if is("name", 2) || is("jobname", 4) {
            changes.insert("name".into(), value.into());
        } else if is("comment", 3) {
            changes.insert("comment".into(), value.into());
        } else if is("nice", 2) {
            // Nice=N (administrators); `Nice=` alone is Slurm's default, 100.
            let nice = match value {
                "" => 100,
                v => v.parse::<i64>().map_err(|_| {
                    failure(vec![
                        format!("Invalid nice value: {value}"),
                        "Request aborted".into(),
                    ])
                })?,
            };
            changes.insert("nice".into(), nice.into());
        } else {
            return Err(failure(vec![
                format!("Update of this parameter is not supported: {word}"),
                "Request aborted".into(),
            ])
            .into());
        }
    }
    let Some(job) = job else {
        return Err(failure(vec![
            "No valid entity in update command".into(),
            "Input line must include \"NodeName\", \"PartitionName\", \"Reservation\", \"JobId\", or \"SlurmctldDebug\"".into(),
        ])
        .into());
    };
    if changes.is_empty() {
        return Err(failure(vec!["No changes specified".into()]).into());
    }
    let portal = connect(CMD)?;
    portal
        .update_job(&job, &serde_json::Value::Object(changes))
        .await
        .map_err(|e| {
            let reason = match e.status {
                Some(404) => "Invalid job id specified".to_string(),
                _ => e.message,
            };
            failure(vec![format!("{reason} for job {job}")])
        })?;
    Ok(())
}

async fn show(r: &Request, words: &[String]) -> anyhow::Result<()> {
    let Some(what) = words.first() else {
        return Err(failure(vec!["too few arguments for keyword:show".into()]).into());
    };
    // `show job=17` and `show job 17`.
    let (what, mut id) = match what.split_once('=') {
        Some((w, v)) => (w.to_string(), Some(v.to_string())),
        None => (what.clone(), None),
    };
    if id.is_none() {
        id = words.get(1).cloned();
    }
    if words.len() > 2 {
        return Err(failure(vec!["too many arguments for keyword:show".into()]).into());
    }
    let Some(entity) = entity(&what) else {
        return Err(failure(vec![format!("invalid entity:{what} for keyword:show ")]).into());
    };
    // The time zone is read only by the records that print times (not `hostnames`,
    // which every job script may call).
    let clock = std::cell::LazyCell::new(|| Clock::from_env(CMD).0);
    let mut out = Vec::new();
    match entity {
        "hostnames" => {
            let list = match id {
                Some(list) => list,
                None => match std::env::var("SLURM_JOB_NODELIST")
                    .or_else(|_| std::env::var("SLURM_NODELIST"))
                {
                    Ok(l) => l,
                    Err(_) => {
                        eprintln!("{CMD}: error: host list is empty");
                        return Ok(());
                    }
                },
            };
            let hosts = expand_hostlist(&list).map_err(|e| super::SlurmError::new(CMD, e))?;
            out.extend(hosts);
        }
        "hostlist" | "hostlistsorted" => {
            let Some(list) = id else {
                return Err(failure(vec!["invalid encode argument".into()]).into());
            };
            let mut hosts: Vec<String> = list
                .split(',')
                .flat_map(|h| expand_hostlist(h).unwrap_or_default())
                .collect();
            if entity == "hostlistsorted" {
                hosts.sort();
                hosts.dedup();
            }
            let refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
            out.push(scheduler::compress_hostlist(&refs));
        }
        "job" => {
            let portal = connect(CMD)?;
            let jobs = match &id {
                Some(id) => {
                    if id
                        .split('_')
                        .next()
                        .is_none_or(|j| j.parse::<u64>().is_err())
                    {
                        return Err(failure(vec![
                            "scontrol_print_job error: Invalid job id specified".into(),
                        ])
                        .into());
                    }
                    let found = portal
                        .jobs(&[
                            ("ids", id.split('_').next().unwrap_or(id).to_string()),
                            ("state", "all".into()),
                            ("detail", "true".into()),
                        ])
                        .await
                        .map_err(failed(CMD))?;
                    let found: Vec<JobInfo> = found
                        .into_iter()
                        .filter(|j| !id.contains('_') || j.id == *id)
                        .collect();
                    if found.is_empty() {
                        return Err(failure(vec![
                            "slurm_load_jobs error: Invalid job id specified".into(),
                        ])
                        .into());
                    }
                    found
                }
                None => portal.jobs(&[]).await.map_err(failed(CMD))?,
            };
            if jobs.is_empty() {
                out.push("No jobs in the system".into());
            }
            for job in &jobs {
                out.extend(record(&job_record(job, &clock), r.oneliner, true));
            }
        }
        "step" => {
            let portal = connect(CMD)?;
            let jobs = portal.jobs(&[]).await.map_err(failed(CMD))?;
            let mut any = false;
            for job in &jobs {
                for step in job.steps.iter().filter(|s| s.end_time.is_none()) {
                    let sid = format!("{}.{}", job.id, step.step_id);
                    if id.as_ref().is_some_and(|i| *i != sid && *i != job.id) {
                        continue;
                    }
                    any = true;
                    let lines = vec![
                        vec![
                            format!("StepId={sid}"),
                            format!("UserId={}", job.uid.unwrap_or(0)),
                            format!(
                                "StartTime={}",
                                clock.stamp_of(Some(&step.start_time), "Unknown")
                            ),
                            "TimeLimit=UNLIMITED".into(),
                        ],
                        vec![
                            format!("State={}", step.state),
                            format!("Partition={}", job.partition),
                            format!("NodeList={}", job.nodelist),
                        ],
                        vec![
                            format!("Nodes={}", job.nodes.max(1)),
                            format!("CPUs={}", step.ntasks.max(1)),
                            format!("Tasks={}", step.ntasks.max(1)),
                            format!("Name={}", step.name),
                            "Network=(null)".into(),
                        ],
                    ];
                    out.extend(record(&lines, r.oneliner, false));
                }
            }
            if !any {
                if let Some(i) = id {
                    return Err(failure(vec![format!("Job step {i} not found")]).into());
                }
                out.push("No job steps in the system".into());
            }
        }
        "node" | "partition" => {
            let portal = connect(CMD)?;
            let cluster = portal.cluster().await.map_err(failed(CMD))?;
            if entity == "node" {
                let nodes: Vec<&NodeInfo> = cluster
                    .nodes
                    .iter()
                    .filter(|n| {
                        id.as_ref().is_none_or(|i| {
                            expand_hostlist(i).unwrap_or_default().contains(&n.name)
                        })
                    })
                    .collect();
                if nodes.is_empty() {
                    // On standard output, as Slurm's.
                    return Err(CommandExit::new(Vec::new(), 1)
                        .with_stdout(vec![format!("Node {} not found", id.unwrap_or_default())])
                        .into());
                }
                for n in nodes {
                    out.extend(record(&node_record(n, &clock), r.oneliner, false));
                }
            } else {
                let parts: Vec<&PartitionInfo> = cluster
                    .partitions
                    .iter()
                    .filter(|p| id.as_ref().is_none_or(|i| *i == p.name))
                    .collect();
                if parts.is_empty() {
                    return Err(CommandExit::new(Vec::new(), 1)
                        .with_stdout(vec![format!(
                            "Partition {} not found",
                            id.unwrap_or_default()
                        )])
                        .into());
                }
                for p in parts {
                    out.extend(record(
                        &partition_record(p, &cluster.nodes),
                        r.oneliner,
                        false,
                    ));
                }
            }
        }
        "config" => {
            let portal = connect(CMD)?;
            let config = portal.get_json("/config").await.map_err(failed(CMD))?;
            out.push(format!(
                "Configuration data as of {}",
                clock.stamp(clock.now)
            ));
            if let Some(map) = config.as_object() {
                for (key, value) in map {
                    let text = match value {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Null => "(null)".into(),
                        other => other.to_string(),
                    };
                    out.push(format!("{key:<23} = {text}"));
                }
            }
            out.push(String::new());
            out.push("Slurmctld(primary) at atrium is UP".into());
        }
        _ => {}
    }
    print_lines(out.iter())?;
    Ok(())
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let r = read(&args)?;
    if let Some(early) = &r.early {
        print_lines(early.iter())?;
        return Ok(());
    }
    let Some((first, rest)) = r.words.split_first() else {
        return Err(failure(vec![
            "scontrol: interactive mode is not available: give a command, as `scontrol show job 17`".into(),
        ])
        .into());
    };
    let Some(key) = keyword(first) else {
        return Err(failure(vec![format!("invalid keyword: {first}")]).into());
    };
    match key {
        "show" => show(&r, rest).await,
        "hold" | "holdu" | "uhold" | "release" | "requeue" | "top" => act(key, rest).await,
        "update" => update(rest).await,
        "suspend" | "resume" => {
            if rest.is_empty() {
                return Err(failure(vec![format!("too few arguments for keyword:{key}")]).into());
            }
            Err(failure(
                rest.iter()
                    .map(|id| format!("Access/permission denied for job {}", job_arg(id)))
                    .collect(),
            )
            .into())
        }
        "ping" => {
            connect(CMD)?.get_json("/me").await.map_err(failed(CMD))?;
            print_lines(["Slurmctld(primary) at atrium is UP"])?;
            Ok(())
        }
        "version" => {
            print_lines([super::VERSION_LINE])?;
            Ok(())
        }
        other => Err(failure(vec![format!(
            "{CMD}: {other} is not available here: atrium's scontrol shows jobs, nodes, partitions and the configuration, holds, releases, requeues, tops and updates jobs"
        )])
        .into()),
    }
}

const USAGE: &str = "scontrol [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -a or --all: equivalent to \"all\" command
     -d or --details: equivalent to \"details\" command
     -h or --help: equivalent to \"help\" command
     -M or --cluster: equivalent to \"cluster\" command
     -o or --oneliner: equivalent to \"oneliner\" command
     -Q or --quiet: equivalent to \"quiet\" command
     -u or --uid: update request with this uid
     -v or --verbose: equivalent to \"verbose\" command
     -V or --version: equivalent to \"version\" command

    Valid <COMMAND> values are:
     hold <job_list>          prevent specified job from starting
     release <job_list>       permit specified job to start
     requeue <job_id>         re-queue a batch job
     show <ENTITY> [<ID>]     display state of identified entity (job, node,
                              partition, config, step, hostnames, hostlist,
                              hostlistsorted)
     top <job_id>             put a job at the top of its user's queue
     uhold <job_list>         place user hold on specified job
     update <SPECIFICATIONS>  update job: JobId=<id> TimeLimit=<time>,
                              Partition=<name>, Dependency=<deps>,
                              NumNodes=<count>, JobName=<name>, Comment=<text>,
                              Nice=<adjustment> (administrators)
     version                  display tool version number.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_filter_matches_hosts_not_text() {
        let wanted = wanted_hosts(&["n1".to_string()]);
        assert!(node_overlap(&wanted, "n[1-2]"));
        assert!(!node_overlap(&wanted, "n10"));
        assert!(!node_overlap(&wanted_hosts(&["n[".to_string()]), "n1"));
        assert!(node_overlap(&wanted_hosts(&["m,n[0-3]".to_string()]), "n2"));
    }

    #[test]
    fn host_lists_expand_like_slurms() {
        assert_eq!(expand_hostlist("head").expect("one"), ["head"]);
        assert_eq!(
            expand_hostlist("gpu[01-03,7],cpu1").expect("list"),
            ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]
        );
        assert_eq!(
            expand_hostlist("n[9-10]-ib").expect("suffix"),
            ["n9-ib", "n10-ib"]
        );
        assert!(expand_hostlist("n[3-1]").is_err());
        assert!(expand_hostlist("n[1-99999999]").is_err());
        assert!(expand_hostlist("n[1-2").is_err());
    }

    #[test]
    fn keywords_are_matched_as_scontrol_matches_them() {
        assert_eq!(keyword("show"), Some("show"));
        assert_eq!(keyword("sho"), Some("show"));
        assert_eq!(keyword("sh"), None);
        assert_eq!(keyword("s"), None);
        assert_eq!(keyword("requeue"), Some("requeue"));
        assert_eq!(keyword("requeuehold"), Some("requeuehold"));
        assert_eq!(keyword("uhold"), Some("uhold"));
        assert_eq!(keyword("ho"), None);
        assert_eq!(keyword("u"), Some("update"));
        assert_eq!(entity("j"), Some("job"));
        assert_eq!(entity("p"), None);
        assert_eq!(entity("pa"), Some("partition"));
        assert_eq!(entity("hostn"), Some("hostnames"));
    }

    #[test]
    fn records_are_indented_and_one_line_with_o() {
        let lines = vec![vec!["A=1".to_string(), "B=2".into()], vec!["C=3".into()]];
        assert_eq!(
            record(&lines, false, true),
            ["A=1 B=2", "   C=3", "   ", ""]
        );
        assert_eq!(record(&lines, true, true), ["A=1 B=2 C=3 "]);
        assert_eq!(record(&lines, false, false), ["A=1 B=2", "   C=3", ""]);
    }

    #[test]
    fn a_running_jobs_record_reads_as_slurms() {
        let mut job = JobInfo::sample("RUNNING", "R");
        job.uid = Some(20001);
        job.gid = Some(20001);
        job.group = Some("alice".into());
        job.time_limit = Some(1800);
        job.time_used = 182;
        job.submit_time = "2026-11-27T17:34:10Z".into();
        job.start_time = Some("2026-11-27T17:34:10Z".into());
        let clock = Clock {
            tz: jiff::tz::TimeZone::UTC,
            now: "2026-11-27T17:37:12Z".parse().expect("now"),
            format: super::super::times::TimeFormat::Standard,
        };
        let lines = record(&job_record(&job, &clock), false, true);
        assert_eq!(lines[0], "JobId=17 JobName=train");
        assert_eq!(
            lines[1],
            "   UserId=alice(20001) GroupId=alice(20001) MCS_label=N/A"
        );
        assert_eq!(
            lines[5],
            "   RunTime=00:03:02 TimeLimit=00:30:00 TimeMin=N/A"
        );
        assert_eq!(
            lines[8],
            "   StartTime=2026-11-27T17:34:10 EndTime=2026-11-27T18:04:10 Deadline=N/A"
        );
        assert!(
            lines.contains(&"   BatchHost=head".to_string()),
            "{lines:?}"
        );
    }
}
