//! `salloc`: an allocation with a command (by default the user's shell) running in
//! it on a terminal of its own, as Slurm's `salloc` with `use_interactive_step`
//! does: the shell runs on the allocated node, inside the job, with the job's GPUs
//! and Slurm's variables, and `srun` in it runs steps of the job. The options are
//! sbatch's (one table, [`CommandLine::parse`]); the allocation ends when the command
//! exits, and salloc exits with its exit code.
//! Must not touch: the job's files (the portal writes none for an interactive job).

use clap::Args;

use super::sbatch::{job_environment, request_body, CommandLine};
use super::{connect, interactive, SlurmError};

const CMD: &str = "salloc";

/// Everything after `salloc`, read by [`CommandLine::parse`].
#[derive(Debug, Clone, Default, Args)]
pub struct SallocArgs {
    /// salloc's options, then the command and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub words: Vec<String>,
}

/// salloc's own options that change nothing here: `--bell`, `--no-bell` (the
/// terminal's bell when the allocation is granted).
const NOTHING_HERE: [&str; 2] = ["--bell", "--no-bell"];

/// The options sbatch has and salloc has not.
const NOT_SALLOC: [&str; 9] = [
    "array",
    "wrap",
    "output",
    "error",
    "input",
    "open-mode",
    "parsable",
    "test-only",
    "wait",
];

pub fn help_text() -> String {
    "Usage: salloc [OPTIONS...] [command [args...]]\n\n\
     Allocates what the options ask for (sbatch's options: salloc --time, --partition,\n\
     --gres, --gpus, --cpus-per-task, --mem, --account, --qos …; `sbatch --help` lists\n\
     them) and runs the command in the allocation on a terminal of its own: by default\n\
     your shell ($SHELL). `srun` in it runs steps of the job. The allocation ends when\n\
     the command exits; salloc exits with its exit code.\n"
        .to_string()
}

/// The command line read, and the job's request.
pub fn request(
    words: &[String],
    shell: Option<String>,
    environment: std::collections::BTreeMap<String, String>,
    cwd: &str,
) -> Result<Option<serde_json::Value>, SlurmError> {
    let words: Vec<String> = words
        .iter()
        .take_while(|w| *w != "--")
        .filter(|w| !NOTHING_HERE.contains(&w.as_str()))
        .chain(words.iter().skip_while(|w| *w != "--"))
        .cloned()
        .collect();
    let cl = CommandLine::parse(&words).map_err(|mut e| {
        e.command = CMD;
        e
    })?;
    if cl.help || cl.usage {
        return Ok(None);
    }
    if let Some((name, _)) = cl.options.iter().find(|(n, _)| NOT_SALLOC.contains(n)) {
        return Err(SlurmError::new(
            CMD,
            format!("unrecognized option '--{name}'"),
        ));
    }
    if cl.wrap.is_some() || cl.parsable || cl.wait || cl.test_only {
        return Err(SlurmError::new(
            CMD,
            "--wrap, --parsable, --wait and --test-only are sbatch's, not salloc's",
        ));
    }
    let mut command: Vec<String> = cl
        .script
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .chain(cl.script_args.iter().cloned())
        .collect();
    if command.is_empty() {
        command.push(
            shell
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/sh".into()),
        );
    }
    let mut body = request_body(&cl, Some(interactive::SCRIPT.to_string()), environment, cwd);
    if !cl.options.iter().any(|(n, _)| *n == "job-name") {
        body["options"]["job-name"] = interactive::default_name(&command).into();
    }
    body["arguments"] = command.into();
    body["interactive"] = true.into();
    Ok(Some(body))
}

pub async fn run(args: SallocArgs) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()
        .map_err(|e| SlurmError::new(CMD, format!("cannot read the current directory: {e}")))?;
    let Some(body) = request(
        &args.words,
        std::env::var("SHELL").ok(),
        job_environment(std::env::vars_os()),
        &cwd.to_string_lossy(),
    )?
    else {
        print!("{}", help_text());
        return Ok(());
    };
    let portal = connect(CMD)?;
    let (id, code) = interactive::run(CMD, &portal, &body, true).await?;
    eprintln!("salloc: Relinquishing job allocation {id}");
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_command_defaults_to_the_shell_and_names_the_job() {
        let body = request(
            &words(&["-p", "gpu", "--gres=gpu:1", "-t", "2:00:00", "--bell"]),
            Some("/bin/bash".into()),
            Default::default(),
            "/home/a",
        )
        .expect("parses")
        .expect("a request");
        assert_eq!(body["arguments"], serde_json::json!(["/bin/bash"]));
        assert_eq!(body["interactive"], true);
        assert_eq!(body["script"], interactive::SCRIPT);
        assert_eq!(body["options"]["job-name"], "bash");
        assert_eq!(body["options"]["partition"], "gpu");
        assert_eq!(body["options"]["time"], "2:00:00");
        let body = request(
            &words(&["-J", "nb", "python3", "-i"]),
            None,
            Default::default(),
            "/",
        )
        .expect("parses")
        .expect("a request");
        assert_eq!(body["arguments"], serde_json::json!(["python3", "-i"]));
        assert_eq!(body["options"]["job-name"], "nb");
    }

    #[test]
    fn sbatchs_own_options_are_refused_in_salloc_words() {
        for w in [&["--array=1-3"][..], &["-o", "x.out"], &["--wrap", "true"]] {
            let e = request(&words(w), None, Default::default(), "/").expect_err("refused");
            assert_eq!(e.command, "salloc", "{w:?}");
        }
        let e = request(&words(&["--colour"]), None, Default::default(), "/").expect_err("unknown");
        assert_eq!(
            e.to_string(),
            "salloc: error: unrecognized option '--colour'"
        );
        assert!(request(&words(&["--help"]), None, Default::default(), "/")
            .expect("help")
            .is_none());
    }
}
