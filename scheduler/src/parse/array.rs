//! `--array` specifications: lists, ranges, steps and a `%` limit.

use crate::model::ArraySpec;
use std::fmt;
use std::str::FromStr;

/// Largest task index accepted (Slurm's `MaxArraySize` is configurable; this is a
/// hard ceiling against typos like `0-99999999`).
pub const MAX_ARRAY_INDEX: u32 = 1_000_000;

pub(crate) const ARRAY_EXPECTED: &str = "indices like 0-15, 1,3,5, 0-15:4 with an optional %limit";

impl FromStr for ArraySpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected {ARRAY_EXPECTED}, got \"{s}\"");
        let n = |v: &str| -> Result<u32, String> {
            if v.is_empty() || v.len() > 7 || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let x: u32 = v.parse().map_err(|_| bad())?;
            if x > MAX_ARRAY_INDEX {
                return Err(format!("array index {x} is above {MAX_ARRAY_INDEX}"));
            }
            Ok(x)
        };
        let (list, limit) = match s.split_once('%') {
            Some((l, m)) => {
                let m = n(m)?;
                if m == 0 {
                    return Err(bad());
                }
                (l, Some(m))
            }
            None => (s, None),
        };
        let mut ranges = Vec::new();
        for part in list.split(',') {
            let (range, step) = match part.split_once(':') {
                Some((r, st)) => (r, n(st)?),
                None => (part, 1),
            };
            if step == 0 {
                return Err(bad());
            }
            let (a, b) = match range.split_once('-') {
                Some((a, b)) => (n(a)?, n(b)?),
                None => {
                    let a = n(range)?;
                    (a, a)
                }
            };
            if b < a {
                return Err(bad());
            }
            // Normalise so that `last` is an element.
            ranges.push((a, a + (b - a) / step * step, step));
        }
        Ok(ArraySpec::normalised(ranges, limit))
    }
}

impl ArraySpec {
    /// Sorts ranges; merges exact duplicates away by re-expanding overlapping ones.
    fn normalised(mut ranges: Vec<(u32, u32, u32)>, max_running: Option<u32>) -> Self {
        ranges.sort_unstable();
        let overlaps = ranges.windows(2).any(|w| w[1].0 <= w[0].1);
        if overlaps {
            let mut all: Vec<u32> = ranges
                .iter()
                .flat_map(|&(a, b, st)| (a..=b).step_by(st as usize))
                .collect();
            all.sort_unstable();
            all.dedup();
            ranges = all.into_iter().map(|i| (i, i, 1)).collect();
            // Re-compress consecutive singles into unit-step ranges.
            let mut merged: Vec<(u32, u32, u32)> = Vec::new();
            for (i, _, _) in ranges {
                match merged.last_mut() {
                    Some(last) if last.2 == 1 && last.1 + 1 == i => last.1 = i,
                    _ => merged.push((i, i, 1)),
                }
            }
            ranges = merged;
        }
        ArraySpec {
            ranges,
            max_running,
        }
    }

    /// Number of tasks.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(a, b, st)| u64::from((b - a) / st + 1))
            .sum()
    }

    /// Whether there are no tasks (never true for a parsed spec).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The task indices in increasing order.
    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges
            .iter()
            .flat_map(|&(a, b, st)| (a..=b).step_by(st as usize))
    }
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b, st)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match (a == b, st) {
                (true, _) => write!(f, "{a}")?,
                (false, 1) => write!(f, "{a}-{b}")?,
                (false, st) => write!(f, "{a}-{b}:{st}")?,
            }
        }
        if let Some(m) = self.max_running {
            write!(f, "%{m}")?;
        }
        Ok(())
    }
}

impl TryFrom<String> for ArraySpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<ArraySpec> for String {
    fn from(a: ArraySpec) -> String {
        a.to_string()
    }
}
