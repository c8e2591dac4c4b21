//! `atrium sbatch [OPTIONS] [FILE]`: submit a batch script (FILE, or standard input)
//! or a `--wrap` command. Command-line options go to the portal as `options` under
//! their long names (`job-name`, `gres`, `hold` …), where they override the script's
//! `#SBATCH` lines; the portal checks their values.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Map, Value};

use super::{connect, failed, SlurmError};

const CMD: &str = "sbatch";

#[derive(Debug, Clone, Default, Args)]
pub struct SbatchArgs {
    /// Job name.
    #[arg(short = 'J', long)]
    pub job_name: Option<String>,
    /// Partition.
    #[arg(short = 'p', long)]
    pub partition: Option<String>,
    /// Time limit (minutes, H:MM:SS, D-HH:MM:SS, UNLIMITED).
    #[arg(short = 't', long)]
    pub time: Option<String>,
    /// GPUs for the whole job ([type:]N).
    #[arg(short = 'G', long)]
    pub gpus: Option<String>,
    /// Generic resources per node (gpu[:type]:N, shard:N).
    #[arg(long)]
    pub gres: Option<String>,
    /// GPUs per node ([type:]N).
    #[arg(long)]
    pub gpus_per_node: Option<String>,
    /// Nodes (min[-max]).
    #[arg(short = 'N', long)]
    pub nodes: Option<String>,
    /// Tasks.
    #[arg(short = 'n', long)]
    pub ntasks: Option<String>,
    /// Tasks per node.
    #[arg(long)]
    pub ntasks_per_node: Option<String>,
    /// CPUs per task.
    #[arg(short = 'c', long)]
    pub cpus_per_task: Option<String>,
    /// CPUs per GPU.
    #[arg(long)]
    pub cpus_per_gpu: Option<String>,
    /// Memory per node (e.g. 16G).
    #[arg(long)]
    pub mem: Option<String>,
    /// Memory per CPU.
    #[arg(long)]
    pub mem_per_cpu: Option<String>,
    /// Memory per GPU.
    #[arg(long)]
    pub mem_per_gpu: Option<String>,
    /// Job array indices (e.g. 0-9%2).
    #[arg(short = 'a', long)]
    pub array: Option<String>,
    /// Dependencies (e.g. afterok:17).
    #[arg(short = 'd', long)]
    pub dependency: Option<String>,
    /// Standard output file pattern.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Standard error file pattern.
    #[arg(short = 'e', long)]
    pub error: Option<String>,
    /// Working directory of the job.
    #[arg(short = 'D', long)]
    pub chdir: Option<String>,
    /// Environment to export (ALL, NONE, or a list).
    #[arg(long)]
    pub export: Option<String>,
    /// Account to charge.
    #[arg(short = 'A', long)]
    pub account: Option<String>,
    /// Quality of service.
    #[arg(short = 'q', long)]
    pub qos: Option<String>,
    /// Start no earlier than this time.
    #[arg(short = 'b', long)]
    pub begin: Option<String>,
    /// Node features required.
    #[arg(short = 'C', long)]
    pub constraint: Option<String>,
    /// Nodes to run on.
    #[arg(short = 'w', long)]
    pub nodelist: Option<String>,
    /// Nodes not to run on.
    #[arg(short = 'x', long)]
    pub exclude: Option<String>,
    /// A comment.
    #[arg(long)]
    pub comment: Option<String>,
    /// Lower the job's priority.
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<String>,
    /// Submit the job held.
    #[arg(short = 'H', long)]
    pub hold: bool,
    /// Whole nodes.
    #[arg(long)]
    pub exclusive: bool,
    /// The job may be requeued.
    #[arg(long, conflicts_with = "no_requeue")]
    pub requeue: bool,
    /// The job must not be requeued.
    #[arg(long)]
    pub no_requeue: bool,
    /// Run this command (wrapped in a shell script) instead of a script file.
    #[arg(long, conflicts_with = "script")]
    pub wrap: Option<String>,
    /// Print only the job id.
    #[arg(long)]
    pub parsable: bool,
    /// The batch script (default: standard input).
    pub script: Option<PathBuf>,
}

impl SbatchArgs {
    /// The command-line options as the API's `options`: long names, strings for
    /// values and `true` for flags.
    pub fn options(&self) -> Map<String, Value> {
        let values = [
            ("job-name", &self.job_name),
            ("partition", &self.partition),
            ("time", &self.time),
            ("gpus", &self.gpus),
            ("gres", &self.gres),
            ("gpus-per-node", &self.gpus_per_node),
            ("nodes", &self.nodes),
            ("ntasks", &self.ntasks),
            ("ntasks-per-node", &self.ntasks_per_node),
            ("cpus-per-task", &self.cpus_per_task),
            ("cpus-per-gpu", &self.cpus_per_gpu),
            ("mem", &self.mem),
            ("mem-per-cpu", &self.mem_per_cpu),
            ("mem-per-gpu", &self.mem_per_gpu),
            ("array", &self.array),
            ("dependency", &self.dependency),
            ("output", &self.output),
            ("error", &self.error),
            ("chdir", &self.chdir),
            ("export", &self.export),
            ("account", &self.account),
            ("qos", &self.qos),
            ("begin", &self.begin),
            ("constraint", &self.constraint),
            ("nodelist", &self.nodelist),
            ("exclude", &self.exclude),
            ("comment", &self.comment),
            ("nice", &self.nice),
        ];
        let flags = [
            ("hold", self.hold),
            ("exclusive", self.exclusive),
            ("requeue", self.requeue),
            ("no-requeue", self.no_requeue),
        ];
        let mut options = Map::new();
        for (name, value) in values {
            if let Some(value) = value {
                options.insert(name.into(), Value::String(value.clone()));
            }
        }
        for (name, set) in flags {
            if set {
                options.insert(name.into(), Value::Bool(true));
            }
        }
        options
    }
}

/// Whether `name` can be an environment variable a shell exports.
fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The environment sent with the job, as sbatch propagates it: every variable with
/// a valid name and UTF-8 value, except atrium's own (`ATRIUM_TOKEN` and the rest).
pub fn job_environment(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| is_variable_name(k) && !k.starts_with("ATRIUM_"))
        .collect()
}

/// The body of `POST /jobs`.
pub fn request_body(
    args: &SbatchArgs,
    script: Option<String>,
    environment: BTreeMap<String, String>,
    working_directory: &str,
) -> Value {
    let mut body = json!({
        "options": args.options(),
        "environment": environment,
        "working_directory": working_directory,
    });
    match (&args.wrap, script) {
        (Some(wrap), _) => body["wrap"] = Value::String(wrap.clone()),
        (None, Some(script)) => body["script"] = Value::String(script),
        (None, None) => {}
    }
    body
}

/// What sbatch prints once the job is in.
pub fn submitted_line(job_id: u64, parsable: bool) -> String {
    if parsable {
        job_id.to_string()
    } else {
        format!("Submitted batch job {job_id}")
    }
}

fn read_script(args: &SbatchArgs) -> Result<Option<String>, SlurmError> {
    if args.wrap.is_some() {
        return Ok(None);
    }
    let script = match &args.script {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            SlurmError::new(CMD, format!("Unable to open file {}: {e}", path.display()))
        })?,
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| SlurmError::new(CMD, format!("reading standard input: {e}")))?;
            text
        }
    };
    Ok(Some(script))
}

pub async fn run(args: SbatchArgs) -> anyhow::Result<()> {
    let script = read_script(&args)?;
    let cwd = std::env::current_dir()
        .map_err(|e| SlurmError::new(CMD, format!("cannot read the current directory: {e}")))?;
    let body = request_body(
        &args,
        script,
        job_environment(std::env::vars_os()),
        &cwd.to_string_lossy(),
    );
    let portal = connect(CMD)?;
    let submitted = portal.submit(&body).await.map_err(failed(CMD))?;
    println!("{}", submitted_line(submitted.job_id, args.parsable));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SbatchArgs,
    }

    fn parse(words: &[&str]) -> SbatchArgs {
        Wrapper::try_parse_from(std::iter::once("sbatch").chain(words.iter().copied()))
            .expect("parse")
            .args
    }

    #[test]
    fn short_and_long_options_map_to_long_names() {
        let args = parse(&[
            "-J",
            "train",
            "-p",
            "gpu",
            "-t",
            "1:00:00",
            "-G",
            "2",
            "--gres=gpu:a100:1",
            "-c",
            "4",
            "--mem",
            "16G",
            "-a",
            "0-9%2",
            "-d",
            "afterok:12",
            "-o",
            "out-%j",
            "-e",
            "err-%j",
            "-D",
            "/scratch",
            "-H",
            "--export=ALL,FOO=1",
            "-A",
            "lab",
            "-q",
            "high",
            "--begin",
            "now+1hour",
            "--nice=-5",
            "--exclusive",
            "job.sh",
        ]);
        let options = Value::Object(args.options());
        assert_eq!(
            options,
            json!({
                "job-name": "train", "partition": "gpu", "time": "1:00:00", "gpus": "2",
                "gres": "gpu:a100:1", "cpus-per-task": "4", "mem": "16G",
                "array": "0-9%2", "dependency": "afterok:12", "output": "out-%j",
                "error": "err-%j", "chdir": "/scratch", "hold": true,
                "export": "ALL,FOO=1", "account": "lab", "qos": "high",
                "begin": "now+1hour", "nice": "-5", "exclusive": true
            })
        );
        assert_eq!(args.script, Some(PathBuf::from("job.sh")));
    }

    #[test]
    fn no_options_send_an_empty_map() {
        let args = parse(&[]);
        assert!(args.options().is_empty());
        assert_eq!(args.script, None);
    }

    #[test]
    fn wrap_replaces_the_script() {
        let args = parse(&["--wrap", "nvidia-smi", "--parsable"]);
        let body = request_body(&args, None, BTreeMap::new(), "/home/alice");
        assert_eq!(body["wrap"], "nvidia-smi");
        assert!(body.get("script").is_none());
        assert_eq!(body["working_directory"], "/home/alice");
        assert!(Wrapper::try_parse_from(["sbatch", "--wrap", "x", "job.sh"]).is_err());

        let args = parse(&["job.sh"]);
        let body = request_body(&args, Some("#!/bin/sh\n".into()), BTreeMap::new(), "/");
        assert_eq!(body["script"], "#!/bin/sh\n");
        assert!(body.get("wrap").is_none());
    }

    #[test]
    fn the_environment_leaves_out_atrium_variables_and_bad_names() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/alice"),
            ("_private", "1"),
            ("ATRIUM_TOKEN", "atr_secret"),
            ("ATRIUM_URL", "http://x"),
            ("BASH_FUNC_f%%", "() { :; }"),
            ("1ABC", "x"),
            ("A-B", "x"),
            ("", "x"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = job_environment(vars);
        assert_eq!(
            env.keys().map(String::as_str).collect::<Vec<_>>(),
            ["HOME", "PATH", "_private"]
        );
    }

    #[test]
    fn submission_is_announced_like_sbatch() {
        assert_eq!(submitted_line(17, false), "Submitted batch job 17");
        assert_eq!(submitted_line(17, true), "17");
    }
}
