//! `sacct`'s columns (`--format`): Slurm 22.05's 109 field names in its order, each
//! with its width, justification and kind (text cut with a `+`, numbers never cut,
//! dates cut silently, durations never cut), how a name is matched (the first field it
//! begins, any case; `ALL`), and the fixed-width and parsable lines. Fields atrium does
//! not keep print as Slurm prints an unset value: blank. Pure functions; no IO.

use super::api::JobInfo;
use super::sacct::Row;
use super::times::{cpu_time, secs2time, Clock};

/// How a field's value is printed when it is longer than its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Cut, its last kept character replaced by `+`.
    Text,
    /// Never cut.
    Number,
    /// Cut silently (also in parsable output).
    Date,
    /// Never cut.
    Duration,
}

/// Every field `--helpformat` lists, in Slurm's order: name, width (negative:
/// left-justified) and kind.
const FIELDS: &[(&str, i32, Kind)] = &[
    ("Account", 10, Kind::Text),
    ("AdminComment", 15, Kind::Text),
    ("AllocCPUS", 10, Kind::Number),
    ("AllocNodes", 10, Kind::Text),
    ("AllocTRES", 10, Kind::Text),
    ("AssocID", 7, Kind::Number),
    ("AveCPU", 10, Kind::Text),
    ("AveCPUFreq", 10, Kind::Text),
    ("AveDiskRead", 14, Kind::Text),
    ("AveDiskWrite", 14, Kind::Text),
    ("AvePages", 10, Kind::Text),
    ("AveRSS", 10, Kind::Text),
    ("AveVMSize", 10, Kind::Text),
    ("BlockID", 16, Kind::Text),
    ("Cluster", 10, Kind::Text),
    ("Comment", 14, Kind::Text),
    ("Constraints", 19, Kind::Text),
    ("ConsumedEnergy", 14, Kind::Text),
    ("ConsumedEnergyRaw", 17, Kind::Number),
    ("Container", 19, Kind::Text),
    ("CPUTime", 10, Kind::Duration),
    ("CPUTimeRAW", 10, Kind::Number),
    ("DBIndex", -10, Kind::Number),
    ("DerivedExitCode", 15, Kind::Text),
    ("Elapsed", 10, Kind::Duration),
    ("ElapsedRaw", 10, Kind::Number),
    ("Eligible", 19, Kind::Date),
    ("End", 19, Kind::Date),
    ("ExitCode", 8, Kind::Text),
    ("Flags", 19, Kind::Text),
    ("GID", 6, Kind::Number),
    ("Group", 9, Kind::Text),
    ("JobID", -12, Kind::Text),
    ("JobIDRaw", -12, Kind::Text),
    ("JobName", 10, Kind::Text),
    ("Layout", 9, Kind::Text),
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
    ("McsLabel", 12, Kind::Text),
    ("MinCPU", 10, Kind::Text),
    ("MinCPUNode", 10, Kind::Text),
    ("MinCPUTask", 10, Kind::Number),
    ("NCPUS", 10, Kind::Number),
    ("NNodes", 8, Kind::Number),
    ("NodeList", 15, Kind::Text),
    ("NTasks", 8, Kind::Number),
    ("Partition", 10, Kind::Text),
    ("Priority", 10, Kind::Number),
    ("QOS", 10, Kind::Text),
    ("QOSRAW", 6, Kind::Number),
    ("Reason", 22, Kind::Text),
    ("ReqCPUFreq", 10, Kind::Text),
    ("ReqCPUFreqGov", 13, Kind::Text),
    ("ReqCPUFreqMax", 13, Kind::Text),
    ("ReqCPUFreqMin", 13, Kind::Text),
    ("ReqCPUS", 8, Kind::Number),
    ("ReqMem", 10, Kind::Text),
    ("ReqNodes", 8, Kind::Text),
    ("ReqTRES", 10, Kind::Text),
    ("Reservation", 20, Kind::Text),
    ("ReservationId", 8, Kind::Number),
    ("Reserved", 10, Kind::Duration),
    ("ResvCPU", 10, Kind::Duration),
    ("ResvCPURAW", 10, Kind::Number),
    ("Start", 19, Kind::Date),
    ("State", 10, Kind::Text),
    ("Submit", 19, Kind::Date),
    ("SubmitLine", 20, Kind::Text),
    ("Suspended", 10, Kind::Duration),
    ("SystemComment", 15, Kind::Text),
    ("SystemCPU", 10, Kind::Text),
    ("Timelimit", 10, Kind::Text),
    ("TimelimitRaw", 10, Kind::Text),
    ("TotalCPU", 10, Kind::Text),
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
    ("UID", 6, Kind::Number),
    ("User", 9, Kind::Text),
    ("UserCPU", 10, Kind::Text),
    ("WCKey", 10, Kind::Text),
    ("WCKeyID", 10, Kind::Number),
    ("WorkDir", 20, Kind::Text),
];

/// `sacct`'s columns without `--format`.
pub const DEFAULT_FORMAT: &str = "jobid,jobname,partition,account,alloccpus,state,exitcode";

/// `-l`'s columns.
pub const LONG_FORMAT: &str = "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,reqtres,alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,tresusageouttot";

/// One column of the output: its field (an index into Slurm's table) and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    index: usize,
    /// Negative: left-justified.
    pub width: i32,
}

impl Field {
    pub fn name(&self) -> &'static str {
        FIELDS[self.index].0
    }
}

pub use super::print_fields::Layout;
use super::print_fields::{self, Cut};

/// Why a `--format` list was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// `Invalid field requested: "<item>"`.
    Invalid(String),
    /// A field Slurm removed, with its fatal message.
    Removed(String),
}

/// Read a `--format` list as sacct does: items split on commas (leading blanks
/// skipped, trailing ones kept), each with an optional `%WIDTH` (`%-15`: left); a
/// prefix of `ALL` is every field; otherwise the first field whose name begins with
/// the item, any case.
pub fn parse_format(spec: &str) -> Result<Vec<Field>, FormatError> {
    let mut fields = Vec::new();
    for raw in spec.split(',') {
        let item = raw.trim_start();
        if item.is_empty() {
            continue;
        }
        let (name, width) = match item.split_once('%') {
            Some((name, width)) => (name, Some(atoi(width))),
            None => (item, None),
        };
        let lower = name.to_ascii_lowercase();
        let with_width = |index: usize| Field {
            index,
            width: width.unwrap_or(FIELDS[index].1),
        };
        if !lower.is_empty() && "all".starts_with(&lower) {
            fields.extend((0..FIELDS.len()).map(with_width));
            continue;
        }
        if lower == "allocgres" || lower == "reqgres" {
            let (old, new) = if lower == "allocgres" {
                ("AllocGRES", "AllocTRES")
            } else {
                ("ReqGRES", "ReqTRES")
            };
            return Err(FormatError::Removed(format!(
                "{old} has been removed, please use {new}"
            )));
        }
        let index = FIELDS
            .iter()
            .position(|(n, _, _)| !lower.is_empty() && n.to_ascii_lowercase().starts_with(&lower))
            .ok_or_else(|| FormatError::Invalid(item.to_string()))?;
        fields.push(with_width(index));
    }
    Ok(fields)
}

/// C's `atoi`: an optional sign and the digits that follow, else 0.
fn atoi(text: &str) -> i32 {
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    let digits: String = digits.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<i32>().map_or(0, |n| sign * n)
}

/// `--helpformat`: the names, four to a line, each 19 wide, one blank between.
pub fn help_lines() -> Vec<String> {
    FIELDS
        .chunks(4)
        .map(|chunk| {
            chunk
                .iter()
                .map(|(n, _, _)| format!("{n:<19}"))
                .collect::<Vec<_>>()
                .join(" ")
                .trim_end()
                .to_string()
        })
        .collect()
}

impl Kind {
    /// How the print engine cuts a value of this kind.
    fn cut(self) -> Cut {
        match self {
            Kind::Text => Cut::Plus,
            Kind::Date => Cut::Silent,
            Kind::Number | Kind::Duration => Cut::Never,
        }
    }
}

/// The header: names (and in fixed width a line of dashes).
pub fn header(fields: &[Field], layout: Layout, delimiter: &str) -> Vec<String> {
    let columns: Vec<(&str, i32)> = fields.iter().map(|f| (f.name(), f.width)).collect();
    print_fields::header(&columns, layout, delimiter)
}

/// One row's line.
pub fn line(
    fields: &[Field],
    row: Row<'_>,
    clock: &Clock,
    layout: Layout,
    delimiter: &str,
) -> String {
    print_fields::join(
        fields
            .iter()
            .map(|f| {
                let (_, _, kind) = FIELDS[f.index];
                let text = value(f.name(), row, clock);
                print_fields::value(&text, f.width, kind.cut(), layout)
            })
            .collect(),
        layout,
        delimiter,
    )
}

fn job_of<'a>(row: Row<'a>) -> &'a JobInfo {
    match row {
        Row::Job(j) | Row::Batch(j) | Row::Step(j, _) => j,
    }
}

/// What a column shows for a row.
fn value(name: &str, row: Row<'_>, clock: &Clock) -> String {
    let job = job_of(row);
    let is_job = matches!(row, Row::Job(_));
    let started = job.start_time.is_some();
    let stamp = |t: Option<&str>| clock.stamp_of(t, "Unknown");
    let cpus = job.cpus.filter(|_| started).unwrap_or(0);
    let (step_start, step_end, step_used) = match row {
        Row::Step(_, s) => (
            Some(s.start_time.as_str()),
            s.end_time.as_deref(),
            s.time_used,
        ),
        _ => (
            job.start_time.as_deref(),
            job.end_time.as_deref(),
            job.time_used,
        ),
    };
    match name {
        "Account" => job.account.clone(),
        "AllocCPUS" | "NCPUS" => match row {
            Row::Step(_, s) => s.ntasks.max(1).to_string(),
            // Not started: what it asks for, as Slurm's accounting records it.
            Row::Job(j) if !started => j.min_cpus.unwrap_or(1).to_string(),
            _ => cpus.to_string(),
        },
        "AllocNodes" => (if started { job.nodes.max(1) } else { 0 }).to_string(),
        "AllocTRES" if started => match row {
            Row::Job(_) => sorted_tres(job),
            // A step has the job's memory (none where memory is not tracked).
            _ => format!(
                "cpu={cpus},mem={},node={}",
                job.memory_mb.map_or_else(|| "0".into(), memory),
                job.nodes.max(1)
            ),
        },
        "Cluster" => job.cluster.clone().unwrap_or_default(),
        "Comment" if is_job => job.comment.clone().unwrap_or_default(),
        "Constraints" if is_job => job.features.clone().unwrap_or_default(),
        "CPUTime" => secs2time(step_used.saturating_mul(cpus.max(1))),
        "CPUTimeRAW" => step_used.saturating_mul(cpus.max(1)).to_string(),
        // The highest exit code of the job's steps (srun), with the signal that ended
        // that step; 0:0 without steps, as Slurm's.
        "DerivedExitCode" if is_job => job
            .steps
            .iter()
            .map(|s| (s.exit_code.unwrap_or(0), s.signal.unwrap_or(0)))
            .max()
            .map_or_else(|| "0:0".into(), |(code, signal)| format!("{code}:{signal}")),
        "Elapsed" => secs2time(step_used),
        "ElapsedRaw" => step_used.to_string(),
        // A step is eligible when it starts.
        // Tasks of a step are laid out cyclically (srun's default); a batch step's
        // layout is not recorded.
        "Layout" => match row {
            Row::Job(_) => String::new(),
            Row::Batch(_) => "Unknown".into(),
            Row::Step(..) => "Cyclic".into(),
        },
        "Eligible" => match row {
            Row::Job(_) => stamp(job.eligible_time.as_deref()),
            _ => stamp(step_start),
        },
        "End" => match row {
            Row::Step(_, s) => stamp(s.end_time.as_deref()),
            _ => stamp(step_end),
        },
        "ExitCode" => match row {
            Row::Step(_, s) => format!("{}:{}", s.exit_code.unwrap_or(0), s.signal.unwrap_or(0)),
            // Ended from outside (scancel, the time limit): the job itself exited with
            // nothing; the signal is its batch step's.
            Row::Job(j) if matches!(j.state.as_str(), "CANCELLED" | "TIMEOUT") => "0:0".into(),
            _ => exit_code(job),
        },
        "GID" if is_job => job.gid.map(|g| g.to_string()).unwrap_or_default(),
        "Group" if is_job => job.group.clone().unwrap_or_default(),
        "JobID" => match row {
            Row::Job(j) => j.display_id.clone(),
            Row::Batch(j) => format!("{}.batch", j.id),
            Row::Step(j, s) => format!("{}.{}", j.id, s.step_id),
        },
        "JobIDRaw" => match row {
            Row::Job(j) => j.id.clone(),
            Row::Batch(j) => format!("{}.batch", j.id),
            Row::Step(j, s) => format!("{}.{}", j.id, s.step_id),
        },
        "JobName" => match row {
            Row::Job(j) => j.name.clone(),
            Row::Batch(_) => "batch".into(),
            Row::Step(_, s) => s.name.clone(),
        },
        "MaxRSS" if !is_job => job
            .max_rss_kb
            .map(|kb| format!("{kb}K"))
            .unwrap_or_default(),
        "MaxRSSNode" if !is_job && job.max_rss_kb.is_some() => first_node(job),
        "MaxRSSTask" if !is_job && job.max_rss_kb.is_some() => "0".into(),
        "NNodes" => job.nodes.max(1).to_string(),
        "NodeList" if !started => "None assigned".into(),
        "NodeList" => job.nodelist.clone(),
        "NTasks" if !is_job => match row {
            Row::Step(_, s) => s.ntasks.max(1).to_string(),
            _ => "1".into(),
        },
        "Partition" if is_job => job.partition.clone(),
        "Priority" if is_job => job.priority.map(|p| p.to_string()).unwrap_or_default(),
        "QOS" if is_job => job.qos.clone().unwrap_or_else(|| "normal".into()),
        "Reason" if is_job => job.reason.clone().unwrap_or_else(|| "None".into()),
        "ReqCPUS" => job.min_cpus.unwrap_or(1).to_string(),
        "ReqMem" if is_job => job
            .min_memory
            .clone()
            .or_else(|| job.memory_mb.map(memory))
            .unwrap_or_default(),
        "ReqNodes" => job.nodes.max(1).to_string(),
        "ReqTRES" if is_job => sorted_tres(job),
        "Start" => stamp(step_start.or(if is_job {
            None
        } else {
            job.start_time.as_deref()
        })),
        "State" => match row {
            Row::Step(_, s) => s.state.clone(),
            Row::Batch(j) => batch_state(j),
            Row::Job(j) => j.state.clone(),
        },
        "Submit" => stamp(Some(&job.submit_time)),
        "Suspended" => secs2time(0),
        "SystemCPU" => cpu_time(0),
        "Timelimit" if is_job => job.time_limit.map_or("UNLIMITED".into(), secs2time),
        "TimelimitRaw" if is_job => job
            .time_limit
            .map_or("UNLIMITED".into(), |s| (s / 60).to_string()),
        "TotalCPU" | "UserCPU" => match (row, job.cpu_seconds) {
            (Row::Step(..), _) | (_, None) => cpu_time(0),
            (_, Some(s)) => cpu_time((s * 1000.0) as u64),
        },
        "UID" if is_job => job.uid.map(|u| u.to_string()).unwrap_or_default(),
        "User" if is_job => job.user.clone(),
        "WorkDir" if is_job => job.workdir.clone().unwrap_or_default(),
        _ => String::new(),
    }
}

fn first_node(job: &JobInfo) -> String {
    super::scontrol::first_host(&job.nodelist).unwrap_or_default()
}

/// The batch step's state: the job's, but a script killed by a signal was CANCELLED.
pub fn batch_state(job: &JobInfo) -> String {
    match (job.state.as_str(), job.signal) {
        ("FAILED", Some(s)) if s > 0 => "CANCELLED".into(),
        ("PENDING", _) => "PENDING".into(),
        (state, _) => state.to_string(),
    }
}

/// A job's trackable resources as sacct prints them: in name order.
fn sorted_tres(job: &JobInfo) -> String {
    let tres = super::squeue::tres_alloc(job);
    let mut items: Vec<&str> = tres.split(',').collect();
    items.sort_unstable();
    items.join(",")
}

/// `ExitCode` as `sacct` prints it: `code:signal`.
pub fn exit_code(job: &JobInfo) -> String {
    format!("{}:{}", job.exit_code.unwrap_or(0), job.signal.unwrap_or(0))
}

/// Megabytes as Slurm prints memory: in the largest unit that divides them exactly
/// (`4000M`, `96G`).
pub fn memory(mb: u64) -> String {
    let mut value = mb;
    let mut unit = 0;
    const UNITS: [&str; 4] = ["M", "G", "T", "P"];
    while value >= 1024 && value & 1023 == 0 && unit + 1 < UNITS.len() {
        value /= 1024;
        unit += 1;
    }
    format!("{value}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::times::TimeFormat;

    fn clock() -> Clock {
        Clock {
            tz: jiff::tz::TimeZone::UTC,
            now: "2026-11-27T17:34:10Z".parse().expect("now"),
            format: TimeFormat::Standard,
        }
    }

    fn done() -> JobInfo {
        JobInfo {
            id: "7".into(),
            job_id: 7,
            display_id: "7".into(),
            name: "ok".into(),
            account: "science".into(),
            partition: "debug".into(),
            state: "COMPLETED".into(),
            cpus: Some(1),
            nodes: 1,
            nodelist: "vm".into(),
            submit_time: "2026-11-27T17:35:57Z".into(),
            start_time: Some("2026-11-27T17:35:58Z".into()),
            end_time: Some("2026-11-27T17:36:02Z".into()),
            time_used: 4,
            ..JobInfo::default()
        }
    }

    fn lines(spec: &str, layout: Layout, rows: &[Row<'_>]) -> Vec<String> {
        let fields = parse_format(spec).expect("format");
        let mut out = header(&fields, layout, "|");
        out.extend(
            rows.iter()
                .map(|r| line(&fields, *r, &clock(), layout, "|")),
        );
        out
    }

    #[test]
    fn the_default_columns_match_sacct() {
        let job = done();
        assert_eq!(
            lines(
                DEFAULT_FORMAT,
                Layout::Fixed,
                &[Row::Job(&job), Row::Batch(&job)]
            ),
            [
                "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ",
                "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
                "7                    ok      debug    science          1  COMPLETED      0:0 ",
                "7.batch           batch               science          1  COMPLETED      0:0 ",
            ]
        );
    }

    #[test]
    fn widths_and_parsable_layouts_as_sacct() {
        let job = done();
        assert_eq!(
            lines(
                "jobid%5,jobname%-15,state%3,end%10,alloccpus%2",
                Layout::Fixed,
                &[Row::Job(&job)]
            ),
            [
                "JobID JobName         Sta        End Al ",
                "----- --------------- --- ---------- -- ",
                "    7 ok              CO+ 2026-11-27  1 ",
            ]
        );
        assert_eq!(
            lines(
                "jobid,jobname,nodelist,ntasks,alloccpus",
                Layout::Parsable,
                &[Row::Job(&job)]
            ),
            ["JobID|JobName|NodeList|NTasks|AllocCPUS|", "7|ok|vm||1|"]
        );
        assert_eq!(
            lines("JobIdRaw,State", Layout::Parsable2, &[Row::Job(&job)]),
            ["JobIDRaw|State", "7|COMPLETED"]
        );
    }

    #[test]
    fn names_are_matched_as_sacct_matches_them() {
        let name = |spec: &str| parse_format(spec).expect(spec)[0].name();
        assert_eq!(name("j"), "JobID");
        assert_eq!(name("jobn"), "JobName");
        assert_eq!(name("s"), "Start");
        assert_eq!(name("e"), "Elapsed");
        assert_eq!(name("exitc"), "ExitCode");
        assert_eq!(name("  maxrss"), "MaxRSS");
        assert_eq!(parse_format("a").expect("all").len(), FIELDS.len());
        assert_eq!(
            parse_format("jobid ,state"),
            Err(FormatError::Invalid("jobid ".into()))
        );
        assert_eq!(
            parse_format("AllocGRES"),
            Err(FormatError::Removed(
                "AllocGRES has been removed, please use AllocTRES".into()
            ))
        );
        assert_eq!(
            help_lines()[0],
            "Account             AdminComment        AllocCPUS           AllocNodes"
        );
    }

    #[test]
    fn memory_is_in_the_largest_exact_unit() {
        assert_eq!(memory(4000), "4000M");
        assert_eq!(memory(98_304), "96G");
        assert_eq!(memory(1 << 20), "1T");
    }
}
