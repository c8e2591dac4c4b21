//! `atrium squeue`: jobs not yet over, in Slurm's default columns.

use clap::{ArgAction, Args};

use super::api::JobInfo;
use super::format::{squeue_header, squeue_line};
use super::{connect, failed, print_lines, split_list};

const CMD: &str = "squeue";

#[derive(Debug, Clone, Default, Args)]
#[command(disable_help_flag = true)]
pub struct SqueueArgs {
    /// Only the token's own jobs.
    #[arg(long)]
    pub me: bool,
    /// Only these users' jobs (comma-separated).
    #[arg(short = 'u', long = "user", conflicts_with = "me")]
    pub user: Option<String>,
    /// Only jobs in these states (names or codes, comma-separated, or `all`).
    #[arg(short = 't', long = "states")]
    pub states: Option<String>,
    /// Only these jobs (comma-separated ids; an array's id matches its tasks).
    #[arg(short = 'j', long = "jobs")]
    pub jobs: Option<String>,
    /// Only jobs in this partition.
    #[arg(short = 'p', long)]
    pub partition: Option<String>,
    /// Leave out the header line.
    #[arg(short = 'h', long)]
    pub noheader: bool,
    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}

/// The `GET /jobs` query for one user (or none). With `-j` and no `-t` every state
/// is asked for, as squeue shows a named job whatever its state.
pub fn query(args: &SqueueArgs, user: Option<&str>) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    if let Some(user) = user {
        q.push(("user", user.to_string()));
    }
    match &args.states {
        Some(states) if states.eq_ignore_ascii_case("all") => q.push(("state", "all".into())),
        Some(states) => q.push(("state", states.to_ascii_uppercase())),
        None if args.jobs.is_some() => q.push(("state", "all".into())),
        None => {}
    }
    if let Some(partition) = &args.partition {
        q.push(("partition", partition.clone()));
    }
    q
}

/// Whether `job` is one of `ids` (`17` matches the job and all its array tasks,
/// `17_3` that task only).
pub fn job_matches(job: &JobInfo, ids: &[String]) -> bool {
    ids.iter()
        .any(|id| *id == job.id || *id == job.display_id || *id == job.job_id.to_string())
}

pub async fn run(args: SqueueArgs) -> anyhow::Result<()> {
    let portal = connect(CMD)?;
    let users: Vec<Option<String>> = if args.me {
        vec![Some(portal.username().await.map_err(failed(CMD))?)]
    } else if let Some(users) = &args.user {
        split_list(users).into_iter().map(Some).collect()
    } else {
        vec![None]
    };
    let ids = args.jobs.as_deref().map(split_list);
    let mut jobs = Vec::new();
    for user in &users {
        let found = portal
            .jobs(&query(&args, user.as_deref()))
            .await
            .map_err(failed(CMD))?;
        jobs.extend(found);
    }
    let header = (!args.noheader).then(squeue_header);
    let lines = jobs
        .iter()
        .filter(|j| ids.as_ref().is_none_or(|ids| job_matches(j, ids)))
        .map(squeue_line);
    print_lines(header.into_iter().chain(lines))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SqueueArgs,
    }

    fn parse(words: &[&str]) -> SqueueArgs {
        Wrapper::try_parse_from(std::iter::once("squeue").chain(words.iter().copied()))
            .expect("parse")
            .args
    }

    #[test]
    fn the_default_query_asks_for_active_jobs() {
        let args = parse(&[]);
        assert!(query(&args, None).is_empty());
        assert!(!args.noheader);
    }

    #[test]
    fn filters_become_query_parameters() {
        let args = parse(&["-t", "pending,r", "-p", "gpu", "-h"]);
        assert!(args.noheader, "-h means no header, as in squeue");
        assert_eq!(
            query(&args, Some("alice")),
            [
                ("user", "alice".to_string()),
                ("state", "PENDING,R".into()),
                ("partition", "gpu".into())
            ]
        );
        assert_eq!(
            query(&parse(&["-t", "ALL"]), None),
            [("state", "all".to_string())]
        );
        assert_eq!(
            query(&parse(&["-j", "17"]), None),
            [("state", "all".to_string())]
        );
        assert!(Wrapper::try_parse_from(["squeue", "--me", "-u", "bob"]).is_err());
    }

    #[test]
    fn job_ids_match_arrays_and_their_tasks() {
        let task = JobInfo {
            id: "17_3".into(),
            job_id: 17,
            display_id: "17_3".into(),
            ..JobInfo::default()
        };
        assert!(job_matches(&task, &["17".into()]));
        assert!(job_matches(&task, &["17_3".into()]));
        assert!(!job_matches(&task, &["17_4".into()]));
        assert!(!job_matches(&task, &["1".into(), "173".into()]));
    }
}
