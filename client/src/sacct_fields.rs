//! `sacct`'s columns (`--format`): Slurm's names, widths and value formats, and its
//! fixed-width and `--parsable2` lines. Pure functions; owns no IO.

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::api::JobInfo;
use super::format::{field, sacct_field, Align};

/// A column `sacct --format` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    JobId,
    JobName,
    User,
    Account,
    Partition,
    State,
    ExitCode,
    Submit,
    Start,
    End,
    Elapsed,
    ElapsedRaw,
    AllocCpus,
    ReqMem,
    AllocTres,
    NNodes,
    NodeList,
    Timelimit,
}

/// Slurm's spelling, default width and alignment of each column.
const COLUMNS: [(Column, &str, usize, Align); 18] = [
    (Column::JobId, "JobID", 12, Align::Left),
    (Column::JobName, "JobName", 10, Align::Right),
    (Column::User, "User", 9, Align::Right),
    (Column::Account, "Account", 10, Align::Right),
    (Column::Partition, "Partition", 10, Align::Right),
    (Column::State, "State", 10, Align::Right),
    (Column::ExitCode, "ExitCode", 8, Align::Right),
    (Column::Submit, "Submit", 19, Align::Right),
    (Column::Start, "Start", 19, Align::Right),
    (Column::End, "End", 19, Align::Right),
    (Column::Elapsed, "Elapsed", 10, Align::Right),
    (Column::ElapsedRaw, "ElapsedRaw", 10, Align::Right),
    (Column::AllocCpus, "AllocCPUS", 10, Align::Right),
    (Column::ReqMem, "ReqMem", 10, Align::Right),
    (Column::AllocTres, "AllocTRES", 10, Align::Right),
    (Column::NNodes, "NNodes", 8, Align::Right),
    (Column::NodeList, "NodeList", 15, Align::Right),
    (Column::Timelimit, "Timelimit", 10, Align::Right),
];

/// `sacct`'s columns without `--format`.
pub const DEFAULT_FORMAT: &str = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";

/// One column of the output, with its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub column: Column,
    name: &'static str,
    pub width: usize,
    align: Align,
}

/// How lines are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Columns of fixed width, each followed by a space.
    Fixed,
    /// `--parsable`: every field followed by `|`.
    Parsable,
    /// `--parsable2`: fields separated by `|`, none after the last.
    Parsable2,
}

/// Read a `--format` list: names in any case, each optionally `%WIDTH`
/// (`JobID,JobName%30`).
pub fn parse_format(spec: &str) -> Result<Vec<Field>, String> {
    let mut fields = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, width) = match item.split_once('%') {
            Some((name, width)) => {
                let width = width
                    .parse::<usize>()
                    .map_err(|_| format!("Invalid field width requested: \"{item}\""))?;
                (name, Some(width))
            }
            None => (item, None),
        };
        let (column, slurm_name, default_width, align) = COLUMNS
            .iter()
            .find(|(_, n, _, _)| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("Invalid field requested: \"{name}\""))?;
        fields.push(Field {
            column: *column,
            name: slurm_name,
            width: width.filter(|w| *w > 0).unwrap_or(*default_width),
            align: *align,
        });
    }
    if fields.is_empty() {
        return Err("no field requested in --format".into());
    }
    Ok(fields)
}

fn join(cells: impl Iterator<Item = String>, layout: Layout) -> String {
    match layout {
        Layout::Fixed => cells.map(|c| c + " ").collect(),
        Layout::Parsable => cells.map(|c| c + "|").collect(),
        Layout::Parsable2 => cells.collect::<Vec<_>>().join("|"),
    }
}

/// The header: names then dashes, or one line of names when parsable.
pub fn header(fields: &[Field], layout: Layout) -> Vec<String> {
    if layout != Layout::Fixed {
        return vec![join(fields.iter().map(|f| f.name.to_string()), layout)];
    }
    vec![
        join(
            fields.iter().map(|f| field(f.name, f.width, f.align)),
            layout,
        ),
        join(fields.iter().map(|f| "-".repeat(f.width)), layout),
    ]
}

/// One job's line.
pub fn line(fields: &[Field], job: &JobInfo, tz: &TimeZone, layout: Layout) -> String {
    join(
        fields.iter().map(|f| {
            let text = value(f.column, job, tz);
            match layout {
                Layout::Fixed => sacct_field(&text, f.width, f.align),
                _ => text,
            }
        }),
        layout,
    )
}

fn started(job: &JobInfo) -> bool {
    job.state != "PENDING" && job.cpus.is_some()
}

fn value(column: Column, job: &JobInfo, tz: &TimeZone) -> String {
    let cpus = if started(job) {
        job.cpus.unwrap_or(0)
    } else {
        0
    };
    match column {
        Column::JobId => job.id.clone(),
        Column::JobName => job.name.clone(),
        Column::User => job.user.clone(),
        Column::Account => job.account.clone(),
        Column::Partition => job.partition.clone(),
        Column::State => job.state.clone(),
        Column::ExitCode => exit_code(job),
        Column::Submit => local_time(Some(&job.submit_time), tz),
        Column::Start => local_time(job.start_time.as_deref(), tz),
        Column::End => local_time(job.end_time.as_deref(), tz),
        Column::Elapsed => duration(Some(job.time_used)),
        Column::ElapsedRaw => job.time_used.to_string(),
        Column::AllocCpus => cpus.to_string(),
        Column::ReqMem => job.memory_mb.map(memory).unwrap_or_default(),
        Column::AllocTres => alloc_tres(job),
        Column::NNodes => job.nodes.max(1).to_string(),
        Column::NodeList if job.nodelist.is_empty() => "None assigned".into(),
        Column::NodeList => job.nodelist.clone(),
        Column::Timelimit => duration(job.time_limit),
    }
}

/// `ExitCode` as `sacct` prints it: `code:signal`.
pub fn exit_code(job: &JobInfo) -> String {
    format!("{}:{}", job.exit_code.unwrap_or(0), job.signal.unwrap_or(0))
}

/// A time in the local zone as `sacct` prints it (`2025-03-10T15:30:20`), or
/// `Unknown`.
fn local_time(rfc3339: Option<&str>, tz: &TimeZone) -> String {
    rfc3339
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map(|t| {
            t.to_zoned(tz.clone())
                .datetime()
                .strftime("%Y-%m-%dT%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| "Unknown".into())
}

/// Seconds as `sacct` prints `Elapsed` and `Timelimit`: `[D-]HH:MM:SS`;
/// `None` is `UNLIMITED`.
fn duration(secs: Option<u64>) -> String {
    let Some(secs) = secs else {
        return "UNLIMITED".into();
    };
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// Megabytes as Slurm prints memory: in the largest unit that divides them exactly
/// (`4000M`, `96G`).
fn memory(mb: u64) -> String {
    let mut value = mb;
    let mut unit = 0;
    const UNITS: [&str; 4] = ["M", "G", "T", "P"];
    while value >= 1024 && value & 1023 == 0 && unit + 1 < UNITS.len() {
        value /= 1024;
        unit += 1;
    }
    format!("{value}{}", UNITS[unit])
}

/// The resources given, as `sacct` prints `AllocTRES`:
/// `cpu=16,mem=96G,node=1,billing=16,gres/gpu=2,gres/gpu:a100=2` (billing is the
/// CPU count: atrium weighs no resource more). Empty for a job that never started.
fn alloc_tres(job: &JobInfo) -> String {
    if !started(job) {
        return String::new();
    }
    let cpus = job.cpus.unwrap_or(0);
    let nodes = u64::from(job.nodes.max(1));
    let mut parts = vec![format!("cpu={cpus}")];
    if let Some(mb) = job.memory_mb.filter(|mb| *mb > 0) {
        parts.push(format!("mem={}", memory(mb)));
    }
    parts.push(format!("node={nodes}"));
    parts.push(format!("billing={cpus}"));
    // gres per node (`gpu:2`, `gpu:a100:2`, `shard:4`): totals per name, then per type.
    let mut totals: Vec<(String, u64)> = Vec::new();
    let mut typed: Vec<(String, u64)> = Vec::new();
    for item in job.gres.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = item.split(':').collect();
        let (name, kind, count) = match parts.as_slice() {
            [name] => (*name, None, Some(1)),
            [name, n] if n.parse::<u64>().is_ok() => (*name, None, n.parse().ok()),
            [name, kind] => (*name, Some(*kind), Some(1)),
            [name, kind, n, ..] => (*name, Some(*kind), n.parse().ok()),
            [] => continue,
        };
        let count = count.unwrap_or(1) * nodes;
        add(&mut totals, format!("gres/{name}"), count);
        if let Some(kind) = kind {
            add(&mut typed, format!("gres/{name}:{kind}"), count);
        }
    }
    for (name, count) in totals.into_iter().chain(typed) {
        parts.push(format!("{name}={count}"));
    }
    parts.join(",")
}

fn add(list: &mut Vec<(String, u64)>, name: String, count: u64) {
    match list.iter_mut().find(|(n, _)| *n == name) {
        Some((_, c)) => *c += count,
        None => list.push((name, count)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str) -> JobInfo {
        JobInfo {
            submit_time: "2025-03-10T14:00:00Z".into(),
            ..JobInfo::sample(state, "")
        }
    }

    fn done() -> JobInfo {
        let mut j = job("COMPLETED");
        j.cpus = Some(16);
        j.memory_mb = Some(98_304);
        j.gres = "gpu:a100:2".into();
        j.start_time = Some("2025-03-10T14:00:05Z".into());
        j.end_time = Some("2025-03-11T15:01:06Z".into());
        j.time_used = 90_061;
        j.time_limit = Some(2 * 86_400);
        j.exit_code = Some(0);
        j
    }

    fn utc1() -> TimeZone {
        TimeZone::fixed(jiff::tz::offset(1))
    }

    fn fields(spec: &str) -> Vec<Field> {
        parse_format(spec).expect(spec)
    }

    #[test]
    fn the_default_format_matches_slurm() {
        let f = fields(DEFAULT_FORMAT);
        assert_eq!(
            header(&f, Layout::Fixed),
            [
                "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ",
                "------------ ---------- ---------- ---------- ---------- ---------- -------- ",
            ]
        );
        let mut d = done();
        d.cpus = Some(4);
        assert_eq!(
            line(&f, &d, &utc1(), Layout::Fixed),
            "17                train        gpu        lab          4  COMPLETED      0:0 "
        );
        let mut killed = job("CANCELLED");
        killed.id = "17_3".into();
        killed.signal = Some(15);
        assert_eq!(exit_code(&killed), "0:15");
        let mut oom = job("OUT_OF_MEMORY");
        oom.exit_code = Some(137);
        assert!(line(&f, &oom, &utc1(), Layout::Fixed).contains("OUT_OF_ME+"));
        assert_eq!(exit_code(&oom), "137:0");
    }

    #[test]
    fn every_column_prints_like_sacct() {
        let f = fields(
            "jobid,JobName,User,Account,Partition,State,ExitCode,Submit,Start,End,Elapsed,\
             ElapsedRaw,AllocCPUS,ReqMem,AllocTRES,NNodes,NodeList,TimeLimit",
        );
        assert_eq!(
            header(&f, Layout::Parsable2),
            [
                "JobID|JobName|User|Account|Partition|State|ExitCode|Submit|Start|End|Elapsed|\
              ElapsedRaw|AllocCPUS|ReqMem|AllocTRES|NNodes|NodeList|Timelimit"
            ]
        );
        assert_eq!(
            line(&f, &done(), &utc1(), Layout::Parsable2),
            "17|train|alice|lab|gpu|COMPLETED|0:0|2025-03-10T15:00:00|2025-03-10T15:00:05|\
             2025-03-11T16:01:06|1-01:01:01|90061|16|96G|\
             cpu=16,mem=96G,node=1,billing=16,gres/gpu=2,gres/gpu:a100=2|1|head|2-00:00:00"
        );
        let pending = job("PENDING");
        assert_eq!(
            line(&f, &pending, &utc1(), Layout::Parsable),
            "17|train|alice|lab|gpu|PENDING|0:0|2025-03-10T15:00:00|Unknown|Unknown|00:00:00|\
             0|0|||1|head|UNLIMITED|"
        );
    }

    #[test]
    fn widths_can_be_given_and_long_values_are_cut() {
        let f = fields("JobName%4,NodeList%20,AllocTRES");
        assert_eq!(
            header(&f, Layout::Fixed)[0],
            "JobN             NodeList  AllocTRES "
        );
        let text = line(&f, &done(), &utc1(), Layout::Fixed);
        assert!(
            text.starts_with("tra+                 head cpu=16,me+ "),
            "{text}"
        );
        assert_eq!(memory(4000), "4000M");
        assert_eq!(memory(1024 * 1024), "1T");
        assert_eq!(memory(0), "0M");
    }

    #[test]
    fn unknown_columns_are_named() {
        assert_eq!(
            parse_format("JobID,Colour").expect_err("unknown"),
            "Invalid field requested: \"Colour\""
        );
        assert!(parse_format("JobName%x").is_err());
        assert!(parse_format(",").is_err());
    }

    #[test]
    fn tres_counts_gres_per_name_and_per_type_on_every_node() {
        let mut j = done();
        j.nodes = 2;
        j.memory_mb = Some(4000);
        j.gres = "gpu:1g.10gb:2,shard:3".into();
        assert_eq!(
            alloc_tres(&j),
            "cpu=16,mem=4000M,node=2,billing=16,gres/gpu=4,gres/shard=6,gres/gpu:1g.10gb=4"
        );
        j.gres = "gpu".into();
        j.memory_mb = None;
        assert_eq!(alloc_tres(&j), "cpu=16,node=2,billing=16,gres/gpu=2");
    }
}
