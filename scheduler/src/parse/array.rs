//! `--array` specifications: lists, ranges, steps and a `%` limit. Indices are
//! checked against [`MaxArraySize`] as written, before anything is expanded; the
//! union of overlapping ranges is computed in a bitset of at most that many bits.

use super::limits::MaxArraySize;
use crate::model::ArraySpec;
use std::fmt;
use std::str::FromStr;

pub(crate) const ARRAY_EXPECTED: &str = "indices like 0-15, 1,3,5, 0-15:4 with an optional %limit";

impl ArraySpec {
    /// Parses `0-15`, `1,3,5`, `0-15:4%2` with every task index below `max`. The work
    /// and memory are bounded by the length of `s` and by `max`, never by the
    /// indices' values.
    pub fn parse(s: &str, max: MaxArraySize) -> Result<Self, String> {
        let bad = || format!("expected {ARRAY_EXPECTED}, got \"{s}\"");
        let number = |v: &str| -> Result<u32, String> {
            if v.is_empty() || v.len() > 7 || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            v.parse().map_err(|_| bad())
        };
        let index = |v: &str| -> Result<u32, String> {
            let x = number(v)?;
            if x >= max.get() {
                return Err(format!(
                    "task index {x} is above the largest allowed, {} (MaxArraySize is {max})",
                    max.get() - 1
                ));
            }
            Ok(x)
        };
        let (list, limit) = match s.split_once('%') {
            Some((l, m)) => {
                let m = number(m)?;
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
                Some((r, st)) => (r, number(st)?),
                None => (part, 1),
            };
            if step == 0 {
                return Err(bad());
            }
            let (a, b) = match range.split_once('-') {
                Some((a, b)) => (index(a)?, index(b)?),
                None => {
                    let a = index(range)?;
                    (a, a)
                }
            };
            if b < a {
                return Err(bad());
            }
            // Normalise so that `last` is an element, and a single index has step 1.
            let last = a + (b - a) / step * step;
            ranges.push((a, last, if a == last { 1 } else { step }));
        }
        Ok(ArraySpec::normalised(ranges, limit, max))
    }

    /// Sorts ranges; overlapping ones are replaced by their union. Every index is
    /// below `max` (checked by the caller), so the union fits in `max` bits.
    fn normalised(
        mut ranges: Vec<(u32, u32, u32)>,
        max_running: Option<u32>,
        max: MaxArraySize,
    ) -> Self {
        ranges.sort_unstable();
        ranges.dedup();
        if ranges.windows(2).any(|w| w[1].0 <= w[0].1) {
            let top = ranges
                .iter()
                .map(|r| r.1)
                .max()
                .unwrap_or(0)
                .min(max.get() - 1);
            let mut set = IndexSet::new(top);
            for &(a, b, step) in &ranges {
                set.insert(a, b.min(top), step);
            }
            ranges = set.progressions();
        }
        ArraySpec {
            ranges,
            max_running,
        }
    }

    /// Whether every task index is below `max`.
    pub fn fits(&self, max: MaxArraySize) -> bool {
        self.ranges.iter().all(|r| r.1 < max.get())
    }

    /// Number of tasks.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(a, b, st)| u64::from((b - a) / st.max(1) + 1))
            .sum()
    }

    /// Whether there are no tasks (never true for a parsed spec).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The smallest and largest task index.
    pub fn bounds(&self) -> Option<(u32, u32)> {
        let first = self.ranges.iter().map(|r| r.0).min()?;
        let last = self.ranges.iter().map(|r| r.1).max()?;
        Some((first, last))
    }

    /// The tasks of this spec that are not in `taken`, with no `%` limit; `None` when
    /// none is left. Work bounded by the largest index and the length of `taken`.
    pub fn without(&self, taken: impl IntoIterator<Item = u32>) -> Option<ArraySpec> {
        let (_, top) = self.bounds()?;
        let mut set = IndexSet::new(top);
        for &(a, b, st) in &self.ranges {
            set.insert(a, b, st.max(1));
        }
        for t in taken {
            if t <= top {
                set.0[t as usize / 64] &= !(1 << (t % 64));
            }
        }
        let ranges = set.progressions();
        (!ranges.is_empty()).then_some(ArraySpec {
            ranges,
            max_running: None,
        })
    }

    /// Whether task `t` is one of this spec's.
    pub fn contains(&self, t: u32) -> bool {
        self.ranges
            .iter()
            .any(|&(a, b, st)| (a..=b).contains(&t) && (t - a).is_multiple_of(st.max(1)))
    }

    /// The task indices in increasing order.
    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges
            .iter()
            .flat_map(|&(a, b, st)| (a..=b).step_by(st.max(1) as usize))
    }
}

/// Task indices `0..=top` as bits.
struct IndexSet(Vec<u64>);

impl IndexSet {
    fn new(top: u32) -> Self {
        IndexSet(vec![0; top as usize / 64 + 1])
    }

    /// Adds `first, first+step, … ≤ last`; a unit step fills whole words.
    fn insert(&mut self, first: u32, last: u32, step: u32) {
        if first > last {
            return;
        }
        if step == 1 {
            let (a, b) = (first as usize, last as usize);
            for w in a / 64..=b / 64 {
                let lo = if w == a / 64 { a % 64 } else { 0 };
                let hi = if w == b / 64 { b % 64 } else { 63 };
                let mask = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
                self.0[w] |= mask;
            }
        } else {
            for i in (first..=last).step_by(step as usize) {
                self.0[i as usize / 64] |= 1 << (i % 64);
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits & (1 << b) != 0)
                .map(move |b| (w * 64 + b) as u32)
        })
    }

    /// The set as ranges `(first, last, step)`: each run of equal gaps, taken
    /// greedily from the smallest index.
    fn progressions(&self) -> Vec<(u32, u32, u32)> {
        let mut out: Vec<(u32, u32, u32)> = Vec::new();
        let mut cur: Option<(u32, u32, u32)> = None;
        for i in self.iter() {
            cur = Some(match cur {
                None => (i, i, 1),
                Some((a, b, _)) if a == b => (a, i, i - a),
                Some((a, b, st)) if i - b == st => (a, i, st),
                Some(done) => {
                    out.push(done);
                    (i, i, 1)
                }
            });
        }
        out.extend(cur);
        out
    }
}

impl FromStr for ArraySpec {
    type Err = String;
    /// Parses with the largest size a site may configure: for reading back what was
    /// accepted under the site's own, smaller, size.
    fn from_str(s: &str) -> Result<Self, String> {
        ArraySpec::parse(s, MaxArraySize::CEILING)
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
