//! `atrium sstat`: what the running steps of jobs use, option for option as Slurm
//! 22.05's sstat: its options read as getopt_long reads them (`-j job[.step]`, the
//! first operand as a job, `-a`, `-i`, `-o`/`--fields`, `-p`, `-P`, `-n`, `-e`,
//! `--noconvert`), its field list (names matched by their beginning, any case,
//! `%N` widths) printed by Slurm's print engine ([`super::print_fields`]), and its
//! words and exit statuses when something is wrong.
//!
//! The figures are atrium's supervisor's samples of the whole job
//! (`GET /api/v1/jobs/{id}/efficiency`): CPU time, peak and latest resident
//! memory, on the node it runs on. They are the batch step's (`N.batch`, shown
//! with `-a` or `-j N.batch`); atrium does not sample the steps of `srun`
//! separately, so their lines carry no figures. What atrium does not measure prints
//! as Slurm prints it without the plugin that would: virtual memory, pages, disk
//! I/O and the outbound TRES empty, AveCPUFreq and ConsumedEnergy 0, ReqCPUFreq*
//! `Unknown`, Pids empty.

use serde::Deserialize;

use super::api::{JobInfo, StepInfo};
use super::getopt::{HasArg, Opt, Parser};
use super::print_fields::{self, Cut, Layout};
use super::sacct::JobSpec;
use super::times::{cpu_time, secs2time};
use super::{connect, print_lines, CommandExit};

const CMD: &str = "sstat";

/// sstat's options, in the order of its table (which decides ambiguities).
const OPTIONS: &[Opt] = &[
    Opt::new("allsteps", Some('a'), &["allsteps"], HasArg::No),
    Opt::new("helpformat", Some('e'), &["helpformat"], HasArg::No),
    Opt::new("help", Some('h'), &["help"], HasArg::No),
    Opt::new("jobs", Some('j'), &["jobs"], HasArg::Required),
    Opt::new("noheader", Some('n'), &["noheader"], HasArg::No),
    Opt::new("format", Some('o'), &["fields", "format"], HasArg::Required),
    Opt::new("noconvert", None, &["noconvert"], HasArg::No),
    Opt::new("pidformat", Some('i'), &["pidformat"], HasArg::No),
    Opt::new("parsable", Some('p'), &["parsable"], HasArg::No),
    Opt::new("parsable2", Some('P'), &["parsable2"], HasArg::No),
    Opt::new("usage", None, &["usage"], HasArg::No),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
];

/// How a field prints: text (cut with `+`) or a number (never cut).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
}

/// sstat's fields, in its order (the order names are matched in).
const FIELDS: &[(&str, i32, Kind)] = &[
    ("AveCPU", 10, Kind::Text),
    ("AveCPUFreq", 10, Kind::Text),
    ("AveDiskRead", 12, Kind::Text),
    ("AveDiskWrite", 12, Kind::Text),
    ("AvePages", 10, Kind::Text),
    ("AveRSS", 10, Kind::Text),
    ("AveVMSize", 10, Kind::Text),
    ("ConsumedEnergy", 14, Kind::Text),
    ("ConsumedEnergyRaw", 17, Kind::Number),
    ("JobID", -12, Kind::Text),
    ("MaxDiskRead", 12, Kind::Text),
    ("MaxDiskReadNode", 15, Kind::Text),
    ("MaxDiskReadTask", 15, Kind::Number),
    ("MaxDiskWrite", 12, Kind::Text),
    ("MaxDiskWriteNode", 16, Kind::Text),
    ("MaxDiskWriteTask", 16, Kind::Number),
    ("MaxPages", 8, Kind::Text),
    ("MaxPagesNode", 12, Kind::Text),
    ("MaxPagesTask", 14, Kind::Number),
    ("MaxRSS", 10, Kind::Text),
    ("MaxRSSNode", 10, Kind::Text),
    ("MaxRSSTask", 10, Kind::Number),
    ("MaxVMSize", 10, Kind::Text),
    ("MaxVMSizeNode", 14, Kind::Text),
    ("MaxVMSizeTask", 14, Kind::Number),
    ("MinCPU", 10, Kind::Text),
    ("MinCPUNode", 10, Kind::Text),
    ("MinCPUTask", 10, Kind::Number),
    ("Nodelist", 20, Kind::Text),
    ("NTasks", 8, Kind::Number),
    ("Pids", 20, Kind::Text),
    ("ReqCPUFreq", 10, Kind::Text),
    ("ReqCPUFreqMin", 13, Kind::Text),
    ("ReqCPUFreqMax", 13, Kind::Text),
    ("ReqCPUFreqGov", 13, Kind::Text),
    ("TRESUsageInAve", 14, Kind::Text),
    ("TRESUsageInMax", 14, Kind::Text),
    ("TRESUsageInMaxNode", 18, Kind::Text),
    ("TRESUsageInMaxTask", 18, Kind::Text),
    ("TRESUsageInMin", 14, Kind::Text),
    ("TRESUsageInMinNode", 18, Kind::Text),
    ("TRESUsageInMinTask", 18, Kind::Text),
    ("TRESUsageInTot", 14, Kind::Text),
    ("TRESUsageOutAve", 15, Kind::Text),
    ("TRESUsageOutMax", 15, Kind::Text),
    ("TRESUsageOutMaxNode", 19, Kind::Text),
    ("TRESUsageOutMaxTask", 19, Kind::Text),
    ("TRESUsageOutMin", 15, Kind::Text),
    ("TRESUsageOutMinNode", 19, Kind::Text),
    ("TRESUsageOutMinTask", 19, Kind::Text),
    ("TRESUsageOutTot", 15, Kind::Text),
];

/// sstat's columns without `-o`.
pub const DEFAULT_FIELDS: &str = "jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutave,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutmin,tresusageoutminn,tresusageoutmint,tresusageouttot";

/// `-i`'s columns, added to the others.
const PID_FIELDS: &str = "jobid,nodelist,pids";

/// One column: a field and its width (negative: left-justified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    index: usize,
    pub width: i32,
}

impl Field {
    pub fn name(&self) -> &'static str {
        FIELDS[self.index].0
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub fields: Vec<Field>,
    pub layout: Layout,
    pub header: bool,
    pub all_steps: bool,
    pub pid_format: bool,
    pub noconvert: bool,
    pub jobs: Vec<JobSpec>,
    /// What to print instead (`--help`, `--helpformat`, `--usage`, `--version`).
    pub early: Option<Vec<String>>,
}

fn error(message: String) -> CommandExit {
    CommandExit::new(vec![format!("{CMD}: error: {message}")], 1)
}

/// Read a field list as sstat does: items up to each comma, leading blanks
/// skipped, each with an optional `%WIDTH`, matched to the first field it begins
/// (any case); an empty item ends the list. A width set for a field applies to
/// each of its columns.
pub fn parse_fields(list: &str) -> Result<Vec<Field>, CommandExit> {
    let names: Vec<&str> = FIELDS.iter().map(|(n, _, _)| *n).collect();
    let mut widths: Vec<i32> = FIELDS.iter().map(|(_, w, _)| *w).collect();
    let mut chosen = Vec::new();
    let mut rest = list;
    while let Some((item, after)) = rest.split_once(',') {
        let item = item.trim_start();
        if item.is_empty() {
            break;
        }
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, print_fields::atoi(w)),
            None => (item, 0),
        };
        let index = print_fields::find_prefix(&names, name)
            .ok_or_else(|| error(format!("Invalid field requested: \"{name}\"")))?;
        if width != 0 {
            widths[index] = width;
        }
        chosen.push(index);
        rest = after;
    }
    Ok(chosen
        .into_iter()
        .map(|index| Field {
            index,
            width: widths[index],
        })
        .collect())
}

/// Read sstat's command line, option by option as sstat acts on them.
pub fn read(args: &[String]) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| CommandExit::new(vec![e.line(&super::invoked_as(CMD))], 1))?;
    let mut r = Request {
        fields: Vec::new(),
        layout: Layout::Fixed,
        header: true,
        all_steps: false,
        pid_format: false,
        noconvert: false,
        jobs: Vec::new(),
        early: None,
    };
    let mut help = None;
    let mut list: Option<String> = None;
    let add_jobs = |jobs: &mut Vec<JobSpec>, text: &str| -> Result<(), CommandExit> {
        for item in text.split(',').filter(|s| !s.is_empty()) {
            let spec = JobSpec::parse(item)
                .map_err(|m| CommandExit::new(vec![format!("{CMD}: fatal: {m}")], 1))?;
            if !jobs.contains(&spec) {
                jobs.push(spec);
            }
        }
        Ok(())
    };
    for o in &parsed.options {
        let value = o.value.as_deref().unwrap_or("");
        match o.key {
            "allsteps" => r.all_steps = true,
            "helpformat" => help = Some("fields"),
            "help" => help = Some("help"),
            "usage" => help = Some("usage"),
            "pidformat" => {
                r.pid_format = true;
                let l = list.get_or_insert_with(String::new);
                l.push_str(PID_FIELDS);
                l.push(',');
            }
            "jobs" => add_jobs(&mut r.jobs, value)?,
            "noheader" => r.header = false,
            "noconvert" => r.noconvert = true,
            "format" => {
                let l = list.get_or_insert_with(String::new);
                l.push_str(value);
                l.push(',');
            }
            "parsable" => r.layout = Layout::Parsable,
            "parsable2" => r.layout = Layout::Parsable2,
            "version" => {
                r.early = Some(vec![super::VERSION_LINE.to_string()]);
                return Ok(r);
            }
            _ => {}
        }
    }
    if let Some(which) = help {
        r.early = Some(match which {
            "help" => HELP.iter().map(|l| l.to_string()).collect(),
            "fields" => {
                let names: Vec<&str> = FIELDS.iter().map(|(n, _, _)| *n).collect();
                print_fields::help_lines(&names, 19)
            }
            _ => vec![
                "Usage: sstat [options] -j <job(.stepid)>".into(),
                "\tUse --help for help".into(),
            ],
        });
        return Ok(r);
    }
    if let Some(first) = parsed.operands.first() {
        add_jobs(&mut r.jobs, first)?;
    }
    let list = list.unwrap_or_else(|| format!("{DEFAULT_FIELDS},"));
    r.fields = parse_fields(&list)?;
    if r.jobs.is_empty() {
        return Err(error("You didn't give me any jobs to stat.".into()));
    }
    Ok(r)
}

/// `GET /jobs/{id}/efficiency`, what sstat reads of it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// `atrium`, `slurm`, or none: nothing sampled yet.
    pub source: Option<String>,
    pub cpu_seconds: Option<f64>,
    pub max_rss_bytes: Option<u64>,
    pub series: Option<Series>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Series {
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Point {
    pub rss_mib: u64,
}

/// A step's figures: one task's, so each is the average, the largest and the
/// smallest at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub cpu_seconds: f64,
    pub max_rss_bytes: Option<u64>,
    /// The latest sample's resident memory.
    pub rss_bytes: Option<u64>,
}

impl Stats {
    /// The figures of a job's samples, when there are any.
    pub fn of(usage: &Usage) -> Option<Stats> {
        usage.source.as_ref()?;
        Some(Stats {
            cpu_seconds: usage.cpu_seconds?,
            max_rss_bytes: usage.max_rss_bytes,
            rss_bytes: usage
                .series
                .as_ref()
                .and_then(|s| s.points.last())
                .map(|p| p.rss_mib << 20),
        })
    }
}

/// One line to print: a step, on its nodes, with its figures if known.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLine {
    /// `12.0`, `12.batch`, `12_3.batch`.
    pub id: String,
    /// Its nodes (a host list), or with `-i` one node.
    pub nodes: String,
    pub ntasks: u32,
    pub stats: Option<Stats>,
}

/// The first host of a host list.
fn first_host(nodes: &str) -> String {
    super::scontrol::first_host(nodes).unwrap_or_else(|| nodes.to_string())
}

/// What a step of a job is called in sstat's messages (`StepId=12.batch`).
fn step_name(spec: &JobSpec) -> String {
    format!("StepId={}.{}", spec.job, spec.step.as_deref().unwrap_or(""))
}

/// The running steps of `job` that `spec` asks for (all with `-a`), each with its
/// figures, or sstat's complaint.
pub fn steps(
    r: &Request,
    spec: &JobSpec,
    job: &JobInfo,
    usage: &Usage,
) -> Result<Vec<StepLine>, String> {
    let running = job.state == "RUNNING";
    let mut steps: Vec<(String, Option<&StepInfo>)> = Vec::new();
    if running {
        steps.push(("batch".into(), None));
        let mut srun: Vec<&StepInfo> = job
            .steps
            .iter()
            .filter(|s| s.end_time.is_none() && s.state == "RUNNING")
            .collect();
        srun.sort_by_key(|s| s.step_id);
        steps.extend(srun.into_iter().map(|s| (s.step_id.to_string(), Some(s))));
    }
    let wanted: Vec<&(String, Option<&StepInfo>)> = match &spec.step {
        Some(step) => steps.iter().filter(|(id, _)| id == step).collect(),
        None if r.all_steps => steps.iter().collect(),
        // The lowest numbered step, not the batch step.
        None => steps.iter().filter(|s| s.1.is_some()).take(1).collect(),
    };
    if wanted.is_empty() && (steps.is_empty() || spec.step.is_some()) {
        return Err(match &spec.step {
            None => format!("No steps running for job {}", spec.job),
            Some(_) => format!("{} not found running.", step_name(spec)),
        });
    }
    let mut lines = Vec::new();
    for (id, step) in wanted {
        let nodes = match step {
            None => first_host(&job.nodelist),
            Some(_) => job.nodelist.clone(),
        };
        let ntasks = step.map_or(1, |s| s.ntasks.max(1));
        let stats = match step {
            None => Stats::of(usage),
            Some(_) => None,
        };
        let id = format!("{}.{id}", job.display_id);
        if r.pid_format {
            let hosts = super::scontrol::expand_hostlist(&nodes).unwrap_or_else(|_| vec![nodes]);
            lines.extend(hosts.into_iter().map(|node| StepLine {
                id: id.clone(),
                nodes: node,
                ntasks: 0,
                stats: None,
            }));
        } else {
            lines.push(StepLine {
                id,
                nodes,
                ntasks,
                stats,
            });
        }
    }
    Ok(lines)
}

/// A field's value on a step's line.
fn value(name: &str, line: &StepLine, noconvert: bool) -> String {
    let s = line.stats.as_ref();
    let node = || s.map(|_| first_host(&line.nodes)).unwrap_or_default();
    let task = || s.map(|_| "0".to_string()).unwrap_or_default();
    let cpu = || {
        s.map(|s| cpu_time((s.cpu_seconds.max(0.0) as u64) * 1000))
            .unwrap_or_default()
    };
    let bytes = |b: Option<u64>| {
        b.map(|b| print_fields::convert_num_unit(b as f64, noconvert))
            .unwrap_or_default()
    };
    // The TRES strings: the CPU time and the memory, where known.
    let tres = |mem: Option<u64>| -> String {
        let Some(s) = s else {
            return String::new();
        };
        let mut parts = vec![format!("cpu={}", secs2time(s.cpu_seconds.max(0.0) as u64))];
        if let Some(m) = mem {
            parts.push(format!(
                "mem={}",
                print_fields::convert_num_unit(m as f64, noconvert)
            ));
        }
        parts.join(",")
    };
    let tres_at = |what: &str| -> String {
        let Some(s) = s else {
            return String::new();
        };
        let mut parts = vec![format!("cpu={what}")];
        if s.max_rss_bytes.is_some() {
            parts.push(format!("mem={what}"));
        }
        parts.join(",")
    };
    match name {
        "AveCPU" | "MinCPU" => cpu(),
        "AveCPUFreq" | "ConsumedEnergy" | "ConsumedEnergyRaw" => "0".into(),
        "AveRSS" => bytes(s.and_then(|s| s.rss_bytes)),
        "JobID" => line.id.clone(),
        "MaxRSS" => bytes(s.and_then(|s| s.max_rss_bytes)),
        "MaxRSSNode" if s.is_some_and(|s| s.max_rss_bytes.is_some()) => node(),
        "MaxRSSTask" if s.is_some_and(|s| s.max_rss_bytes.is_some()) => task(),
        "MinCPUNode" => node(),
        "MinCPUTask" => task(),
        "Nodelist" => line.nodes.clone(),
        "NTasks" => line.ntasks.to_string(),
        "ReqCPUFreq" | "ReqCPUFreqMin" | "ReqCPUFreqMax" | "ReqCPUFreqGov" => "Unknown".into(),
        "TRESUsageInAve" | "TRESUsageInTot" => tres(s.and_then(|s| s.rss_bytes)),
        "TRESUsageInMax" | "TRESUsageInMin" => tres(s.and_then(|s| s.max_rss_bytes)),
        "TRESUsageInMaxNode" | "TRESUsageInMinNode" => tres_at(&node()),
        "TRESUsageInMaxTask" | "TRESUsageInMinTask" => tres_at("0"),
        // Not measured by atrium: virtual memory, pages, disk I/O, outbound TRES, pids.
        _ => String::new(),
    }
}

/// The header lines.
pub fn header(r: &Request) -> Vec<String> {
    let columns: Vec<(&str, i32)> = r.fields.iter().map(|f| (f.name(), f.width)).collect();
    print_fields::header(&columns, r.layout, "|")
}

/// One step's line.
pub fn line(r: &Request, step: &StepLine) -> String {
    print_fields::join(
        r.fields
            .iter()
            .map(|f| {
                let cut = match FIELDS[f.index].2 {
                    Kind::Text => Cut::Plus,
                    Kind::Number => Cut::Never,
                };
                print_fields::value(&value(f.name(), step, r.noconvert), f.width, cut, r.layout)
            })
            .collect(),
        r.layout,
        "|",
    )
}

/// The portal's id of what `spec` names (`12`, `12_3`).
fn job_id(spec: &JobSpec) -> String {
    match spec.task {
        Some(t) => format!("{}_{t}", spec.job),
        None => spec.job.to_string(),
    }
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let r = read(&args)?;
    if let Some(early) = &r.early {
        print_lines(early.iter())?;
        return Ok(());
    }
    let portal = connect(CMD)?;
    if r.header {
        print_lines(header(&r))?;
    }
    for spec in &r.jobs {
        let id = job_id(spec);
        let fetched = async {
            let job = portal.job(&id).await?;
            let usage: Usage = if job.state == "RUNNING" {
                portal
                    .get_query(&format!("/jobs/{id}/efficiency"), &[])
                    .await?
            } else {
                Usage::default()
            };
            Ok::<_, super::api::CallError>((job, usage))
        }
        .await;
        let (job, usage) = match fetched {
            Ok(got) => got,
            Err(e) => {
                if e.status != Some(404) {
                    eprintln!("{CMD}: error: {}", e.message);
                }
                eprintln!("{CMD}: error: couldn't get steps for job {}", spec.job);
                continue;
            }
        };
        match steps(&r, spec, &job, &usage) {
            Ok(lines) => print_lines(lines.iter().map(|s| line(&r, s)))?,
            Err(e) => eprintln!("{CMD}: error: {e}"),
        }
    }
    Ok(())
}

const HELP: &[&str] = &[
    "sstat [<OPTION>] -j <job(.stepid)>                                          ",
    "    Valid <OPTION> values are:                                              ",
    "      -a, --allsteps:                                                       ",
    "                   Print all steps for the given job(s) when no step is     ",
    "                   specified.                                               ",
    "      -e, --helpformat:                                                     ",
    "\t           Print a list of fields that can be specified with the    ",
    "\t           '--format' option                                        ",
    "     -h, --help:   Print this description of use.                           ",
    "     -i, --pidformat:                                                       ",
    "                   Predefined format to list the pids running for each      ",
    "                   job step.  (JobId,Nodes,Pids)                            ",
    "     -j, --jobs:                                                            ",
    "\t           Format is <job(.step)>. Stat this job step               ",
    "                   or comma-separated list of job steps. This option is     ",
    "                   required.  The step portion will default to the lowest   ",
    "                   numbered (not batch, extern, etc) step running if not    ",
    "                   specified, unless the --allsteps flag is set where not   ",
    "                   specifying a step will result in all running steps       ",
    "                   to be displayed. A step id of 'batch' will display the   ",
    "                   information about the batch step. A step id of 'extern'  ",
    "                   will display the information about the extern step       ",
    "                   when using PrologFlags=contain.                          ",
    "     -n, --noheader:                                                        ",
    "\t           No header will be added to the beginning of output.      ",
    "                   The default is to print a header.                        ",
    "     --noconvert:  Don't convert units from their original type             ",
    "\t\t   (e.g. 2048M won't be converted to 2G).                   ",
    "     -o, --format:                                                          ",
    "\t           Comma separated list of fields. (use \"--helpformat\"    ",
    "                   for a list of available fields).                         ",
    "     -p, --parsable: output will be '|' delimited with a '|' at the end     ",
    "     -P, --parsable2: output will be '|' delimited without a '|' at the end ",
    "     --usage:      Display brief usage message.                             ",
    "     -v, --verbose:                                                         ",
    "\t           Primarily for debugging purposes, report the state of    ",
    "                   various variables during processing.                     ",
    "     -V, --version: Print version.                                          ",
    "",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn running() -> JobInfo {
        let mut job = JobInfo::sample("RUNNING", "R");
        job.id = "12".into();
        job.job_id = 12;
        job.display_id = "12".into();
        job.nodelist = "vm".into();
        job
    }

    fn srun_step(step_id: u32, state: &str) -> StepInfo {
        StepInfo {
            id: format!("12.{step_id}"),
            step_id,
            name: "python".into(),
            state: state.into(),
            ntasks: 2,
            gpus: String::new(),
            exit_code: None,
            signal: None,
            start_time: "2026-11-27T17:35:58Z".into(),
            end_time: (state != "RUNNING").then(|| "2026-11-27T17:36:58Z".into()),
            time_used: 60,
        }
    }

    fn sampled() -> Usage {
        Usage {
            source: Some("atrium".into()),
            cpu_seconds: Some(65.7),
            max_rss_bytes: Some(1_732_608),
            series: Some(Series {
                points: vec![Point { rss_mib: 3 }, Point { rss_mib: 1 }],
            }),
        }
    }

    fn out(w: &[&str], job: &JobInfo, usage: &Usage) -> Result<Vec<String>, String> {
        let r = read(&words(w)).expect("read");
        let mut lines = if r.header { header(&r) } else { Vec::new() };
        for spec in &r.jobs {
            lines.extend(steps(&r, spec, job, usage)?.iter().map(|s| line(&r, s)));
        }
        Ok(lines)
    }

    #[test]
    fn the_batch_step_carries_the_jobs_figures() {
        let job = running();
        assert_eq!(
            out(
                &["-j", "12.batch", "-o", "jobid,ntasks,avecpu,maxrss,averss,maxvmsize,nodelist,pids"],
                &job,
                &sampled()
            )
            .expect("lines"),
            [
                "JobID          NTasks     AveCPU     MaxRSS     AveRSS  MaxVMSize             Nodelist                 Pids ",
                "------------ -------- ---------- ---------- ---------- ---------- -------------------- -------------------- ",
                "12.batch            1   00:01:05      1692K         1M                              vm                      ",
            ]
        );
        assert_eq!(
            out(
                &[
                    "12.batch",
                    "-P",
                    "-o",
                    "jobid,mincpun,maxrsst,tresusageinmax,reqcpufreqgov,consumedenergy"
                ],
                &job,
                &sampled()
            )
            .expect("lines"),
            [
                "JobID|MinCPUNode|MaxRSSTask|TRESUsageInMax|ReqCPUFreqGov|ConsumedEnergy",
                "12.batch|vm|0|cpu=00:01:05,mem=1692K|Unknown|0",
            ]
        );
        // --noconvert: bytes as they are.
        assert_eq!(
            out(
                &["-j12.batch", "-p", "-n", "-o", "maxrss", "--noconvert"],
                &job,
                &sampled()
            )
            .expect("lines"),
            ["1732608|"]
        );
    }

    #[test]
    fn which_steps_a_job_shows() {
        let mut job = running();
        // Only the batch step: nothing without -a, as Slurm.
        assert_eq!(
            out(&["-n", "-P", "-o", "jobid", "12"], &job, &sampled()),
            Ok(vec![])
        );
        assert_eq!(
            out(
                &["-n", "-P", "-o", "jobid", "-a", "-j", "12"],
                &job,
                &sampled()
            ),
            Ok(vec!["12.batch".into()])
        );
        job.steps = vec![
            srun_step(1, "RUNNING"),
            srun_step(0, "COMPLETED"),
            srun_step(3, "RUNNING"),
        ];
        assert_eq!(
            out(
                &["-n", "-P", "-o", "jobid,ntasks,maxrss", "12"],
                &job,
                &sampled()
            ),
            Ok(vec!["12.1|2|".into()]),
            "the lowest step running, without figures of its own"
        );
        assert_eq!(
            out(&["-n", "-P", "-o", "jobid", "-a", "12"], &job, &sampled()),
            Ok(vec!["12.batch".into(), "12.1".into(), "12.3".into()])
        );
        assert_eq!(
            out(&["-n", "-i", "-P", "-j", "12.3"], &job, &sampled()),
            Ok(vec!["12.3|vm|".into()])
        );
        assert_eq!(
            out(&["-j", "12.0"], &job, &sampled()),
            Err("StepId=12.0 not found running.".into())
        );
        let pending = JobInfo::sample("PENDING", "PD");
        assert_eq!(
            out(&["-j", "12"], &pending, &Usage::default()),
            Err("No steps running for job 12".into())
        );
        // Not sampled yet: the line, empty.
        assert_eq!(
            out(
                &["-n", "-P", "-o", "jobid,maxrss,avecpu", "12.batch"],
                &running(),
                &Usage::default()
            ),
            Ok(vec!["12.batch||".into()])
        );
    }

    #[test]
    fn fields_as_sstat_reads_them() {
        let r = read(&words(&["1"])).expect("read");
        assert_eq!(r.fields.len(), 47);
        assert_eq!(r.fields[0].name(), "JobID");
        let names = |w: &[&str]| -> Vec<&str> {
            read(&words(w))
                .expect("read")
                .fields
                .iter()
                .map(|f| f.name())
                .collect()
        };
        assert_eq!(
            names(&["-j1", "-o", "ntasks", "-i"]),
            ["NTasks", "JobID", "Nodelist", "Pids"]
        );
        assert_eq!(
            names(&["-j1", "--fields", "ave,maxr"]),
            ["AveCPU", "MaxRSS"]
        );
        // An empty item ends the list, as in sstat.
        assert_eq!(names(&["-j1", "-o", "jobid,,ntasks"]), ["JobID"]);
        let r = read(&words(&["-j1", "-o", "jobid%20,JOBID"])).expect("read");
        assert_eq!(
            r.fields.iter().map(|f| f.width).collect::<Vec<_>>(),
            [20, 20]
        );
        assert_eq!(
            read(&words(&["-j1", "-o", "bogus"]))
                .expect_err("bogus")
                .stderr,
            ["sstat: error: Invalid field requested: \"bogus\""]
        );
        assert_eq!(
            read(&words(&["-P", "-j", "1.batch,1.batch,2_3"]))
                .expect("read")
                .jobs,
            [
                JobSpec {
                    job: 1,
                    task: None,
                    step: Some("batch".into())
                },
                JobSpec {
                    job: 2,
                    task: Some(3),
                    step: None
                }
            ]
        );
    }

    #[test]
    fn mistakes_and_early_answers_are_sstats_own() {
        let fail = |w: &[&str]| read(&words(w)).expect_err("a mistake");
        assert_eq!(
            fail(&[]).stderr,
            ["sstat: error: You didn't give me any jobs to stat."]
        );
        assert_eq!(
            fail(&["--bogus"]).stderr,
            ["sstat: unrecognized option '--bogus'"]
        );
        assert_eq!(fail(&["-Z"]).stderr, ["sstat: invalid option -- 'Z'"]);
        assert_eq!(
            fail(&["-j"]).stderr,
            ["sstat: option requires an argument -- 'j'"]
        );
        assert_eq!(
            fail(&["--jobs"]).stderr,
            ["sstat: option '--jobs' requires an argument"]
        );
        assert_eq!(
            fail(&["--p"]).stderr,
            ["sstat: option '--p' is ambiguous; possibilities: '--pidformat' '--parsable' '--parsable2'"]
        );
        assert_eq!(
            fail(&["--usage=1"]).stderr,
            ["sstat: option '--usage' doesn't allow an argument"]
        );
        assert_eq!(
            fail(&["-j", "x"]).stderr,
            ["sstat: fatal: Bad job/step specified: x"]
        );
        for e in [fail(&["--bogus"]), fail(&[]), fail(&["-j", "x"])] {
            assert_eq!(e.status, 1);
        }
        let early = |w: &[&str]| read(&words(w)).expect("read").early.expect("early");
        assert_eq!(
            early(&["--usage"]),
            [
                "Usage: sstat [options] -j <job(.stepid)>",
                "\tUse --help for help"
            ]
        );
        assert_eq!(early(&["-e", "-h"]), HELP, "the last of them wins");
        assert_eq!(
            early(&["-h", "-e"])[0],
            "AveCPU              AveCPUFreq          AveDiskRead         AveDiskWrite       "
        );
        assert_eq!(early(&["-V", "-j", "x"]), [crate::VERSION_LINE]);
    }
}
