//! The cluster's utilisation over time, for the administrators' overview: the
//! GPU-hours used each day (from the accounting records) against what the GPUs could
//! give (GPUs × 24 h), drawn as SVG with plotters, with round ticks and axis labels.
//! Must not touch: SQL or HTTP.

use plotters::prelude::*;

use super::bucket_text;
use crate::domain::numbers::{decimals_for, fixed, Ticks};
use crate::store::BucketUsage;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 320;

/// Per day: GPU-hours used, and what the GPUs could give.
#[derive(Debug, Clone, PartialEq)]
pub struct Utilisation {
    /// Each day's start (ms).
    pub days: Vec<i64>,
    pub used: Vec<f64>,
    /// GPU-hours the cluster can give in a day (GPUs × 24).
    pub capacity_per_day: f64,
}

impl Utilisation {
    /// `usage` (per bucket, any key) summed per day over the days starting at
    /// `bounds` (the last bound ends the last day); `gpus` whole GPUs in all.
    pub fn of(bounds: &[i64], usage: &[BucketUsage], gpus: f64) -> Utilisation {
        let days: Vec<i64> = bounds[..bounds.len().saturating_sub(1)].to_vec();
        let mut used = vec![0.0; days.len()];
        for u in usage {
            if let Ok(i) = days.binary_search(&u.start) {
                used[i] += u.usage.gpu_seconds / 3600.0;
            }
        }
        Utilisation {
            days,
            used,
            capacity_per_day: gpus * 24.0,
        }
    }

    pub fn total_used(&self) -> f64 {
        self.used.iter().sum()
    }

    pub fn total_capacity(&self) -> f64 {
        self.capacity_per_day * self.days.len() as f64
    }

    /// `12.5 of 1440.0 GPU-hours (0.9 %)`: the used and the capacity with the one
    /// precision that shows every day's use.
    pub fn summary(&self) -> String {
        let (used, capacity) = (self.total_used(), self.total_capacity());
        let d = decimals_for(&self.used, used, 1, 3);
        let percent = if capacity > 0.0 {
            format!(" ({} %)", fixed(used / capacity * 100.0, 1))
        } else {
            String::new()
        };
        format!(
            "{} of {} GPU-hours{percent}",
            fixed(used, d),
            fixed(capacity, d)
        )
    }
}

/// The chart as an SVG document: a bar per day, the capacity as a dashed line. A
/// panic of the drawing library is an error.
pub fn render(u: &Utilisation) -> Result<String, String> {
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut svg = String::new();
        draw(&mut svg, u).map(|()| svg).map_err(|e| e.to_string())
    }));
    drawn.unwrap_or_else(|_| Err("the chart could not be drawn".into()))
}

fn draw(svg: &mut String, u: &Utilisation) -> Result<(), Box<dyn std::error::Error>> {
    let max = u.used.iter().copied().fold(u.capacity_per_day, f64::max);
    let ticks = Ticks::for_max(max, 6);
    let mut days: Vec<String> = u.days.iter().map(|d| bucket_text(*d)).collect();
    if days.is_empty() {
        days.push(String::new());
    }
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "GPU-hours used per day, and what the GPUs could give",
            ("sans-serif", 17),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(days.as_slice().into_segmented(), 0.0..ticks.top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .max_light_lines(1)
        .light_line_style(WHITE)
        .x_labels(days.len().min(10))
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(day) | SegmentValue::Exact(day) => {
                day.get(5..).unwrap_or(day).to_string()
            }
            SegmentValue::Last => String::new(),
        })
        .y_labels(ticks.values().len())
        .y_label_formatter(&|v| ticks.label(*v))
        .y_desc("GPU-hours")
        .x_desc("Day (UTC)")
        .draw()?;
    let used = RGBColor(0x1f, 0x4e, 0x79);
    chart
        .draw_series(
            u.used
                .iter()
                .enumerate()
                .filter(|(_, v)| **v > 0.0)
                .map(|(i, v)| {
                    let mut bar = Rectangle::new(
                        [
                            (SegmentValue::Exact(&days[i]), 0.0),
                            (
                                days.get(i + 1)
                                    .map_or(SegmentValue::Last, SegmentValue::Exact),
                                *v,
                            ),
                        ],
                        used.filled(),
                    );
                    bar.set_margin(0, 0, 2, 2);
                    bar
                }),
        )?
        .label("used")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], used.filled()));
    let capacity = RGBColor(0xb4, 0x23, 0x18);
    let first = SegmentValue::Exact(&days[0]);
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![
                (first, u.capacity_per_day),
                (SegmentValue::Last, u.capacity_per_day),
            ],
            capacity.stroke_width(2),
        )))?
        .label("what the GPUs could give")
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 14, y)], capacity.stroke_width(2))
        });
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Usage;

    const DAY: i64 = 86_400_000;

    fn usage(start: i64, key: &str, hours: f64) -> BucketUsage {
        BucketUsage {
            start,
            key: key.into(),
            usage: Usage {
                jobs: 1,
                gpu_seconds: hours * 3600.0,
                ..Usage::default()
            },
        }
    }

    #[test]
    fn days_sum_every_user_and_the_summary_adds_up() {
        let bounds: Vec<i64> = (0..4).map(|d| d * DAY).collect();
        let u = Utilisation::of(
            &bounds,
            &[
                usage(0, "ann", 1.5),
                usage(0, "bob", 0.5),
                usage(2 * DAY, "ann", 0.04),
            ],
            2.0,
        );
        assert_eq!(u.days, [0, DAY, 2 * DAY]);
        assert_eq!(u.used, [2.0, 0.0, 0.04]);
        assert_eq!(u.capacity_per_day, 48.0);
        assert_eq!(u.summary(), "2.04 of 144.00 GPU-hours (1.4 %)");
        let svg = render(&u).expect("svg");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("GPU-hours"), "{svg}");
        assert!(svg.contains("Day (UTC)"), "{svg}");
        assert!(svg.contains("what the GPUs could give"), "{svg}");
        assert!(svg.contains("01-01"), "{svg}");
        // Round ticks up to the capacity (48): 0, 10 … 50.
        for tick in ["0", "10", "20", "30", "40", "50"] {
            assert!(
                svg.contains(&format!(">\n{tick}\n<")) || svg.contains(&format!(">{tick}<")),
                "{tick}: {svg}"
            );
        }
    }

    #[test]
    fn no_gpus_and_no_days_still_draw() {
        let u = Utilisation::of(&[0], &[], 0.0);
        assert_eq!(u.summary(), "0.0 of 0.0 GPU-hours");
        assert!(render(&u).expect("svg").starts_with("<svg"));
    }
}
