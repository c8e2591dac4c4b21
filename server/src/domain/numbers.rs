//! Numbers as people read them: counted nouns (`1 GPU`, `2 GPUs`), the axis ticks of
//! a chart (steps of 1, 2 or 5 × 10ⁿ, printed with as many decimals as the step
//! needs), and the one precision for a column of figures and its total, chosen so
//! that no value that is not zero reads as zero and the rounded rows add up to the
//! rounded total.
//!
//! Owns: those rules. Must not touch: anything with IO (a leaf).

/// `1 GPU`, `2 GPUs`, `0 GPUs`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `1 GPU`, `1.5 GPUs`, `0.5 GPUs`: a count that may have a fraction (at most two
/// decimals, none when whole); only exactly one takes the singular.
pub fn plural_f(x: f64, one: &str, many: &str) -> String {
    let text = short(x);
    if text == "1" {
        format!("{text} {one}")
    } else {
        format!("{text} {many}")
    }
}

/// `2`, `1.5`, `0.25`: at most two decimals, none when whole.
pub fn short(x: f64) -> String {
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// The ticks of a value axis from 0 to at least `max`: a step of 1, 2 or 5 × 10ⁿ
/// giving at most `most` intervals, the top (a whole number of steps ≥ `max`), and
/// the decimals each tick needs to be printed exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ticks {
    pub step: f64,
    pub top: f64,
    pub decimals: usize,
}

impl Ticks {
    pub fn for_max(max: f64, most: usize) -> Ticks {
        let most = most.max(1) as f64;
        let max = if max.is_finite() && max > 0.0 {
            max
        } else {
            1.0
        };
        let rough = max / most;
        let magnitude = 10f64.powf(rough.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|s| max / s <= most + 1e-9)
            .unwrap_or(10.0 * magnitude);
        let intervals = (max / step - 1e-9).ceil().max(1.0);
        let decimals = if step >= 1.0 {
            0
        } else {
            (-step.log10().floor()) as usize
        };
        Ticks {
            step,
            top: intervals * step,
            decimals,
        }
    }

    /// Every tick value, from 0 to the top.
    pub fn values(&self) -> Vec<f64> {
        let n = (self.top / self.step).round() as usize;
        (0..=n).map(|i| i as f64 * self.step).collect()
    }

    /// A tick's label, with the axis's decimals.
    pub fn label(&self, v: f64) -> String {
        format!("{:.*}", self.decimals, v)
    }
}

/// Round `x` to `decimals`.
fn round_to(x: f64, decimals: usize) -> f64 {
    let f = 10f64.powi(decimals as i32);
    (x * f).round() / f
}

/// The decimals (from `least` up to `most`) to print a column of `rows` and their
/// `total` with: the fewest such that every row that is not zero shows as not zero,
/// and the rows as printed add up to the total as printed.
pub fn decimals_for(rows: &[f64], total: f64, least: usize, most: usize) -> usize {
    (least..=most)
        .find(|&d| {
            let shown: f64 = rows.iter().map(|r| round_to(*r, d)).sum();
            let tiny = 0.5 / 10f64.powi(d as i32 + 1);
            rows.iter().all(|r| *r == 0.0 || round_to(*r, d) != 0.0)
                && (round_to(shown, d) - round_to(total, d)).abs() < tiny
        })
        .unwrap_or(most)
}

/// `x` with `decimals` (never `-0.0`: a sum of nothing is `-0.0` in floating point).
pub fn fixed(x: f64, decimals: usize) -> String {
    let text = format!("{:.decimals$}", x + 0.0);
    match text.strip_prefix('-') {
        Some(rest) if rest.bytes().all(|b| b == b'0' || b == b'.') => rest.to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nouns_agree_with_their_count() {
        assert_eq!(plural(1, "GPU", "GPUs"), "1 GPU");
        assert_eq!(plural(0, "GPU", "GPUs"), "0 GPUs");
        assert_eq!(plural(2, "job", "jobs"), "2 jobs");
        assert_eq!(plural_f(1.0, "GPU", "GPUs"), "1 GPU");
        assert_eq!(plural_f(0.5, "GPU", "GPUs"), "0.5 GPUs");
        assert_eq!(plural_f(1.25, "GPU", "GPUs"), "1.25 GPUs");
        assert_eq!(short(2.0), "2");
        assert_eq!(short(0.004), "0");
    }

    #[test]
    fn ticks_are_round_steps_with_the_decimals_they_need() {
        // The chart that read `1 1 1 1 1 0 0 0`: values under 1.
        let t = Ticks::for_max(0.9, 8);
        assert_eq!(t.decimals, 1);
        let labels: Vec<String> = t.values().iter().map(|v| t.label(*v)).collect();
        assert_eq!(labels, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        let t = Ticks::for_max(0.04, 5);
        assert!((t.step - 0.01).abs() < 1e-12, "{t:?}");
        assert_eq!(t.decimals, 2);
        let t = Ticks::for_max(37.0, 8);
        assert_eq!((t.step, t.top, t.decimals), (5.0, 40.0, 0));
        let t = Ticks::for_max(1234.0, 6);
        assert_eq!((t.step, t.top), (500.0, 1500.0));
        // Labels are distinct: no two ticks read the same.
        for max in [0.003, 0.07, 0.9, 1.0, 3.3, 12.0, 99.0, 1e6] {
            let t = Ticks::for_max(max, 8);
            let labels: Vec<String> = t.values().iter().map(|v| t.label(*v)).collect();
            let mut unique = labels.clone();
            unique.dedup();
            assert_eq!(labels, unique, "max {max}");
            assert!(t.top >= max && labels.len() <= 9, "max {max}: {labels:?}");
        }
        assert_eq!(Ticks::for_max(0.0, 8).top, 1.0);
    }

    #[test]
    fn a_column_and_its_total_share_one_precision_that_adds_up() {
        // "0.0 GPU-hours" beside a row of 0.04.
        let d = decimals_for(&[0.04], 0.04, 1, 3);
        assert_eq!(d, 2);
        assert_eq!(fixed(0.04, d), "0.04");
        // Rows that round down each but not together: 0.14 + 0.14 + 0.14 = 0.42.
        let rows = [0.14, 0.14, 0.14];
        let d = decimals_for(&rows, 0.42, 1, 3);
        assert_eq!(d, 2, "0.1 × 3 ≠ 0.4");
        assert_eq!(decimals_for(&[2.5, 1.0], 3.5, 1, 3), 1);
        assert_eq!(decimals_for(&[], 0.0, 1, 3), 1);
        assert_eq!(decimals_for(&[0.0001], 0.0001, 1, 3), 3, "capped");
        assert_eq!(fixed(Vec::<f64>::new().iter().sum(), 1), "0.0");
        assert_eq!(fixed(-0.001, 1), "0.0");
        assert_eq!(fixed(-1.5, 1), "-1.5");
    }
}
