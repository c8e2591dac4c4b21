//! `atrium sprio`: the factors of the pending jobs' priorities, option for option as
//! Slurm 22.05's sprio: its options read as getopt_long reads them (`-j` with an
//! optional value or an operand, `-u`, `-p`, `-l`, `-n`, `-w`, `-h`, `-S`), its
//! `%` format letters with widths (`-o`, `SPRIO_FORMAT`), its default format built
//! from the non-zero weights, and its words when something is wrong. The figures
//! are the portal's (`GET /api/v1/priority`): atrium weighs age, fair share, job
//! size, partition and QOS; it has no association, site or TRES factor, which
//! print as Slurm prints them unconfigured (0, empty). A job's PRIORITY is what its
//! factors give now, less its nice value (atrium does not raise it to 1).

use serde::Deserialize;

use super::columns::Column;
use super::getopt::{HasArg, Opt, Parser};
use super::print_fields::c_fixed;
use super::{connect, print_lines, CommandExit};

const CMD: &str = "sprio";

/// sprio's options, in the order of its table (which decides ambiguities).
const OPTIONS: &[Opt] = &[
    Opt::new("noheader", Some('h'), &["noheader"], HasArg::No),
    Opt::new("jobs", Some('j'), &["jobs"], HasArg::Optional),
    Opt::new("long", Some('l'), &["long"], HasArg::No),
    Opt::new(
        "clusters",
        Some('M'),
        &["cluster", "clusters"],
        HasArg::Required,
    ),
    Opt::new("norm", Some('n'), &["norm"], HasArg::No),
    Opt::new("format", Some('o'), &["format"], HasArg::Required),
    Opt::new("sort", Some('S'), &["sort"], HasArg::Required),
    Opt::new("partition", Some('p'), &["partition"], HasArg::Required),
    Opt::new("users", Some('u'), &["user", "users"], HasArg::Required),
    Opt::new("verbose", Some('v'), &["verbose"], HasArg::No),
    Opt::new("version", Some('V'), &["version"], HasArg::No),
    Opt::new("weights", Some('w'), &["weights"], HasArg::No),
    Opt::new("federation", None, &["federation"], HasArg::No),
    Opt::new("help", None, &["help"], HasArg::No),
    Opt::new("local", None, &["local"], HasArg::No),
    Opt::new("sibling", None, &["sib", "sibling"], HasArg::No),
    Opt::new("usage", None, &["usage"], HasArg::No),
];

const LONG: &str = "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T";
const LONG_NORM: &str = "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t";

/// The letters sprio knows, each with its header.
const LETTERS: &[(char, &str)] = &[
    ('a', "AGE"),
    ('A', "AGE"),
    ('b', "ASSOC"),
    ('B', "ASSOC"),
    ('c', "CLUSTER"),
    ('f', "FAIRSHARE"),
    ('F', "FAIRSHARE"),
    ('i', "JOBID"),
    ('j', "JOBSIZE"),
    ('J', "JOBSIZE"),
    ('N', "NICE"),
    ('p', "PARTITION"),
    ('P', "PARTITION"),
    ('r', "PARTITION"),
    ('q', "QOS"),
    ('Q', "QOS"),
    ('S', "SITE"),
    ('t', "TRES"),
    ('T', "TRES"),
    ('u', "USER"),
    ('y', "PRIORITY"),
    ('Y', "PRIORITY"),
];

/// `GET /priority`'s weights.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Weights {
    pub age: u32,
    pub assoc: u32,
    pub fairshare: u32,
    pub job_size: u32,
    pub partition: u32,
    pub qos: u32,
    /// `PriorityWeightTRES`; none in atrium.
    pub tres: Option<String>,
}

/// One factor each, as `GET /priority` answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct FactorValues {
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition: f64,
    pub qos: f64,
    pub site: f64,
}

/// One pending job.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct JobPriority {
    pub id: String,
    pub job_id: u64,
    pub user: String,
    pub partition: String,
    pub priority: i64,
    pub nice: i64,
    pub weighted: FactorValues,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Answer {
    pub weights: Weights,
    pub jobs: Vec<JobPriority>,
}

/// One piece of a format: text, or a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Column(Column),
}

/// sprio's `-o` grammar: text before the first `%`, then `%[.][width]letter` each
/// followed by text up to the next `%`; an unknown letter is left out (its text
/// too) with a complaint, as sprio does.
pub fn parse_format(spec: &str) -> (Vec<Piece>, Vec<String>) {
    let mut pieces = Vec::new();
    let mut warnings = Vec::new();
    let mut tokens = spec.split('%');
    if let Some(prefix) = tokens.next().filter(|p| !p.is_empty()) {
        pieces.push(Piece::Text(prefix.to_string()));
    }
    for token in tokens.filter(|t| !t.is_empty()) {
        let (right, rest) = match token.strip_prefix('.') {
            Some(r) => (true, r),
            None => (false, token),
        };
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let width = rest[..digits].parse().unwrap_or(0);
        let mut chars = rest[digits..].chars();
        let letter = chars.next();
        match letter.filter(|l| LETTERS.iter().any(|(k, _)| k == l)) {
            Some(letter) => pieces.push(Piece::Column(Column {
                letter,
                width,
                right,
                suffix: chars.as_str().to_string(),
            })),
            None => warnings.push(format!(
                "Invalid job format specification: {}",
                letter.map(String::from).unwrap_or_default()
            )),
        }
    }
    (pieces, warnings)
}

/// What the command line and the environment ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub header: bool,
    pub long: bool,
    pub norm: bool,
    pub weights: bool,
    /// `-o` or `SPRIO_FORMAT`; `None`: the default, built from the weights.
    pub format: Option<String>,
    pub sort: String,
    /// `-j`'s jobs: the job number and maybe an array task.
    pub jobs: Option<Vec<(u64, Option<u32>)>>,
    pub users: Option<Vec<String>>,
    pub partitions: Option<String>,
    /// `--sibling` without `--local`: a CLUSTER column in the default format.
    pub cluster_column: bool,
    /// What to print instead of the jobs (`--help`, `--usage`, `--version`).
    pub early: Option<Vec<String>>,
}

fn fatal(message: &str) -> CommandExit {
    CommandExit::new(vec![format!("{CMD}: fatal: {message}")], 1)
}

/// `-j`'s list: job numbers (`12`, or an array task `12_3`); Slurm's error otherwise.
fn job_list(text: &str) -> Result<Vec<(u64, Option<u32>)>, CommandExit> {
    let mut out = Vec::new();
    for item in text.split(',').filter(|s| !s.is_empty()) {
        let (job, task) = match item.split_once('_') {
            Some((j, t)) => (j, Some(t)),
            None => (item, None),
        };
        let job = job.parse::<u64>().ok().filter(|j| *j > 0);
        let task = match task {
            None => Some(None),
            Some(t) => t.parse::<u32>().ok().map(Some),
        };
        match (job, task) {
            (Some(job), Some(task)) => out.push((job, task)),
            _ => {
                return Err(CommandExit::new(
                    vec![format!("{CMD}: error: Invalid job id: {item}")],
                    1,
                ))
            }
        }
    }
    Ok(out)
}

/// Read sprio's command line and environment (through `var`).
pub fn read(args: &[String], var: &dyn Fn(&str) -> Option<String>) -> Result<Request, CommandExit> {
    let parsed = Parser::new(OPTIONS)
        .parse(args)
        .map_err(|e| super::usage_error(CMD, &e))?;
    let mut r = Request {
        header: !parsed.has("noheader"),
        sort: parsed.last("sort").unwrap_or("i").to_string(),
        ..Request::default()
    };
    // sprio acts on each option as it meets it: `--help`, `--usage` and `-V`
    // answer at once, a bad job id is fatal at once.
    for o in &parsed.options {
        match (o.key, o.value.as_deref()) {
            ("help", _) => r.early = Some(vec![HELP.to_string()]),
            ("usage", _) => r.early = Some(USAGE.iter().map(|l| l.to_string()).collect()),
            ("version", _) => r.early = Some(vec![super::VERSION_LINE.to_string()]),
            ("jobs", Some(v)) => r.jobs = Some(job_list(v)?),
            ("users", Some(v)) => {
                r.users = Some(
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect(),
                )
            }
            _ => {}
        }
        if r.early.is_some() {
            return Ok(r);
        }
    }
    r.long = parsed.has("long");
    r.norm = parsed.has("norm");
    r.weights = parsed.has("weights");
    r.format = parsed.last("format").map(str::to_string);
    if r.long && r.format.is_some() {
        return Err(fatal(
            "Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.",
        ));
    }
    if !r.long && r.format.is_none() {
        r.format = var("SPRIO_FORMAT");
    }
    let mut operands = parsed.operands.iter();
    if parsed.has("jobs") {
        if let Some(o) = operands.next() {
            r.jobs = Some(job_list(o)?);
        }
    }
    if let Some(extra) = operands.next() {
        return Err(CommandExit::new(
            vec![format!("{CMD}: error: Unrecognized option: {extra}")],
            1,
        )
        .with_stdout(USAGE.iter().map(|l| l.to_string()).collect()));
    }
    let clusters_var = var("SLURM_CLUSTERS");
    if parsed
        .last("clusters")
        .or(clusters_var.as_deref())
        .is_some_and(|c| c.split(',').filter(|s| !s.is_empty()).count() > 1)
    {
        return Err(fatal("Only one cluster can be used at a time with sprio"));
    }
    let local = parsed.has("local")
        || parsed.has("clusters")
        || var("SPRIO_LOCAL").is_some()
        || clusters_var.is_some();
    r.cluster_column = (parsed.has("sibling") || var("SPRIO_SIBLING").is_some()) && !local;
    r.partitions = parsed.last("partition").map(str::to_string);
    Ok(r)
}

/// The format sprio prints without `-o`: `-l`'s, or the job id and partition, the
/// user with `-u`, the priority, then a column for each non-zero weight.
pub fn default_format(r: &Request, w: &Weights) -> String {
    if r.long {
        return if r.norm { LONG_NORM } else { LONG }.to_string();
    }
    let mut f = String::from("%.15i %9r");
    if r.cluster_column {
        f.push_str(" %.8c");
    }
    if r.users.is_some() {
        f.push_str(" %.8u");
    }
    f.push_str(if r.norm { " %10y" } else { " %.10Y %.10S" });
    let columns: [(bool, &str, &str); 7] = [
        (w.age != 0, " %10a", " %.10A"),
        (w.assoc != 0, " %10b", " %.10B"),
        (w.fairshare != 0, " %10f", " %.10F"),
        (w.job_size != 0, " %10j", " %.10J"),
        (w.partition != 0, " %10p", " %.10P"),
        (w.qos != 0, " %10q", " %.10Q"),
        (w.tres.is_some(), " %20t", " %.20T"),
    ];
    for (on, norm, weighted) in columns {
        if on {
            f.push_str(if r.norm { norm } else { weighted });
        }
    }
    f
}

/// The query for the portal: the jobs (numbers), users and partitions asked for.
pub fn query(r: &Request) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    if let Some(jobs) = &r.jobs {
        let mut numbers: Vec<u64> = jobs.iter().map(|(j, _)| *j).collect();
        numbers.sort_unstable();
        numbers.dedup();
        let numbers: Vec<String> = numbers.iter().map(u64::to_string).collect();
        // No job at all (`-j ""`) matches nothing, as an empty list does in sprio.
        q.push(("ids", numbers.join(",")));
    }
    if let Some(users) = &r.users {
        q.push(("user", users.join(",")));
    }
    if let Some(p) = &r.partitions {
        q.push(("partition", p.clone()));
    }
    q
}

/// Whether `job` is one of `-j`'s (a task: that task, or the array's pending tasks).
fn asked(r: &Request, job: &JobPriority) -> bool {
    let Some(jobs) = &r.jobs else {
        return true;
    };
    jobs.iter().any(|(number, task)| {
        *number == job.job_id
            && task.is_none_or(|t| {
                job.id == format!("{number}_{t}") || job.id.starts_with(&format!("{number}_["))
            })
    })
}

fn int(v: f64) -> String {
    c_fixed(v, 0)
}

fn norm(weighted: f64, weight: u32) -> String {
    let n = if weight != 0 {
        weighted / f64::from(weight)
    } else {
        0.0
    };
    c_fixed(n, 7)
}

/// A job's value for `letter`.
fn job_value(job: &JobPriority, w: &Weights, letter: char) -> String {
    let f = &job.weighted;
    match letter {
        'a' => norm(f.age, w.age),
        'A' => int(f.age),
        'b' => norm(f.assoc, w.assoc),
        'B' => int(f.assoc),
        'c' => "(null)".into(),
        'f' => norm(f.fairshare, w.fairshare),
        'F' => int(f.fairshare),
        'i' => job.id.clone(),
        'j' => norm(f.job_size, w.job_size),
        'J' => int(f.job_size),
        'N' => job.nice.to_string(),
        'p' => norm(f.partition, w.partition),
        'P' => int(f.partition),
        'q' => norm(f.qos, w.qos),
        'Q' => int(f.qos),
        'r' => job.partition.clone(),
        'S' => int(f.site),
        'u' => job.user.clone(),
        'y' => format!("{:16.14}", job.priority as f64 / f64::from(u32::MAX)),
        'Y' => job.priority.to_string(),
        // No TRES factors: nothing to list.
        _ => String::new(),
    }
}

/// The `Weights` line's value for `letter`.
fn weight_value(w: &Weights, letter: char) -> String {
    match letter {
        'a' | 'A' => w.age.to_string(),
        'b' | 'B' => w.assoc.to_string(),
        'c' => "(null)".into(),
        'f' | 'F' => w.fairshare.to_string(),
        'i' => "Weights".into(),
        'j' | 'J' => w.job_size.to_string(),
        'p' | 'P' => w.partition.to_string(),
        'q' | 'Q' => w.qos.to_string(),
        'S' => "1".into(),
        'T' => w.tres.clone().unwrap_or_else(|| "(null)".into()),
        _ => String::new(),
    }
}

fn header_of(letter: char) -> &'static str {
    LETTERS
        .iter()
        .find(|(l, _)| *l == letter)
        .map_or("", |(_, h)| *h)
}

/// One line of `pieces`, each column's value from `value` (cut to its width).
pub fn render(pieces: &[Piece], value: impl Fn(char) -> String) -> String {
    let mut line = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => line.push_str(t),
            Piece::Column(c) => line.push_str(&c.cell(&value(c.letter), true)),
        }
    }
    line
}

#[derive(Debug, PartialEq, PartialOrd)]
enum Key {
    Id(u64, String),
    Num(f64),
    Text(String),
}

/// Sort as sprio's `-S`: the letters read from the end, each a stable sort, a `-`
/// before one descending. `Err`: sprio's complaint about an unknown letter.
pub fn sort_jobs(jobs: &mut [JobPriority], spec: &str) -> Result<(), String> {
    let chars: Vec<char> = spec.chars().collect();
    for i in (0..chars.len()).rev() {
        let c = chars[i];
        if matches!(c, ',' | '-' | '+') {
            continue;
        }
        let descending = i > 0 && chars[i - 1] == '-';
        let key = |j: &JobPriority| -> Option<Key> {
            let f = &j.weighted;
            Some(match c {
                'c' => Key::Text(String::new()),
                'i' => Key::Id(j.job_id, j.id.clone()),
                'N' => Key::Num(j.nice as f64),
                'r' => Key::Text(j.partition.clone()),
                'u' => Key::Text(j.user.clone()),
                'a' | 'A' => Key::Num(f.age),
                'b' | 'B' => Key::Num(f.assoc),
                'f' | 'F' => Key::Num(f.fairshare),
                'j' | 'J' => Key::Num(f.job_size),
                'p' | 'P' => Key::Num(f.partition),
                'q' | 'Q' => Key::Num(f.qos),
                't' | 'T' => Key::Num(0.0),
                'y' | 'Y' => Key::Num(j.priority as f64),
                _ => return None,
            })
        };
        if key(&JobPriority::default()).is_none() {
            return Err(format!("Invalid sort specification: {c}"));
        }
        jobs.sort_by(|a, b| {
            let o = key(a)
                .partial_cmp(&key(b))
                .unwrap_or(std::cmp::Ordering::Equal);
            if descending {
                o.reverse()
            } else {
                o
            }
        });
    }
    Ok(())
}

/// What sprio prints for `answer` (its lines), and the error that ends it, if any.
pub fn output(r: &Request, answer: &Answer) -> (Vec<String>, Vec<String>, Option<String>) {
    let spec = r
        .format
        .clone()
        .unwrap_or_else(|| default_format(r, &answer.weights));
    let (pieces, warnings) = parse_format(&spec);
    let warnings: Vec<String> = warnings
        .into_iter()
        .map(|w| format!("{CMD}: error: {w}"))
        .collect();
    let mut jobs: Vec<JobPriority> = answer
        .jobs
        .iter()
        .filter(|j| asked(r, j))
        .cloned()
        .collect();
    if r.jobs.is_some() && jobs.is_empty() {
        return (
            vec!["Unable to find jobs matching user/id(s) specified".into()],
            warnings,
            None,
        );
    }
    let mut lines = Vec::new();
    if r.header {
        lines.push(render(&pieces, |l| header_of(l).to_string()));
    }
    if r.weights {
        lines.push(render(&pieces, |l| weight_value(&answer.weights, l)));
        return (lines, warnings, None);
    }
    if jobs.is_empty() {
        return (lines, warnings, None);
    }
    if let Err(e) = sort_jobs(&mut jobs, &r.sort) {
        return (lines, warnings, Some(format!("{CMD}: error: {e}")));
    }
    for job in &jobs {
        lines.push(render(&pieces, |l| job_value(job, &answer.weights, l)));
    }
    (lines, warnings, None)
}

pub async fn run(args: Vec<String>) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let r = read(&args, &var)?;
    if let Some(early) = &r.early {
        print_lines(early.iter())?;
        return Ok(());
    }
    let portal = connect(CMD)?;
    let answer: Answer = portal
        .get_query("/priority", &query(&r))
        .await
        .map_err(|e| {
            CommandExit::new(
                vec![format!(
                    "Couldn't get priority factors from controller: {}",
                    e.message
                )],
                255,
            )
        })?;
    let (lines, warnings, error) = output(&r, &answer);
    for w in &warnings {
        eprintln!("{w}");
    }
    print_lines(lines.iter())?;
    match error {
        Some(e) => Err(CommandExit::new(vec![e], 1).into()),
        None => Ok(()),
    }
}

const USAGE: [&str; 2] = [
    "Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]",
    "   [--federation] [--local] [--sibling] [--usage] [-hlnvVw]",
];

const HELP: &str = "Usage: sprio [OPTIONS]
      --federation                display jobs in federation if a member of one
  -h, --noheader                  no headers on output
  -j, --jobs                      comma separated list of jobs
                                  to view, default is all
      --local                     display jobs on local cluster only
  -l, --long                      long report
  -M, --cluster=cluster_name      cluster to issue commands to.  Default is
                                  current cluster.  cluster with no name will
                                  reset to default.
                                  NOTE: SlurmDBD must be up.
  -n, --norm                      display normalized values
  -o, --format=format             format specification
      --sibling                   display job records separately for each federation cluster
  -p, --partition=partition_name  comma separated list of partitions
  -u, --user=user_name            comma separated list of users to view
  -v, --verbose                   verbosity level
  -V, --version                   output version information and exit
  -w, --weights                   show the weights for each priority factor

Help options:
  --help                          show this help message
  --usage                         display a brief summary of sprio options";

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn read_words(w: &[&str]) -> Result<Request, CommandExit> {
        read(&words(w), &|_| None)
    }

    /// Slurm's sample: weights age 1000, fairshare 10000, jobsize 100, partition 1000.
    fn answer() -> Answer {
        let job = |id: u64, partition: &str, user: &str| JobPriority {
            id: id.to_string(),
            job_id: id,
            user: user.into(),
            partition: partition.into(),
            priority: 3600,
            nice: 0,
            weighted: FactorValues {
                fairshare: 2500.0,
                job_size: 100.0,
                partition: 1000.0,
                ..FactorValues::default()
            },
        };
        Answer {
            weights: Weights {
                age: 1000,
                fairshare: 10_000,
                job_size: 100,
                partition: 1000,
                ..Weights::default()
            },
            jobs: vec![job(14, "other", "root"), job(13, "debug", "root")],
        }
    }

    fn lines(w: &[&str]) -> Vec<String> {
        let r = read_words(w).expect("read");
        let (lines, warnings, error) = output(&r, &answer());
        assert!(
            warnings.is_empty() && error.is_none(),
            "{warnings:?} {error:?}"
        );
        lines
    }

    #[test]
    fn the_default_format_has_a_column_per_non_zero_weight() {
        assert_eq!(
            lines(&[]),
            [
                "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION",
                "             13 debug           3600          0          0       2500        100       1000",
                "             14 other           3600          0          0       2500        100       1000",
            ]
        );
        assert_eq!(
            lines(&["-n"]),
            [
                "          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  JOBSIZE    PARTITION ",
                "             13 debug     0.00000083 0.0000000  0.2500000  1.0000000  1.0000000 ",
                "             14 other     0.00000083 0.0000000  0.2500000  1.0000000  1.0000000 ",
            ]
        );
        assert_eq!(
            lines(&["-u", "root", "-h", "-j13"]),
            ["             13 debug         root       3600          0          0       2500        100       1000"]
        );
    }

    #[test]
    fn long_and_weights_lines_as_sprio() {
        assert_eq!(
            lines(&["-l"])[..2],
            [
                "          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE                 TRES",
                "             13 debug         root       3600          0          0          0       2500        100       1000          0           0                     ",
            ]
        );
        assert_eq!(
            lines(&["-w"]),
            [
                "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION",
                "        Weights                               1       1000      10000        100       1000",
            ]
        );
        assert_eq!(
            lines(&["-wn"]),
            [
                "          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  JOBSIZE    PARTITION ",
                "        Weights                      1000       10000      100        1000      ",
            ]
        );
    }

    #[test]
    fn formats_sort_and_job_lists() {
        assert_eq!(
            lines(&["-o", "x%i|%.3r|%y%Y", "-S", "-i", "-h"]),
            [
                "x14|oth|0.000000838190323600",
                "x13|deb|0.000000838190323600"
            ]
        );
        let r = read_words(&["-o", "%i %Z%r"]).expect("read");
        let (lines, warnings, _) = output(&r, &answer());
        assert_eq!(
            warnings,
            ["sprio: error: Invalid job format specification: Z"]
        );
        // The unknown letter goes, its text with it.
        assert_eq!(lines[1], "13 debug");
        // `-j` alone takes the first operand; an unknown job says so on stdout.
        let r = read_words(&["-j", "99"]).expect("read");
        assert_eq!(r.jobs, Some(vec![(99, None)]));
        assert_eq!(query(&r), [("ids", "99".to_string())]);
        assert_eq!(
            output(&r, &answer()).0,
            ["Unable to find jobs matching user/id(s) specified"]
        );
        let r = read_words(&["-S", "x"]).expect("read");
        let (lines, _, error) = output(&r, &answer());
        assert_eq!(lines.len(), 1, "the header is printed first");
        assert_eq!(
            error.as_deref(),
            Some("sprio: error: Invalid sort specification: x")
        );
        let r = read_words(&["-u", "ann,bob", "-p", "gpu"]).expect("read");
        assert_eq!(
            query(&r),
            [
                ("user", "ann,bob".to_string()),
                ("partition", "gpu".to_string())
            ]
        );
    }

    #[test]
    fn mistakes_are_sprios_own() {
        let fail = |w: &[&str]| read_words(w).expect_err("a mistake");
        let e = fail(&["--bogus"]);
        assert_eq!(
            e.stderr,
            [
                "sprio: unrecognized option '--bogus'",
                "Try \"sprio --help\" for more information"
            ]
        );
        assert_eq!(e.status, 1);
        assert_eq!(
            fail(&["--s"]).stderr[0],
            "sprio: option '--s' is ambiguous; possibilities: '--sort' '--sib' '--sibling'"
        );
        assert_eq!(
            fail(&["--long=1"]).stderr[0],
            "sprio: option '--long' doesn't allow an argument"
        );
        assert_eq!(
            fail(&["-o"]).stderr[0],
            "sprio: option requires an argument -- 'o'"
        );
        assert_eq!(
            fail(&["-l", "-o", "%i"]).stderr,
            ["sprio: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry."]
        );
        let e = fail(&["extra"]);
        assert_eq!(e.stderr, ["sprio: error: Unrecognized option: extra"]);
        assert_eq!(e.stdout, USAGE);
        assert_eq!(fail(&["-jx"]).stderr, ["sprio: error: Invalid job id: x"]);
        assert_eq!(
            fail(&["-M", "a,b"]).stderr,
            ["sprio: fatal: Only one cluster can be used at a time with sprio"]
        );
        let early = |w: &[&str]| read_words(w).expect("read").early.expect("early");
        assert_eq!(early(&["--usage", "--help"]), USAGE);
        assert!(early(&["--help"])[0].starts_with("Usage: sprio [OPTIONS]"));
        assert_eq!(early(&["-V"]), [crate::VERSION_LINE]);
        assert_eq!(early(&["-j1", "--usage", "-jx"]), USAGE);
        assert_eq!(
            fail(&["-jx", "--usage"]).stderr,
            ["sprio: error: Invalid job id: x"]
        );
        // SPRIO_FORMAT unless -o or -l.
        let env = |k: &str| (k == "SPRIO_FORMAT").then(|| "%i".to_string());
        assert_eq!(
            read(&words(&[]), &env).expect("read").format.as_deref(),
            Some("%i")
        );
        assert_eq!(read(&words(&["-l"]), &env).expect("read").format, None);
    }
}
