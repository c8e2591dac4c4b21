//! Scaling efficiency of a campaign's training points: the points identical but for
//! their GPU count form a series, each GPU count's median against linear scaling
//! from the series' fewest GPUs (the 1-GPU point when there is one). Must not
//! touch: where the medians come from (`report`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::matrix::Point;
use super::point::PointReport;

/// One GPU count of a scaling series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScalingPoint {
    pub point: u32,
    pub gpus: u32,
    pub value: f64,
    /// Linear scaling from the fewest GPUs of the series.
    pub ideal: f64,
    /// value ÷ ideal, in percent.
    pub efficiency_percent: f64,
}

/// The points identical but for their GPU count, fewest GPUs first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scaling {
    /// `Point::params_key` of the series.
    pub params_key: String,
    pub points: Vec<ScalingPoint>,
}

/// Scaling series: points identical but for their GPUs (with GPUs and a median),
/// two GPU counts or more, each against linear scaling from its fewest GPUs.
pub(super) fn scaling(points: &[PointReport]) -> Vec<Scaling> {
    let mut series: BTreeMap<String, Vec<(u32, u32, f64)>> = BTreeMap::new();
    for p in points.iter().filter(|p| p.gpus > 0) {
        if let Some(m) = p.median {
            let params_key = Point {
                index: p.index,
                gpus: p.gpus,
                params: p.params.clone(),
            }
            .params_key();
            series
                .entry(params_key)
                .or_default()
                .push((p.gpus, p.index, m));
        }
    }
    series
        .into_iter()
        .filter(|(_, s)| s.len() > 1)
        .map(|(params_key, mut s)| {
            s.sort_by_key(|(gpus, _, _)| *gpus);
            let (base_gpus, _, base) = s[0];
            Scaling {
                params_key,
                points: s
                    .into_iter()
                    .map(|(gpus, point, value)| {
                        let ideal = base * f64::from(gpus) / f64::from(base_gpus);
                        ScalingPoint {
                            point,
                            gpus,
                            value,
                            ideal,
                            efficiency_percent: if ideal > 0.0 {
                                value / ideal * 100.0
                            } else {
                                0.0
                            },
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::benchmarks::campaign::report::report;
    use crate::benchmarks::campaign::report::tests::{input, point, run};

    #[test]
    fn scaling_efficiency_is_against_the_fewest_gpus() {
        let points = [
            point(0, 1, "64"),
            point(1, 2, "64"),
            point(2, 4, "64"),
            point(3, 2, "128"),
        ];
        let runs = [
            run(0, 1, 1000.0),
            run(1, 1, 1900.0),
            run(2, 1, 3600.0),
            run(3, 1, 2000.0),
        ];
        let r = report(&input(&points, &runs, &[]));
        assert_eq!(r.scaling.len(), 1, "BATCH=128 has one GPU count");
        let s = &r.scaling[0];
        assert_eq!(s.params_key, "BATCH=64,PRECISION=fp16");
        let eff: Vec<(u32, f64)> = s
            .points
            .iter()
            .map(|p| (p.gpus, (p.efficiency_percent * 10.0).round() / 10.0))
            .collect();
        assert_eq!(eff, [(1, 100.0), (2, 95.0), (4, 90.0)]);
        assert_eq!(s.points[2].ideal, 4000.0);
        // Starting at 2 GPUs: relative to 2.
        let r = report(&input(&points[1..3], &runs[1..3], &[]));
        assert_eq!(
            r.scaling[0].points[1].efficiency_percent,
            3600.0 / 3800.0 * 100.0
        );
    }
}
