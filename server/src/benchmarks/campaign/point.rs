//! One point of a campaign's report: its repetitions' figures, the closest published
//! configuration, what it read, and its change since the previous campaign.
//! Must not touch: how those are worked out (`report`, `closest`, `storage`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::closest::Closest;

/// A point whose spread between repetitions is over this many percent is not a
/// precise figure.
pub const UNSTEADY_PERCENT: f64 = 5.0;

/// The storage a point read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageRead {
    /// Median of the repetitions (MB/s).
    pub mb_per_s: f64,
    /// ÷ the point's GPUs; absent without GPUs.
    pub mb_per_s_per_gpu: Option<f64>,
    /// What measured it.
    pub source: String,
}

/// A point's median against the previous campaign's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    pub before: f64,
    /// Now ÷ before.
    pub ratio: f64,
    /// (now − before) ÷ before, in percent.
    pub change_percent: f64,
    /// More than 5 % lower.
    pub slower: bool,
}

/// One point of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointReport {
    pub index: u32,
    pub key: String,
    pub gpus: u32,
    pub params: BTreeMap<String, String>,
    /// The headline metric of each repetition recorded, by repetition.
    pub values: Vec<f64>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// (max − min) ÷ median, in percent.
    pub spread_percent: Option<f64>,
    /// The spread is over 5 %: not a precise figure.
    pub unsteady: bool,
    /// The median ÷ the GPUs (training only).
    pub per_gpu: Option<f64>,
    pub gpu_model: Option<String>,
    pub closest: Option<Closest>,
    pub storage: Option<StorageRead>,
    pub previous: Option<Change>,
}

impl PointReport {
    /// `spread 7.3 % — more than 5 %: not a precise figure`, for an unsteady point.
    pub fn spread_note(&self) -> Option<String> {
        let spread = self.spread_percent.filter(|_| self.unsteady)?;
        Some(format!(
            "spread {spread:.1} % — more than {UNSTEADY_PERCENT} %: not a precise figure"
        ))
    }
}
