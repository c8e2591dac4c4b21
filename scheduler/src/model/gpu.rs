//! GPUs and the slices they are handed out as: a whole GPU, a MIG instance or a shard.

use serde::{Deserialize, Serialize};

/// One physical GPU of a node, as configured or discovered with `nvidia-smi`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuConfig {
    /// Index as `nvidia-smi` shows it (what `CUDA_VISIBLE_DEVICES` takes).
    pub index: u32,
    pub uuid: String,
    /// Model name, e.g. `A100-80GB`, `H100-80GB`, `V100-SXM2-32GB`. A typed request
    /// `gpu:a100` matches a model equal to the type or starting with `type-`
    /// (case-insensitive).
    pub model: String,
    pub memory_mb: u64,
    #[serde(default)]
    pub mode: GpuMode,
}

/// How a GPU is sliced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GpuMode {
    /// The whole GPU is one slice.
    #[default]
    Whole,
    /// Partitioned into MIG instances; each is one slice.
    Mig(Vec<MigInstanceConfig>),
    /// Time-sliced into this many shards (`--gres=shard:N`).
    Shards(u32),
}

/// One MIG instance of a partitioned GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInstanceConfig {
    /// Profile such as `1g.10gb`; must be valid for the GPU's model.
    pub profile: String,
    pub uuid: String,
}

/// The exact device a job gets, listed in its allocation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SliceId {
    /// A whole GPU by index.
    Gpu { index: u32 },
    /// A MIG instance of GPU `gpu`.
    Mig {
        gpu: u32,
        profile: String,
        uuid: String,
    },
    /// Shard `shard` of GPU `gpu`.
    Shard { gpu: u32, shard: u32 },
}

impl SliceId {
    /// What to put in `CUDA_VISIBLE_DEVICES` for this slice: the index of a whole
    /// or shared GPU, the UUID of a MIG instance.
    pub fn cuda_device(&self) -> String {
        match self {
            SliceId::Gpu { index } => index.to_string(),
            SliceId::Mig { uuid, .. } => uuid.clone(),
            SliceId::Shard { gpu, .. } => gpu.to_string(),
        }
    }
}

/// MIG profiles valid for a GPU model, with their compute slices (out of 7), or
/// `None` for a model without MIG support.
pub fn mig_profiles(model: &str) -> Option<&'static [(&'static str, u32)]> {
    const A100_40: &[(&str, u32)] = &[
        ("1g.5gb", 1),
        ("1g.10gb", 1),
        ("2g.10gb", 2),
        ("3g.20gb", 3),
        ("4g.20gb", 4),
        ("7g.40gb", 7),
    ];
    const X_80: &[(&str, u32)] = &[
        ("1g.10gb", 1),
        ("1g.20gb", 1),
        ("2g.20gb", 2),
        ("3g.40gb", 3),
        ("4g.40gb", 4),
        ("7g.80gb", 7),
    ];
    const H_96: &[(&str, u32)] = &[
        ("1g.12gb", 1),
        ("1g.24gb", 1),
        ("2g.24gb", 2),
        ("3g.47gb", 3),
        ("4g.47gb", 4),
        ("7g.94gb", 7),
    ];
    let m = model.to_ascii_lowercase();
    if m.starts_with("a100") || m.starts_with("a30") {
        if m.contains("80gb") {
            Some(X_80)
        } else {
            Some(A100_40)
        }
    } else if m.starts_with("h100") || m.starts_with("h800") || m.starts_with("h200") {
        if m.contains("94gb") || m.contains("96gb") {
            Some(H_96)
        } else {
            Some(X_80)
        }
    } else {
        None
    }
}

/// Compute slices (out of 7) of a MIG profile name such as `3g.40gb`.
pub(crate) fn mig_compute_slices(profile: &str) -> Option<u32> {
    let (g, rest) = profile.split_once('g')?;
    if !rest.starts_with('.') {
        return None;
    }
    g.parse().ok().filter(|g| (1..=7).contains(g))
}

/// Whether a typed request `gpu:<ty>` names this GPU model.
pub(crate) fn model_matches(model: &str, ty: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let t = ty.to_ascii_lowercase();
    m == t || (m.starts_with(&t) && m.as_bytes().get(t.len()) == Some(&b'-'))
}
