//! Rebuilding the scheduler's state after a restart, and the snapshot it starts from.
//!
//! The state is the last snapshot plus the log written after it (the tail). A
//! snapshot (format 2) holds the cluster (each distinct job request once, see
//! `scheduler::Snapshot`) and the actor's [`JobMeta`] of every open job, each
//! distinct meta once; so a restore reads no job rows but those of the jobs
//! submitted after the snapshot. Format 1, the cluster alone, is still read: its
//! meta then comes from the jobs table, once.
//!
//! Large buffers (the snapshot's text, the log's entries) are dropped as soon as they
//! are read, and jobs that asked the same share one request and one meta in memory.
//!
//! Owns: the stored snapshot's format, encoding it (off the actor's thread) and
//! reading it back with the log.
//! Must not touch: what events mean (`event.rs`), the actor's loop, HTTP types.

use std::collections::HashMap;
use std::sync::Arc;

use scheduler::{Cluster, ClusterConfig};
use serde::{Deserialize, Serialize};

use super::decide::JobMeta;
use super::event::Event;
use crate::store::Store;

/// The format the actor writes (`sched_snapshot.format`): 3, format 2's JSON
/// compressed with gzip.
pub(super) const FORMAT: i64 = 3;

/// A snapshot in format 2 (and, compressed, 3).
#[derive(Serialize, Deserialize)]
struct Stored {
    cluster: scheduler::Snapshot,
    /// Each distinct meta once …
    metas: Vec<Arc<JobMeta>>,
    /// … and which each open job has: (job number, index into `metas`).
    meta_of: Vec<(u64, u32)>,
}

/// What a snapshot is made of, taken on the actor (cheap: the jobs' requests and
/// meta are shared, not copied) and encoded elsewhere by [`encode`].
pub(super) struct Taken {
    cluster: scheduler::Snapshot,
    meta: Vec<(u64, Arc<JobMeta>)>,
}

impl Taken {
    pub(super) fn new(cluster: &Cluster, meta: &HashMap<u64, Arc<JobMeta>>) -> Taken {
        Taken {
            cluster: cluster.snapshot(),
            meta: meta.iter().map(|(id, m)| (*id, m.clone())).collect(),
        }
    }
}

/// The snapshot's bytes (format [`FORMAT`]). Compressed at gzip's fastest level: a
/// queue's JSON repeats itself, so the blob is a tenth of the text or less, and
/// writing it holds the database's write lock (SQLite's: every other commit waits)
/// that much less.
pub(super) fn encode(taken: Taken) -> std::io::Result<Vec<u8>> {
    let mut index: HashMap<*const JobMeta, u32> = HashMap::new();
    let mut metas: Vec<Arc<JobMeta>> = Vec::new();
    let mut meta_of = Vec::with_capacity(taken.meta.len());
    for (id, meta) in taken.meta {
        let i = *index.entry(Arc::as_ptr(&meta)).or_insert_with(|| {
            // Not shared by pointer: maybe still the same as the last distinct one.
            match metas.last() {
                Some(last) if **last == *meta => (metas.len() - 1) as u32,
                _ => {
                    metas.push(meta.clone());
                    (metas.len() - 1) as u32
                }
            }
        });
        meta_of.push((id, i));
    }
    meta_of.sort_unstable();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    serde_json::to_writer(
        &mut gz,
        &Stored {
            cluster: taken.cluster,
            metas,
            meta_of,
        },
    )?;
    gz.finish()
}

/// Format 2's JSON: as stored, or unpacked from format 3.
fn unpacked(s: &crate::store::StoredSnapshot) -> anyhow::Result<std::borrow::Cow<'_, [u8]>> {
    if s.format < 3 {
        return Ok(std::borrow::Cow::Borrowed(s.data.as_bytes()));
    }
    let packed = s
        .packed
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("the snapshot (format {}) has no bytes", s.format))?;
    let mut json = Vec::with_capacity(packed.len() * 8);
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(packed), &mut json)?;
    Ok(std::borrow::Cow::Owned(json))
}

/// The state the actor starts from.
pub(super) struct Restored {
    pub cluster: Cluster,
    /// The last sequence number applied.
    pub seq: i64,
    /// Log entries replayed (written after the snapshot).
    pub entries: usize,
    /// The meta of every open job.
    pub meta: HashMap<u64, Arc<JobMeta>>,
    /// The highest job number the database has.
    pub max_job_id: i64,
    /// The snapshot was in the current format (else write one soon).
    pub current_format: bool,
}

/// The cluster as the database has it: the snapshot, then every logged event, and the
/// meta of the open jobs.
pub(super) async fn rebuild(store: &Store, config: &ClusterConfig) -> anyhow::Result<Restored> {
    let started = std::time::Instant::now();
    let log = store.load_scheduler_log().await?;
    let read = started.elapsed();
    let snapshot_bytes = log
        .snapshot
        .as_ref()
        .map_or(0, |s| s.data.len() + s.packed.as_ref().map_or(0, Vec::len));
    let current_format = log.snapshot.as_ref().is_some_and(|s| s.format == FORMAT);
    let (mut cluster, mut seq, mut meta, meta_complete) = match log.snapshot {
        Some(s) if s.format == 2 || s.format == FORMAT => {
            let stored: Stored = serde_json::from_slice(&unpacked(&s)?)?;
            let Stored {
                cluster,
                metas,
                meta_of,
            } = stored;
            let mut meta = HashMap::with_capacity(meta_of.len());
            for (id, i) in meta_of {
                let m = metas
                    .get(i as usize)
                    .ok_or_else(|| anyhow::anyhow!("the snapshot's job {id} names no meta"))?;
                meta.insert(id, m.clone());
            }
            (Cluster::restore(cluster)?, s.seq, meta, true)
        }
        Some(s) => {
            let snapshot: scheduler::Snapshot = serde_json::from_str(&s.data)?;
            drop(s.data);
            (Cluster::restore(snapshot)?, s.seq, HashMap::new(), false)
        }
        None => (Cluster::new(config.clone())?, 0, HashMap::new(), false),
    };
    let decoded = started.elapsed();
    let entries = log.entries.len();
    // The first job submitted after the snapshot: its meta, and that of every job after
    // it, comes from the jobs table.
    let mut first_submitted: Option<u64> = None;
    for (s, json) in log.entries {
        let event: Event = serde_json::from_str(&json)?;
        drop(json);
        if let Event::Submit { id, .. } = &event {
            first_submitted = Some(first_submitted.map_or(*id, |f| f.min(*id)));
        }
        if let Err(e) = event.apply(&mut cluster) {
            tracing::warn!(seq = s, error = %e, "a logged scheduler event no longer applies");
        }
        seq = s;
    }
    let replayed = started.elapsed();
    let from_id = if meta_complete {
        first_submitted
    } else {
        Some(0)
    };
    let mut meta_rows = 0;
    if let Some(from_id) = from_id {
        let rows = store.open_job_meta(from_id as i64).await?;
        meta_rows = rows.len();
        let mut last: Option<Arc<JobMeta>> = None;
        let unknown = scheduler::JobRequest::default();
        for r in rows {
            // The options the steps need are the request's, which the cluster has.
            let request = cluster.request_of(r.id as u64).unwrap_or(&unknown);
            let m = JobMeta::new(&r.user_name, &r.name, &r.workdir, request);
            let m = match last {
                Some(l) if *l == m => l,
                _ => Arc::new(m),
            };
            last = Some(m.clone());
            meta.insert(r.id as u64, m);
        }
    }
    // Quotas come from the database (through logged events), not from the file.
    let config = ClusterConfig {
        limits: cluster.config().limits.clone(),
        ..config.clone()
    };
    if *cluster.config() != config {
        if cluster.is_empty() {
            tracing::info!(
                "the cluster configuration changed; the queue is empty, so it applies now"
            );
            let old = std::mem::replace(&mut cluster, Cluster::new(config)?);
            cluster.keep_usage_of(&old);
        } else {
            tracing::warn!(
                "the cluster configuration changed while jobs are queued or running; the previous nodes and partitions stay in use until the queue is empty and the portal restarts"
            );
        }
    }
    tracing::info!(
        snapshot_bytes,
        entries,
        meta_rows,
        open_jobs = meta.len(),
        read_ms = read.as_millis() as u64,
        decoded_ms = (decoded - read).as_millis() as u64,
        replayed_ms = (replayed - decoded).as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "the scheduler's state is rebuilt"
    );
    Ok(Restored {
        cluster,
        seq,
        entries,
        meta,
        max_job_id: log.max_job_id,
        current_format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredSnapshot;

    /// A snapshot written now (format 3, packed) reads as the same JSON a format 2
    /// snapshot held as text, so both restore the same cluster.
    #[test]
    fn packed_and_text_snapshots_read_alike() {
        let mut partition = scheduler::PartitionConfig::new("cpu", vec!["n01".into()]);
        partition.default = true;
        let config = ClusterConfig {
            nodes: vec![scheduler::NodeConfig {
                name: "n01".into(),
                cpus: 8,
                memory_mb: 8192,
                features: Vec::new(),
                gpus: Vec::new(),
            }],
            partitions: vec![partition],
            ..Default::default()
        };
        let mut cluster = Cluster::new(config).expect("cluster");
        let owner = scheduler::Owner::user("alice");
        for i in 0..50 {
            let req =
                scheduler::parse_script(&format!("#SBATCH -J job{i} --hold\n")).expect("parse");
            cluster.submit(req, &owner, 0).expect("submit");
        }
        let packed = encode(Taken::new(&cluster, &HashMap::new())).expect("encode");
        let format3 = StoredSnapshot {
            seq: 7,
            format: FORMAT,
            data: String::new(),
            packed: Some(packed.clone()),
        };
        let json = unpacked(&format3).expect("unpack").into_owned();
        assert!(
            packed.len() * 4 < json.len(),
            "{} of {}",
            packed.len(),
            json.len()
        );
        let format2 = StoredSnapshot {
            seq: 7,
            format: 2,
            data: String::from_utf8(json.clone()).expect("utf-8"),
            packed: None,
        };
        assert_eq!(unpacked(&format2).expect("text"), json.as_slice());
        let stored: Stored = serde_json::from_slice(&json).expect("format 2 JSON");
        let restored = Cluster::restore(stored.cluster).expect("restore");
        let all = scheduler::SqueueFilter::default();
        assert_eq!(restored.squeue(&all, 0), cluster.squeue(&all, 0));
        let broken = StoredSnapshot {
            packed: None,
            ..format3
        };
        assert!(unpacked(&broken).is_err());
    }
}
