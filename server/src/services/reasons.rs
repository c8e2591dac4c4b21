//! Why a job waits, in plain words: what is missing, why, and what its owner can do,
//! with the scheduler's own code (Slurm's spelling) kept beside it for those who
//! know it.
//!
//! Owns: the wording of every pending reason the internal scheduler gives
//! (`scheduler::PendingReason`) and of those Slurm gives that it does not (partition
//! and QOS limits, down nodes, invalid accounts …), using the job's own request
//! (GPU type and count, from its gres) and the cluster's GPUs in use where they are
//! known; the wording of a refusal at submission. Must not touch: anything with
//! IO (it is pure: the caller passes what it knows), HTML (the pages escape it).

use std::collections::BTreeMap;

/// GPUs of one slice type in the cluster: how many there are, how many are in use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SliceCount {
    pub total: u32,
    pub used: u32,
}

/// The cluster's slices by type name (`a100`, `1g.10gb`, `shard` …), as the
/// scheduler's node views count them: what "both are in use" is read from.
pub type ClusterSlices = BTreeMap<String, SliceCount>;

/// A pending job's reason, explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// What is missing and why: `Waiting for a whole A100: both are in use`.
    pub what: String,
    /// What the owner can do about it.
    pub advice: String,
    /// The scheduler's code as it gave it (`Resources`, `QOSMaxGRESPerUser`).
    pub code: String,
}

/// The GPUs a job asks for per node, read from its gres (`gpu:2`,
/// `gpu:a100:1`, `gpu:1g.10gb|2g.20gb:2`, `shard:2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuAsk {
    /// Type names it accepts; empty: any whole GPU.
    pub types: Vec<String>,
    /// Shares of a GPU (`shard`) rather than GPUs.
    pub shard: bool,
    pub count: u32,
}

impl GpuAsk {
    /// The request in a gres; `None` when it asks no GPU.
    pub fn parse(gres: &str) -> Option<GpuAsk> {
        let gres = gres.trim();
        let gres = gres
            .strip_prefix("gres:")
            .or_else(|| gres.strip_prefix("gres/"))
            .unwrap_or(gres);
        let mut parts = gres.split(':');
        let kind = parts.next()?;
        let shard = match kind {
            "gpu" => false,
            "shard" => true,
            _ => return None,
        };
        let rest: Vec<&str> = parts.collect();
        let (types, count) = match rest.as_slice() {
            [] => (Vec::new(), 1),
            [n] if n.bytes().all(|b| b.is_ascii_digit()) => (Vec::new(), n.parse().ok()?),
            [t] => (split_types(t), 1),
            [t, n, ..] => (split_types(t), n.parse().ok()?),
        };
        (count > 0).then_some(GpuAsk {
            types,
            shard,
            count,
        })
    }

    /// `a GPU`, `2 GPUs`, `a whole A100`, `2 whole A100s`, `a 1g.10gb MIG slice`,
    /// `2 GPU shares`.
    pub fn words(&self) -> String {
        if self.shard {
            return counted(self.count, "GPU share", "GPU shares");
        }
        let names: Vec<String> = self.types.iter().map(|t| type_name(t)).collect();
        match names.as_slice() {
            [] => counted(self.count, "GPU", "GPUs"),
            [one] if is_mig(&self.types[0]) => counted(
                self.count,
                &format!("{one} MIG slice"),
                &format!("{one} MIG slices"),
            ),
            [one] => counted(
                self.count,
                &format!("whole {one}"),
                &format!("whole {one}s"),
            ),
            many => {
                let list = many.join(" or ");
                if self.count == 1 {
                    format!("one {list}")
                } else {
                    format!("{} slices of {list}", self.count)
                }
            }
        }
    }

    /// The slices of the cluster this request could use: (total, in use).
    fn availability(&self, cluster: &ClusterSlices) -> Option<SliceCount> {
        let matching: Vec<&SliceCount> = if self.shard {
            cluster
                .iter()
                .filter(|(t, _)| t.as_str() == "shard")
                .map(|(_, c)| c)
                .collect()
        } else if self.types.is_empty() {
            cluster
                .iter()
                .filter(|(t, _)| is_whole_gpu(t))
                .map(|(_, c)| c)
                .collect()
        } else {
            cluster
                .iter()
                .filter(|(t, _)| self.types.iter().any(|w| w.eq_ignore_ascii_case(t)))
                .map(|(_, c)| c)
                .collect()
        };
        if matching.is_empty() {
            return None;
        }
        Some(
            matching
                .iter()
                .fold(SliceCount::default(), |a, c| SliceCount {
                    total: a.total + c.total,
                    used: a.used + c.used,
                }),
        )
    }
}

fn split_types(t: &str) -> Vec<String> {
    t.split('|')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A MIG profile (`1g.10gb`) rather than a GPU model (`a100`).
pub fn is_mig(t: &str) -> bool {
    t.contains('.') && t.contains('g')
}

/// A slice type that is a whole GPU: neither a MIG profile nor a shard.
pub fn is_whole_gpu(t: &str) -> bool {
    t != "shard" && !is_mig(t)
}

/// A GPU model as people write it (`a100` → `A100`); MIG profiles stay as they are.
fn type_name(t: &str) -> String {
    if is_mig(t) {
        t.to_string()
    } else {
        t.to_ascii_uppercase()
    }
}

/// `1 GPU`-style counting with `a` for one: `a GPU`, `2 GPUs`.
fn counted(n: u32, one: &str, many: &str) -> String {
    if n == 1 {
        let article = if one.starts_with(['a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `1 GPU`, `2 GPUs`: a count with its noun, plural right.
pub use crate::domain::numbers::plural;

/// Why the request cannot be served now, from the cluster's slices in use.
fn busy(ask: &GpuAsk, cluster: &ClusterSlices) -> String {
    let Some(c) = ask.availability(cluster) else {
        return "not enough are free now".into();
    };
    let free = c.total.saturating_sub(c.used);
    if free == 0 {
        return match c.total {
            1 => "the only one is in use".into(),
            2 => "both are in use".into(),
            n => format!("all {n} are in use"),
        };
    }
    if free < ask.count {
        return format!("only {free} of {} are free", c.total);
    }
    format!(
        "{free} of {} are free, but not enough on one node with the CPUs and memory it asks",
        c.total
    )
}

/// The words for a pending job's reason `code` (Slurm's spelling), given its
/// `gres` and the cluster's slices (empty when unknown).
pub fn explain(code: &str, gres: &str, cluster: &ClusterSlices) -> Explained {
    let ask = GpuAsk::parse(gres);
    let want = ask
        .as_ref()
        .map_or_else(|| "the CPUs and memory it asks".to_string(), GpuAsk::words);
    let code = code.trim();
    // Slurm adds detail after the code: `ReqNodeNotAvail, UnavailableNodes:node1`.
    let base = code.split([',', ' ', '(']).next().unwrap_or(code);
    let (what, advice): (String, &str) = match base {
        "" | "None" => (
            "Waiting to be examined by the scheduler".into(),
            "Nothing to do: it is looked at within seconds.",
        ),
        "Resources" => (
            match &ask {
                Some(a) => format!("Waiting for {want}: {}", busy(a, cluster)),
                None => format!("Waiting for {want}: they are in use by other jobs"),
            },
            "It starts when running jobs end. Asking for fewer GPUs or a shorter time limit \
             may let it start sooner, in a gap the scheduler can fill (backfill).",
        ),
        "Priority" => (
            format!("Waiting for its turn: jobs with a higher priority are ahead of it for {want}"),
            "Nothing to do: its priority grows while it waits. A shorter time limit may let \
             it start sooner, in a gap (backfill).",
        ),
        "Dependency" => (
            "Waiting for the jobs it depends on (--dependency) to reach the state it asks".into(),
            "It starts after them; cancel it if you no longer need it.",
        ),
        "DependencyNeverSatisfied" => (
            "It will never start: a job it depends on ended in a way its dependency does not \
             accept"
                .into(),
            "Cancel it, and submit it again without that dependency (or with --kill-on-invalid-dep=yes).",
        ),
        "JobHeldUser" => (
            "Held: it was submitted with --hold or held by its owner".into(),
            "Release it (scontrol release JOBID) to let it start.",
        ),
        "JobHeldAdmin" => (
            "Held by an administrator".into(),
            "Ask your administrator why, and to release it.",
        ),
        "BeginTime" => (
            "Waiting for the start time it was given (--begin)".into(),
            "It may start from then on; nothing to do.",
        ),
        "PartitionTimeLimit" => (
            "Its time limit is longer than its partition allows".into(),
            "Cancel it and submit it again with a shorter --time, or in another partition.",
        ),
        "PartitionNodeLimit" => (
            "It asks more nodes than its partition allows".into(),
            "Cancel it and submit it again with fewer nodes (-N), or in another partition.",
        ),
        "PartitionDown" | "PartitionInactive" => (
            "Its partition is not accepting jobs to run now".into(),
            "It waits until an administrator opens the partition again; or cancel it and \
             submit to another partition.",
        ),
        "ReqNodeNotAvail" | "NodeDown" => (
            "The nodes it needs are down, drained or reserved".into(),
            "It waits until they are back. Ask your administrator, or submit again without \
             --nodelist or to another partition.",
        ),
        "BadConstraints" => (
            "No node has the features it asks (--constraint)".into(),
            "Cancel it and submit it again with other constraints.",
        ),
        "InvalidAccount" | "InvalidQOS" => (
            "Its account or QOS is not valid for you".into(),
            "Cancel it and submit it again with an account (-A) and QOS you may use, or ask \
             your administrator.",
        ),
        "QOSMaxGRESPerUser" => (
            format!("Waiting for {want}: you already use as many GPUs at once as your limit allows"),
            "It starts when one of your running jobs or sessions ends; stop a session you no \
             longer use to let it start now.",
        ),
        "AssocGrpGRES" | "QOSGrpGRES" => (
            format!(
                "Waiting for {want}: your group or account already uses as many GPUs at once as \
                 it may"
            ),
            "It starts when other jobs of your group or account end.",
        ),
        "AssocGrpGRESMinutes" | "AssocGrpGRESRunMinutes" | "QOSGrpGRESMinutes" => (
            "Your group or account has used its GPU-hours for this period".into(),
            "It waits for the next period; ask your administrator to raise the quota if it \
             cannot wait.",
        ),
        "AssocMaxJobsLimit" | "QOSMaxJobsPerUserLimit" => (
            "You already run as many jobs at once as you may".into(),
            "It starts when one of your running jobs ends.",
        ),
        "AssocGrpJobsLimit" | "QOSGrpJobsLimit" => (
            "Your group or account already runs as many jobs at once as it may".into(),
            "It starts when other jobs of your group or account end.",
        ),
        "AssocMaxWallDurationPerJobLimit" | "QOSMaxWallDurationPerJobLimit" => (
            "Its time limit is longer than your account or QOS allows".into(),
            "Cancel it and submit it again with a shorter --time.",
        ),
        "JobArrayTaskLimit" => (
            "The array already runs as many tasks at once as its % limit allows".into(),
            "More tasks start as running ones end.",
        ),
        "Licenses" => (
            "Waiting for licenses (-L) that other jobs hold".into(),
            "It starts when they are given back.",
        ),
        "DeadLine" => (
            "It could not end before its --deadline".into(),
            "Submit it again with a later deadline or a shorter time limit.",
        ),
        "Reservation" => (
            "Waiting for its reservation (--reservation) to begin".into(),
            "It may start when the reservation does.",
        ),
        "Cleaning" => (
            "Its node is still being cleaned up after an earlier run".into(),
            "Nothing to do: it starts again shortly.",
        ),
        other if other.starts_with("QOS") || other.starts_with("Assoc") => (
            "Waiting: a limit of your account or QOS is reached".into(),
            "It starts when your running jobs use less; ask your administrator which limit.",
        ),
        _ => (
            "Waiting for a reason the scheduler gives in its own words".into(),
            "See the code beside it in Slurm's documentation (squeue's reasons), or ask your \
             administrator.",
        ),
    };
    Explained {
        what,
        advice: advice.to_string(),
        code: code.to_string(),
    }
}

/// A refusal at submission in plain words, from the scheduler's message (what
/// `scheduler::SubmitError` says): the limit named, then what to do. Messages it
/// does not know are returned as they are.
pub fn refusal(message: &str) -> String {
    let m = message.trim();
    let advice = if m.contains("GPUs at once") || m.contains("slices at once") {
        Some("Stop a session or cancel a job you no longer need, or ask for fewer GPUs.")
    } else if m.starts_with("time limit") || m.contains("time limit") && m.contains("above") {
        Some("Ask for a shorter time limit (--time), or use a partition that allows it.")
    } else if m.starts_with("no such partition") {
        Some("Pick a partition the cluster has (see the Cluster page), or leave -p out.")
    } else if m.starts_with("not allowed to use partition") {
        Some("Pick another partition, or ask your administrator for access.")
    } else if m.starts_with("not allowed to charge account") {
        Some("Leave -A out to use your own account, or ask your administrator.")
    } else if m.starts_with("the job can never run") {
        Some("No node could ever hold what it asks: ask for fewer GPUs, CPUs or memory per node.")
    } else if m.contains("GPU-hours") || m.contains("GRESMinutes") {
        Some("Your GPU-hours for this period are used up; wait for the next period or ask your administrator.")
    } else {
        None
    };
    match advice {
        Some(a) => format!("{}. {a}", capitalise(m.trim_end_matches('.'))),
        None => m.to_string(),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(entries: &[(&str, u32, u32)]) -> ClusterSlices {
        entries
            .iter()
            .map(|(t, total, used)| {
                (
                    t.to_string(),
                    SliceCount {
                        total: *total,
                        used: *used,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn gres_is_read_into_a_request() {
        assert_eq!(
            GpuAsk::parse("gpu:2"),
            Some(GpuAsk {
                types: vec![],
                shard: false,
                count: 2
            })
        );
        assert_eq!(
            GpuAsk::parse("gres:gpu:a100:1").map(|a| a.types),
            Some(vec!["a100".to_string()])
        );
        assert_eq!(
            GpuAsk::parse("gpu:1g.10gb|2g.20gb:2").map(|a| (a.types.len(), a.count)),
            Some((2, 2))
        );
        assert_eq!(GpuAsk::parse("shard:3").map(|a| a.shard), Some(true));
        assert_eq!(GpuAsk::parse(""), None);
        assert_eq!(GpuAsk::parse("license:x"), None);
        assert_eq!(GpuAsk::parse("gpu:0"), None);
    }

    #[test]
    fn requests_are_counted_in_words_with_plurals_right() {
        let words = |g: &str| GpuAsk::parse(g).map(|a| a.words()).unwrap_or_default();
        assert_eq!(words("gpu:1"), "a GPU");
        assert_eq!(words("gpu:2"), "2 GPUs");
        assert_eq!(words("gpu:a100:1"), "a whole A100");
        assert_eq!(words("gpu:a100:2"), "2 whole A100s");
        assert_eq!(words("gpu:1g.10gb:1"), "a 1g.10gb MIG slice");
        assert_eq!(words("gpu:1g.10gb:3"), "3 1g.10gb MIG slices");
        assert_eq!(words("shard:1"), "a GPU share");
        assert_eq!(words("gpu:a100|h100:1"), "one A100 or H100");
        assert_eq!(plural(1, "GPU", "GPUs"), "1 GPU");
        assert_eq!(plural(0, "GPU", "GPUs"), "0 GPUs");
        assert_eq!(plural(2, "GPU", "GPUs"), "2 GPUs");
    }

    #[test]
    fn resources_say_what_is_missing_from_the_clusters_state() {
        let c = cluster(&[("a100", 2, 2), ("1g.10gb", 7, 3), ("h100", 8, 6)]);
        let e = explain("Resources", "gpu:a100:1", &c);
        assert_eq!(e.what, "Waiting for a whole A100: both are in use");
        assert_eq!(e.code, "Resources");
        assert!(e.advice.contains("fewer GPUs"), "{}", e.advice);
        assert_eq!(
            explain("Resources", "gpu:h100:4", &c).what,
            "Waiting for 4 whole H100s: only 2 of 8 are free"
        );
        assert_eq!(
            explain("Resources", "gpu:1g.10gb:2", &c).what,
            "Waiting for 2 1g.10gb MIG slices: 4 of 7 are free, but not enough on one node with the CPUs and memory it asks"
        );
        assert_eq!(
            explain("Resources", "gpu:1", &cluster(&[("a100", 1, 1)])).what,
            "Waiting for a GPU: the only one is in use"
        );
        assert_eq!(
            explain(
                "Resources",
                "gpu:2",
                &cluster(&[("a100", 2, 2), ("h100", 4, 4)])
            )
            .what,
            "Waiting for 2 GPUs: all 6 are in use"
        );
        assert_eq!(
            explain("Resources", "gpu:2", &ClusterSlices::new()).what,
            "Waiting for 2 GPUs: not enough are free now"
        );
        assert_eq!(
            explain("Resources", "", &c).what,
            "Waiting for the CPUs and memory it asks: they are in use by other jobs"
        );
    }

    #[test]
    fn every_reason_of_the_internal_scheduler_has_its_own_words() {
        let c = ClusterSlices::new();
        let unknown = explain("SomethingNew", "", &c).what;
        let mut seen = std::collections::BTreeSet::new();
        for code in [
            "Priority",
            "Resources",
            "Dependency",
            "DependencyNeverSatisfied",
            "JobHeldUser",
            "JobHeldAdmin",
            "BeginTime",
            "PartitionTimeLimit",
            "ReqNodeNotAvail",
            "QOSMaxGRESPerUser",
            "AssocGrpGRES",
            "AssocGrpGRESMinutes",
            "AssocMaxJobsLimit",
            "AssocGrpJobsLimit",
            "AssocMaxWallDurationPerJobLimit",
            "JobArrayTaskLimit",
            "Licenses",
            "DeadLine",
        ] {
            let e = explain(code, "gpu:1", &c);
            assert_ne!(e.what, unknown, "{code} has no words of its own");
            assert!(!e.advice.is_empty(), "{code}");
            assert_eq!(e.code, code);
            assert!(seen.insert(e.what.clone()), "{code} shares its words");
        }
        assert_eq!(
            explain("QOSMaxGRESPerUser", "gpu:a100:1", &c).what,
            "Waiting for a whole A100: you already use as many GPUs at once as your limit allows"
        );
    }

    #[test]
    fn slurms_own_reasons_and_details_are_read_by_their_code() {
        let c = ClusterSlices::new();
        let e = explain("ReqNodeNotAvail, UnavailableNodes:node[1-2]", "", &c);
        assert_eq!(e.what, "The nodes it needs are down, drained or reserved");
        assert_eq!(e.code, "ReqNodeNotAvail, UnavailableNodes:node[1-2]");
        assert_eq!(
            explain("PartitionNodeLimit", "", &c).what,
            "It asks more nodes than its partition allows"
        );
        assert_eq!(
            explain("QOSMaxCpuPerUserLimit", "", &c).what,
            "Waiting: a limit of your account or QOS is reached"
        );
        assert_eq!(
            explain("None", "", &c).what,
            "Waiting to be examined by the scheduler"
        );
    }

    #[test]
    fn refusals_keep_the_limit_and_add_what_to_do() {
        let r = refusal("user ann may use 2 GPUs at once; the job asks 1, and 2 are in use");
        assert!(r.starts_with("User ann may use 2 GPUs at once"), "{r}");
        assert!(r.contains("ask for fewer GPUs"), "{r}");
        let r = refusal("time limit 2-00:00:00 is above the limit 1-00:00:00 of partition gpu");
        assert!(r.contains("shorter time limit"), "{r}");
        assert_eq!(refusal("something else"), "something else");
    }
}
