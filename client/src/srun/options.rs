//! srun's command line: the options real scripts pass (getopt_long's grammar:
//! `--name=value`, `--name value`, `-n4`, `-n 4`, grouped flags `-lu`), and the
//! others accepted with a note on standard error. Parsing stops at the first word
//! that is not an option (the command) or at `--`.
//! Must not touch: the environment, processes, the portal.

/// How GPUs are bound to tasks (`--gpu-bind`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GpuBind {
    /// Slurm's default: each task gets `--gpus-per-task` GPUs of its own when that
    /// is given, else every GPU of the step.
    #[default]
    Default,
    /// `closest`: on one node, as the default (no topology to follow).
    Closest,
    /// `none`: every task sees every GPU of the step.
    None,
    /// `single:N`: each GPU bound to N tasks in turn.
    Single(u32),
    /// `per_task:N`: N GPUs of its own per task.
    PerTask(u32),
    /// `map_gpu:i,j,…`: task t gets the GPU at position `list[t % len]`.
    Map(Vec<u32>),
    /// `mask_gpu:m,…`: task t gets the GPUs whose bits `list[t % len]` sets.
    Mask(Vec<u64>),
}

/// `--export`: which of srun's variables the tasks get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// All of srun's (`ALL`, the default) or only Slurm's (`NONE`, a list without `ALL`).
    pub all: bool,
    /// `VAR` (srun's value) and `VAR=value` items.
    pub vars: Vec<(String, Option<String>)>,
}

impl Default for Export {
    fn default() -> Self {
        Export {
            all: true,
            vars: Vec::new(),
        }
    }
}

/// What srun was asked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SrunOptions {
    pub ntasks: Option<u32>,
    pub nodes: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub cpus_per_task: Option<u32>,
    pub gpus_per_task: Option<u32>,
    pub gpu_bind: GpuBind,
    pub label: bool,
    pub kill_on_bad_exit: bool,
    pub overcommit: bool,
    pub export: Export,
    pub output: Option<String>,
    pub error: Option<String>,
    pub input: Option<String>,
    pub job_name: Option<String>,
    pub chdir: Option<String>,
    /// Options accepted and ignored, for the note on standard error.
    pub ignored: Vec<String>,
    /// `--pty`: outside a job, the command runs on a terminal of its own.
    pub pty: bool,
    /// `-h`, `--help`, `--usage`.
    pub help: bool,
    /// Outside a job: the options that shape the allocation (sbatch's names), in order.
    pub allocation: Vec<(&'static str, Option<String>)>,
    /// The options that shape the step, as `--name[=value]` words: what an srun run
    /// inside the new allocation is given.
    pub step_words: Vec<String>,
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// The most bytes of one option's value (as sbatch's).
const MAX_VALUE_BYTES: usize = 8192;
/// The most GPUs a `map_gpu`/`mask_gpu` list or `per_task`/`single` count names.
const MAX_GPU_ITEMS: u32 = 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    Value,
    /// A value only when attached (`--name=value`, `-Xvalue`).
    Optional,
}

/// srun's options: (long name, short letter, arity). Those not handled by
/// [`SrunOptions::set`] are accepted and noted.
const OPTIONS: &[(&str, Option<char>, Arity)] = &[
    ("ntasks", Some('n'), Arity::Value),
    ("nodes", Some('N'), Arity::Value),
    ("ntasks-per-node", None, Arity::Value),
    ("cpus-per-task", Some('c'), Arity::Value),
    ("gpus-per-task", None, Arity::Value),
    ("gpu-bind", None, Arity::Value),
    ("label", Some('l'), Arity::Flag),
    ("unbuffered", Some('u'), Arity::Flag),
    ("kill-on-bad-exit", Some('K'), Arity::Optional),
    ("overcommit", Some('O'), Arity::Flag),
    ("export", None, Arity::Value),
    ("output", Some('o'), Arity::Value),
    ("error", Some('e'), Arity::Value),
    ("input", Some('i'), Arity::Value),
    ("job-name", Some('J'), Arity::Value),
    ("chdir", Some('D'), Arity::Value),
    ("cpu-bind", None, Arity::Value),
    ("cpu_bind", None, Arity::Value),
    ("mpi", None, Arity::Value),
    ("exact", None, Arity::Flag),
    ("overlap", None, Arity::Flag),
    ("exclusive", None, Arity::Optional),
    ("whole", None, Arity::Flag),
    ("quiet", Some('Q'), Arity::Flag),
    ("verbose", Some('v'), Arity::Flag),
    ("wait", Some('W'), Arity::Value),
    ("time", Some('t'), Arity::Value),
    ("partition", Some('p'), Arity::Value),
    ("account", Some('A'), Arity::Value),
    ("qos", Some('q'), Arity::Value),
    ("mem", None, Arity::Value),
    ("mem-per-cpu", None, Arity::Value),
    ("mem-per-gpu", None, Arity::Value),
    ("cpus-per-gpu", None, Arity::Value),
    ("gpus", Some('G'), Arity::Value),
    ("gpus-per-node", None, Arity::Value),
    ("gres", None, Arity::Value),
    ("gres-flags", None, Arity::Value),
    ("constraint", Some('C'), Arity::Value),
    ("nodelist", Some('w'), Arity::Value),
    ("exclude", Some('x'), Arity::Value),
    ("distribution", Some('m'), Arity::Value),
    ("hint", None, Arity::Value),
    ("threads-per-core", None, Arity::Value),
    ("ntasks-per-core", None, Arity::Value),
    ("ntasks-per-socket", None, Arity::Value),
    ("ntasks-per-gpu", None, Arity::Value),
    ("signal", None, Arity::Value),
    ("propagate", None, Arity::Optional),
    ("pty", None, Arity::Flag),
    ("open-mode", None, Arity::Value),
    ("mem-bind", None, Arity::Value),
    ("accel-bind", None, Arity::Value),
    ("network", None, Arity::Value),
    ("reservation", None, Arity::Value),
    ("dependency", Some('d'), Arity::Value),
    ("immediate", Some('I'), Arity::Optional),
    ("slurmd-debug", None, Arity::Value),
    ("task-prolog", None, Arity::Value),
    ("task-epilog", None, Arity::Value),
    ("prolog", None, Arity::Value),
    ("epilog", None, Arity::Value),
    ("comment", None, Arity::Value),
    ("het-group", None, Arity::Value),
    ("multi-prog", None, Arity::Flag),
    ("no-kill", Some('k'), Arity::Optional),
    ("relative", Some('r'), Arity::Value),
    ("disable-status", Some('X'), Arity::Flag),
    ("join", Some('j'), Arity::Flag),
    ("help", Some('h'), Arity::Flag),
    ("usage", None, Arity::Flag),
];

/// Options that ask for the allocation only (outside a job: sbatch's options of the
/// same names; inside one: the allocation exists, they are noted and ignored).
const ALLOCATION_ONLY: &[&str] = &[
    "time",
    "partition",
    "account",
    "qos",
    "mem",
    "mem-per-cpu",
    "mem-per-gpu",
    "cpus-per-gpu",
    "gpus",
    "gpus-per-node",
    "gres",
    "gres-flags",
    "constraint",
    "nodelist",
    "exclude",
    "dependency",
    "reservation",
    "comment",
    "signal",
    "exclusive",
];

/// Options that shape both the allocation and the step's tasks.
const ALLOCATION_AND_STEP: &[&str] = &[
    "ntasks",
    "nodes",
    "ntasks-per-node",
    "cpus-per-task",
    "gpus-per-task",
    "job-name",
];

/// A refusal, in srun's words (printed after `srun: error: `).
pub type OptionError = String;

fn number(name: &str, value: &str) -> Result<u32, OptionError> {
    match value.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("invalid --{name} argument: {value}")),
    }
}

fn gpu_count(name: &str, value: &str) -> Result<u32, OptionError> {
    let n = number(name, value)?;
    if n > MAX_GPU_ITEMS {
        return Err(format!("invalid --{name} argument: {value}"));
    }
    Ok(n)
}

/// A `map_gpu`/`mask_gpu` list: items separated by commas, each optionally `*N`
/// times; at most [`MAX_GPU_ITEMS`] in all.
fn gpu_list<T>(value: &str, item: impl Fn(&str) -> Option<T>) -> Option<Vec<T>>
where
    T: Clone,
{
    let mut out = Vec::new();
    for word in value.split(',') {
        let (item_text, times) = match word.split_once('*') {
            Some((i, n)) => (i, n.parse::<u32>().ok()?),
            None => (word, 1),
        };
        let one = item(item_text.trim())?;
        if times == 0 || out.len() as u64 + u64::from(times) > u64::from(MAX_GPU_ITEMS) {
            return None;
        }
        out.extend(std::iter::repeat_n(one, times as usize));
    }
    (!out.is_empty()).then_some(out)
}

impl GpuBind {
    /// `--gpu-bind`'s value (a leading `verbose,` is dropped).
    pub fn parse(value: &str) -> Result<GpuBind, OptionError> {
        let bad = || format!("invalid --gpu-bind argument: {value}");
        let v = value.trim();
        let v = v.strip_prefix("verbose,").unwrap_or(v);
        if v == "closest" {
            return Ok(GpuBind::Closest);
        }
        if v == "none" {
            return Ok(GpuBind::None);
        }
        let (kind, arg) = v.split_once(':').ok_or_else(bad)?;
        match kind {
            "single" => gpu_count("gpu-bind", arg)
                .map(GpuBind::Single)
                .map_err(|_| bad()),
            "per_task" => gpu_count("gpu-bind", arg)
                .map(GpuBind::PerTask)
                .map_err(|_| bad()),
            "map_gpu" => gpu_list(arg, |i| i.parse::<u32>().ok())
                .map(GpuBind::Map)
                .ok_or_else(bad),
            "mask_gpu" => gpu_list(arg, |m| {
                let hex = m
                    .strip_prefix("0x")
                    .or_else(|| m.strip_prefix("0X"))
                    .unwrap_or(m);
                u64::from_str_radix(hex, 16).ok().filter(|m| *m != 0)
            })
            .map(GpuBind::Mask)
            .ok_or_else(bad),
            _ => Err(bad()),
        }
    }
}

impl Export {
    /// `--export`'s value: `ALL`, `NONE`, or `[ALL,]VAR[=value],…`.
    pub fn parse(value: &str) -> Export {
        let mut export = Export {
            all: false,
            vars: Vec::new(),
        };
        for item in value.split(',').filter(|i| !i.is_empty()) {
            match item {
                "ALL" => export.all = true,
                "NONE" => export.all = false,
                _ => match item.split_once('=') {
                    Some((k, v)) => export.vars.push((k.to_string(), Some(v.to_string()))),
                    None => export.vars.push((item.to_string(), None)),
                },
            }
        }
        export
    }
}

impl SrunOptions {
    /// Parse srun's arguments (without the program's name).
    pub fn parse(args: &[String]) -> Result<SrunOptions, OptionError> {
        let mut o = SrunOptions::default();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            if arg == "--" {
                o.command = args[i + 1..].to_vec();
                break;
            }
            if let Some(long) = arg.strip_prefix("--") {
                let (name, attached) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                let Some(&(full, _, arity)) = find_long(name) else {
                    // Unknown: accepted; its value only if attached.
                    o.ignored.push(format!("--{name}"));
                    i += 1;
                    continue;
                };
                let value = match (arity, attached) {
                    (Arity::Flag, Some(_)) => {
                        return Err(format!("option '--{full}' doesn't allow an argument"))
                    }
                    (Arity::Flag, None) | (Arity::Optional, None) => None,
                    (_, Some(v)) => Some(v),
                    (Arity::Value, None) => {
                        i += 1;
                        Some(
                            args.get(i)
                                .cloned()
                                .ok_or_else(|| format!("option '--{full}' requires an argument"))?,
                        )
                    }
                };
                o.set(full, value)?;
                i += 1;
                continue;
            }
            if arg.len() > 1 && arg.starts_with('-') {
                // Grouped short options: flags, then at most one taking a value.
                let letters: Vec<char> = arg[1..].chars().collect();
                let mut j = 0;
                while j < letters.len() {
                    let c = letters[j];
                    let Some(&(full, _, arity)) = OPTIONS.iter().find(|(_, s, _)| *s == Some(c))
                    else {
                        o.ignored.push(format!("-{c}"));
                        j += 1;
                        continue;
                    };
                    let rest: String = letters[j + 1..].iter().collect();
                    let value =
                        match arity {
                            Arity::Flag => None,
                            Arity::Optional => (!rest.is_empty()).then_some(rest),
                            Arity::Value if !rest.is_empty() => Some(rest),
                            Arity::Value => {
                                i += 1;
                                Some(args.get(i).cloned().ok_or_else(|| {
                                    format!("option requires an argument -- '{c}'")
                                })?)
                            }
                        };
                    let consumed_rest = value.is_some() && arity != Arity::Flag;
                    o.set(full, value)?;
                    if consumed_rest {
                        break;
                    }
                    j += 1;
                }
                i += 1;
                continue;
            }
            o.command = args[i..].to_vec();
            break;
        }
        Ok(o)
    }

    /// Apply one option by its long name.
    fn set(&mut self, name: &'static str, value: Option<String>) -> Result<(), OptionError> {
        if value.as_ref().is_some_and(|v| v.len() > MAX_VALUE_BYTES) {
            return Err(format!(
                "--{name}: the value is longer than {MAX_VALUE_BYTES} bytes"
            ));
        }
        let as_word = || match &value {
            Some(v) => format!("--{name}={v}"),
            None => format!("--{name}"),
        };
        if ALLOCATION_ONLY.contains(&name) {
            self.allocation.push((name, value.clone()));
        } else if ALLOCATION_AND_STEP.contains(&name) {
            self.allocation.push((name, value.clone()));
            self.step_words.push(as_word());
        } else if !matches!(name, "pty" | "help" | "usage") {
            self.step_words.push(as_word());
        }
        let v = value.unwrap_or_default();
        match name {
            "pty" => self.pty = true,
            "help" | "usage" => self.help = true,
            "ntasks" => self.ntasks = Some(number(name, &v)?),
            "nodes" => {
                // `-N 1` or `-N 1-1`: one node is all a job of the internal
                // scheduler has.
                let first = v.split('-').next().unwrap_or_default();
                self.nodes = Some(number(name, first)?);
            }
            "ntasks-per-node" => self.ntasks_per_node = Some(number(name, &v)?),
            "cpus-per-task" => self.cpus_per_task = Some(number(name, &v)?),
            "gpus-per-task" => {
                // `--gpus-per-task=[type:]N`.
                let count = v.rsplit(':').next().unwrap_or_default();
                self.gpus_per_task = Some(gpu_count(name, count)?);
            }
            "gpu-bind" => self.gpu_bind = GpuBind::parse(&v)?,
            "label" => self.label = true,
            "kill-on-bad-exit" => self.kill_on_bad_exit = v.is_empty() || v != "0",
            "overcommit" => self.overcommit = true,
            "export" => self.export = Export::parse(&v),
            "output" => self.output = Some(v),
            "error" => self.error = Some(v),
            "input" => self.input = Some(v),
            "job-name" => self.job_name = Some(v),
            "chdir" => self.chdir = Some(v),
            // Accepted as they are: what they ask holds on one node already, or
            // changes nothing here.
            "unbuffered" | "cpu-bind" | "cpu_bind" | "mpi" | "exact" | "overlap" | "whole"
            | "quiet" | "verbose" | "exclusive" | "join" => {}
            other => self.ignored.push(format!("--{other}")),
        }
        Ok(())
    }
}

/// An option by its long name or an unambiguous prefix of it (getopt_long).
fn find_long(name: &str) -> Option<&'static (&'static str, Option<char>, Arity)> {
    if let Some(exact) = OPTIONS.iter().find(|(n, _, _)| *n == name) {
        return Some(exact);
    }
    let mut matching = OPTIONS.iter().filter(|(n, _, _)| n.starts_with(name));
    let first = matching.next()?;
    matching.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> SrunOptions {
        let args: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        SrunOptions::parse(&args).expect("parses")
    }

    #[test]
    fn options_stop_at_the_command() {
        let o = parse(&[
            "-n",
            "4",
            "--gpus-per-task=1",
            "-l",
            "python",
            "-c",
            "print(1)",
        ]);
        assert_eq!(o.ntasks, Some(4));
        assert_eq!(o.gpus_per_task, Some(1));
        assert!(o.label);
        assert_eq!(o.command, ["python", "-c", "print(1)"]);
        let o = parse(&["-n4", "-lK", "--", "-weird"]);
        assert_eq!(o.ntasks, Some(4));
        assert!(o.label && o.kill_on_bad_exit);
        assert_eq!(o.command, ["-weird"]);
        let o = parse(&[
            "--ntasks",
            "2",
            "--nodes=1",
            "-c2",
            "--ntasks-per-node=2",
            "hostname",
        ]);
        assert_eq!(
            (o.ntasks, o.nodes, o.cpus_per_task),
            (Some(2), Some(1), Some(2))
        );
        assert_eq!(o.ntasks_per_node, Some(2));
        let o = parse(&["--gpus-per-t=3", "--kill-on-bad-exit=0", "true"]);
        assert_eq!(o.gpus_per_task, Some(3), "an unambiguous prefix");
        assert!(!o.kill_on_bad_exit);
    }

    #[test]
    fn others_are_accepted_and_noted() {
        let o = parse(&[
            "--mpi=pmix",
            "--cpu-bind=cores",
            "-u",
            "--exact",
            "--overlap",
            "--mem=4G",
            "-t",
            "10",
            "--frobnicate",
            "-J",
            "train",
            "-o",
            "out-%t",
            "true",
        ]);
        assert_eq!(o.ignored, ["--mem", "--time", "--frobnicate"]);
        assert_eq!(o.job_name.as_deref(), Some("train"));
        assert_eq!(o.output.as_deref(), Some("out-%t"));
        assert_eq!(o.command, ["true"]);
    }

    #[test]
    fn bad_values_are_refused_like_srun() {
        let err = |words: &[&str]| {
            let args: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            SrunOptions::parse(&args).expect_err("refused")
        };
        assert_eq!(
            err(&["-n", "zero", "true"]),
            "invalid --ntasks argument: zero"
        );
        assert_eq!(err(&["-n", "0", "true"]), "invalid --ntasks argument: 0");
        assert_eq!(
            err(&["--gpu-bind=sideways", "true"]),
            "invalid --gpu-bind argument: sideways"
        );
        assert!(err(&["-n"]).contains("requires an argument"));
        assert!(err(&["--label=yes", "x"]).contains("doesn't allow"));
        assert!(err(&["--gpus-per-task=100000", "x"]).contains("gpus-per-task"));
        let long = format!("--job-name={}", "x".repeat(9000));
        assert!(err(&[&long, "x"]).contains("8192"));
    }

    #[test]
    fn gpu_bind_reads_slurms_forms() {
        assert_eq!(GpuBind::parse("closest"), Ok(GpuBind::Closest));
        assert_eq!(GpuBind::parse("verbose,none"), Ok(GpuBind::None));
        assert_eq!(GpuBind::parse("single:2"), Ok(GpuBind::Single(2)));
        assert_eq!(GpuBind::parse("per_task:1"), Ok(GpuBind::PerTask(1)));
        assert_eq!(
            GpuBind::parse("map_gpu:1,0*2"),
            Ok(GpuBind::Map(vec![1, 0, 0]))
        );
        assert_eq!(
            GpuBind::parse("mask_gpu:0x3,0xC"),
            Ok(GpuBind::Mask(vec![3, 12]))
        );
        for bad in [
            "map_gpu:",
            "map_gpu:a",
            "mask_gpu:0",
            "single:0",
            "map_gpu:0*5000",
            "x:1",
        ] {
            assert!(GpuBind::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn export_lists_read_like_sbatchs() {
        assert_eq!(Export::parse("ALL"), Export::default());
        let e = Export::parse("NONE");
        assert!(!e.all && e.vars.is_empty());
        let e = Export::parse("ALL,FOO=1,BAR");
        assert!(e.all);
        assert_eq!(
            e.vars,
            [("FOO".into(), Some("1".into())), ("BAR".into(), None)]
        );
    }
}
