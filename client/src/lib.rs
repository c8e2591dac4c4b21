//! The Slurm-style command line client: `atrium sbatch|squeue|sinfo|scancel|sacct|seff`,
//! `scontrol` (`show hostnames`, `requeue|hold|release`) and inside a job `srun`
//! (also reachable through symlinks named after those commands) talking to a
//! portal's `/api/v1` with a personal token (a job's own steps and requeue: with its
//! job token). Owns: argument handling, the HTTP
//! calls ([`api`]), Slurm's text output ([`format`]), which command a program's name
//! means ([`dispatch_argv0`]) and Slurm's way of reporting failures ([`SlurmError`]).
//! Must not touch the database or the configuration file: everything goes through
//! the API, as for any user. A crate of its own that does not depend on the server
//! crate (`atrium`), so the compiler holds it to that; the server's command line
//! (`atrium::cli`) parses these commands' arguments and calls their `run`.

pub mod api;
pub mod campaign;
pub mod columns;
pub mod getopt;
pub mod interactive;
pub mod print_fields;
pub mod sacct;
pub mod sacct_fields;
pub mod salloc;
pub mod sbatch;
pub mod scancel;
pub mod scontrol;
pub mod seff;
pub mod sinfo;
pub mod sprio;
pub mod squeue;
pub mod srun;
pub mod sshare;
pub mod sstat;
pub mod times;

use std::ffi::{OsStr, OsString};
use std::path::Path;

use api::{CallError, Portal, Settings};

/// The commands a symlink to `atrium` may be named after.
pub const SLURM_COMMANDS: [&str; 12] = [
    "sbatch", "squeue", "sinfo", "scancel", "sacct", "srun", "scontrol", "seff", "salloc", "sprio",
    "sshare", "sstat",
];

/// The Slurm command a program run as `program` (its `argv[0]`: a path or a name)
/// is, when its file name is one of [`SLURM_COMMANDS`].
pub fn slurm_command(program: &OsStr) -> Option<&'static str> {
    let name = Path::new(program).file_name()?.to_str()?;
    SLURM_COMMANDS.into_iter().find(|c| *c == name)
}

/// A Slurm-style command's arguments as typed, read by the command itself as
/// getopt_long would (`crate::getopt`), not by the server's command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RawArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// The version line the Slurm-style commands print for `--version`, as Slurm's do
/// (`slurm-wlm 22.05.8`): the Slurm they follow, and atrium's own version.
pub const VERSION_LINE: &str = concat!("slurm 22.05.8 (atrium ", env!("CARGO_PKG_VERSION"), ")");

static INVOKED_AS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The program's name as it was typed (`squeue`, `/usr/lib/atrium/bin/squeue`), as
/// getopt's messages name it; `command` when run as `atrium squeue`.
pub fn invoked_as(command: &str) -> String {
    INVOKED_AS
        .get()
        .cloned()
        .unwrap_or_else(|| command.to_string())
}

/// How a Slurm-style command ends when it does not succeed: lines for standard error,
/// already in the command's words, lines for standard output (some usage errors print
/// the usage there), and its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandExit {
    pub stderr: Vec<String>,
    pub stdout: Vec<String>,
    pub status: u8,
}

impl CommandExit {
    pub fn new(stderr: Vec<String>, status: u8) -> CommandExit {
        CommandExit {
            stderr,
            stdout: Vec::new(),
            status,
        }
    }

    pub fn with_stdout(mut self, stdout: Vec<String>) -> CommandExit {
        self.stdout = stdout;
        self
    }
}

impl std::fmt::Display for CommandExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.stderr.join("\n"))
    }
}

impl std::error::Error for CommandExit {}

/// When the program runs as `sbatch` (a symlink to `atrium`), the arguments of
/// `atrium sbatch …`; otherwise the arguments unchanged. The server's command line
/// parses the result.
pub fn dispatch_argv0(args: Vec<OsString>) -> Vec<OsString> {
    let name = args.first().and_then(|a| slurm_command(a));
    if name.is_some() {
        if let Some(typed) = args.first().and_then(|a| a.to_str()) {
            let _ = INVOKED_AS.set(typed.to_string());
        }
    }
    match name {
        Some(command) => {
            let mut out = Vec::with_capacity(args.len() + 1);
            out.push(OsString::from("atrium"));
            out.push(OsString::from(command));
            out.extend(args.into_iter().skip(1));
            out
        }
        None => args,
    }
}

/// A failure reported the Slurm way: `<command>: error: <message>` per line on
/// standard error, exit status 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmError {
    pub command: &'static str,
    pub messages: Vec<String>,
}

impl SlurmError {
    pub fn new(command: &'static str, message: impl Into<String>) -> Self {
        SlurmError {
            command,
            messages: vec![message.into()],
        }
    }
}

impl std::fmt::Display for SlurmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, message) in self.messages.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}: error: {message}", self.command)?;
        }
        Ok(())
    }
}

impl std::error::Error for SlurmError {}

/// Attach the command's name to a failed call.
pub(crate) fn failed(command: &'static str) -> impl Fn(CallError) -> SlurmError {
    move |e| SlurmError::new(command, e.message)
}

/// The portal named by the environment, with the caller's token.
pub(crate) fn connect(command: &'static str) -> Result<Portal, SlurmError> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let settings = Settings::load(|name| std::env::var(name).ok(), home.as_deref())
        .map_err(failed(command))?;
    Portal::new(&settings).map_err(failed(command))
}

/// Comma-separated list items, trimmed, empty ones dropped.
pub(crate) fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A command line getopt refused, as glibc and Slurm's commands say it: the error, then
/// where to read the usage; exit status 1.
pub(crate) fn usage_error(command: &'static str, e: &getopt::GetoptError) -> CommandExit {
    CommandExit::new(
        vec![
            e.line(&invoked_as(command)),
            format!("Try \"{command} --help\" for more information"),
        ],
        1,
    )
}

/// The items of every comma-separated list in `values` (a repeated option's), in
/// order.
pub(crate) fn split_lists<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    values.into_iter().flat_map(split_list).collect()
}

/// Print `lines` on standard output through one buffer (stdout alone flushes every
/// line: a thousand-job `squeue` would be a thousand writes). A closed pipe
/// (`squeue | head`) ends the output quietly.
pub(crate) fn print_lines<L: std::fmt::Display>(
    lines: impl IntoIterator<Item = L>,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let written = lines
        .into_iter()
        .try_for_each(|line| writeln!(out, "{line}"))
        .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn symlinks_named_after_slurm_commands_run_that_subcommand() {
        assert_eq!(
            dispatch_argv0(args(&["/usr/local/bin/sbatch", "-p", "gpu", "job.sh"])),
            args(&["atrium", "sbatch", "-p", "gpu", "job.sh"])
        );
        assert_eq!(
            dispatch_argv0(args(&["squeue"])),
            args(&["atrium", "squeue"])
        );
        assert_eq!(
            dispatch_argv0(args(&["./scancel", "17"])),
            args(&["atrium", "scancel", "17"])
        );
        for name in ["sinfo", "sacct"] {
            assert_eq!(dispatch_argv0(args(&[name]))[1], name);
        }
    }

    #[test]
    fn a_program_name_means_a_command_by_its_file_name() {
        assert_eq!(slurm_command(OsStr::new("/opt/bin/sacct")), Some("sacct"));
        assert_eq!(slurm_command(OsStr::new("squeue")), Some("squeue"));
        assert_eq!(slurm_command(OsStr::new("/usr/bin/atrium")), None);
        assert_eq!(slurm_command(OsStr::new("")), None);
    }

    #[test]
    fn other_names_are_left_alone() {
        for argv in [
            args(&["/usr/bin/atrium", "squeue"]),
            args(&["atrium-squeue"]),
            args(&["sbatch.sh"]),
            args(&[]),
        ] {
            assert_eq!(dispatch_argv0(argv.clone()), argv);
        }
    }

    #[test]
    fn errors_print_like_slurm() {
        let e = SlurmError {
            command: "scancel",
            messages: vec!["first".into(), "second".into()],
        };
        assert_eq!(
            e.to_string(),
            "scancel: error: first\nscancel: error: second"
        );
        assert_eq!(split_list(" 1, 2,,3 "), ["1", "2", "3"]);
    }
}
