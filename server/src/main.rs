//! The `atrium` binary: parse the command line and hand over to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = atrium::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("atrium: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(atrium::cli::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("atrium: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
