//! Usage charts: GPU-hours per bucket (day, week or month), stacked by user or group,
//! drawn as SVG with plotters. The largest [`MAX_SERIES`] users or groups get their
//! own colour; the rest are summed as `other`.

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::bucket_text;
use crate::domain::numbers::Ticks;
use crate::store::{Bucket, BucketUsage};

/// Users or groups drawn on their own; the others are summed as `other`.
pub const MAX_SERIES: usize = 8;

const WIDTH: u32 = 900;
/// The legend's column, right of the plot.
const LEGEND_WIDTH: u32 = 150;
const HEIGHT: u32 = 420;

/// One colour per series; the last (grey) for `other`.
pub const PALETTE: [RGBColor; MAX_SERIES] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x99, 0x99, 0x99),
];

/// A chart's data: per bucket start, the GPU-hours of each series.
#[derive(Debug, Clone, PartialEq)]
pub struct Stacks {
    pub buckets: Vec<i64>,
    /// `(name, GPU-hours per bucket)`, the largest first; `other` last.
    pub series: Vec<(String, Vec<f64>)>,
}

impl Stacks {
    /// Lay `usage` out over the buckets starting at `bounds` (the last bound ends
    /// the last bucket).
    pub fn of(bounds: &[i64], usage: &[BucketUsage]) -> Stacks {
        let buckets: Vec<i64> = bounds[..bounds.len().saturating_sub(1)].to_vec();
        let mut by_key: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for u in usage {
            if let Ok(i) = buckets.binary_search(&u.start) {
                by_key
                    .entry(u.key.as_str())
                    .or_insert_with(|| vec![0.0; buckets.len()])[i] += u.usage.gpu_seconds / 3600.0;
            }
        }
        let mut series: Vec<(String, Vec<f64>)> = by_key
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let total = |v: &[f64]| v.iter().sum::<f64>();
        series.sort_by(|a, b| total(&b.1).total_cmp(&total(&a.1)).then(a.0.cmp(&b.0)));
        if series.len() > MAX_SERIES {
            let rest = series.split_off(MAX_SERIES - 1);
            let mut other = vec![0.0; buckets.len()];
            for (_, values) in rest {
                for (o, v) in other.iter_mut().zip(values) {
                    *o += v;
                }
            }
            series.push(("other".to_string(), other));
        }
        Stacks { buckets, series }
    }
}

/// The chart as an SVG document. A panic of the drawing library is an error, not
/// the end of the server's worker.
pub fn render(stacks: &Stacks, bucket: Bucket, by: &str) -> Result<String, String> {
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut svg = String::new();
        draw(&mut svg, stacks, bucket, by)
            .map(|()| svg)
            .map_err(|e| e.to_string())
    }));
    drawn.unwrap_or_else(|_| Err("the chart could not be drawn".into()))
}

fn draw(
    svg: &mut String,
    stacks: &Stacks,
    bucket: Bucket,
    by: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let n = stacks.buckets.len().max(1);
    let mut tops = vec![0.0f64; n];
    for (_, values) in &stacks.series {
        for (t, v) in tops.iter_mut().zip(values) {
            *t += v;
        }
    }
    let max = tops.iter().copied().fold(0.0, f64::max);
    let ticks = Ticks::for_max(max, 8);
    let per = match bucket {
        Bucket::Day => "day",
        Bucket::Week => "week",
        Bucket::Month => "month",
    };
    // One label per bucket, unique (its first day), shortened when drawn.
    let mut days: Vec<String> = stacks.buckets.iter().map(|b| bucket_text(*b)).collect();
    if days.is_empty() {
        days.push(String::new());
    }
    let short = |day: &str| -> String {
        match bucket {
            Bucket::Month => day.get(..7).unwrap_or(day).to_string(),
            _ => day.get(5..).unwrap_or(day).to_string(),
        }
    };
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let caption = if stacks.series.is_empty() {
        format!("GPU-hours per {per}: no usage in this range")
    } else {
        format!("GPU-hours per {per}, by {by}")
    };
    let mut chart = ChartBuilder::on(&plot)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(days.as_slice().into_segmented(), 0.0..ticks.top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        // One light line per step, white: none shows (no count of light lines
        // is safe with a single bucket).
        .max_light_lines(1)
        .light_line_style(WHITE)
        .x_labels(n.min(16))
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(day) | SegmentValue::Exact(day) => short(day),
            SegmentValue::Last => String::new(),
        })
        // Round steps (1, 2 or 5 × 10ⁿ) to the top, each printed with the decimals
        // the step needs: below one GPU-hour the axis reads 0.0, 0.2, 0.4 …
        .y_labels(ticks.values().len())
        .y_label_formatter(&|v| ticks.label(*v))
        .y_desc("GPU-hours")
        .x_desc(match bucket {
            Bucket::Day => "Day (UTC)",
            Bucket::Week => "Week starting (UTC)",
            Bucket::Month => "Month (UTC)",
        })
        .draw()?;
    let mut base = vec![0.0f64; n];
    for (i, (name, values)) in stacks.series.iter().enumerate() {
        let color = PALETTE[i.min(MAX_SERIES - 1)];
        let bars: Vec<Rectangle<(SegmentValue<&String>, f64)>> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| **v > 0.0)
            .map(|(b, v)| {
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(&days[b]), base[b]),
                        (
                            days.get(b + 1)
                                .map_or(SegmentValue::Last, SegmentValue::Exact),
                            base[b] + v,
                        ),
                    ],
                    color.filled(),
                );
                bar.set_margin(0, 0, 2, 2);
                base[b] += v;
                bar
            })
            .collect();
        chart.draw_series(bars)?;
        // The legend beside the plot, never over its bars.
        let y = 48 + 22 * i as i32;
        legend.draw(&Rectangle::new([(6, y), (18, y + 12)], color.filled()))?;
        let label: String = if name.chars().count() > 18 {
            name.chars().take(17).chain(['…']).collect()
        } else {
            name.clone()
        };
        legend.draw_text(&label, &("sans-serif", 13).into_font().into(), (24, y))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Usage;

    fn usage(start: i64, key: &str, gpu_hours: f64) -> BucketUsage {
        BucketUsage {
            start,
            key: key.into(),
            usage: Usage {
                jobs: 1,
                gpu_seconds: gpu_hours * 3600.0,
                ..Usage::default()
            },
        }
    }

    const DAY: i64 = 86_400_000;

    /// The text of every `<text>` element of an SVG that reads as a number.
    fn axis_labels(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let inner = t.split_once('>')?.1.split("</text>").next()?.trim();
                inner.parse::<f64>().ok().map(|_| inner.to_string())
            })
            .collect()
    }

    #[test]
    fn stacks_keep_the_largest_series_and_sum_the_rest() {
        let bounds: Vec<i64> = (0..4).map(|d| d * DAY).collect();
        let mut rows = vec![
            usage(0, "alice", 5.0),
            usage(DAY, "alice", 1.0),
            usage(2 * DAY, "bob", 2.0),
        ];
        for i in 0..10 {
            rows.push(usage(0, &format!("user{i}"), 0.5));
        }
        let stacks = Stacks::of(&bounds, &rows);
        assert_eq!(stacks.buckets, [0, DAY, 2 * DAY]);
        assert_eq!(stacks.series.len(), MAX_SERIES);
        assert_eq!(stacks.series[0], ("alice".to_string(), vec![5.0, 1.0, 0.0]));
        assert_eq!(stacks.series[1].0, "bob");
        let (name, other) = stacks.series.last().expect("other");
        assert_eq!(
            (name.as_str(), other[0]),
            ("other", 2.5),
            "5 of the 10 small users"
        );
    }

    #[test]
    fn charts_are_svg_with_escaped_names() {
        let bounds: Vec<i64> = (0..3).map(|d| d * DAY).collect();
        let stacks = Stacks::of(&bounds, &[usage(0, "<ml&cv>", 3.0), usage(DAY, "bob", 1.0)]);
        let svg = render(&stacks, Bucket::Day, "group").expect("svg");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("GPU-hours per day, by group"), "{svg}");
        assert!(svg.contains("&lt;ml&amp;cv&gt;"), "{svg}");
        assert!(!svg.contains("<ml&cv>"), "{svg}");
        assert!(svg.contains("01-01"), "{svg}");
        let one_day = render(
            &Stacks::of(&bounds[..2], &[usage(0, "ml", 0.001)]),
            Bucket::Day,
            "group",
        )
        .expect("one bucket");
        assert!(one_day.contains(">\nml\n<"), "{one_day}");
        let small = render(
            &Stacks::of(&bounds, &[usage(0, "ml", 0.9), usage(DAY, "ml", 0.3)]),
            Bucket::Day,
            "group",
        )
        .expect("small values");
        let labels = axis_labels(&small);
        for tick in ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"] {
            assert!(labels.contains(&tick.to_string()), "{tick}: {labels:?}");
        }
        assert!(!labels.contains(&"1".to_string()), "{labels:?}");
        assert!(small.contains("Day (UTC)"), "{small}");
        let empty = render(&Stacks::of(&bounds, &[]), Bucket::Month, "user").expect("svg");
        assert!(empty.contains("no usage in this range"), "{empty}");
    }
}
