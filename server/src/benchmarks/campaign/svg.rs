//! The report's two charts, laid out for inline SVG: each point's median beside its
//! closest published figure (horizontal bars), and scaling (each series' median per
//! GPU count, with its ideal line). Owns: the geometry and the labels. Must not
//! touch: the markup (`templates/web/benchmarks/campaign_report.html` draws what
//! this computes, escaped).

use super::super::sizing::figure;
use super::report::Report;
use crate::domain::numbers::Ticks;

pub const WIDTH: f64 = 760.0;
/// The most bars drawn; the table lists every point.
pub const MAX_BARS: usize = 40;
/// The most scaling series drawn.
pub const MAX_SERIES: usize = 6;
/// One colour per series (no more than [`MAX_SERIES`]).
const COLORS: [&str; MAX_SERIES] = [
    "#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#57606a",
];
/// The bar chart's label column, the rows' height.
const LABEL_WIDTH: f64 = 230.0;
const ROW: f64 = 40.0;
const MARGIN: f64 = 24.0;

/// One tick of an axis: where (an SVG coordinate, one decimal) and its label.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub at: String,
    pub label: String,
}

/// One point's bars: its median, and the published figure it is compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    /// The row's top; the median's bar and the reference's below it.
    pub y: String,
    pub text_y: String,
    pub width: String,
    pub value: String,
    pub value_x: String,
    pub reference_y: String,
    pub reference_text_y: String,
    pub reference_width: Option<String>,
    pub reference_value: String,
    pub reference_x: String,
}

/// The bar chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    pub height: String,
    pub left: f64,
    pub right: f64,
    /// The axis line's y, below the bars.
    pub bottom: String,
    pub tick_label_y: String,
    pub bars: Vec<Bar>,
    pub ticks: Vec<Tick>,
    /// Points not drawn (beyond [`MAX_BARS`], or without a median).
    pub left_out: usize,
}

/// `x` to one decimal, for an attribute.
fn at(x: f64) -> String {
    format!("{x:.1}")
}

/// The bar chart of `report`, `labels` naming each point (in the report's order);
/// `None` when no point has a median.
pub fn bars(report: &Report, labels: &[String]) -> Option<Bars> {
    let drawn: Vec<(usize, f64, Option<f64>)> = report
        .points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.median?, p.closest.as_ref().map(|c| c.compared_value))))
        .take(MAX_BARS)
        .collect();
    if drawn.is_empty() {
        return None;
    }
    let top = drawn
        .iter()
        .map(|(_, m, r)| m.max(r.unwrap_or(0.0)))
        .fold(0.0, f64::max);
    let ticks = Ticks::for_max(top * 1.05, 6);
    let (left, right) = (LABEL_WIDTH, WIDTH - MARGIN - 70.0);
    let x = |v: f64| (v / ticks.top).clamp(0.0, 1.0) * (right - left);
    let bottom = MARGIN + ROW * drawn.len() as f64;
    Some(Bars {
        height: at(bottom + 34.0),
        left,
        right,
        bottom: at(bottom),
        tick_label_y: at(bottom + 16.0),
        bars: drawn
            .iter()
            .enumerate()
            .map(|(row, &(i, median, reference))| {
                let y = MARGIN + ROW * row as f64;
                Bar {
                    label: labels.get(i).cloned().unwrap_or_default(),
                    y: at(y + 4.0),
                    text_y: at(y + 11.0),
                    width: at(x(median).max(1.0)),
                    value: figure(median),
                    value_x: at(left + x(median) + 4.0),
                    reference_y: at(y + 21.0),
                    reference_text_y: at(y + 25.5),
                    reference_width: reference.map(|r| at(x(r).max(1.0))),
                    reference_value: reference
                        .map(|r| format!("published {}", figure(r)))
                        .unwrap_or_else(|| "nothing published to compare".to_string()),
                    reference_x: at(left + reference.map_or(0.0, x) + 4.0),
                }
            })
            .collect(),
        ticks: ticks
            .values()
            .into_iter()
            .map(|v| Tick {
                at: at(left + x(v)),
                label: figure(v),
            })
            .collect(),
        left_out: report.points.len().saturating_sub(drawn.len()),
    })
}

/// One GPU count of a series: where, and its efficiency.
#[derive(Debug, Clone, PartialEq)]
pub struct Dot {
    pub x: String,
    pub y: String,
    pub label: String,
}

/// A scaling series as drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub name: String,
    pub color: &'static str,
    /// The polyline of the medians, and of linear scaling.
    pub points: String,
    pub ideal: String,
    pub dots: Vec<Dot>,
    pub legend_y: String,
}

/// The scaling chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Lines {
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub x_ticks: Vec<Tick>,
    pub y_ticks: Vec<Tick>,
    pub lines: Vec<Line>,
    pub legend_x: f64,
    /// Series not drawn, beyond [`MAX_SERIES`].
    pub left_out: usize,
}

/// The scaling chart of `report`; `None` without a series.
pub fn lines(report: &Report) -> Option<Lines> {
    let series = &report.scaling[..report.scaling.len().min(MAX_SERIES)];
    if series.is_empty() {
        return None;
    }
    let (height, left, right, top, bottom) = (340.0, 72.0, WIDTH - 250.0, 16.0, 300.0);
    let max_gpus = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.gpus))
        .max()
        .unwrap_or(1);
    let max_value = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.value.max(p.ideal)))
        .fold(0.0, f64::max);
    let ticks = Ticks::for_max(max_value * 1.05, 6);
    let gpu_ticks = Ticks::for_max(f64::from(max_gpus), 8);
    let x = |g: f64| left + g / gpu_ticks.top * (right - left);
    let y = |v: f64| bottom - (v / ticks.top).clamp(0.0, 1.0) * (bottom - top);
    let polyline = |pairs: Vec<(f64, f64)>| {
        pairs
            .into_iter()
            .map(|(gx, v)| format!("{:.1},{:.1}", x(gx), y(v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some(Lines {
        height,
        left,
        right,
        top,
        bottom,
        // GPUs come whole: no tick between two counts.
        x_ticks: gpu_ticks
            .values()
            .into_iter()
            .filter(|g| g.fract() == 0.0)
            .map(|g| Tick {
                at: at(x(g)),
                label: figure(g),
            })
            .collect(),
        y_ticks: ticks
            .values()
            .into_iter()
            .map(|v| Tick {
                at: at(y(v)),
                label: figure(v),
            })
            .collect(),
        lines: series
            .iter()
            .enumerate()
            .map(|(i, s)| Line {
                name: if s.params_key.is_empty() {
                    "all points".to_string()
                } else {
                    s.params_key.replace(',', ", ")
                },
                color: COLORS[i],
                points: polyline(
                    s.points
                        .iter()
                        .map(|p| (f64::from(p.gpus), p.value))
                        .collect(),
                ),
                ideal: polyline(
                    s.points
                        .iter()
                        .map(|p| (f64::from(p.gpus), p.ideal))
                        .collect(),
                ),
                dots: s
                    .points
                    .iter()
                    .map(|p| Dot {
                        x: at(x(f64::from(p.gpus))),
                        y: at(y(p.value)),
                        label: format!("{:.0} %", p.efficiency_percent),
                    })
                    .collect(),
                legend_y: at(top + 8.0 + 22.0 * i as f64),
            })
            .collect(),
        legend_x: right + 24.0,
        left_out: report.scaling.len() - series.len(),
    })
}
