//! A job request: every field `sbatch` directives can set, also buildable as a typed
//! struct (serde/JSON). The small value types serialize as their `sbatch` spelling
//! (`"1-12:00:00"`, `"0-9%2"`, `"afterok:12"`), parsed by `crate::parse`.

use serde::{Deserialize, Serialize};

/// Everything a job asks for. `Default` is an empty request (one task, one CPU, the
/// default partition).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobRequest {
    /// `-J/--job-name`.
    pub name: Option<String>,
    /// `-p/--partition`.
    pub partition: Option<String>,
    /// `-N/--nodes`.
    pub nodes: Option<NodeRange>,
    /// `-n/--ntasks`.
    pub ntasks: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `-c/--cpus-per-task`.
    pub cpus_per_task: Option<u32>,
    /// `--mem`, `--mem-per-cpu` or `--mem-per-gpu`.
    pub memory: Option<MemoryRequest>,
    /// `--cpus-per-gpu`.
    pub cpus_per_gpu: Option<u32>,
    /// `--gres=gpu[:type]:N`, `--gres=shard:N`, `-G/--gpus`, `--gpus-per-node`.
    pub gpus: Option<GpuRequest>,
    /// `-t/--time`.
    pub time_limit: Option<TimeLimit>,
    /// `-a/--array`.
    pub array: Option<ArraySpec>,
    /// `-d/--dependency`.
    pub dependency: Option<Dependency>,
    /// `-o/--output` pattern (`%j %A %a %u %x %N`).
    pub output: Option<String>,
    /// `-e/--error` pattern.
    pub error: Option<String>,
    /// `-D/--chdir`.
    pub chdir: Option<String>,
    /// `--export`.
    pub export: Option<ExportSpec>,
    /// `-A/--account`.
    pub account: Option<String>,
    /// `-q/--qos`.
    pub qos: Option<String>,
    /// `-H/--hold`: submitted held by the user.
    pub hold: bool,
    /// `--begin`.
    pub begin: Option<BeginTime>,
    /// `--exclusive`: whole nodes.
    pub exclusive: bool,
    /// `-w/--nodelist`: nodes the job must run on (expanded host list).
    pub nodelist: Vec<String>,
    /// `-x/--exclude`: nodes the job must not run on.
    pub exclude: Vec<String>,
    /// `-C/--constraint`: node features.
    pub constraint: Option<Constraint>,
    /// `--comment`.
    pub comment: Option<String>,
    /// `--requeue` (true) / `--no-requeue` (false); unset: the cluster's default.
    pub requeue: Option<bool>,
    /// `--nice`: lowers the job's priority by this much (users: >= 0).
    pub nice: Option<i32>,
    /// `--signal=[{R|B}:]SIG[@TIME]`: a signal sent before the time limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalSpec>,
    /// `--open-mode`: append to or truncate the output files (default: truncate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_mode: Option<OpenMode>,
    /// `--mail-type`: the events a notification is sent for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mail_type: Option<MailTypes>,
    /// `--mail-user`: whom notifications go to (default: the submitting user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mail_user: Option<String>,
    /// `--gpus-per-task=[type:]N`: GPUs each task gets (the job's GPUs are this
    /// times the tasks, unless GPUs are asked otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus_per_task: Option<u32>,
    /// `--ntasks-per-gpu`: tasks per allocated GPU (the job's tasks, unless `-n`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ntasks_per_gpu: Option<u32>,
    /// `--gpu-bind`: how `srun` binds tasks to GPUs, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_bind: Option<String>,
    /// `-L/--licenses`: counted site resources (`name[:count]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub licenses: Vec<License>,
    /// `--time-min`: the job may start with any limit from this up to `--time`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_min: Option<TimeLimit>,
    /// `--deadline`: the job is cancelled if it cannot end by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<BeginTime>,
    /// `--get-user-env`: the job starts from the user's login environment.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub get_user_env: bool,
    /// Options accepted that mean nothing on this site, as Slurm ignores them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<IgnoredOption>,
    /// The batch script's arguments (`sbatch script ARGS`): not an option, kept
    /// with the request so that every run of the job gets them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<String>,
    /// An interactive job (`salloc`, `srun --pty` outside a job): its command runs on
    /// a terminal of its own, which its user attaches to; not an sbatch option.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pty: bool,
    /// With `pty`: the terminal passes bytes as they are (no echo, no line editing, no
    /// carriage return added): `srun` outside a job without `--pty`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pty_raw: bool,
}

/// `--signal`: which signal, to whom, how long before the time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SignalSpec {
    /// The signal's number (`USR1` is 10 on Linux).
    pub signal: i32,
    /// `B:`: the batch shell only; otherwise every process of the job but the shell.
    pub batch_only: bool,
    /// `R:`: also before a reservation ends (no reservations here: recorded only).
    pub reservation: bool,
    /// Seconds before the time limit (Slurm's default: 60).
    pub seconds_before: u32,
}

/// `--open-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenMode {
    Append,
    Truncate,
}

/// `--mail-type`: events, as a set of flags (`BEGIN`, `END`, `FAIL` …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MailTypes(pub u16);

/// One `-L` item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct License {
    pub name: String,
    pub count: u32,
}

/// An option accepted and not acted on, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoredOption {
    /// The long option as written in full (`--cores-per-socket=4`).
    pub option: String,
    /// Why it means nothing here.
    pub reason: String,
}

/// `-N min[-max]`. The scheduler allocates `min` nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRange {
    pub min: u32,
    pub max: u32,
}

/// Memory request, in MB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryRequest {
    PerNode(u64),
    PerCpu(u64),
    PerGpu(u64),
}

/// Which kind of slice a GPU request wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceKind {
    /// Whole GPUs (`gpu`, or `gpu:<model>`) or MIG instances (`gpu:<profile>`).
    Gpu { r#type: Option<String> },
    /// Shards of shared GPUs (`shard`).
    Shard,
}

/// Whether a GPU count is per node (`--gres`, `--gpus-per-node`) or per job (`-G`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuPer {
    Node,
    Job,
}

/// A GPU slice request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRequest {
    pub kind: SliceKind,
    pub count: u32,
    pub per: GpuPer,
}

/// `-t/--time`: a limit in seconds or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum TimeLimit {
    Seconds(u64),
    Unlimited,
}

/// `--array`: sorted, distinct task indices and an optional `%` limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArraySpec {
    /// Ranges `(first, last, step)`, as written (normalised: sorted, no overlap).
    pub ranges: Vec<(u32, u32, u32)>,
    /// Most tasks running at once.
    pub max_running: Option<u32>,
}

/// `--dependency`: items joined by `,` (all) or `?` (any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Dependency {
    /// True for `?` (any item suffices), false for `,` (all items).
    pub any: bool,
    pub items: Vec<DependencyItem>,
}

/// One dependency item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyItem {
    pub kind: DepKind,
    pub targets: Vec<DepTarget>,
}

/// Dependency types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    After,
    AfterAny,
    AfterOk,
    AfterNotOk,
    Singleton,
}

/// A job a dependency waits for; `delay_secs` only for `after:<id>+<minutes>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepTarget {
    pub job: super::JobId,
    pub delay_secs: u64,
}

/// `--begin`, kept as written and resolved against `now` at submit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BeginTime(pub(crate) String);

/// `-C/--constraint`: features in disjunctive normal form (`a&b|c`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Constraint {
    /// Any of these alternatives; each alternative needs all its features.
    pub any_of: Vec<Vec<String>>,
}

/// `--export`: `ALL`, `NONE`, and/or variables (`VAR` or `VAR=value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ExportSpec {
    /// Whether the submitting environment is passed (`ALL`, the default).
    pub all: bool,
    pub vars: Vec<(String, Option<String>)>,
}
