//! `atrium sacct`: jobs from the accounting records (over or not), by default the
//! caller's since local midnight, in Slurm's default columns or those of `--format`.

use clap::Args;
use jiff::{civil, Timestamp, Zoned};

use super::api::{JobInfo, StepInfo};
use super::sacct_fields::{header, line, parse_format, Layout, DEFAULT_FORMAT};
use super::squeue::job_matches;
use super::{connect, failed, print_lines, split_list, SlurmError};

const CMD: &str = "sacct";

#[derive(Debug, Clone, Default, Args)]
pub struct SacctArgs {
    /// Only these jobs (comma-separated ids); without -S, whenever they ran.
    #[arg(short = 'j', long = "jobs")]
    pub jobs: Option<String>,
    /// Jobs since this time (YYYY-MM-DD[THH:MM[:SS]], today, now[-N{seconds|minutes|hours|days|weeks}]).
    #[arg(short = 'S', long = "starttime")]
    pub starttime: Option<String>,
    /// Jobs eligible (submitted) before this time; same formats as -S.
    #[arg(short = 'E', long = "endtime")]
    pub endtime: Option<String>,
    /// Only jobs of these accounts (comma-separated).
    #[arg(short = 'A', long = "accounts")]
    pub accounts: Option<String>,
    /// Only jobs of these partitions (comma-separated).
    #[arg(short = 'r', long = "partition")]
    pub partition: Option<String>,
    /// Only jobs in these states (names or codes, comma-separated: CD,F,CA,R,PD …).
    #[arg(short = 's', long = "state")]
    pub state: Option<String>,
    /// The columns, comma-separated, each optionally %WIDTH: JobID, JobName, User,
    /// Account, Partition, State, ExitCode, Submit, Start, End, Elapsed, ElapsedRaw,
    /// AllocCPUS, ReqMem, AllocTRES, NNodes, NodeList, Timelimit.
    #[arg(short = 'o', long = "format")]
    pub format: Option<String>,
    /// Fields separated by `|`, each followed by one.
    #[arg(short = 'p', long, conflicts_with = "parsable2")]
    pub parsable: bool,
    /// Fields separated by `|`, none after the last.
    #[arg(short = 'P', long)]
    pub parsable2: bool,
    /// This user's jobs.
    #[arg(short = 'u', long = "user", conflicts_with = "allusers")]
    pub user: Option<String>,
    /// Every user's jobs (administrators).
    #[arg(short = 'a', long)]
    pub allusers: bool,
    /// Allocations only, without their steps (`JOBID.0` …).
    #[arg(short = 'X', long)]
    pub allocations: bool,
    /// Leave out the header lines.
    #[arg(short = 'n', long)]
    pub noheader: bool,
}

/// A `-S` time, read in the local time zone of `now`.
pub fn parse_start(text: &str, now: &Zoned) -> Result<Timestamp, String> {
    let text = text.trim();
    let bad = || format!("invalid time specification: {text}");
    let lower = text.to_ascii_lowercase();
    if lower == "today" || lower == "midnight" {
        return now.start_of_day().map(|t| t.timestamp()).map_err(|_| bad());
    }
    if let Some(rest) = lower.strip_prefix("now") {
        if rest.is_empty() {
            return Ok(now.timestamp());
        }
        let (sign, rest) = match rest.split_at(1) {
            ("-", r) => (-1, r),
            ("+", r) => (1, r),
            _ => return Err(bad()),
        };
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let count: i64 = rest[..digits].parse().map_err(|_| bad())?;
        let unit = match &rest[digits..] {
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "h" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => 86_400,
            "w" | "week" | "weeks" => 7 * 86_400,
            _ => return Err(bad()),
        };
        let secs = count.checked_mul(unit * sign).ok_or_else(bad)?;
        return Timestamp::from_second(now.timestamp().as_second().saturating_add(secs))
            .map_err(|_| bad());
    }
    let local: civil::DateTime = text.parse().map_err(|_| bad())?;
    local
        .to_zoned(now.time_zone().clone())
        .map(|z| z.timestamp())
        .map_err(|_| bad())
}

/// The `GET /jobs` query: the `-s` states, else every state; `since` (Unix seconds)
/// from `-S`, else local midnight unless `-j` names jobs; the given user, or the
/// caller (`me`) unless `-a`.
pub fn query(
    args: &SacctArgs,
    me: Option<&str>,
    now: &Zoned,
) -> Result<Vec<(&'static str, String)>, String> {
    let states = args.state.as_deref().map(split_list).unwrap_or_default();
    let states = if states.is_empty() {
        "all".to_string()
    } else {
        states.join(",")
    };
    let mut q = vec![("state", states)];
    let since = match (&args.starttime, &args.jobs) {
        (Some(start), _) => Some(parse_start(start, now)?),
        (None, Some(_)) => None,
        (None, None) => Some(parse_start("today", now)?),
    };
    if let Some(since) = since {
        q.push(("since", since.as_second().to_string()));
    }
    if let Some(user) = args.user.as_deref().or(me) {
        q.push(("user", user.to_string()));
    }
    Ok(q)
}

/// What the portal's query cannot ask: `-E`, `-A`, `-r` and `-j`.
pub struct Selection {
    before: Option<Timestamp>,
    accounts: Option<Vec<String>>,
    partitions: Option<Vec<String>>,
    ids: Option<Vec<String>>,
}

impl Selection {
    pub fn of(args: &SacctArgs, now: &Zoned) -> Result<Selection, String> {
        Ok(Selection {
            before: args
                .endtime
                .as_deref()
                .map(|t| parse_start(t, now))
                .transpose()?,
            accounts: args.accounts.as_deref().map(split_list),
            partitions: args.partition.as_deref().map(split_list),
            ids: args.jobs.as_deref().map(split_list),
        })
    }

    pub fn keeps(&self, job: &JobInfo) -> bool {
        let submitted = job.submit_time.parse::<Timestamp>().ok();
        self.before
            .is_none_or(|before| submitted.is_some_and(|s| s < before))
            && self
                .accounts
                .as_ref()
                .is_none_or(|a| a.contains(&job.account))
            && self
                .partitions
                .as_ref()
                .is_none_or(|p| p.contains(&job.partition))
            && self.ids.as_ref().is_none_or(|ids| job_matches(job, ids))
    }
}

/// A step's line as `sacct` prints it under its job: its own id (`17.0`), name,
/// state, exit code and times; its job's user, account and node; no partition.
pub fn step_row(job: &JobInfo, step: &StepInfo) -> JobInfo {
    JobInfo {
        id: step.id.clone(),
        display_id: step.id.clone(),
        name: step.name.clone(),
        partition: String::new(),
        state: step.state.clone(),
        exit_code: step.exit_code,
        signal: step.signal,
        start_time: Some(step.start_time.clone()),
        end_time: step.end_time.clone(),
        time_used: step.time_used,
        time_limit: None,
        cpus: Some(u64::from(step.ntasks)),
        steps: Vec::new(),
        ..job.clone()
    }
}

pub async fn run(args: SacctArgs) -> anyhow::Result<()> {
    let fields = parse_format(args.format.as_deref().unwrap_or(DEFAULT_FORMAT))
        .map_err(|e| SlurmError::new(CMD, e))?;
    let layout = match (args.parsable, args.parsable2) {
        (_, true) => Layout::Parsable2,
        (true, false) => Layout::Parsable,
        _ => Layout::Fixed,
    };
    let now = Zoned::now();
    let selection = Selection::of(&args, &now).map_err(|e| SlurmError::new(CMD, e))?;
    let portal = connect(CMD)?;
    let me = if args.allusers || args.user.is_some() {
        None
    } else {
        Some(portal.username().await.map_err(failed(CMD))?)
    };
    let q = query(&args, me.as_deref(), &now).map_err(|e| SlurmError::new(CMD, e))?;
    let mut jobs: Vec<JobInfo> = portal.jobs(&q).await.map_err(failed(CMD))?;
    // Oldest first, as sacct lists them (the portal lists the newest first).
    jobs.sort_by_key(|j| (j.job_id, j.array_task_id));
    let header = if args.noheader {
        Vec::new()
    } else {
        header(&fields, layout)
    };
    let tz = now.time_zone().clone();
    let rows: Vec<JobInfo> = jobs
        .iter()
        .filter(|j| selection.keeps(j))
        .flat_map(|j| {
            let steps = if args.allocations {
                &[][..]
            } else {
                &j.steps[..]
            };
            std::iter::once(j.clone()).chain(steps.iter().map(|s| step_row(j, s)))
        })
        .collect();
    let lines = rows.iter().map(|j| line(&fields, j, &tz, layout));
    print_lines(header.into_iter().chain(lines))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::tz::TimeZone;

    fn now() -> Zoned {
        // 2025-03-10 15:30:20 at UTC+1.
        let tz = TimeZone::fixed(jiff::tz::offset(1));
        civil::date(2025, 3, 10)
            .at(15, 30, 20, 0)
            .to_zoned(tz)
            .expect("zoned")
    }

    fn start(text: &str) -> String {
        let t = parse_start(text, &now()).expect(text);
        Timestamp::from_second(t.as_second())
            .expect("whole seconds")
            .to_string()
    }

    fn unix(rfc3339: &str) -> String {
        let t: Timestamp = rfc3339.parse().expect("RFC 3339");
        t.as_second().to_string()
    }

    #[test]
    fn start_times_are_local() {
        assert_eq!(start("today"), "2025-03-09T23:00:00Z");
        assert_eq!(start("2025-03-01"), "2025-02-28T23:00:00Z");
        assert_eq!(start("2025-03-01T08:15"), "2025-03-01T07:15:00Z");
        assert_eq!(start("2025-03-01T08:15:30"), "2025-03-01T07:15:30Z");
        assert_eq!(start("now"), "2025-03-10T14:30:20Z");
        assert_eq!(start("now-1hour"), "2025-03-10T13:30:20Z");
        assert_eq!(start("now-2days"), "2025-03-08T14:30:20Z");
        assert_eq!(start("now-90"), "2025-03-10T14:28:50Z");
        for bad in ["yesterday", "now*3", "now-xdays", "2025-13-01"] {
            assert!(parse_start(bad, &now()).is_err(), "{bad}");
        }
    }

    #[test]
    fn default_query_is_the_callers_jobs_since_midnight() {
        let args = SacctArgs::default();
        assert_eq!(
            query(&args, Some("alice"), &now()).expect("query"),
            [
                ("state", "all".to_string()),
                ("since", unix("2025-03-09T23:00:00Z")),
                ("user", "alice".into())
            ]
        );
    }

    #[test]
    fn states_are_asked_of_the_portal_and_the_rest_selected_here() {
        let args = SacctArgs {
            state: Some("CD, F".into()),
            endtime: Some("2025-03-10".into()),
            accounts: Some("lab,ml".into()),
            partition: Some("gpu".into()),
            ..SacctArgs::default()
        };
        assert_eq!(
            query(&args, Some("alice"), &now()).expect("query")[0],
            ("state", "CD,F".to_string())
        );
        let sel = Selection::of(&args, &now()).expect("selection");
        let job = |account: &str, partition: &str, submitted: &str| JobInfo {
            account: account.into(),
            partition: partition.into(),
            submit_time: submitted.into(),
            ..JobInfo::default()
        };
        assert!(sel.keeps(&job("lab", "gpu", "2025-03-09T22:59:59Z")));
        assert!(
            !sel.keeps(&job("lab", "gpu", "2025-03-09T23:00:00Z")),
            "-E is local midnight"
        );
        assert!(!sel.keeps(&job("other", "gpu", "2025-03-01T00:00:00Z")));
        assert!(!sel.keeps(&job("ml", "cpu", "2025-03-01T00:00:00Z")));
        let bad = SacctArgs {
            endtime: Some("soon".into()),
            ..SacctArgs::default()
        };
        assert!(Selection::of(&bad, &now()).is_err());
    }

    #[test]
    fn steps_print_under_their_job() {
        let job = JobInfo::sample("COMPLETED", "CD");
        let step = StepInfo {
            id: "17.1".into(),
            step_id: 1,
            name: "python3".into(),
            state: "FAILED".into(),
            ntasks: 4,
            exit_code: Some(3),
            start_time: "2025-03-10T14:00:00Z".into(),
            ..StepInfo::default()
        };
        let row = step_row(&job, &step);
        assert_eq!((row.id.as_str(), row.name.as_str()), ("17.1", "python3"));
        assert_eq!((row.state.as_str(), row.exit_code), ("FAILED", Some(3)));
        assert_eq!((row.user.as_str(), row.partition.as_str()), ("alice", ""));
        assert_eq!(row.cpus, Some(4));
    }

    #[test]
    fn named_jobs_are_looked_up_whenever_they_ran() {
        let args = SacctArgs {
            jobs: Some("17,18".into()),
            allusers: true,
            ..SacctArgs::default()
        };
        assert_eq!(
            query(&args, None, &now()).expect("query"),
            [("state", "all".to_string())]
        );
        let args = SacctArgs {
            user: Some("bob".into()),
            starttime: Some("now-1day".into()),
            ..SacctArgs::default()
        };
        assert_eq!(
            query(&args, None, &now()).expect("query"),
            [
                ("state", "all".to_string()),
                ("since", unix("2025-03-09T14:30:20Z")),
                ("user", "bob".into())
            ]
        );
    }
}
