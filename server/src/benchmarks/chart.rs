//! Benchmark charts, drawn as SVG with plotters: a metric (images/sec by default)
//! against GPUs, one line per series: local runs and each reference study (scaling,
//! local against reference), or each storage system (storage comparison).
//!
//! A series holds the best value measured at each GPU count. On a scaling chart each
//! series also gets its ideal line, linear from its smallest point (the 1-GPU run when
//! there is one), and each point is labelled with its efficiency: the value measured ÷
//! the ideal value there, in percent. Must not touch: SQL or HTTP.

use std::collections::BTreeMap;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::sizing::figure;
use crate::accounting::chart::{MAX_SERIES, PALETTE};
use crate::domain::numbers::Ticks;
use crate::store::BenchmarkRecord;

const WIDTH: u32 = 900;
/// The legend's column, right of the plot.
const LEGEND_WIDTH: u32 = 220;
const HEIGHT: u32 = 440;

/// One point: the best value measured on this many GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub gpus: i64,
    pub value: f64,
}

/// The points of one series, by GPU count.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

impl Series {
    /// What linear scaling from the smallest point would reach on `gpus`.
    pub fn ideal(&self, gpus: i64) -> Option<f64> {
        let base = self.points.first()?;
        Some(base.value * gpus as f64 / base.gpus as f64)
    }

    /// The efficiency of `point` in percent: measured ÷ ideal.
    pub fn efficiency(&self, point: &Point) -> Option<f64> {
        self.ideal(point.gpus)
            .filter(|ideal| *ideal > 0.0)
            .map(|ideal| point.value / ideal * 100.0)
    }
}

/// What the series of a chart are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesBy {
    /// Local runs, and each reference study.
    Source,
    /// Each storage system (and source).
    Storage,
}

/// A chart's data.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    /// The metric on the y axis and its unit.
    pub metric: String,
    pub unit: String,
    /// Local runs first, then by name; at most [`MAX_SERIES`].
    pub series: Vec<Series>,
    /// Series left out beyond [`MAX_SERIES`].
    pub left_out: usize,
    /// Draw ideal lines and efficiency labels.
    pub scaling: bool,
}

impl Chart {
    /// Lay out `metric` of `runs` against their GPUs (runs without the metric, or
    /// without GPUs, are skipped).
    pub fn of(runs: &[BenchmarkRecord], metric: &str, by: SeriesBy, title: String) -> Chart {
        let mut best: BTreeMap<(bool, String), BTreeMap<i64, f64>> = BTreeMap::new();
        let mut unit = String::new();
        for r in runs.iter().filter(|r| r.run.setup.gpus > 0) {
            let Some(m) = r.run.metrics.iter().find(|m| m.name == metric) else {
                continue;
            };
            if unit.is_empty() {
                unit.clone_from(&m.unit);
            }
            let name = match by {
                SeriesBy::Source => r.run.source.clone(),
                SeriesBy::Storage => format!(
                    "{} ({})",
                    r.run
                        .setup
                        .storage
                        .as_deref()
                        .unwrap_or("storage not given"),
                    r.run.source
                ),
            };
            let at = best
                .entry((r.is_reference(), name))
                .or_default()
                .entry(r.run.setup.gpus)
                .or_insert(m.value);
            *at = at.max(m.value);
        }
        let mut series: Vec<Series> = best
            .into_iter()
            .map(|((_, name), points)| Series {
                name,
                points: points
                    .into_iter()
                    .map(|(gpus, value)| Point { gpus, value })
                    .collect(),
            })
            .collect();
        let left_out = series.len().saturating_sub(MAX_SERIES);
        series.truncate(MAX_SERIES);
        Chart {
            title,
            metric: metric.to_string(),
            unit,
            series,
            left_out,
            scaling: by == SeriesBy::Source,
        }
    }
}

/// The chart as an SVG document. A panic of the drawing library is an error, not the
/// end of the server's worker.
pub fn render(chart: &Chart) -> Result<String, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut svg = String::new();
        draw(&mut svg, chart).map_err(|e| e.to_string())?;
        Ok(svg)
    }))
    .unwrap_or_else(|_| Err("the chart could not be drawn".into()))
}

fn draw(svg: &mut String, chart: &Chart) -> Result<(), Box<dyn std::error::Error>> {
    let max_gpus = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.gpus))
        .max()
        .unwrap_or(1);
    let max_value = chart
        .series
        .iter()
        .flat_map(|s| {
            let top = s
                .points
                .last()
                .and_then(|p| s.ideal(p.gpus))
                .filter(|_| chart.scaling);
            s.points.iter().map(|p| p.value).chain(top)
        })
        .fold(0.0, f64::max);
    // Round steps to a round top above the highest point.
    let ticks = Ticks::for_max(max_value * 1.05, 8);
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let caption = if chart.series.is_empty() {
        format!("{}: no runs with {}", chart.title, chart.metric)
    } else {
        chart.title.clone()
    };
    let mut area = ChartBuilder::on(&plot)
        .caption(caption, ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..(max_gpus as f64 * 1.08).max(1.0), 0.0..ticks.top)?;
    let y_desc = if chart.unit.is_empty() {
        chart.metric.clone()
    } else {
        format!("{} ({})", chart.metric, chart.unit)
    };
    area.configure_mesh()
        .max_light_lines(1)
        .light_line_style(WHITE)
        .x_desc("GPUs")
        .y_desc(y_desc)
        // GPUs come whole: no label between two counts.
        .x_label_formatter(&|x| {
            if x.fract() == 0.0 {
                figure(*x)
            } else {
                String::new()
            }
        })
        .y_labels(ticks.values().len())
        .y_label_formatter(&|y| figure(*y))
        .draw()?;
    let label_font = ("sans-serif", 12).into_font();
    for (i, s) in chart.series.iter().enumerate() {
        let color = PALETTE[i.min(MAX_SERIES - 1)];
        let xy = |p: &Point| (p.gpus as f64, p.value);
        if let (true, Some(first), Some(last)) = (chart.scaling, s.points.first(), s.points.last())
        {
            if last.gpus > first.gpus {
                let top = s.ideal(last.gpus).unwrap_or(last.value);
                area.draw_series([DashedPathElement::new(
                    [xy(first), (last.gpus as f64, top)],
                    6,
                    4,
                    color.stroke_width(1),
                )])?;
            }
        }
        area.draw_series([PathElement::new(
            s.points.iter().map(xy).collect::<Vec<_>>(),
            color.stroke_width(2),
        )])?;
        for p in &s.points {
            let label = match (chart.scaling, s.efficiency(p)) {
                (true, Some(e)) => format!("{e:.0}%"),
                _ => figure(p.value),
            };
            area.draw_series([EmptyElement::at(xy(p))
                + Circle::new((0, 0), 4, color.filled())
                + Text::new(label, (6, -16), label_font.clone().color(&color))])?;
        }
        // The legend beside the plot, never over its lines.
        let y = 48 + 22 * i as i32;
        legend.draw(&Rectangle::new([(6, y), (18, y + 12)], color.filled()))?;
        let name: String = if s.name.chars().count() > 30 {
            s.name.chars().take(29).chain(['…']).collect()
        } else {
            s.name.clone()
        };
        legend.draw_text(&name, &("sans-serif", 13).into_font().into(), (24, y))?;
    }
    if chart.scaling && !chart.series.is_empty() {
        let y = 48 + 22 * chart.series.len() as i32 + 8;
        legend.draw_text(
            "dashed: linear scaling",
            &("sans-serif", 12).into_font().into(),
            (6, y),
        )?;
        legend.draw_text(
            "labels: efficiency",
            &("sans-serif", 12).into_font().into(),
            (6, y + 18),
        )?;
    }
    if chart.left_out > 0 {
        legend.draw_text(
            &format!("{} more series not drawn", chart.left_out),
            &("sans-serif", 12).into_font().into(),
            (6, 20),
        )?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::{Metric, RunSetup};
    use crate::store::BenchmarkRun;

    fn record(source: &str, storage: &str, gpus: i64, images: f64) -> BenchmarkRecord {
        BenchmarkRecord {
            id: gpus,
            created_at: 0,
            run: BenchmarkRun {
                source: source.into(),
                setup: RunSetup {
                    storage: Some(storage.into()),
                    gpus,
                    ..RunSetup::default()
                },
                metrics: vec![Metric {
                    name: "images_per_sec".into(),
                    value: images,
                    unit: "images/s".into(),
                }],
                ..BenchmarkRun::default()
            },
        }
    }

    #[test]
    fn series_keep_the_best_run_per_gpu_count() {
        let runs = [
            record("local", "nfs", 1, 800.0),
            record("local", "nfs", 8, 6000.0),
            record("local", "nfs", 8, 6100.0),
            record("isilon-dss8440-2019", "Isilon F800", 1, 819.0),
        ];
        let chart = Chart::of(&runs, "images_per_sec", SeriesBy::Source, "t".into());
        assert_eq!(chart.series.len(), 2);
        let local = chart
            .series
            .iter()
            .find(|s| s.name == "local")
            .expect("local");
        assert_eq!(
            local.points,
            [
                Point {
                    gpus: 1,
                    value: 800.0
                },
                Point {
                    gpus: 8,
                    value: 6100.0
                }
            ]
        );
        let e = local.efficiency(&local.points[1]).expect("efficiency");
        assert!((e - 6100.0 / 6400.0 * 100.0).abs() < 1e-9);
        assert_eq!(chart.unit, "images/s");
        let by_storage = Chart::of(&runs, "images_per_sec", SeriesBy::Storage, "t".into());
        assert_eq!(by_storage.series[0].name, "nfs (local)");
        assert!(!by_storage.scaling);
    }

    #[test]
    fn charts_are_svg_with_a_circle_per_point_and_escaped_names() {
        let runs = [
            record("local", "<nfs>", 1, 800.0),
            record("local", "<nfs>", 2, 1500.0),
            record("local", "<nfs>", 4, 2800.0),
        ];
        let svg = render(&Chart::of(
            &runs,
            "images_per_sec",
            SeriesBy::Source,
            "ResNet-50 & co".into(),
        ))
        .expect("svg");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        assert!(svg.contains("88%"), "2800 / 3200: {svg}");
        assert!(svg.contains("ResNet-50 &amp; co"), "{svg}");
        let storage = render(&Chart::of(
            &runs,
            "images_per_sec",
            SeriesBy::Storage,
            "s".into(),
        ))
        .expect("svg");
        assert!(storage.contains("&lt;nfs&gt; (local)"), "{storage}");
        let empty = render(&Chart::of(
            &[],
            "images_per_sec",
            SeriesBy::Source,
            "none".into(),
        ))
        .expect("svg");
        assert!(empty.contains("no runs with images_per_sec"), "{empty}");
    }
}
