//! `scontrol show hostnames [LIST]` inside a job: one host name per line, from
//! `LIST` or `SLURM_JOB_NODELIST` (DDP scripts find `MASTER_ADDR` so). Other
//! `scontrol` commands are refused with a message saying what to use instead.
//! Must not touch: the portal (nothing here needs it).

use clap::Args;

use super::{print_lines, SlurmError};

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

pub fn run(args: ScontrolArgs) -> anyhow::Result<()> {
    let words: Vec<&str> = args.args.iter().map(String::as_str).collect();
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
            "only `scontrol show hostnames [LIST]` is available inside an atrium job; use squeue, scancel or the portal's API for the rest",
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
