//! The `atrium` binary: parse the command line and hand over to the library. Run
//! through a symlink named `sbatch`, `squeue`, `sinfo`, `scancel` or `sacct`, it is
//! `atrium <that command>`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = atrium::client::dispatch_argv0(std::env::args_os().collect());
    let cli = atrium::cli::Cli::parse_from(args);
    let mut builder = if cli.single_threaded() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("atrium: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(atrium::cli::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<atrium::client::SlurmError>() {
                // Already in Slurm's words: `sbatch: error: …`.
                Some(slurm) => eprintln!("{slurm}"),
                None => eprintln!("atrium: {e:#}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}
