//! What Slurm's commands print, read: `squeue -O` rows, `scontrol show node|partition
//! -o` records, `sbatch --parsable`, raw exit statuses and TRES strings. Pure functions;
//! the commands run with `SLURM_TIME_FORMAT=%s`, so times are Unix seconds.

use std::collections::BTreeMap;

use scheduler::{JobOutcome, JobState, NodeState, SliceUsage, TimeLimit};

use crate::sched::handle::JobUsage;
use crate::sched::step_env::{expand_pattern, NO_TASK};

/// The field separator asked of `squeue -O` (ASCII unit separator): job names and
/// comments may hold any printable character.
pub const SEP: char = '\x1f';

/// The `squeue -O` fields [`SqueueRow::parse`] reads, in order.
pub const SQUEUE_FIELDS: [&str; 23] = [
    "JobID",
    "ArrayJobID",
    "ArrayTaskID",
    "State",
    "Reason",
    "UserName",
    "Name",
    "Partition",
    "Account",
    "PriorityLong",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "TimeLimit",
    "TimeUsed",
    "NumNodes",
    "NodeList",
    "tres-per-node",
    "tres-alloc",
    "exit_code",
    "STDOUT",
    "STDERR",
    "Comment",
];

/// The `-O` argument: every field, each followed by [`SEP`].
pub fn squeue_format() -> String {
    SQUEUE_FIELDS
        .iter()
        .map(|f| format!("{f}:{SEP}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Which array task a row is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArrayTask {
    /// Not an array.
    None,
    /// One task.
    One(u32),
    /// The array's tasks still pending, as Slurm spells them (`2-3%1`).
    Pending(String),
}

/// One line of `squeue -h -t all -O <squeue_format()>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqueueRow {
    /// The row's own id (a task's own id for array tasks).
    pub job_id: String,
    /// The array's id, or the job's own.
    pub array_job_id: String,
    pub array_task: ArrayTask,
    /// Slurm's state name (`PENDING`, `RUNNING`, `CANCELLED` …).
    pub state: String,
    pub reason: String,
    pub user: String,
    pub name: String,
    pub partition: String,
    pub account: String,
    pub priority: i64,
    pub submit_time: Option<i64>,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub time_limit: TimeLimit,
    pub time_used: u64,
    pub nodes: u32,
    pub nodelist: String,
    /// Generic resources asked per node, without the `gres:` prefix (`gpu:2`).
    pub gres: String,
    pub tres: Tres,
    /// The raw wait status (`768`: exit code 3).
    pub exit_status: i32,
    pub stdout: String,
    pub stderr: String,
    pub comment: String,
}

fn text(s: &str) -> String {
    match s.trim() {
        "N/A" | "(null)" => String::new(),
        t => t.to_string(),
    }
}

fn epoch(s: &str) -> Option<i64> {
    s.trim().parse::<i64>().ok().filter(|t| *t > 0)
}

/// Slurm's elapsed time: `M:SS`, `H:MM:SS` or `D-HH:MM:SS`.
fn elapsed(s: &str) -> u64 {
    match s.trim().parse::<TimeLimit>() {
        Ok(TimeLimit::Seconds(n)) => n,
        _ => 0,
    }
}

impl SqueueRow {
    /// One line; `None` for a line that is not one (a warning, a truncated line).
    pub fn parse(line: &str) -> Option<SqueueRow> {
        let f: Vec<&str> = line.split(SEP).collect();
        // The last field ends with a separator too.
        if f.len() < SQUEUE_FIELDS.len() {
            return None;
        }
        let job_id = f[0].trim().to_string();
        if job_id.is_empty() || !job_id.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let array_task = match f[2].trim() {
            "N/A" | "" => ArrayTask::None,
            t => match t.parse() {
                Ok(n) => ArrayTask::One(n),
                Err(_) => ArrayTask::Pending(t.to_string()),
            },
        };
        let gres = text(f[17]);
        let gres = gres
            .strip_prefix("gres:")
            .or_else(|| gres.strip_prefix("gres/"))
            .unwrap_or(&gres)
            .to_string();
        Some(SqueueRow {
            array_job_id: match f[1].trim() {
                "" | "N/A" => job_id.clone(),
                a => a.to_string(),
            },
            job_id,
            array_task,
            state: f[3].trim().to_string(),
            reason: text(f[4]),
            user: text(f[5]),
            name: f[6].trim().to_string(),
            partition: text(f[7]),
            account: text(f[8]),
            priority: f[9].trim().parse().unwrap_or(0),
            submit_time: epoch(f[10]),
            start_time: epoch(f[11]),
            end_time: epoch(f[12]),
            time_limit: f[13].trim().parse().unwrap_or(TimeLimit::Unlimited),
            time_used: elapsed(f[14]),
            nodes: f[15].trim().parse().unwrap_or(0),
            nodelist: text(f[16]),
            gres,
            tres: Tres::parse(f[18]),
            exit_status: f[19].trim().parse().unwrap_or(0),
            stdout: text(f[20]),
            stderr: text(f[21]),
            // The rest of the line: a comment may hold the separator itself.
            comment: f[22..f.len() - 1].join(&SEP.to_string()).trim().to_string(),
        })
    }

    /// The output file with the patterns Slurm leaves unexpanded for arrays.
    pub fn stdout_path(&self) -> String {
        self.expand(&self.stdout)
    }

    pub fn stderr_path(&self) -> String {
        self.expand(&self.stderr)
    }

    /// `%j` is the row's own id: for an array task, the task's own job id (unlike
    /// the internal scheduler's `123_4`). A path that would be longer than
    /// `PATH_MAX` (no file can have it) stays as Slurm wrote it.
    fn expand(&self, pattern: &str) -> String {
        expand_pattern(pattern, |c| match c {
            'A' => Some(self.array_job_id.clone()),
            'a' => Some(match &self.array_task {
                ArrayTask::One(t) => t.to_string(),
                _ => NO_TASK.to_string(),
            }),
            'j' => Some(self.job_id.clone()),
            'u' => Some(self.user.clone()),
            'x' => Some(self.name.clone()),
            _ => None,
        })
        .unwrap_or_else(|_| pattern.to_string())
    }
}

/// Slurm's state name as one of ours. States this crate has no name for map to the
/// nearest (`SUSPENDED` runs on, `REQUEUED` waits, `BOOT_FAIL` is a node failure).
pub fn job_state(slurm: &str) -> JobState {
    let s = slurm.split_whitespace().next().unwrap_or("");
    if let Some(state) = JobState::parse(s) {
        return state;
    }
    match s {
        "CONFIGURING" | "SUSPENDED" | "RESIZING" | "SIGNALING" | "STOPPED" => JobState::Running,
        "STAGE_OUT" => JobState::Completing,
        "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESV_DEL_HOLD" => JobState::Pending,
        "BOOT_FAIL" => JobState::NodeFail,
        "DEADLINE" => JobState::Timeout,
        "PREEMPTED" | "REVOKED" => JobState::Cancelled,
        "SPECIAL_EXIT" => JobState::Failed,
        _ => JobState::Unknown,
    }
}

/// A raw wait status as the job's outcome.
pub fn outcome(state: JobState, status: i32) -> JobOutcome {
    if state == JobState::OutOfMemory {
        JobOutcome::OutOfMemory
    } else if status & 0x7f != 0 {
        JobOutcome::Signaled(status & 0x7f)
    } else {
        JobOutcome::Exited((status >> 8) & 0xff)
    }
}

/// `sbatch --parsable`: `1234` or `1234;cluster`.
pub fn sbatch_id(out: &str) -> Option<String> {
    let line = out.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let id = line.split(';').next()?.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| id.to_string())
}

/// What `sbatch --test-only` says on standard error: `sbatch: Job 3 to start at
/// 1764052200 using 4 processors on nodes n[1-2] in partition gpu` (times as Unix
/// seconds: the commands run with `SLURM_TIME_FORMAT=%s`).
pub fn test_only_answer(stderr: &str) -> Option<scheduler::TestOnly> {
    let line = stderr.lines().find(|l| l.contains(" to start at "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |w: &str| {
        words
            .iter()
            .position(|x| *x == w)
            .and_then(|i| words.get(i + 1))
            .copied()
    };
    let start: i64 = after("at")?.parse().ok()?;
    let cpus: u32 = after("using").and_then(|c| c.parse().ok()).unwrap_or(0);
    let nodes = after("nodes")
        .and_then(|n| scheduler::parse::expand_hostlist(n).ok())
        .unwrap_or_default();
    Some(scheduler::TestOnly {
        start: Some(start),
        in_plan: true,
        nodes,
        cpus,
        partition: after("partition").unwrap_or_default().to_string(),
        reason: None,
    })
}

/// Trackable resources (`cpu=4,mem=16G,node=1,gres/gpu=2,gres/gpu:a100=2`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tres {
    pub cpus: u64,
    pub memory_mb: u64,
    /// GPUs of any type.
    pub gpus: u64,
    /// GPUs by type, where Slurm counts them by type.
    pub gpu_types: BTreeMap<String, u64>,
}

/// `16G`, `512M`, `2T`, `1024` (megabytes) in megabytes.
fn megabytes(s: &str) -> u64 {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "M"),
    };
    let n: f64 = num.parse().unwrap_or(0.0);
    let mb = match unit.chars().next().map(|c| c.to_ascii_uppercase()) {
        Some('K') => n / 1024.0,
        Some('G') => n * 1024.0,
        Some('T') => n * 1024.0 * 1024.0,
        _ => n,
    };
    mb.round() as u64
}

impl Tres {
    pub fn parse(s: &str) -> Tres {
        let mut t = Tres::default();
        for item in s.split(',') {
            let Some((key, value)) = item.trim().split_once('=') else {
                continue;
            };
            match key {
                "cpu" => t.cpus = value.parse().unwrap_or(0),
                "mem" => t.memory_mb = megabytes(value),
                "gres/gpu" => t.gpus = value.parse().unwrap_or(0),
                k => {
                    if let Some(ty) = k.strip_prefix("gres/gpu:") {
                        t.gpu_types
                            .insert(ty.to_string(), value.parse().unwrap_or(0));
                    }
                }
            }
        }
        t
    }

    /// GPUs in thousandths of a whole GPU: a MIG instance `Ng.…` counts N of seven.
    pub fn gpu_milli(&self) -> u64 {
        let typed: u64 = self.gpu_types.values().sum();
        let mut milli: u64 = self
            .gpu_types
            .iter()
            .map(|(ty, n)| n * slice_milli(ty))
            .sum();
        milli += self.gpus.saturating_sub(typed) * 1000;
        milli
    }
}

/// One GPU of type `ty` in thousandths of a whole GPU.
pub fn slice_milli(ty: &str) -> u64 {
    match ty.split_once("g.").and_then(|(n, _)| n.parse::<u64>().ok()) {
        Some(n) if (1..7).contains(&n) => n * 1000 / 7,
        _ => 1000,
    }
}

/// `gpu:a100:2(S:0-1),gpu:1g.10gb:2` as (type, count) pairs; an untyped `gpu:4` is of
/// type `gpu`.
pub fn gres_counts(s: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let item = item.split('(').next().unwrap_or("").trim();
        let parts: Vec<&str> = item.split(':').collect();
        match parts.as_slice() {
            ["gpu", n] => out.push(("gpu".to_string(), n.parse().unwrap_or(0))),
            ["gpu", ty, n] => out.push((ty.to_string(), n.parse().unwrap_or(0))),
            _ => {}
        }
    }
    out
}

/// The number in `name(1234)`, as `scontrol` writes `UserId` and `GroupId`.
pub fn id_in_parentheses(s: &str) -> Option<u32> {
    let (_, rest) = s.rsplit_once('(')?;
    rest.strip_suffix(')')?.parse().ok()
}

/// `FirstJobId` from `scontrol show config` (`FirstJobId              = 1`).
pub fn first_job_id(config: &str) -> Option<i64> {
    config.lines().find_map(|l| {
        let (key, value) = l.split_once('=')?;
        (key.trim() == "FirstJobId").then(|| value.trim().parse().ok())?
    })
}

/// `scontrol show <thing> -o`: one record per line of `Key=Value` words; a value runs
/// until the next word that starts a key (values such as `OS=Linux 6.1 #1 SMP` and
/// `Reason=…` hold spaces).
pub fn records(out: &str) -> Vec<BTreeMap<String, String>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut record = BTreeMap::new();
            let mut current: Option<String> = None;
            for word in line.split(' ').filter(|w| !w.is_empty()) {
                let key = word.split_once('=').map(|(k, _)| k).filter(|k| {
                    !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                });
                match key {
                    Some(k) => {
                        let value = &word[k.len() + 1..];
                        record.insert(k.to_string(), value.to_string());
                        current = Some(k.to_string());
                    }
                    None => {
                        if let Some(v) = current.as_ref().and_then(|k| record.get_mut(k)) {
                            v.push(' ');
                            v.push_str(word);
                        }
                    }
                }
            }
            record
        })
        .collect()
}

/// One node of `scontrol show node -o`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    pub name: String,
    pub state: NodeState,
    pub partitions: Vec<String>,
    pub cpus_total: u32,
    pub cpus_alloc: u32,
    pub memory_mb_total: u64,
    pub memory_mb_alloc: u64,
    pub features: Vec<String>,
    pub slices: Vec<SliceUsage>,
}

fn list(s: Option<&String>) -> Vec<String> {
    s.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty() && *x != "(null)")
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// A node's state words (`IDLE+DRAIN`, `MIXED`, `DOWN*+NOT_RESPONDING`) as ours.
pub fn node_state(words: &str, reason: &str) -> NodeState {
    let flags: Vec<&str> = words
        .split('+')
        .map(|w| w.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']))
        .collect();
    let base = flags.first().copied().unwrap_or("");
    let reason = reason.to_string();
    if base == "DOWN"
        || flags.contains(&"NOT_RESPONDING")
            && base != "IDLE"
            && base != "MIXED"
            && base != "ALLOCATED"
    {
        return NodeState::Down { reason };
    }
    if flags
        .iter()
        .any(|f| matches!(*f, "DRAIN" | "DRAINED" | "DRAINING"))
        || base.starts_with("DRAIN")
    {
        return NodeState::Drain { reason };
    }
    match base {
        "ALLOCATED" | "COMPLETING" => NodeState::Allocated,
        "MIXED" => NodeState::Mixed,
        "IDLE" => NodeState::Idle,
        _ => NodeState::Down { reason },
    }
}

impl SlurmNode {
    pub fn from_record(r: &BTreeMap<String, String>) -> Option<SlurmNode> {
        let name = r.get("NodeName")?.clone();
        let num = |k: &str| r.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let reason = r
            .get("Reason")
            .map(|s| s.split(" [").next().unwrap_or("").to_string())
            .unwrap_or_default();
        let alloc = Tres::parse(r.get("AllocTRES").map_or("", |s| s.as_str()));
        let slices = gres_counts(r.get("Gres").map_or("", |s| s.as_str()))
            .into_iter()
            .map(|(ty, total)| {
                let used = if ty == "gpu" {
                    alloc.gpus
                } else {
                    alloc.gpu_types.get(&ty).copied().unwrap_or(0)
                };
                SliceUsage {
                    r#type: ty,
                    total,
                    used: used.min(u64::from(total)) as u32,
                }
            })
            .collect();
        Some(SlurmNode {
            name,
            state: node_state(r.get("State").map_or("", |s| s.as_str()), &reason),
            partitions: list(r.get("Partitions")),
            cpus_total: num("CPUTot") as u32,
            cpus_alloc: num("CPUAlloc") as u32,
            memory_mb_total: num("RealMemory"),
            memory_mb_alloc: num("AllocMem"),
            features: list(r.get("AvailableFeatures")),
            slices,
        })
    }
}

/// One partition of `scontrol show partition -o`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmPartition {
    pub name: String,
    pub default: bool,
    pub max_time: TimeLimit,
    pub nodes: String,
    pub up: bool,
}

impl SlurmPartition {
    pub fn from_record(r: &BTreeMap<String, String>) -> Option<SlurmPartition> {
        Some(SlurmPartition {
            name: r.get("PartitionName")?.clone(),
            default: r.get("Default").is_some_and(|d| d == "YES"),
            max_time: r
                .get("MaxTime")
                .and_then(|t| t.parse().ok())
                .unwrap_or(TimeLimit::Unlimited),
            nodes: r.get("Nodes").cloned().unwrap_or_default(),
            up: r.get("State").is_none_or(|s| s == "UP"),
        })
    }
}

/// The `sacct` fields [`sacct_usage`] reads, in order.
pub const SACCT_USAGE_FIELDS: [&str; 5] = [
    "JobID",
    "TotalCPU",
    "MaxRSS",
    "TRESUsageInAve",
    "TRESUsageInMax",
];

/// A time as `sacct` prints `TotalCPU`: `[D-][HH:]MM:SS[.mmm]`.
pub fn sacct_seconds(text: &str) -> Option<f64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let (days, rest) = match text.split_once('-') {
        Some((d, r)) => (d.parse::<f64>().ok()?, r),
        None => (0.0, text),
    };
    let parts: Vec<f64> = rest
        .split(':')
        .map(|p| p.parse::<f64>().ok())
        .collect::<Option<_>>()?;
    let (h, m, s) = match parts[..] {
        [h, m, s] => (h, m, s),
        [m, s] => (0.0, m, s),
        [s] => (0.0, 0.0, s),
        _ => return None,
    };
    Some(days * 86_400.0 + h * 3600.0 + m * 60.0 + s)
}

/// A size as `sacct` prints `MaxRSS` or a TRES amount: bytes, or with a `K`, `M`,
/// `G`, `T` or `P` suffix (powers of 1024).
pub fn sacct_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_uppercase()),
        _ => (text, 'B'),
    };
    let power = "BKMGTP".find(unit)?;
    let value: f64 = number.parse().ok()?;
    Some((value * 1024f64.powi(power as i32)) as u64)
}

/// One entry of a TRES string (`cpu=00:00:03,mem=1804K,gres/gpuutil=87`).
fn tres<'a>(tres: &'a str, key: &str) -> Option<&'a str> {
    tres.split(',').find_map(|kv| {
        kv.split_once('=')
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| v)
    })
}

/// What `sacct -P -o` [`SACCT_USAGE_FIELDS`] says a job used: its allocation's
/// `TotalCPU` (every step's), the largest memory and GPU figures of its steps;
/// `None` when it lists nothing of the job.
pub fn sacct_usage(out: &str) -> Option<JobUsage> {
    let mut usage = JobUsage::default();
    let mut any = false;
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(SEP).collect();
        let [id, total_cpu, max_rss, ave, max] = f[..] else {
            continue;
        };
        any = true;
        if !id.contains('.') {
            usage.cpu_seconds = sacct_seconds(total_cpu);
            continue;
        }
        let larger = |a: Option<u64>, b: Option<u64>| a.max(b);
        usage.max_rss_bytes = larger(usage.max_rss_bytes, sacct_bytes(max_rss));
        usage.max_rss_bytes = larger(usage.max_rss_bytes, tres(max, "mem").and_then(sacct_bytes));
        usage.gpu_memory_bytes = larger(
            usage.gpu_memory_bytes,
            tres(max, "gres/gpumem").and_then(sacct_bytes),
        );
        if let Some(u) = tres(ave, "gres/gpuutil").and_then(|v| v.parse::<f64>().ok()) {
            usage.gpu_utilization_percent =
                Some(usage.gpu_utilization_percent.unwrap_or(0.0).max(u));
        }
    }
    any.then_some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(fields: &[&str]) -> String {
        fields.iter().map(|f| format!("{f}{SEP}")).collect()
    }

    #[test]
    fn squeue_rows_of_a_job_an_array_and_its_tasks() {
        let job = line(&[
            "1",
            "1",
            "N/A",
            "FAILED",
            "NonZeroExitCode",
            "ann",
            "train|v2",
            "gpu",
            "(null)",
            "4294901759",
            "1763881449",
            "1763881451",
            "1763881451",
            "UNLIMITED",
            "0:00",
            "1",
            "vm",
            "N/A",
            "cpu=1,node=1,billing=1",
            "768",
            "/h/out.txt",
            "/h/out.txt",
            "atrium",
        ]);
        let r = SqueueRow::parse(&job).expect("row");
        assert_eq!(r.job_id, "1");
        assert_eq!(r.array_task, ArrayTask::None);
        assert_eq!(r.name, "train|v2");
        assert_eq!(r.account, "");
        assert_eq!(r.start_time, Some(1_763_881_451));
        assert_eq!(job_state(&r.state), JobState::Failed);
        assert_eq!(
            outcome(JobState::Failed, r.exit_status),
            JobOutcome::Exited(3)
        );
        assert_eq!(r.comment, "atrium");

        let pending = line(&[
            "2",
            "2",
            "2-3%1",
            "PENDING",
            "JobArrayTaskLimit",
            "ann",
            "wrap",
            "gpu",
            "",
            "1",
            "1763881550",
            "N/A",
            "N/A",
            "10:00",
            "0:00",
            "1",
            "",
            "gres:gpu:1",
            "cpu=1,mem=21694M,node=1,billing=1",
            "0",
            "/h/out-%A_%a.txt",
            "/h/out-%A_%a.txt",
            "atrium",
        ]);
        let p = SqueueRow::parse(&pending).expect("row");
        assert_eq!(p.array_task, ArrayTask::Pending("2-3%1".into()));
        assert_eq!(p.gres, "gpu:1");
        assert_eq!(p.time_limit, TimeLimit::Seconds(600));
        assert_eq!(p.start_time, None);

        let task = line(&[
            "5",
            "2",
            "1",
            "RUNNING",
            "None",
            "ann",
            "wrap",
            "gpu",
            "",
            "1",
            "1763881550",
            "1763881556",
            "1763885156",
            "1:00:00",
            "1:05",
            "1",
            "vm",
            "gres/gpu:1",
            "cpu=2,mem=4G,node=1,billing=2,gres/gpu=1,gres/gpu:1g.10gb=1",
            "0",
            "/h/out-%A_%a.txt",
            "",
            "atrium",
        ]);
        let t = SqueueRow::parse(&task).expect("row");
        assert_eq!(t.array_job_id, "2");
        assert_eq!(t.array_task, ArrayTask::One(1));
        assert_eq!(t.stdout_path(), "/h/out-2_1.txt");
        assert_eq!(t.time_used, 65);
        assert_eq!(t.tres.cpus, 2);
        assert_eq!(t.tres.memory_mb, 4096);
        assert_eq!(t.tres.gpu_milli(), 142);
        assert!(SqueueRow::parse("squeue: error: something").is_none());
    }

    #[test]
    fn states_statuses_and_sbatch_answers() {
        assert_eq!(job_state("CANCELLED by 0"), JobState::Cancelled);
        assert_eq!(job_state("REQUEUED"), JobState::Pending);
        assert_eq!(job_state("OUT_OF_MEMORY"), JobState::OutOfMemory);
        assert_eq!(job_state("NEW_STATE"), JobState::Unknown);
        assert_eq!(outcome(JobState::Cancelled, 15), JobOutcome::Signaled(15));
        assert_eq!(outcome(JobState::Completed, 0), JobOutcome::Exited(0));
        assert_eq!(sbatch_id("1234\n"), Some("1234".into()));
        assert_eq!(sbatch_id("1234;cluster\n"), Some("1234".into()));
        assert_eq!(sbatch_id("sbatch: error: bad"), None);
    }

    #[test]
    fn tres_and_gres() {
        let t = Tres::parse("cpu=16,mem=2T,node=2,billing=16,gres/gpu=8,gres/gpu:a100=8");
        assert_eq!((t.cpus, t.memory_mb, t.gpus), (16, 2 * 1024 * 1024, 8));
        assert_eq!(t.gpu_milli(), 8000);
        assert_eq!(Tres::parse("gres/gpu=2").gpu_milli(), 2000);
        assert_eq!(slice_milli("3g.40gb"), 428);
        assert_eq!(
            gres_counts("gpu:a100:2(S:0-1),gpu:1g.10gb:2"),
            vec![("a100".to_string(), 2), ("1g.10gb".to_string(), 2)]
        );
        assert_eq!(gres_counts("gpu:8"), vec![("gpu".to_string(), 8)]);
    }

    #[test]
    fn nodes_and_partitions_from_scontrol() {
        let out = "NodeName=gpu01 Arch=x86_64 CPUAlloc=4 CPUTot=64 AvailableFeatures=a100,nvlink \
            Gres=gpu:a100:4(S:0-1) NodeAddr=10.0.0.1 OS=Linux 6.1.0 #1 SMP RealMemory=512000 \
            AllocMem=64000 State=MIXED+DRAIN Partitions=gpu,debug \
            AllocTRES=cpu=4,mem=64000M,gres/gpu=2,gres/gpu:a100=2 \
            Reason=fan broken [root@2026-11-23T07:00:00]\n";
        let rec = &records(out)[0];
        assert_eq!(rec["OS"], "Linux 6.1.0 #1 SMP");
        let n = SlurmNode::from_record(rec).expect("node");
        assert_eq!(n.name, "gpu01");
        assert_eq!(
            n.state,
            NodeState::Drain {
                reason: "fan broken".into()
            }
        );
        assert_eq!(n.partitions, ["gpu", "debug"]);
        assert_eq!(n.features, ["a100", "nvlink"]);
        assert_eq!((n.cpus_total, n.cpus_alloc), (64, 4));
        assert_eq!(
            n.slices,
            [SliceUsage {
                r#type: "a100".into(),
                total: 4,
                used: 2
            }]
        );
        assert_eq!(node_state("IDLE", ""), NodeState::Idle);
        assert!(matches!(
            node_state("DOWN*+NOT_RESPONDING", "x"),
            NodeState::Down { .. }
        ));
        let p = records(
            "PartitionName=debug AllowGroups=ALL Default=YES MaxTime=1:00:00 Nodes=gpu[01-02] State=UP\n",
        );
        let p = SlurmPartition::from_record(&p[0]).expect("partition");
        assert!(p.default && p.up);
        assert_eq!(p.max_time, TimeLimit::Seconds(3600));
        assert_eq!(p.nodes, "gpu[01-02]");
    }

    #[test]
    fn first_job_id_from_the_configuration() {
        let config = "Configuration data as of 2026-11-23T10:00:00\n\
                      EpilogSlurmctld         = (null)\n\
                      FirstJobId              = 5000\n\
                      MaxJobId                = 67043328\n";
        assert_eq!(first_job_id(config), Some(5000));
        assert_eq!(first_job_id("MaxJobId = 7\n"), None);
    }

    #[test]
    fn ids_in_parentheses() {
        assert_eq!(id_in_parentheses("ann(20381)"), Some(20381));
        assert_eq!(id_in_parentheses("20381(20381)"), Some(20381));
        assert_eq!(id_in_parentheses("ann"), None);
    }
}

#[cfg(test)]
mod usage_tests {
    use super::*;

    #[test]
    fn sacct_times_and_sizes_read_in_every_form() {
        assert_eq!(sacct_seconds("00:03.814"), Some(3.814));
        assert_eq!(sacct_seconds("01:02:03"), Some(3723.0));
        assert_eq!(sacct_seconds("2-01:00:00"), Some(176_400.0));
        assert_eq!(sacct_seconds(""), None);
        assert_eq!(sacct_seconds("soon"), None);
        assert_eq!(sacct_bytes("1804K"), Some(1804 * 1024));
        assert_eq!(sacct_bytes("1.5G"), Some(1_610_612_736));
        assert_eq!(sacct_bytes("2332"), Some(2332));
        assert_eq!(sacct_bytes("0"), Some(0));
        assert_eq!(sacct_bytes(""), None);
        assert_eq!(sacct_bytes("12Q"), None);
    }

    #[test]
    fn a_jobs_usage_is_its_allocations_cpu_and_its_steps_largest_figures() {
        let out = [
            "42\x1f00:07.500\x1f\x1f\x1f",
            "42.batch\x1f00:05.000\x1f204800K\x1fcpu=00:00:05,mem=204800K\x1fcpu=00:00:05,mem=204800K",
            "42.extern\x1f00:00:00\x1f0\x1f\x1f",
            "42.0\x1f00:02.500\x1f1024K\x1fcpu=00:00:02,gres/gpuutil=87,mem=1M\x1fcpu=00:00:02,gres/gpumem=30G,gres/gpuutil=100,mem=300M",
        ]
        .join("\n");
        let u = sacct_usage(&out).expect("usage");
        assert_eq!(u.cpu_seconds, Some(7.5));
        assert_eq!(u.max_rss_bytes, Some(300 << 20));
        assert_eq!(u.gpu_utilization_percent, Some(87.0));
        assert_eq!(u.gpu_memory_bytes, Some(30 << 30));
        assert_eq!(sacct_usage(""), None);
    }
}
