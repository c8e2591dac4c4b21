//! `atrium sinfo`: partitions and their nodes by state, in Slurm's default columns.

use clap::{ArgAction, Args};

use super::format::sinfo_lines;
use super::{connect, failed, print_lines, split_list, SlurmError};

const CMD: &str = "sinfo";

#[derive(Debug, Clone, Default, Args)]
#[command(disable_help_flag = true)]
pub struct SinfoArgs {
    /// Only these partitions (comma-separated).
    #[arg(short = 'p', long)]
    pub partition: Option<String>,
    /// Leave out the header line.
    #[arg(short = 'h', long)]
    pub noheader: bool,
    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}

pub async fn run(args: SinfoArgs) -> anyhow::Result<()> {
    let portal = connect(CMD)?;
    let mut partitions = portal.partitions().await.map_err(failed(CMD))?;
    if let Some(wanted) = args.partition.as_deref().map(split_list) {
        partitions.retain(|p| wanted.contains(&p.name));
    }
    let lines = sinfo_lines(&partitions, !args.noheader).map_err(|e| SlurmError::new(CMD, e))?;
    print_lines(lines)?;
    Ok(())
}
