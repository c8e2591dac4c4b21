//! A typed job request as `sbatch` long options: the edge where a request built in
//! code (a session's) becomes text, for the Slurm backend's command line. Reading
//! the options back with the scheduler's parser gives the same request (tested).
//!
//! Must not touch: processes, the database, sessions.

use scheduler::{GpuPer, JobRequest, MemoryRequest, SliceKind};

/// `--job-name=…`, `--gres=…`, `--time=…` … for every field `request` sets.
pub fn options(request: &JobRequest) -> Vec<String> {
    let r = request;
    let mut out = Vec::new();
    let mut push = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            out.push(format!("--{name}={v}"));
        }
    };
    push("job-name", r.name.clone());
    push("partition", r.partition.clone());
    push("nodes", r.nodes.map(|n| n.to_string()));
    push("ntasks", r.ntasks.map(|n| n.to_string()));
    push("ntasks-per-node", r.ntasks_per_node.map(|n| n.to_string()));
    push("cpus-per-task", r.cpus_per_task.map(|n| n.to_string()));
    if let Some(m) = r.memory {
        let (name, mb) = match m {
            MemoryRequest::PerNode(mb) => ("mem", mb),
            MemoryRequest::PerCpu(mb) => ("mem-per-cpu", mb),
            MemoryRequest::PerGpu(mb) => ("mem-per-gpu", mb),
        };
        push(name, Some(format!("{mb}M")));
    }
    push("cpus-per-gpu", r.cpus_per_gpu.map(|n| n.to_string()));
    if let Some(g) = &r.gpus {
        match (g.per, &g.kind) {
            (GpuPer::Node, _) => push("gres", Some(crate::domain::gres::text(g))),
            (GpuPer::Job, SliceKind::Gpu { r#type: Some(t) }) => {
                push("gpus", Some(format!("{t}:{}", g.count)))
            }
            (GpuPer::Job, _) => push("gpus", Some(g.count.to_string())),
        }
    }
    push("time", r.time_limit.map(String::from));
    push("array", r.array.clone().map(String::from));
    push("dependency", r.dependency.clone().map(String::from));
    push("output", r.output.clone());
    push("error", r.error.clone());
    push("chdir", r.chdir.clone());
    push("export", r.export.clone().map(String::from));
    push("account", r.account.clone());
    push("qos", r.qos.clone());
    push("begin", r.begin.clone().map(String::from));
    if !r.nodelist.is_empty() {
        let names: Vec<&str> = r.nodelist.iter().map(String::as_str).collect();
        push("nodelist", Some(scheduler::compress_hostlist(&names)));
    }
    if !r.exclude.is_empty() {
        let names: Vec<&str> = r.exclude.iter().map(String::as_str).collect();
        push("exclude", Some(scheduler::compress_hostlist(&names)));
    }
    push("constraint", r.constraint.clone().map(String::from));
    push("comment", r.comment.clone());
    push("nice", r.nice.map(|n| n.to_string()));
    if r.hold {
        out.push("--hold".into());
    }
    if r.exclusive {
        out.push("--exclusive".into());
    }
    match r.requeue {
        Some(true) => out.push("--requeue".into()),
        Some(false) => out.push("--no-requeue".into()),
        None => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options as a user would write them read back as the same request.
    #[test]
    fn options_read_back_as_the_same_request() {
        let written = [
            "--job-name=notebook:default",
            "--partition=gpu",
            "--nodes=1-2",
            "--ntasks=4",
            "--cpus-per-task=2",
            "--mem=16G",
            "--gres=gpu:1g.10gb:2",
            "--time=1:30:00",
            "--array=0-9%2",
            "--dependency=afterok:12",
            "--output=/home/a/.atrium/sessions/3/session.log",
            "--chdir=/tmp",
            "--export=NONE",
            "--account=physics",
            "--qos=high",
            "--nodelist=gpu[01-03]",
            "--constraint=a100&nvlink",
            "--comment=hello",
            "--nice=5",
            "--hold",
            "--exclusive",
            "--no-requeue",
        ];
        let request = scheduler::parse_args(&written).expect("parses");
        let again = scheduler::parse_args(&options(&request)).expect("parses again");
        assert_eq!(again, request);
        for gpus in [
            "--gpus=a100:2",
            "--gpus=3",
            "--gres=shard:2",
            "--gres=gpu:1",
        ] {
            let request = scheduler::parse_args(&[gpus]).expect("parses");
            assert_eq!(
                scheduler::parse_args(&options(&request)).expect("again"),
                request
            );
        }
        assert!(options(&JobRequest::default()).is_empty());
    }
}
