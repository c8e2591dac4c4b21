//! `atrium seff JOBID`: what a job used of what it was given, in the layout of
//! Slurm's `seff` (CPU and memory efficiency), followed by its GPUs' utilisation and
//! memory, from `GET /api/v1/jobs/{id}/efficiency`.

use clap::Args;
use serde::Deserialize;

use super::{connect, failed, print_lines, SlurmError};

const CMD: &str = "seff";

#[derive(Debug, Clone, Default, Args)]
pub struct SeffArgs {
    /// The job (`17`, or `17_3` for an array task).
    pub job: String,
}

/// `GET /jobs/{id}/efficiency`, the fields `seff` prints.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Efficiency {
    pub id: String,
    #[serde(default)]
    pub cluster: String,
    pub user: String,
    pub account: String,
    pub state: String,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub nodes: u32,
    pub cpus: Option<u64>,
    pub elapsed_seconds: u64,
    pub source: Option<String>,
    pub complete: bool,
    pub cpu_seconds: Option<f64>,
    pub cpu_efficiency_percent: Option<f64>,
    pub memory_requested_bytes: Option<u64>,
    pub max_rss_bytes: Option<u64>,
    pub memory_efficiency_percent: Option<f64>,
    #[serde(default)]
    pub gres: String,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    pub gpu_utilization_percent: Option<f64>,
    pub gpu_idle_seconds: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Gpu {
    pub index: u32,
    #[serde(default)]
    pub uuid: String,
    pub mean_utilization_percent: Option<f64>,
    pub max_utilization_percent: u32,
    pub max_memory_bytes: u64,
    pub memory_total_bytes: u64,
    pub idle_seconds: f64,
}

/// CPU time as `seff` prints it: `HH:MM:SS`, or `D-HH:MM:SS` from a day on.
pub fn clock(secs: f64) -> String {
    super::times::secs2time(secs.max(0.0).round() as u64)
}

/// An amount of memory as `seff` prints it: two decimals in the largest unit (of
/// KB, MB, GB, TB) that keeps it at least 1.
pub fn memory(bytes: u64) -> String {
    let mut value = bytes as f64 / 1024.0;
    let mut unit = "KB";
    for next in ["MB", "GB", "TB"] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.2} {unit}")
}

/// The lines `seff` prints for `e`.
pub fn report(e: &Efficiency) -> Vec<String> {
    let mut out = Vec::new();
    if e.id.contains('_') {
        out.push(format!("Array Job ID: {}", e.id));
    } else {
        out.push(format!("Job ID: {}", e.id));
    }
    if !e.cluster.is_empty() {
        out.push(format!("Cluster: {}", e.cluster));
    }
    out.push(format!("User/Group: {}/{}", e.user, e.account));
    let state = match (e.exit_code, e.signal) {
        (_, Some(sig)) if e.complete => format!("{} (signal {sig})", e.state),
        (Some(code), _) if e.complete => format!("{} (exit code {code})", e.state),
        _ => e.state.clone(),
    };
    out.push(format!("State: {state}"));
    if e.state == "PENDING" {
        out.push("Efficiency not available for jobs in the PENDING state.".into());
        return out;
    }
    let cores = e.cpus.unwrap_or(0);
    let per_node = cores / u64::from(e.nodes.max(1));
    out.push(format!("Nodes: {}", e.nodes.max(1)));
    out.push(format!("Cores per node: {per_node}"));
    let core_walltime = clock((e.elapsed_seconds * cores) as f64);
    match (e.cpu_seconds, e.cpu_efficiency_percent) {
        (Some(cpu), Some(pct)) => {
            out.push(format!("CPU Utilized: {}", clock(cpu)));
            out.push(format!(
                "CPU Efficiency: {pct:.2}% of {core_walltime} core-walltime"
            ));
        }
        (Some(cpu), None) => out.push(format!("CPU Utilized: {}", clock(cpu))),
        _ => {
            out.push("CPU Utilized: not sampled yet".into());
        }
    }
    out.push(format!(
        "Job Wall-clock time: {}",
        clock(e.elapsed_seconds as f64)
    ));
    match e.max_rss_bytes {
        Some(rss) => out.push(format!("Memory Utilized: {}", memory(rss))),
        None => out.push("Memory Utilized: not sampled yet".into()),
    }
    match (e.memory_efficiency_percent, e.memory_requested_bytes) {
        (Some(pct), Some(req)) => {
            out.push(format!("Memory Efficiency: {pct:.2}% of {}", memory(req)))
        }
        (None, Some(req)) => out.push(format!("Memory Efficiency: of {}", memory(req))),
        _ => {}
    }
    if !e.gres.is_empty() || !e.gpus.is_empty() {
        gpu_lines(e, &mut out);
    }
    if e.state == "RUNNING" || !e.complete && e.source.is_some() {
        out.push("WARNING: Efficiency statistics may be misleading for RUNNING jobs.".into());
    }
    out
}

/// `GPUs`, then one line per GPU read, then the whole job's.
fn gpu_lines(e: &Efficiency, out: &mut Vec<String>) {
    out.push(format!(
        "GPUs: {}",
        if e.gres.is_empty() { "-" } else { &e.gres }
    ));
    if e.gpus.is_empty() {
        out.push("GPU Utilized: not sampled (no nvidia-smi reading of these GPUs)".into());
        return;
    }
    for g in &e.gpus {
        // A MIG instance is named by its UUID after its GPU's index.
        let name = if g.uuid.starts_with("MIG-") {
            format!("{} ({})", g.index, g.uuid)
        } else {
            g.index.to_string()
        };
        let memory = format!(
            "memory {} of {}",
            memory(g.max_memory_bytes),
            memory(g.memory_total_bytes)
        );
        out.push(match g.mean_utilization_percent {
            Some(mean) => format!(
                "GPU {name}: {mean:.2}% mean, {}% max utilization; {memory}; idle {}",
                g.max_utilization_percent,
                clock(g.idle_seconds),
            ),
            None => format!("GPU {name}: {memory} (utilization not reported)"),
        });
    }
    if let Some(u) = e.gpu_utilization_percent {
        out.push(format!("GPU Efficiency: {u:.2}% mean utilization"));
    }
    if let Some(idle) = e.gpu_idle_seconds {
        out.push(format!("GPU Idle: {} GPU-time", clock(idle)));
    }
}

pub async fn run(args: SeffArgs) -> anyhow::Result<()> {
    let portal = connect(CMD)?;
    let e: Efficiency = portal.efficiency(&args.job).await.map_err(|e| {
        if e.status == Some(404) {
            SlurmError::new(CMD, format!("Job not found: {}", args.job))
        } else {
            failed(CMD)(e)
        }
    })?;
    print_lines(report(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_has_seffs_lines_and_the_gpus() {
        let e = Efficiency {
            id: "12".into(),
            cluster: "atrium".into(),
            user: "alice".into(),
            account: "alice".into(),
            state: "COMPLETED".into(),
            exit_code: Some(0),
            nodes: 1,
            cpus: Some(4),
            elapsed_seconds: 60,
            source: Some("atrium".into()),
            complete: true,
            cpu_seconds: Some(83.0),
            cpu_efficiency_percent: Some(34.58),
            memory_requested_bytes: Some(4 << 30),
            max_rss_bytes: Some(1288490189),
            memory_efficiency_percent: Some(30.0),
            gres: "gpu:1".into(),
            gpus: vec![
                Gpu {
                    index: 0,
                    uuid: "GPU-5b7e1d2c".into(),
                    mean_utilization_percent: Some(87.5),
                    max_utilization_percent: 100,
                    max_memory_bytes: 30 << 30,
                    memory_total_bytes: 80 << 30,
                    idle_seconds: 3.0,
                },
                Gpu {
                    index: 1,
                    uuid: "MIG-aaaaaaaa".into(),
                    max_memory_bytes: 1 << 30,
                    memory_total_bytes: 10 << 30,
                    ..Default::default()
                },
            ],
            gpu_utilization_percent: Some(87.5),
            gpu_idle_seconds: Some(3.0),
            ..Default::default()
        };
        assert_eq!(
            report(&e),
            [
                "Job ID: 12",
                "Cluster: atrium",
                "User/Group: alice/alice",
                "State: COMPLETED (exit code 0)",
                "Nodes: 1",
                "Cores per node: 4",
                "CPU Utilized: 00:01:23",
                "CPU Efficiency: 34.58% of 00:04:00 core-walltime",
                "Job Wall-clock time: 00:01:00",
                "Memory Utilized: 1.20 GB",
                "Memory Efficiency: 30.00% of 4.00 GB",
                "GPUs: gpu:1",
                "GPU 0: 87.50% mean, 100% max utilization; memory 30.00 GB of 80.00 GB; idle 00:00:03",
                "GPU 1 (MIG-aaaaaaaa): memory 1.00 GB of 10.00 GB (utilization not reported)",
                "GPU Efficiency: 87.50% mean utilization",
                "GPU Idle: 00:00:03 GPU-time",
            ]
        );
        let running = Efficiency {
            state: "RUNNING".into(),
            complete: false,
            ..e.clone()
        };
        let lines = report(&running);
        assert_eq!(lines[3], "State: RUNNING");
        assert_eq!(
            lines.last().map(String::as_str),
            Some("WARNING: Efficiency statistics may be misleading for RUNNING jobs.")
        );
        let pending = Efficiency {
            state: "PENDING".into(),
            complete: false,
            ..e
        };
        assert_eq!(
            report(&pending).last().map(String::as_str),
            Some("Efficiency not available for jobs in the PENDING state.")
        );
    }

    #[test]
    fn memory_and_clock_read_like_seffs() {
        assert_eq!(memory(0), "0.00 KB");
        assert_eq!(memory(1536 * 1024), "1.50 MB");
        assert_eq!(clock(90061.0), "1-01:01:01");
        assert_eq!(clock(59.6), "00:01:00");
    }
}
