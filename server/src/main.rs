//! The `atrium` binary: parse the command line and hand over to the library. Run
//! through a symlink named `sbatch`, `squeue`, `sinfo`, `scancel`, `sacct`, `srun` or
//! `scontrol`, it is `atrium <that command>`.

use clap::Parser;

/// glibc's allocator raises its mmap threshold to the size of the largest block freed,
/// so after one password hash (argon2's 19 MiB) such blocks stay in the heap for good:
/// the portal's resident memory grew by tens of MiB with the first logins. A fixed
/// threshold gives them back at once.
const MALLOC_TUNABLE: &str = "glibc.malloc.mmap_threshold=131072";

/// Run the portal again with [`MALLOC_TUNABLE`] in `GLIBC_TUNABLES` (read by glibc at
/// start only), unless it is there. Same process, same descriptors; nothing has run yet.
fn with_allocator_tuned() {
    use std::os::unix::process::CommandExt;
    let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if current.contains("glibc.malloc.mmap_threshold") {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let tunables = if current.is_empty() {
        MALLOC_TUNABLE.to_string()
    } else {
        format!("{current}:{MALLOC_TUNABLE}")
    };
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let err = std::process::Command::new(exe)
        .arg0(argv0)
        .args(args)
        .env("GLIBC_TUNABLES", tunables)
        .exec();
    // Not fatal: the portal runs, with more memory.
    eprintln!("atrium: could not tune the allocator ({err}); going on");
}

fn main() -> std::process::ExitCode {
    let args = atrium_client::dispatch_argv0(std::env::args_os().collect());
    let cli = atrium::cli::Cli::parse_from(args);
    if cli.is_portal_side() {
        // Before anything is created: the database, keys and logs are the portal's alone.
        atrium::privilege::restrict_umask();
    }
    if matches!(cli.command, atrium::cli::Command::Serve) {
        with_allocator_tuned();
    }
    // One TLS provider for the whole process (the listener, LDAP, the client), chosen
    // here rather than guessed from which of rustls's features a build happened to
    // unify: with two enabled, rustls refuses to pick one and the first LDAP
    // connection without a CA file panics. An `Err` means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
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
            if let Some(exit) = e.downcast_ref::<atrium_client::CommandExit>() {
                // In the command's own words, with its own status.
                for line in &exit.stdout {
                    println!("{line}");
                }
                for line in &exit.stderr {
                    eprintln!("{line}");
                }
                return std::process::ExitCode::from(exit.status);
            }
            if let Some(exit) = e.downcast_ref::<atrium_client::srun::StepExit>() {
                // srun said what failed; its status is its tasks'.
                return std::process::ExitCode::from(exit.0);
            }
            match e.downcast_ref::<atrium_client::SlurmError>() {
                // Already in Slurm's words: `sbatch: error: …`.
                Some(slurm) => eprintln!("{slurm}"),
                None => eprintln!("atrium: {e:#}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}
