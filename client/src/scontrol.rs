//! `scontrol` inside a job: `show hostnames [LIST]`, one host name per line from
//! `LIST` or `SLURM_JOB_NODELIST` (DDP scripts find `MASTER_ADDR` so), and
//! `requeue|hold|release ID[,ID…]`: a job's own requeue (`scontrol requeue
//! $SLURM_JOB_ID`, as checkpointing scripts do) with the job's token, any other with
//! the user's token as `scancel` would. Other commands are refused with a message.
//! Must not touch: anything of the server.

use clap::Args;

use super::{connect, failed, print_lines, split_list, SlurmError};

const CMD: &str = "scontrol";
/// The most host names one list expands to (as sbatch's `--nodelist`).
const MAX_HOSTS: usize = 8192;

#[derive(Debug, Clone, Default, Args)]
pub struct ScontrolArgs {
    /// `show hostnames [LIST]`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Expand a Slurm host list (`head`, `gpu[01-03,7],cpu1`) within [`MAX_HOSTS`].
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let bad = || format!("invalid host list: {list}");
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // One item: up to a comma outside brackets.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let item = &rest[..end];
        rest = rest[end..].strip_prefix(',').unwrap_or("");
        match item.split_once('[') {
            None if !item.is_empty() => out.push(item.to_string()),
            None => {}
            Some((prefix, ranges)) => {
                let (ranges, suffix) = ranges.split_once(']').ok_or_else(bad)?;
                for range in ranges.split(',') {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    let width = lo.len();
                    let lo: u64 = lo.parse().map_err(|_| bad())?;
                    let hi: u64 = hi.parse().map_err(|_| bad())?;
                    if hi < lo || (hi - lo) as usize >= MAX_HOSTS {
                        return Err(bad());
                    }
                    for n in lo..=hi {
                        out.push(format!("{prefix}{n:0width$}{suffix}"));
                        if out.len() > MAX_HOSTS {
                            return Err(format!("the host list names more than {MAX_HOSTS} hosts"));
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// `requeue`, `hold` or `release` of `ids`: the job's own requeue with its token,
/// the rest with the user's.
async fn act(action: &str, ids: &str) -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).ok();
    let own = super::srun::job_id(&var);
    for id in split_list(ids) {
        if action == "requeue" && own.as_deref() == Some(id.as_str()) {
            if let Some(portal) = super::srun::job_portal(&var) {
                let portal = portal.map_err(|e| SlurmError::new(CMD, e))?;
                portal.requeue_itself(&id).await.map_err(failed(CMD))?;
                continue;
            }
        }
        connect(CMD)?.act(&id, action).await.map_err(failed(CMD))?;
    }
    Ok(())
}

pub async fn run(args: ScontrolArgs) -> anyhow::Result<()> {
    let words: Vec<&str> = args.args.iter().map(String::as_str).collect();
    if let [action @ ("requeue" | "hold" | "release"), ids] = words.as_slice() {
        return act(action, ids).await;
    }
    match words.as_slice() {
        ["show", "hostnames" | "hostname"] | ["show", "hostnames" | "hostname", _] => {
            let list = match words.get(2) {
                Some(list) => list.to_string(),
                None => std::env::var("SLURM_JOB_NODELIST").map_err(|_| {
                    SlurmError::new(CMD, "no host list given and SLURM_JOB_NODELIST is not set")
                })?,
            };
            let hosts = expand_hostlist(&list).map_err(|e| SlurmError::new(CMD, e))?;
            print_lines(hosts)?;
            Ok(())
        }
        _ => Err(SlurmError::new(
            CMD,
            "atrium's scontrol knows `show hostnames [LIST]` and `requeue|hold|release ID`; use squeue, scancel or the portal's API for the rest",
        )
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_expand_like_slurms() {
        assert_eq!(expand_hostlist("head").expect("one"), ["head"]);
        assert_eq!(
            expand_hostlist("gpu[01-03,7],cpu1").expect("list"),
            ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]
        );
        assert_eq!(
            expand_hostlist("n[9-10]-ib").expect("suffix"),
            ["n9-ib", "n10-ib"]
        );
        assert!(expand_hostlist("n[3-1]").is_err());
        assert!(expand_hostlist("n[1-99999999]").is_err());
        assert!(expand_hostlist("n[1-2").is_err());
    }
}
