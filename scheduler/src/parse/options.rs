//! The table of `sbatch` options (Slurm 22.05 to 25.x): each option's names, how it
//! takes its value, its input environment variable and what this scheduler does with
//! it. Lookups follow `getopt_long`: a long option may be shortened to any prefix
//! that names one option only.

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A flag: `--hold`.
    None,
    /// A value: `--time=10`, `--time 10`, `-t10`, `-t 10`.
    Required,
    /// An optional value, given only with `=` (or attached to a short option):
    /// `--nice`, `--nice=10`.
    Optional,
}

/// What happens to an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Part of the job, acted on by the scheduler.
    Implemented,
    /// Acted on by `atrium sbatch` (the command line), not part of the job; in a
    /// script submitted over the API it is recorded as ignored.
    Client,
    /// Accepted and checked, then recorded on the job as ignored here, with why:
    /// what Slurm does with an option that means nothing on a site.
    Ignored(&'static str),
    /// Refused, with why.
    Refused(&'static str),
}

/// One `sbatch` option.
#[derive(Debug, Clone, Copy)]
pub struct SbatchOption {
    /// The long name without dashes (`job-name`).
    pub long: &'static str,
    pub short: Option<char>,
    pub arg: Arg,
    /// The value's grammar, as the man page writes it (for messages and docs).
    pub value: &'static str,
    pub support: Support,
    /// The input environment variables `sbatch` reads it from (`SBATCH_JOB_NAME`).
    pub env: &'static [&'static str],
}

use Arg::{None as Flag, Optional as Opt, Required as Val};
use Support::{Client, Ignored, Implemented, Refused};

const NO_TOPOLOGY: &str =
    "nodes are described by their CPUs, memory and GPUs, not by sockets, cores and threads";
const NO_AFFINITY: &str = "tasks are not bound to CPUs or memory";
const ONE_CLUSTER: &str = "the portal schedules one cluster";

macro_rules! opt {
    ($long:literal, $short:expr, $arg:expr, $value:literal, $support:expr $(, $env:literal)*) => {
        SbatchOption {
            long: $long,
            short: $short,
            arg: $arg,
            value: $value,
            support: $support,
            env: &[$($env),*],
        }
    };
}

/// Every option of `sbatch`, in alphabetical order of the long name.
pub static SBATCH_OPTIONS: &[SbatchOption] = &[
    opt!("account", Some('A'), Val, "<account>", Implemented, "SBATCH_ACCOUNT"),
    opt!("acctg-freq", None, Val, "<datatype>=<interval>[,…]", Ignored("the portal samples usage at its own interval"), "SBATCH_ACCTG_FREQ"),
    opt!("array", Some('a'), Val, "<indexes>[%<max running>]", Implemented, "SBATCH_ARRAY_INX"),
    opt!("batch", None, Val, "<features>", Ignored("the batch step runs on the job's first node"), "SBATCH_BATCH"),
    opt!("bb", None, Val, "<spec>", Ignored("no burst buffers are configured")),
    opt!("bbf", None, Val, "<file name>", Ignored("no burst buffers are configured")),
    opt!("begin", Some('b'), Val, "<time>", Implemented),
    opt!("chdir", Some('D'), Val, "<directory>", Implemented),
    opt!("cluster-constraint", None, Val, "[!]<list>", Ignored(ONE_CLUSTER)),
    opt!("clusters", Some('M'), Val, "<cluster names>", Ignored(ONE_CLUSTER), "SBATCH_CLUSTERS", "SLURM_CLUSTERS"),
    opt!("comment", None, Val, "<string>", Implemented),
    opt!("constraint", Some('C'), Val, "<features with & | , [ ] and *count>", Implemented, "SBATCH_CONSTRAINT"),
    opt!("container", None, Val, "<OCI bundle path>", Ignored("OCI bundles are not run: jobs run in the portal's container runtime (#ATRIUM --environment)"), "SBATCH_CONTAINER"),
    opt!("container-id", None, Val, "<id>", Ignored("OCI bundles are not run")),
    opt!("contiguous", None, Flag, "", Ignored("node names carry no topology here")),
    opt!("core-spec", Some('S'), Val, "<count>", Ignored("no cores are set aside for the system"), "SBATCH_CORE_SPEC"),
    opt!("cores-per-socket", None, Val, "<cores>", Ignored(NO_TOPOLOGY)),
    opt!("cpu-freq", None, Val, "<p1>[-p2[:p3]]", Ignored("CPU frequencies are not managed")),
    opt!("cpus-per-gpu", None, Val, "<ncpus>", Implemented, "SBATCH_CPUS_PER_GPU"),
    opt!("cpus-per-task", Some('c'), Val, "<ncpus>", Implemented, "SBATCH_CPUS_PER_TASK"),
    opt!("deadline", None, Val, "<time>", Implemented),
    opt!("delay-boot", None, Val, "<minutes>", Ignored("nodes are not rebooted for jobs"), "SBATCH_DELAY_BOOT"),
    opt!("dependency", Some('d'), Val, "<type:job_id[:job_id]>[,…|?…]", Implemented),
    opt!("distribution", Some('m'), Val, "<block|cyclic|arbitrary|plane=size>[:…]", Ignored("srun starts a job's tasks in order of their rank"), "SBATCH_DISTRIBUTION"),
    opt!("error", Some('e'), Val, "<filename pattern>", Implemented, "SBATCH_ERROR"),
    opt!("exclude", Some('x'), Val, "<node list>", Implemented),
    opt!("exclusive", None, Opt, "[=user|mcs|topo|oversubscribe]", Implemented, "SBATCH_EXCLUSIVE"),
    opt!("export", None, Val, "ALL|NONE|[ALL,]<variables>", Implemented, "SBATCH_EXPORT"),
    opt!("export-file", None, Val, "<file>|<fd>", Ignored("give the variables with --export")),
    opt!("extra", None, Val, "<string>", Ignored("nodes have no extra data to match")),
    opt!("extra-node-info", Some('B'), Val, "<sockets>[:cores[:threads]]", Ignored(NO_TOPOLOGY)),
    opt!("get-user-env", None, Opt, "[=timeout][S|L]", Implemented, "SBATCH_GET_USER_ENV"),
    opt!("gid", None, Val, "<group>", Refused("only root may run a job as another group; a job runs with your own groups")),
    opt!("gpu-bind", None, Val, "[verbose,]<type>", Implemented, "SBATCH_GPU_BIND"),
    opt!("gpu-freq", None, Val, "<type=value>[,…]", Ignored("GPU clocks are not managed"), "SBATCH_GPU_FREQ"),
    opt!("gpus", Some('G'), Val, "[type:]<number>", Implemented, "SBATCH_GPUS"),
    opt!("gpus-per-node", None, Val, "[type:]<number>", Implemented, "SBATCH_GPUS_PER_NODE"),
    opt!("gpus-per-socket", None, Val, "[type:]<number>", Ignored("GPUs are counted per node, not per socket; ask with --gpus-per-node"), "SBATCH_GPUS_PER_SOCKET"),
    opt!("gpus-per-task", None, Val, "[type:]<number>", Implemented, "SBATCH_GPUS_PER_TASK"),
    opt!("gres", None, Val, "gpu[:type][:count] | shard[:count]", Implemented, "SBATCH_GRES"),
    opt!("gres-flags", None, Val, "<type>", Ignored("GPUs are not bound to sockets"), "SBATCH_GRES_FLAGS"),
    opt!("help", Some('h'), Flag, "", Client),
    opt!("hint", None, Val, "<type>", Ignored(NO_AFFINITY), "SBATCH_HINT", "SLURM_HINT"),
    opt!("hold", Some('H'), Flag, "", Implemented),
    opt!("ignore-pbs", None, Flag, "", Client, "SBATCH_IGNORE_PBS"),
    opt!("input", Some('i'), Val, "<filename pattern>", Ignored("the batch script reads /dev/null"), "SBATCH_INPUT"),
    opt!("job-name", Some('J'), Val, "<name>", Implemented, "SBATCH_JOB_NAME"),
    opt!("kill-on-invalid-dep", None, Val, "yes|no", Ignored("a job whose dependency can never be met stays pending with DependencyNeverSatisfied until cancelled")),
    opt!("licenses", Some('L'), Val, "<license>[@db][:count][,…]", Implemented, "SBATCH_LICENSES"),
    opt!("mail-type", None, Val, "NONE|BEGIN|END|FAIL|REQUEUE|ALL|…", Implemented),
    opt!("mail-user", None, Val, "<user or address>", Implemented),
    opt!("mcs-label", None, Val, "<label>", Ignored("no MCS plugin")),
    opt!("mem", None, Val, "<size>[K|M|G|T][B]", Implemented, "SBATCH_MEM_PER_NODE"),
    opt!("mem-bind", None, Val, "[quiet|verbose,]<type>", Ignored(NO_AFFINITY), "SBATCH_MEM_BIND"),
    opt!("mem-per-cpu", None, Val, "<size>[K|M|G|T][B]", Implemented, "SBATCH_MEM_PER_CPU"),
    opt!("mem-per-gpu", None, Val, "<size>[K|M|G|T][B]", Implemented, "SBATCH_MEM_PER_GPU"),
    opt!("mincpus", None, Val, "<n>", Ignored("a node is chosen by the CPUs the job's tasks ask")),
    opt!("network", None, Val, "<type>", Ignored("no network plugin"), "SBATCH_NETWORK"),
    opt!("nice", None, Opt, "[=adjustment]", Implemented),
    opt!("no-kill", Some('k'), Opt, "[=off]", Ignored("a job is ended when one of its nodes fails"), "SBATCH_NO_KILL"),
    opt!("no-requeue", None, Flag, "", Implemented, "SBATCH_NO_REQUEUE"),
    opt!("nodefile", Some('F'), Val, "<node file>", Ignored("the file is on the submitting host; name the nodes with -w/--nodelist")),
    opt!("nodelist", Some('w'), Val, "<node list>", Implemented),
    opt!("nodes", Some('N'), Val, "<minnodes>[-maxnodes]", Implemented),
    opt!("ntasks", Some('n'), Val, "<number>", Implemented),
    opt!("ntasks-per-core", None, Val, "<ntasks>", Ignored(NO_AFFINITY)),
    opt!("ntasks-per-gpu", None, Val, "<ntasks>", Implemented),
    opt!("ntasks-per-node", None, Val, "<ntasks>", Implemented),
    opt!("ntasks-per-socket", None, Val, "<ntasks>", Ignored(NO_AFFINITY)),
    opt!("oom-kill-step", None, Opt, "[=0|1]", Ignored("a job over its memory is ended as a whole")),
    opt!("open-mode", None, Val, "append|truncate", Implemented, "SBATCH_OPEN_MODE"),
    opt!("output", Some('o'), Val, "<filename pattern>", Implemented, "SBATCH_OUTPUT"),
    opt!("overcommit", Some('O'), Flag, "", Ignored("CPUs are never overcommitted"), "SBATCH_OVERCOMMIT"),
    opt!("oversubscribe", Some('s'), Flag, "", Ignored("nodes are shared by jobs as their free CPUs, memory and GPUs allow")),
    opt!("parsable", None, Flag, "", Client),
    opt!("partition", Some('p'), Val, "<partition names>", Implemented, "SBATCH_PARTITION"),
    opt!("power", None, Val, "<flags>", Ignored("no power plugin"), "SBATCH_POWER"),
    opt!("prefer", None, Val, "<features>", Ignored("preferred features are not weighed")),
    opt!("priority", None, Val, "<value>|TOP", Ignored("only an administrator sets priorities; lower your own with --nice")),
    opt!("profile", None, Val, "all|none|<type>[,…]", Ignored("no profiling plugin: the portal samples every job's usage"), "SBATCH_PROFILE"),
    opt!("propagate", None, Opt, "[=rlimit[,…]]", Ignored("a job gets the limits of the portal's step supervisor")),
    opt!("qos", Some('q'), Val, "<qos>", Implemented, "SBATCH_QOS"),
    opt!("quiet", Some('Q'), Flag, "", Client),
    opt!("reboot", None, Flag, "", Ignored("nodes are not rebooted for jobs")),
    opt!("requeue", None, Flag, "", Implemented, "SBATCH_REQUEUE"),
    opt!("reservation", None, Val, "<reservation names>", Ignored("no reservations are configured"), "SBATCH_RESERVATION"),
    opt!("segment", None, Val, "<size>", Ignored("node names carry no topology here")),
    opt!("signal", None, Val, "[{R|B}:]<sig_num>[@sig_time]", Implemented, "SBATCH_SIGNAL"),
    opt!("sockets-per-node", None, Val, "<sockets>", Ignored(NO_TOPOLOGY)),
    opt!("spread-job", None, Flag, "", Ignored("a job gets the fewest nodes it asks"), "SBATCH_SPREAD_JOB"),
    opt!("stepmgr", None, Flag, "", Ignored("steps are managed on the job's node")),
    opt!("switches", None, Val, "<count>[@max-time]", Ignored("node names carry no topology here"), "SBATCH_REQ_SWITCH"),
    opt!("test-only", None, Flag, "", Client),
    opt!("thread-spec", None, Val, "<num>", Ignored("no threads are set aside for the system"), "SBATCH_THREAD_SPEC"),
    opt!("threads-per-core", None, Val, "<threads>", Ignored(NO_TOPOLOGY), "SBATCH_THREADS_PER_CORE"),
    opt!("time", Some('t'), Val, "<time>", Implemented, "SBATCH_TIMELIMIT"),
    opt!("time-min", None, Val, "<time>", Implemented),
    opt!("tmp", None, Val, "<size>[K|M|G|T][B]", Ignored("local disk is not scheduled")),
    opt!("tres-per-task", None, Val, "<tres>=<count>[,…]", Ignored("ask CPUs with --cpus-per-task and GPUs with --gpus-per-task")),
    opt!("uid", None, Val, "<user>", Refused("only root may run a job as another user; a job runs as you")),
    opt!("usage", None, Flag, "", Client),
    opt!("use-min-nodes", None, Flag, "", Ignored("a job always gets the least node count it allows"), "SBATCH_USE_MIN_NODES"),
    opt!("verbose", Some('v'), Flag, "", Client, "SBATCH_DEBUG"),
    opt!("version", Some('V'), Flag, "", Client),
    opt!("wait", Some('W'), Flag, "", Client, "SBATCH_WAIT"),
    opt!("wait-all-nodes", None, Val, "0|1", Ignored("a job starts when all of its nodes are up"), "SBATCH_WAIT_ALL_NODES"),
    opt!("wckey", None, Val, "<wckey>", Ignored("no workload characterization keys"), "SBATCH_WCKEY"),
    opt!("wrap", None, Val, "<command string>", Client),
];

/// Why a long option name is not one option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    Unknown,
    /// A prefix of several options: their names.
    Ambiguous(Vec<&'static str>),
}

/// The option a long name (without dashes) names: an exact name, or a prefix of
/// one option's name only, as `getopt_long` reads it.
pub fn find_long(name: &str) -> Result<&'static SbatchOption, LookupError> {
    if name.is_empty() {
        return Err(LookupError::Unknown);
    }
    if let Some(o) = SBATCH_OPTIONS.iter().find(|o| o.long == name) {
        return Ok(o);
    }
    let mut matches = SBATCH_OPTIONS.iter().filter(|o| o.long.starts_with(name));
    match (matches.next(), matches.next()) {
        (Some(o), None) => Ok(o),
        (None, _) => Err(LookupError::Unknown),
        (Some(a), Some(b)) => {
            let mut all = vec![a.long, b.long];
            all.extend(matches.map(|o| o.long));
            Err(LookupError::Ambiguous(all))
        }
    }
}

/// The option a short letter names.
pub fn find_short(c: char) -> Option<&'static SbatchOption> {
    SBATCH_OPTIONS.iter().find(|o| o.short == Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_with_unique_names() {
        for w in SBATCH_OPTIONS.windows(2) {
            assert!(w[0].long < w[1].long, "{} before {}", w[0].long, w[1].long);
        }
        let mut shorts: Vec<char> = SBATCH_OPTIONS.iter().filter_map(|o| o.short).collect();
        let n = shorts.len();
        shorts.sort_unstable();
        shorts.dedup();
        assert_eq!(shorts.len(), n, "a short option names two options");
    }

    #[test]
    fn long_names_may_be_shortened_to_a_unique_prefix() {
        assert_eq!(find_long("err").map(|o| o.long), Ok("error"));
        assert_eq!(find_long("out").map(|o| o.long), Ok("output"));
        assert_eq!(find_long("no-reque").map(|o| o.long), Ok("no-requeue"));
        // An exact name wins over longer names it is a prefix of.
        assert_eq!(find_long("mem").map(|o| o.long), Ok("mem"));
        assert_eq!(find_long("gpus").map(|o| o.long), Ok("gpus"));
        match find_long("mem-per") {
            Err(LookupError::Ambiguous(all)) => {
                assert_eq!(all, ["mem-per-cpu", "mem-per-gpu"])
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            find_long("bogus").map(|o| o.long),
            Err(LookupError::Unknown)
        );
        assert_eq!(find_long("").map(|o| o.long), Err(LookupError::Unknown));
    }
}

#[cfg(test)]
mod docs {
    use super::*;

    /// docs/COMPATIBILITY.md lists every option with what the table says of it.
    #[test]
    fn the_compatibility_page_lists_every_option() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/COMPATIBILITY.md");
        let whole = std::fs::read_to_string(path).expect("docs/COMPATIBILITY.md");
        let (_, page) = whole
            .split_once("## Every option")
            .expect("a section \"Every option\"");
        for o in SBATCH_OPTIONS {
            let start = format!("| `--{}`", o.long);
            let row = page
                .lines()
                .find(|l| l.starts_with(&start))
                .unwrap_or_else(|| panic!("--{} is not listed", o.long));
            let status = match o.support {
                Support::Implemented => "| implemented |",
                Support::Client => "| implemented by `atrium sbatch` |",
                Support::Ignored(_) => "| accepted, ignored |",
                Support::Refused(_) => "| refused |",
            };
            assert!(row.contains(status), "--{}: {row}", o.long);
        }
        let rows = page.lines().filter(|l| l.starts_with("| `--")).count();
        assert_eq!(
            rows,
            SBATCH_OPTIONS.len(),
            "the page lists options the table has not"
        );
    }
}
