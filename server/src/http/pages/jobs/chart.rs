//! The job page's usage charts: a series over the run drawn in an SVG box, with
//! round ticks and units on both axes (time since the start; cores, memory or
//! percent).
//!
//! Owns: the ticks of time (clock-like steps; the value axis's are
//! `domain::numbers::Ticks`),
//! the scaling of points into the plot area, and the labels. Must not touch:
//! where the samples come from (`services::efficiency`), the markup (the page's
//! template draws what this computes).

use crate::domain::numbers::{plural_f, Ticks};

/// The SVG's size and the plot area inside it (room for the labels around).
pub const WIDTH: f64 = 560.0;
pub const HEIGHT: f64 = 130.0;
const LEFT: f64 = 74.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 34.0;

/// One tick: where it is (in the SVG's coordinates) and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub at: String,
    pub label: String,
}

/// A chart ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub id: &'static str,
    /// What is drawn, with its unit: `CPU cores busy (of 4)`.
    pub title: String,
    /// The value axis's name: `cores`, `MiB`, `%`.
    pub unit: String,
    /// The polyline's points.
    pub points: String,
    pub y_ticks: Vec<Tick>,
    pub x_ticks: Vec<Tick>,
    /// The plot area's edges, for the axes' lines.
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

/// The unit of a chart's values and how one is named: `(1, "core", "cores")`.
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    /// Values are divided by this before they are shown.
    pub scale: f64,
    pub one: &'static str,
    pub many: &'static str,
}

/// Round ticks from 0 to at least `top` (at most four steps, of 1, 2 or 5 × 10ⁿ:
/// `domain::numbers::Ticks`): the values and the axis's top.
pub fn value_ticks(top: f64) -> (Vec<f64>, f64) {
    let ticks = Ticks::for_max(top, 4);
    (ticks.values(), ticks.top)
}

/// Steps of time that read well on a clock, in seconds.
const TIME_STEPS: [u32; 16] = [
    5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];

/// Ticks of time from 0 to `end` seconds: the first clock-like step that gives at
/// most six of them.
pub fn time_ticks(end: u32) -> Vec<u32> {
    let end = end.max(1);
    let step = TIME_STEPS
        .iter()
        .copied()
        .find(|s| end / s <= 6)
        .unwrap_or(86400 * (end / (86400 * 6) + 1));
    (0..=end / step).map(|i| i * step).collect()
}

/// `0`, `30 s`, `5 min`, `1 h`, `1 h 30 min`, `2 d`.
pub fn time_label(secs: u32) -> String {
    match secs {
        0 => "0".into(),
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s % 86400 == 0 => format!("{} d", s / 86400),
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// A value with its unit, plural right: `1 core`, `2 cores`, `0.5 cores`,
/// `512 MiB`, `50 %`.
pub fn value_label(v: f64, unit: Unit) -> String {
    plural_f(v / unit.scale, unit.one, unit.many)
}

/// The chart of `values` (`(t, value)`, t in seconds since the start) up to
/// `end` seconds, its value axis reaching at least `top`.
pub fn chart(
    id: &'static str,
    title: String,
    unit: Unit,
    values: &[(u32, f64)],
    top: f64,
    end: u32,
) -> Chart {
    let (ticks, axis_top) = value_ticks(top);
    let end = end.max(1);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |t: u32| LEFT + f64::from(t) / f64::from(end) * plot_w;
    let y = |v: f64| TOP + plot_h - (v / axis_top).clamp(0.0, 1.0) * plot_h;
    let points = values
        .iter()
        .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
        .collect::<Vec<_>>()
        .join(" ");
    Chart {
        id,
        title,
        unit: unit.many.to_string(),
        points,
        y_ticks: ticks
            .iter()
            .map(|&v| Tick {
                at: format!("{:.1}", y(v)),
                label: value_label(v, unit),
            })
            .collect(),
        x_ticks: time_ticks(end)
            .into_iter()
            .map(|t| Tick {
                at: format!("{:.1}", x(t)),
                label: time_label(t),
            })
            .collect(),
        left: LEFT,
        right: WIDTH - RIGHT,
        top: TOP,
        bottom: HEIGHT - BOTTOM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORES: Unit = Unit {
        scale: 1.0,
        one: "core",
        many: "cores",
    };

    #[test]
    fn value_ticks_are_round_and_reach_the_top() {
        assert_eq!(value_ticks(1.0), (vec![0.0, 0.5, 1.0], 1.0));
        assert_eq!(value_ticks(4.0), (vec![0.0, 1.0, 2.0, 3.0, 4.0], 4.0));
        assert_eq!(value_ticks(100.0), (vec![0.0, 50.0, 100.0], 100.0));
        assert_eq!(value_ticks(7.0), (vec![0.0, 2.0, 4.0, 6.0, 8.0], 8.0));
        assert_eq!(
            value_ticks(3000.0),
            (vec![0.0, 1000.0, 2000.0, 3000.0], 3000.0)
        );
        let (t, top) = value_ticks(4096.0);
        assert_eq!(top, 6000.0);
        assert_eq!(t, vec![0.0, 2000.0, 4000.0, 6000.0]);
        assert_eq!(value_ticks(0.0).1, 1.0);
        // Never the same label twice (the old axis read `1 1 1 1 1 0 0 0`).
        for top in [0.3, 1.0, 2.0, 3.0, 6.0, 48.0, 512.0, 100.0] {
            let (ticks, _) = value_ticks(top);
            let labels: Vec<String> = ticks.iter().map(|v| value_label(*v, CORES)).collect();
            let mut unique = labels.clone();
            unique.dedup();
            assert_eq!(labels, unique, "top {top}");
        }
    }

    #[test]
    fn time_ticks_follow_the_clock() {
        assert_eq!(time_ticks(60), vec![0, 10, 20, 30, 40, 50, 60]);
        assert_eq!(time_ticks(600), vec![0, 120, 240, 360, 480, 600]);
        assert_eq!(time_ticks(3600), vec![0, 600, 1200, 1800, 2400, 3000, 3600]);
        assert_eq!(time_ticks(5400), vec![0, 900, 1800, 2700, 3600, 4500, 5400]);
        assert_eq!(time_label(0), "0");
        assert_eq!(time_label(30), "30 s");
        assert_eq!(time_label(600), "10 min");
        assert_eq!(time_label(3600), "1 h");
        assert_eq!(time_label(5400), "1 h 30 min");
        assert_eq!(time_label(172_800), "2 d");
    }

    #[test]
    fn labels_carry_their_unit_with_plurals_right() {
        assert_eq!(value_label(1.0, CORES), "1 core");
        assert_eq!(value_label(2.0, CORES), "2 cores");
        assert_eq!(value_label(0.5, CORES), "0.5 cores");
        assert_eq!(value_label(0.0, CORES), "0 cores");
        let gib = Unit {
            scale: 1024.0,
            one: "GiB",
            many: "GiB",
        };
        assert_eq!(value_label(2048.0, gib), "2 GiB");
    }

    #[test]
    fn points_fall_in_the_plot_area() {
        let c = chart("c", "t".into(), CORES, &[(0, 0.0), (60, 2.0)], 2.0, 60);
        assert_eq!(
            c.points,
            format!(
                "{LEFT:.1},{:.1} {:.1},{TOP:.1}",
                HEIGHT - BOTTOM,
                WIDTH - RIGHT
            )
        );
        assert_eq!(c.y_ticks.first().map(|t| t.label.as_str()), Some("0 cores"));
        assert_eq!(c.y_ticks.last().map(|t| t.label.as_str()), Some("2 cores"));
        assert_eq!(c.x_ticks.last().map(|t| t.label.as_str()), Some("1 min"));
    }
}
