//! A step's resource use over its run, as its supervisor samples it every
//! `usage_interval_secs` (Slurm's `JobAcctGatherFrequency`) into `usage.json` in the
//! step directory: CPU time and resident memory of the job's processes (or of its
//! cgroup), what they read (every `read` call's bytes, page cache included, and what
//! reached the storage below, from each process's I/O accounting or the cgroup's
//! `io.stat`), and the utilisation and memory of its GPUs from `nvidia-smi`. What is
//! kept is compact: totals over the whole run, one summary per GPU, and a series of
//! at most [`MAX_POINTS`] points (when it is full, neighbours are merged and the
//! interval doubles, so a week-long job keeps the shape of its whole run).
//! Owns: the series and its arithmetic (pure, unit-tested), reading `nvidia-smi`'s
//! per-GPU query and a cgroup's counters.
//! Must not touch: the database, the scheduler.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The most points a series keeps.
pub const MAX_POINTS: usize = 240;

/// Utilisation (percent) below which a GPU counts as idle; the same threshold the
/// sessions' culling uses for "busy".
pub const GPU_IDLE_PERCENT: u32 = 10;

/// How long one `nvidia-smi` query may take.
const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(5);

/// A job's use of what it was given, from its start to the latest sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// The node the job ran on.
    #[serde(default)]
    pub node: String,
    pub started_at_ms: i64,
    /// The latest sample (the end, once the step is over).
    pub sampled_at_ms: i64,
    /// Seconds between two points of `points`.
    pub interval_secs: u32,
    /// CPU time (user and system) of the job's processes.
    pub cpu_seconds: f64,
    /// Peak resident memory.
    pub max_rss_bytes: u64,
    /// Each GPU the job holds, and each MIG instance (memory only: `nvidia-smi` reads
    /// no utilisation of an instance).
    pub gpus: Vec<GpuUsage>,
    pub points: Vec<UsagePoint>,
    /// Bytes the job's processes read through `read` calls, page cache included
    /// (`/proc/PID/io`'s `rchar`, summed over every process seen).
    #[serde(default)]
    pub read_chars: u64,
    /// Bytes the job caused to be read from storage (`read_bytes`, or the cgroup's
    /// `io.stat` `rbytes`): reads the page cache did not answer.
    #[serde(default)]
    pub read_bytes: u64,
    /// Where the read figures come from, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_source: Option<String>,
    /// The step is over: these are the final figures.
    #[serde(default)]
    pub complete: bool,
}

/// One GPU over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuUsage {
    pub index: u32,
    #[serde(default)]
    pub uuid: String,
    /// Samples that read its utilisation.
    pub samples: u32,
    pub utilization_sum: u64,
    pub max_utilization_percent: u32,
    pub last_utilization_percent: u32,
    pub max_memory_bytes: u64,
    pub last_memory_bytes: u64,
    pub memory_total_bytes: u64,
    /// Time it spent below [`GPU_IDLE_PERCENT`].
    pub idle_seconds: f64,
}

impl GpuUsage {
    pub fn mean_utilization_percent(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.utilization_sum as f64 / f64::from(self.samples))
    }
}

/// One point of the series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UsagePoint {
    /// Seconds after the start.
    pub t: u32,
    /// CPU cores busy, on average since the point before.
    pub cpu: f32,
    /// Resident memory, MiB.
    pub rss_mib: u32,
    /// Mean utilisation of the job's GPUs, percent (none without a GPU reading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u8>,
    /// Memory used on the job's GPUs, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mib: Option<u32>,
    /// MB/s (10^6 bytes) read through `read` calls since the point before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_mb_s: Option<f32>,
}

/// What one sample read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    /// CPU time of the job so far.
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub gpus: Vec<GpuSample>,
    /// What the job has read so far, where it could be read.
    pub read: Option<ReadSample>,
}

/// What a job has read so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSample {
    /// Through `read` calls, page cache included.
    pub chars: u64,
    /// From storage.
    pub bytes: u64,
    /// Where these come from, in words.
    pub source: &'static str,
}

/// How fast a job read while it was reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadRate {
    /// MB/s (10^6 bytes) through `read` calls, over the points where it read.
    pub mb_per_s: f64,
    /// The share of those bytes that came from storage rather than the page cache
    /// (0 to 1).
    pub from_storage: f64,
    /// Seconds over which it read.
    pub seconds: f64,
    /// The samples it read in.
    pub points: usize,
    /// Where the figures come from, in words.
    pub source: String,
}

/// One GPU as `nvidia-smi` shows it now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuSample {
    pub index: u32,
    pub uuid: String,
    pub utilization_percent: Option<u32>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
}

const MIB: u64 = 1024 * 1024;

impl Usage {
    pub fn new(started_at_ms: i64, interval_secs: u32) -> Usage {
        Usage {
            started_at_ms,
            sampled_at_ms: started_at_ms,
            interval_secs: interval_secs.max(1),
            ..Default::default()
        }
    }

    /// Add a sample; the series folds when it is full.
    pub fn record(&mut self, sample: &Sample) {
        let dt = (sample.at_ms - self.sampled_at_ms).max(1) as f64 / 1000.0;
        let cpu = (sample.cpu_seconds - self.cpu_seconds).max(0.0) / dt;
        self.cpu_seconds = self.cpu_seconds.max(sample.cpu_seconds);
        self.max_rss_bytes = self.max_rss_bytes.max(sample.rss_bytes);
        self.sampled_at_ms = self.sampled_at_ms.max(sample.at_ms);
        let mut utilisation = Vec::new();
        let mut memory: Option<u64> = None;
        for g in &sample.gpus {
            let at = match self
                .gpus
                .iter()
                .position(|u| u.index == g.index && u.uuid == g.uuid)
            {
                Some(at) => at,
                None => {
                    self.gpus.push(GpuUsage {
                        index: g.index,
                        uuid: g.uuid.clone(),
                        ..Default::default()
                    });
                    self.gpus.len() - 1
                }
            };
            let gpu = &mut self.gpus[at];
            if let Some(u) = g.utilization_percent {
                gpu.samples += 1;
                gpu.utilization_sum += u64::from(u);
                gpu.max_utilization_percent = gpu.max_utilization_percent.max(u);
                gpu.last_utilization_percent = u;
                if u < GPU_IDLE_PERCENT {
                    gpu.idle_seconds += dt;
                }
                utilisation.push(u);
            }
            if let Some(m) = g.memory_used_bytes {
                gpu.max_memory_bytes = gpu.max_memory_bytes.max(m);
                gpu.last_memory_bytes = m;
                *memory.get_or_insert(0) += m;
            }
            if let Some(t) = g.memory_total_bytes {
                gpu.memory_total_bytes = t;
            }
        }
        let gpu = (!utilisation.is_empty())
            .then(|| (utilisation.iter().sum::<u32>() / utilisation.len() as u32).min(100) as u8);
        let read_mb_s = sample.read.as_ref().map(|r| {
            let rate = r.chars.saturating_sub(self.read_chars) as f64 / dt / 1e6;
            self.read_chars = self.read_chars.max(r.chars);
            self.read_bytes = self.read_bytes.max(r.bytes);
            self.read_source = Some(r.source.to_string());
            rate as f32
        });
        self.points.push(UsagePoint {
            t: ((sample.at_ms - self.started_at_ms).max(0) / 1000) as u32,
            cpu: cpu as f32,
            rss_mib: (sample.rss_bytes / MIB) as u32,
            gpu,
            gpu_mib: memory.map(|m| (m / MIB) as u32),
            read_mb_s,
        });
        if self.points.len() > MAX_POINTS {
            self.fold();
        }
    }

    /// Halve the series: each pair of neighbours becomes one point (the mean of
    /// rates, the larger of amounts), and the interval doubles.
    fn fold(&mut self) {
        let merged = self
            .points
            .chunks(2)
            .map(|pair| match pair {
                [a, b] => UsagePoint {
                    t: a.t,
                    cpu: (a.cpu + b.cpu) / 2.0,
                    rss_mib: a.rss_mib.max(b.rss_mib),
                    gpu: match (a.gpu, b.gpu) {
                        (Some(x), Some(y)) => Some(((u16::from(x) + u16::from(y)) / 2) as u8),
                        (x, y) => x.or(y),
                    },
                    gpu_mib: a.gpu_mib.max(b.gpu_mib),
                    read_mb_s: match (a.read_mb_s, b.read_mb_s) {
                        (Some(x), Some(y)) => Some((x + y) / 2.0),
                        (x, y) => x.or(y),
                    },
                },
                [a] => *a,
                _ => UsagePoint::default(),
            })
            .collect();
        self.points = merged;
        self.interval_secs = self.interval_secs.saturating_mul(2);
    }

    /// The step ended: take the final totals where they are larger (the kernel's
    /// count of every process the job waited for, which sampling can miss).
    pub fn finish(&mut self, at_ms: i64, cpu_seconds: f64, max_rss_bytes: u64) {
        self.cpu_seconds = self.cpu_seconds.max(cpu_seconds);
        self.max_rss_bytes = self.max_rss_bytes.max(max_rss_bytes);
        self.sampled_at_ms = self.sampled_at_ms.max(at_ms);
        self.complete = true;
    }

    /// Take the storage reads the kernel counted for every process the job waited
    /// for, where they are more than the samples saw.
    pub fn finish_reads(&mut self, storage_bytes: u64) {
        self.read_bytes = self.read_bytes.max(storage_bytes);
    }

    /// How fast the job read while it was reading: the mean rate of the points that
    /// read at least a twentieth of the fastest one (start-up and the end, which
    /// read little, left out); `None` when it read nothing.
    pub fn read_rate(&self) -> Option<ReadRate> {
        let source = self.read_source.clone()?;
        let fastest = self
            .points
            .iter()
            .filter_map(|p| p.read_mb_s)
            .fold(0.0f32, f32::max);
        if self.read_chars == 0 || fastest <= 0.0 {
            return None;
        }
        let busy: Vec<f64> = self
            .points
            .iter()
            .filter_map(|p| p.read_mb_s)
            .filter(|&r| r >= fastest / 20.0)
            .map(f64::from)
            .collect();
        let mb_per_s = busy.iter().sum::<f64>() / busy.len() as f64;
        Some(ReadRate {
            mb_per_s,
            from_storage: (self.read_bytes as f64 / self.read_chars as f64).min(1.0),
            seconds: busy.len() as f64 * f64::from(self.interval_secs),
            points: busy.len(),
            source,
        })
    }

    /// Time the job's GPUs sat idle, summed over its GPUs.
    pub fn gpu_idle_seconds(&self) -> f64 {
        self.gpus.iter().map(|g| g.idle_seconds).sum()
    }

    /// Mean utilisation over the GPUs that have readings.
    pub fn mean_gpu_utilization_percent(&self) -> Option<f64> {
        let (sum, samples) = self.gpus.iter().fold((0u64, 0u64), |(s, n), g| {
            (s + g.utilization_sum, n + u64::from(g.samples))
        });
        (samples > 0).then(|| sum as f64 / samples as f64)
    }
}

/// Read `usage.json` of a step directory; `None` when the step has not sampled yet.
pub fn read(dir: &Path) -> std::io::Result<Option<Usage>> {
    match std::fs::read(dir.join(USAGE_FILE)) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub(super) const USAGE_FILE: &str = "usage.json";

/// `nvidia-smi`'s reading of the GPUs `indices` (none when there are none to read or
/// it is not installed).
pub(super) async fn gpu_samples(indices: &[u32]) -> Vec<GpuSample> {
    if indices.is_empty() {
        return Vec::new();
    }
    let list: Vec<String> = indices.iter().map(u32::to_string).collect();
    let query = [
        "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total",
        "--format=csv,noheader,nounits",
        "-i",
        &list.join(","),
    ];
    nvidia_smi(&query)
        .await
        .map(|text| parse_gpu_query(&text))
        .unwrap_or_default()
}

/// Lines of `--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total
/// --format=csv,noheader,nounits` (`[N/A]` where a GPU, e.g. in MIG mode, does not
/// report a field).
pub(super) fn parse_gpu_query(text: &str) -> Vec<GpuSample> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [index, uuid, util, used, total] = fields[..] else {
                return None;
            };
            let mib = |v: &str| v.parse::<u64>().ok().map(|m| m * MIB);
            Some(GpuSample {
                index: index.parse().ok()?,
                uuid: uuid.to_string(),
                utilization_percent: util.parse().ok(),
                memory_used_bytes: mib(used),
                memory_total_bytes: mib(total),
            })
        })
        .collect()
}

/// A MIG instance a job holds: its GPU's index and its UUID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigSlice {
    pub gpu: u32,
    pub uuid: String,
}

/// The memory of the MIG instances `migs` (utilisation is not reported per instance):
/// `nvidia-smi -q -x -d MEMORY -i GPU` for each of their GPUs, the instances told apart
/// by UUID (from `nvidia-smi -L` where the XML does not carry it).
pub(super) async fn mig_samples(migs: &[MigSlice]) -> Vec<GpuSample> {
    let mut gpus: Vec<u32> = migs.iter().map(|m| m.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let mut out = Vec::new();
    let mut listed: Option<String> = None;
    for gpu in gpus {
        let index = gpu.to_string();
        let Some(xml) = nvidia_smi(&["-q", "-x", "-d", "MEMORY", "-i", &index]).await else {
            continue;
        };
        let mut devices = parse_mig_memory(&xml);
        if devices.iter().any(|d| d.uuid.is_none()) {
            if listed.is_none() {
                listed = nvidia_smi(&["-L"]).await;
            }
            let uuids = listed
                .as_deref()
                .map(|l| mig_uuids(l, gpu))
                .unwrap_or_default();
            for d in devices.iter_mut().filter(|d| d.uuid.is_none()) {
                d.uuid = uuids
                    .iter()
                    .find(|(n, _)| *n == d.device)
                    .map(|(_, u)| u.clone());
            }
        }
        for m in migs.iter().filter(|m| m.gpu == gpu) {
            if let Some(d) = devices
                .iter()
                .find(|d| d.uuid.as_deref() == Some(m.uuid.as_str()))
            {
                out.push(GpuSample {
                    index: gpu,
                    uuid: m.uuid.clone(),
                    utilization_percent: None,
                    memory_used_bytes: d.used_bytes,
                    memory_total_bytes: d.total_bytes,
                });
            }
        }
    }
    out
}

/// What `nvidia-smi ARGS` printed, if it ran (by its absolute path, with the fixed
/// environment) and succeeded within 5 s.
pub async fn nvidia_smi(args: &[&str]) -> Option<String> {
    let run = tokio::process::Command::new(crate::privilege::system_program("nvidia-smi"))
        .args(args)
        .env_clear()
        .envs(crate::privilege::base_env())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(NVIDIA_SMI_TIMEOUT, run).await {
        Ok(Ok(out)) if out.status.success() => {
            Some(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        _ => None,
    }
}

/// One `<mig_device>` of `nvidia-smi -q -x`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MigMemory {
    /// Its `<index>`: the `Device N` of `nvidia-smi -L`.
    pub device: u32,
    pub uuid: Option<String>,
    pub used_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
}

/// The MIG devices of `nvidia-smi -q -x` output with their `<fb_memory_usage>`.
pub(super) fn parse_mig_memory(xml: &str) -> Vec<MigMemory> {
    // nvidia-smi names its DTD (`<!DOCTYPE nvidia_smi_log SYSTEM …>`); nothing is
    // fetched or expanded from it.
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let Ok(doc) = roxmltree::Document::parse_with_options(xml, options) else {
        return Vec::new();
    };
    let child = |n: roxmltree::Node<'_, '_>, name: &str| {
        n.children()
            .find(|c| c.has_tag_name(name))
            .and_then(|c| c.text())
            .map(|t| t.trim().to_string())
    };
    let mib = |v: Option<String>| {
        v.and_then(|v| v.strip_suffix("MiB").map(|n| n.trim().to_string()))
            .and_then(|n| n.parse::<u64>().ok())
            .map(|n| n * MIB)
    };
    doc.descendants()
        .filter(|n| n.has_tag_name("mig_device"))
        .filter_map(|d| {
            let memory = d.children().find(|c| c.has_tag_name("fb_memory_usage"));
            Some(MigMemory {
                device: child(d, "index")?.parse().ok()?,
                uuid: child(d, "uuid").filter(|u| u.starts_with("MIG-")),
                used_bytes: memory.and_then(|m| mib(child(m, "used"))),
                total_bytes: memory.and_then(|m| mib(child(m, "total"))),
            })
        })
        .collect()
}

/// `(Device N, UUID)` of GPU `gpu`'s MIG instances in `nvidia-smi -L` output.
pub(super) fn mig_uuids(list: &str, gpu: u32) -> Vec<(u32, String)> {
    let mut current: Option<u32> = None;
    let mut out = Vec::new();
    for line in list.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("GPU ") {
            current = rest
                .split_once(':')
                .and_then(|(i, _)| i.trim().parse().ok());
        } else if line.starts_with("MIG ") && current == Some(gpu) {
            let device = line
                .split_once("Device")
                .and_then(|(_, r)| r.split_once(':'))
                .and_then(|(n, _)| n.trim().parse().ok());
            let uuid = line
                .rsplit_once("(UUID:")
                .and_then(|(_, r)| r.strip_suffix(')'))
                .map(|u| u.trim().to_string());
            if let (Some(device), Some(uuid)) = (device, uuid) {
                out.push((device, uuid));
            }
        }
    }
    out
}

/// A cgroup v2's CPU time (`cpu.stat`'s `usage_usec`), current and peak memory.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct CgroupUsage {
    pub cpu_seconds: f64,
    pub memory_bytes: u64,
    /// `memory.peak` (kernels from 5.19); `None` before.
    pub peak_bytes: Option<u64>,
    /// `io.stat`'s `rbytes` over every device; `None` without the io controller.
    pub read_bytes: Option<u64>,
}

pub(super) fn cgroup_usage(dir: &Path) -> Option<CgroupUsage> {
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    let usec: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))?
        .trim()
        .parse()
        .ok()?;
    let number = |file: &str| {
        std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(CgroupUsage {
        cpu_seconds: usec as f64 / 1e6,
        memory_bytes: number("memory.current").unwrap_or(0),
        peak_bytes: number("memory.peak"),
        read_bytes: std::fs::read_to_string(dir.join("io.stat"))
            .ok()
            .map(|t| io_stat_read_bytes(&t)),
    })
}

/// The bytes read from every device in a cgroup's `io.stat` (`MAJ:MIN rbytes=N …`).
fn io_stat_read_bytes(text: &str) -> u64 {
    text.split_whitespace()
        .filter_map(|field| field.strip_prefix("rbytes="))
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// `rchar` and `read_bytes` of a process's `/proc/PID/io`.
pub(super) fn proc_io(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("rchar")?, field("read_bytes").unwrap_or(0)))
}

/// CPU time and largest resident set of every process the caller waited for (and
/// those they waited for in turn): the kernel's account of a finished job.
/// Also the bytes they read from storage (`ru_inblock`, in 512-byte blocks).
pub(super) fn children_usage() -> (f64, u64, u64) {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_CHILDREN) {
        Ok(r) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            let cpu = secs(r.user_time()) + secs(r.system_time());
            // `ru_maxrss` is in kilobytes on Linux.
            let read = (r.block_reads().max(0) as u64) * 512;
            (cpu, (r.max_rss().max(0) as u64) * 1024, read)
        }
        Err(_) => (0.0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_s: i64, cpu: f64, rss_mib: u64, gpus: &[(u32, Option<u32>, u64)]) -> Sample {
        Sample {
            at_ms: at_s * 1000,
            cpu_seconds: cpu,
            rss_bytes: rss_mib * MIB,
            gpus: gpus
                .iter()
                .map(|&(index, util, mem)| GpuSample {
                    index,
                    uuid: format!("GPU-{index}"),
                    utilization_percent: util,
                    memory_used_bytes: Some(mem * MIB),
                    memory_total_bytes: Some(80 * 1024 * MIB),
                })
                .collect(),
            read: None,
        }
    }

    #[test]
    fn reads_become_a_rate_over_the_time_the_job_read() {
        let mut u = Usage::new(0, 1);
        let mut at = |s: i64, chars: u64, bytes: u64| {
            u.record(&Sample {
                at_ms: s * 1000,
                read: Some(ReadSample {
                    chars,
                    bytes,
                    source: "/proc/PID/io",
                }),
                ..Default::default()
            });
        };
        // Start-up reads a little, then 40 MB/s for 4 s, then nothing.
        at(1, 100_000, 0);
        for s in 2..=5 {
            at(
                s,
                100_000 + (s as u64 - 1) * 40_000_000,
                (s as u64 - 1) * 10_000_000,
            );
        }
        at(6, 160_100_000, 40_000_000);
        at(7, 160_100_000, 40_000_000);
        let rate = u.read_rate().expect("a rate");
        assert!((rate.mb_per_s - 40.0).abs() < 1e-6, "{rate:?}");
        assert_eq!((rate.seconds, rate.points), (4.0, 4));
        assert!((rate.from_storage - 0.25).abs() < 0.01, "{rate:?}");
        assert_eq!(rate.source, "/proc/PID/io");
        assert_eq!(u.read_chars, 160_100_000);
        // The kernel's count at the end is taken where it is larger.
        u.finish_reads(50_000_000);
        assert_eq!(u.read_bytes, 50_000_000);
        u.finish_reads(1);
        assert_eq!(u.read_bytes, 50_000_000);
        // Folding keeps the rate of a steady reader.
        let mut steady = Usage::new(0, 1);
        for s in 1..=(MAX_POINTS as i64 + 10) {
            steady.record(&Sample {
                at_ms: s * 1000,
                read: Some(ReadSample {
                    chars: s as u64 * 5_000_000,
                    bytes: 0,
                    source: "x",
                }),
                ..Default::default()
            });
        }
        let rate = steady.read_rate().expect("rate");
        assert!((rate.mb_per_s - 5.0).abs() < 0.1, "{rate:?}");
        assert_eq!(rate.from_storage, 0.0);
        // Nothing read: no rate.
        assert_eq!(Usage::new(0, 1).read_rate(), None);
    }

    #[test]
    fn proc_io_and_io_stat_are_read() {
        let io = "rchar: 323934931\nwchar: 323929600\nsyscr: 632687\nsyscw: 632675\n\
                  read_bytes: 4096\nwrite_bytes: 323932160\ncancelled_write_bytes: 0\n";
        assert_eq!(proc_io(io), Some((323_934_931, 4096)));
        assert_eq!(proc_io("wchar: 1\n"), None);
        assert_eq!(
            io_stat_read_bytes(
                "8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n\
                 8:0 rbytes=90430464 wbytes=299008000 rios=8950 wios=1252 dbytes=50331648 dios=3021\n"
            ),
            91_889_664
        );
    }

    #[test]
    fn a_sample_adds_a_point_with_rates_and_the_totals_keep_the_largest() {
        let mut u = Usage::new(0, 30);
        u.record(&sample(
            30,
            60.0,
            500,
            &[(0, Some(90), 1000), (1, Some(2), 10)],
        ));
        u.record(&sample(
            60,
            75.0,
            300,
            &[(0, Some(100), 2000), (1, Some(4), 10)],
        ));
        assert_eq!(u.cpu_seconds, 75.0);
        assert_eq!(u.max_rss_bytes, 500 * MIB);
        assert_eq!(u.points.len(), 2);
        assert_eq!(u.points[0].t, 30);
        assert_eq!(u.points[0].cpu, 2.0);
        assert_eq!(u.points[1].cpu, 0.5);
        assert_eq!(u.points[1].rss_mib, 300);
        assert_eq!(u.points[0].gpu, Some(46));
        assert_eq!(u.points[1].gpu_mib, Some(2010));
        assert_eq!(u.gpus[0].mean_utilization_percent(), Some(95.0));
        assert_eq!(u.gpus[0].max_memory_bytes, 2000 * MIB);
        // GPU 1 sat idle through both intervals; GPU 0 never did.
        assert_eq!(u.gpus[0].idle_seconds, 0.0);
        assert_eq!(u.gpus[1].idle_seconds, 60.0);
        assert_eq!(u.gpu_idle_seconds(), 60.0);
        assert_eq!(u.mean_gpu_utilization_percent(), Some(49.0));
        u.finish(61_000, 80.0, 100 * MIB);
        assert_eq!((u.cpu_seconds, u.max_rss_bytes), (80.0, 500 * MIB));
        assert!(u.complete);
    }

    #[test]
    fn a_full_series_folds_to_half_at_twice_the_interval() {
        let mut u = Usage::new(0, 1);
        for i in 1..=MAX_POINTS as i64 + 1 {
            let gpu = if i % 2 == 0 { Some(100) } else { Some(0) };
            u.record(&sample(i, i as f64, i as u64, &[(0, gpu, 1)]));
        }
        assert_eq!(u.points.len(), MAX_POINTS / 2 + 1);
        assert_eq!(u.interval_secs, 2);
        assert_eq!(u.points[0].t, 1);
        assert_eq!(u.points[0].rss_mib, 2);
        assert_eq!(u.points[0].gpu, Some(50));
        assert_eq!(u.points.last().map(|p| p.t), Some(MAX_POINTS as u32 + 1));
        // The totals do not fold.
        assert_eq!(u.gpus[0].samples, MAX_POINTS as u32 + 1);
        let idle = (MAX_POINTS / 2 + 1) as f64;
        assert_eq!(u.gpu_idle_seconds(), idle);
    }

    #[test]
    fn nvidia_smi_lines_read_with_missing_fields() {
        let text = "0, GPU-5b7e1d2c-0f4e-4c2a-9d1b-3a5f6e7d8c9b, 87, 30512, 81920\n\
                    1, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, [N/A], 1024, 81920\n\
                    garbage\n";
        let gpus = parse_gpu_query(text);
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].index, 0);
        assert_eq!(gpus[0].utilization_percent, Some(87));
        assert_eq!(gpus[0].memory_used_bytes, Some(30512 * MIB));
        assert_eq!(gpus[1].utilization_percent, None);
        assert_eq!(gpus[1].memory_total_bytes, Some(81920 * MIB));
    }

    #[test]
    fn mig_instances_read_their_memory_by_uuid() {
        // `nvidia-smi -q -x -d MEMORY` of a GPU in MIG mode: the GPU's own memory is
        // N/A, each instance has its own; one driver writes the instance's UUID, the
        // other leaves it to `nvidia-smi -L`.
        let xml = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <gpu id="00000000:07:00.0">
    <fb_memory_usage><total>81920 MiB</total><used>N/A</used></fb_memory_usage>
    <mig_devices>
      <mig_device>
        <index>0</index>
        <gpu_instance_id>1</gpu_instance_id>
        <compute_instance_id>0</compute_instance_id>
        <fb_memory_usage><total>40192 MiB</total><reserved>0 MiB</reserved><used>298 MiB</used><free>39894 MiB</free></fb_memory_usage>
      </mig_device>
      <mig_device>
        <index>1</index>
        <uuid>MIG-bbbbbbbb-0000-5000-8000-000000000001</uuid>
        <fb_memory_usage><total>9728 MiB</total><used>13 MiB</used></fb_memory_usage>
      </mig_device>
    </mig_devices>
  </gpu>
</nvidia_smi_log>"#;
        let devices = parse_mig_memory(xml);
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[0].device, 0);
        assert_eq!(devices[0].uuid, None);
        assert_eq!(devices[0].used_bytes, Some(298 * MIB));
        assert_eq!(devices[0].total_bytes, Some(40192 * MIB));
        assert_eq!(
            devices[1].uuid.as_deref(),
            Some("MIG-bbbbbbbb-0000-5000-8000-000000000001")
        );
        let list = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5b7e1d2c-0f4e-4c2a-9d1b-3a5f6e7d8c9b)
  MIG 3g.40gb     Device  0: (UUID: MIG-aaaaaaaa-0000-5000-8000-000000000000)
  MIG 1g.10gb     Device  1: (UUID: MIG-bbbbbbbb-0000-5000-8000-000000000001)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-6b7e1d2c-0f4e-4c2a-9d1b-3a5f6e7d8c9b)
  MIG 7g.80gb     Device  0: (UUID: MIG-cccccccc-0000-5000-8000-000000000002)
";
        assert_eq!(
            mig_uuids(list, 0),
            vec![
                (0, "MIG-aaaaaaaa-0000-5000-8000-000000000000".to_string()),
                (1, "MIG-bbbbbbbb-0000-5000-8000-000000000001".to_string()),
            ]
        );
        assert_eq!(mig_uuids(list, 1).len(), 1);
        assert!(parse_mig_memory("not xml").is_empty());
        // Two instances of one GPU are kept apart in the usage.
        let mut u = Usage::new(0, 30);
        u.record(&Sample {
            at_ms: 30_000,
            gpus: vec![
                GpuSample {
                    index: 0,
                    uuid: "MIG-a".into(),
                    memory_used_bytes: Some(MIB),
                    ..Default::default()
                },
                GpuSample {
                    index: 0,
                    uuid: "MIG-b".into(),
                    memory_used_bytes: Some(2 * MIB),
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        assert_eq!(u.gpus.len(), 2);
        assert_eq!(u.gpus[1].max_memory_bytes, 2 * MIB);
        assert_eq!(u.mean_gpu_utilization_percent(), None);
    }

    #[test]
    fn a_cgroup_reads_its_counters() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("cpu.stat"),
            "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
        )
        .expect("cpu.stat");
        std::fs::write(dir.path().join("memory.current"), "4096\n").expect("current");
        let u = cgroup_usage(dir.path()).expect("read");
        assert_eq!(u.cpu_seconds, 2.5);
        assert_eq!(u.memory_bytes, 4096);
        assert_eq!(u.peak_bytes, None);
    }
}
