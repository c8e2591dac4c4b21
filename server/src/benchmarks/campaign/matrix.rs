//! A campaign's matrix: the GPU counts and parameter values to run a template with,
//! and how many times. [`plan`] checks a [`MatrixSpec`] (each refusal names the field
//! as the API reports it: `matrix`, `matrix.gpus`, `matrix.params.NAME`,
//! `matrix.points`, `matrix.repetitions`), expands it into [`Point`]s (every
//! combination, the template's defaults filled in) and lays those out as job
//! arrays (`jobs`). Must not touch: submitting the jobs.

use std::collections::BTreeMap;

use scheduler::parse::MaxArraySize;
use serde::{Deserialize, Serialize};

use super::template::{is_param_name, value_problem, Template};
use super::{bad, FieldError};

/// The most points (combinations of values, repetitions not counted).
pub const MAX_POINTS: u64 = 1000;
/// Repetitions of each point: 1 to this.
pub const MAX_REPETITIONS: u32 = 10;
/// The most GPU counts of one matrix.
pub const MAX_GPU_COUNTS: usize = 16;
/// The most values of one parameter.
pub const MAX_VALUES: usize = 64;

/// A matrix as the API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixSpec {
    /// GPU counts (`--gres=gpu:N`; 0: no GPU). Empty or absent: the template's own
    /// (its `#SBATCH` GPU count, else 0).
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// Values of the template's parameters, by name; a parameter left out keeps its
    /// default.
    #[serde(default)]
    pub params: BTreeMap<String, Vec<String>>,
    /// Runs of each point, 1 to 10; default 1.
    #[serde(default = "one")]
    pub repetitions: u32,
}

fn one() -> u32 {
    1
}

impl Default for MatrixSpec {
    fn default() -> Self {
        MatrixSpec {
            gpus: Vec::new(),
            params: BTreeMap::new(),
            repetitions: 1,
        }
    }
}

/// What the cluster allows a campaign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most GPUs one job may ask for (the largest node's, or the partition's).
    pub max_gpus: u32,
    /// Slurm's `MaxArraySize`: the tasks of one GPU count are one array.
    pub max_array_size: MaxArraySize,
    /// The largest job script the cluster takes.
    pub max_script_bytes: usize,
}

impl Limits {
    /// `max_gpus`, with Slurm's default array size and atrium's default script size.
    pub fn new(max_gpus: u32) -> Limits {
        Limits {
            max_gpus,
            max_array_size: MaxArraySize::DEFAULT,
            max_script_bytes: crate::config::DEFAULT_MAX_SCRIPT_BYTES,
        }
    }
}

/// One combination of the matrix's values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// From 0, in the plan's order.
    pub index: u32,
    pub gpus: u32,
    /// Every parameter of the template, defaults filled in.
    pub params: BTreeMap<String, String>,
}

/// `,`, `=` and `%` of a value in a key, escaped so that keys never collide.
fn key_value(value: &str) -> String {
    value
        .replace('%', "%25")
        .replace(',', "%2C")
        .replace('=', "%3D")
}

impl Point {
    /// What the point is, stable across campaigns of a template:
    /// `gpus=2,BATCH=64,PRECISION=fp16` (parameters by name).
    pub fn key(&self) -> String {
        let params = self.params_key();
        if params.is_empty() {
            format!("gpus={}", self.gpus)
        } else {
            format!("gpus={},{params}", self.gpus)
        }
    }

    /// The key without the GPU count: the points that differ only in GPUs share it.
    pub fn params_key(&self) -> String {
        self.params
            .iter()
            .map(|(name, value)| format!("{name}={}", key_value(value)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// `text` cut to 40 characters for a message.
fn shown(text: &str) -> String {
    if text.chars().count() > 40 {
        text.chars().take(39).chain(['…']).collect()
    } else {
        text.to_string()
    }
}

/// The GPU counts, checked and sorted.
fn gpu_counts(
    template: &Template,
    spec: &MatrixSpec,
    limits: &Limits,
) -> Result<Vec<u32>, FieldError> {
    if spec.gpus.is_empty() {
        let own = template.default_gpus();
        if own > limits.max_gpus {
            return Err(bad(
                "matrix.gpus",
                format!(
                    "{} asks for {own} GPUs and a job here may ask for at most {}: give gpus",
                    template.name, limits.max_gpus
                ),
            ));
        }
        return Ok(vec![own]);
    }
    if spec.gpus.len() > MAX_GPU_COUNTS {
        return Err(bad(
            "matrix.gpus",
            format!("{} GPU counts: at most {MAX_GPU_COUNTS}", spec.gpus.len()),
        ));
    }
    let mut gpus = spec.gpus.clone();
    if let Some(g) = gpus.iter().find(|g| **g > limits.max_gpus) {
        return Err(bad(
            "matrix.gpus",
            format!("{g} GPUs: a job here may ask for 0 to {}", limits.max_gpus),
        ));
    }
    gpus.sort_unstable();
    if let Some(twice) = gpus.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad("matrix.gpus", format!("{} is given twice", twice[0])));
    }
    Ok(gpus)
}

/// The values of each parameter the matrix gives, checked.
fn axes<'a>(
    template: &Template,
    spec: &'a MatrixSpec,
) -> Result<Vec<(&'a str, &'a [String])>, FieldError> {
    let mut out = Vec::new();
    for (name, values) in &spec.params {
        let field = if is_param_name(name) {
            format!("matrix.params.{name}")
        } else {
            "matrix.params".to_string()
        };
        if template.param(name).is_none() {
            let known: Vec<&str> = template.params.iter().map(|p| p.name.as_str()).collect();
            return Err(bad(
                field,
                if known.is_empty() {
                    format!(
                        "{:?} is not a parameter of {}: it has none (only gpus)",
                        shown(name),
                        template.name
                    )
                } else {
                    format!(
                        "{:?} is not a parameter of {} (its parameters: {})",
                        shown(name),
                        template.name,
                        known.join(", ")
                    )
                },
            ));
        }
        if values.is_empty() {
            return Err(bad(
                field,
                "no values: give at least one, or leave the parameter out for its default",
            ));
        }
        if values.len() > MAX_VALUES {
            return Err(bad(
                field,
                format!("{} values: at most {MAX_VALUES}", values.len()),
            ));
        }
        for (i, value) in values.iter().enumerate() {
            if let Some(problem) = value_problem(value) {
                return Err(bad(field, format!("value {}: {problem}", i + 1)));
            }
            if values[..i].contains(value) {
                return Err(bad(field, format!("{value:?} is given twice")));
            }
        }
        out.push((name.as_str(), values.as_slice()));
    }
    Ok(out)
}

/// Check `spec` against `template` and `limits`, and expand it: every combination of
/// the GPU counts (fewest first) and the parameters' values (in the order given, the
/// last parameter by name varying fastest); with the names of the parameters the
/// matrix varies. [`super::jobs::plan`] makes the arrays that run them.
pub(super) fn points(
    template: &Template,
    spec: &MatrixSpec,
    limits: &Limits,
) -> Result<(Vec<Point>, Vec<String>), FieldError> {
    if spec.gpus.is_empty() && spec.params.is_empty() {
        return Err(bad(
            "matrix",
            "empty matrix: give GPU counts (gpus) or the values of a parameter",
        ));
    }
    if !(1..=MAX_REPETITIONS).contains(&spec.repetitions) {
        return Err(bad(
            "matrix.repetitions",
            format!(
                "{}: each point runs 1 to {MAX_REPETITIONS} times",
                spec.repetitions
            ),
        ));
    }
    let gpus = gpu_counts(template, spec, limits)?;
    let axes = axes(template, spec)?;
    let count = axes.iter().fold(gpus.len() as u64, |n, (_, values)| {
        n.saturating_mul(values.len() as u64)
    });
    if count > MAX_POINTS {
        return Err(bad(
            "matrix.points",
            format!(
                "{count} points (the product of the number of values of each axis): at most {MAX_POINTS}"
            ),
        ));
    }
    let defaults: BTreeMap<String, String> = template
        .params
        .iter()
        .map(|p| (p.name.clone(), p.default.clone()))
        .collect();
    let mut points = Vec::new();
    for g in gpus {
        // Combinations like an odometer, the last axis turning fastest.
        let mut at = vec![0usize; axes.len()];
        loop {
            let mut params = defaults.clone();
            for ((name, values), i) in axes.iter().zip(&at) {
                params.insert(name.to_string(), values[*i].clone());
            }
            points.push(Point {
                index: points.len() as u32,
                gpus: g,
                params,
            });
            let Some(turn) = (0..axes.len()).rev().find(|&a| at[a] + 1 < axes[a].1.len()) else {
                break;
            };
            at[turn] += 1;
            at[turn + 1..].fill(0);
        }
    }
    let varying = axes.iter().map(|(name, _)| name.to_string()).collect();
    Ok((points, varying))
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::jobs::plan;
    use super::*;

    pub(crate) fn template() -> Template {
        Template::parse(
            "t",
            "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --time=00:30:00\n\
             #CAMPAIGN --param PRECISION=fp16\n#CAMPAIGN --param BATCH=64\n#CAMPAIGN --param STEPS=100\n\n\
             echo \"$ATRIUM_CAMPAIGN_POINT $ATRIUM_CAMPAIGN_REPETITION $BATCH $PRECISION $STEPS\"\n",
        )
        .expect("template")
    }

    pub(crate) fn spec(gpus: &[u32], params: &[(&str, &[&str])], repetitions: u32) -> MatrixSpec {
        MatrixSpec {
            gpus: gpus.to_vec(),
            params: params
                .iter()
                .map(|(n, v)| (n.to_string(), v.iter().map(|s| s.to_string()).collect()))
                .collect(),
            repetitions,
        }
    }

    fn refused(spec: &MatrixSpec) -> FieldError {
        plan(&template(), spec, &Limits::new(8)).expect_err("refused")
    }

    #[test]
    fn refusals_name_their_field() {
        assert_eq!(refused(&spec(&[], &[], 1)).field, "matrix");
        let unknown = refused(&spec(&[1], &[("BATCHES", &["1"])], 1));
        assert_eq!(unknown.field, "matrix.params.BATCHES");
        assert!(
            unknown.message.contains("PRECISION, BATCH, STEPS"),
            "{}",
            unknown.message
        );
        assert_eq!(
            refused(&spec(&[1], &[("batch size", &["1"])], 1)).field,
            "matrix.params"
        );
        let value = refused(&spec(&[1], &[("BATCH", &["64", "1;rm"])], 1));
        assert_eq!(value.field, "matrix.params.BATCH");
        assert!(value.message.starts_with("value 2:"), "{}", value.message);
        assert_eq!(
            refused(&spec(&[1], &[("BATCH", &["64", "64"])], 1)).field,
            "matrix.params.BATCH"
        );
        assert_eq!(
            refused(&spec(&[1], &[("BATCH", &[])], 1)).field,
            "matrix.params.BATCH"
        );
        let many: Vec<String> = (0..=MAX_VALUES).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            refused(&spec(&[1], &[("BATCH", &many)], 1)).field,
            "matrix.params.BATCH"
        );
        assert_eq!(refused(&spec(&[1], &[], 0)).field, "matrix.repetitions");
        assert_eq!(refused(&spec(&[1], &[], 11)).field, "matrix.repetitions");
        assert_eq!(refused(&spec(&[9], &[], 1)).field, "matrix.gpus");
        assert_eq!(refused(&spec(&[1, 1], &[], 1)).field, "matrix.gpus");
        let counts: Vec<u32> = (0..17).collect();
        let wide = plan(&template(), &spec(&counts, &[], 1), &Limits::new(100));
        assert_eq!(wide.expect_err("17 counts").field, "matrix.gpus");
    }

    #[test]
    fn more_than_1000_points_are_refused_and_1000_are_not() {
        let values = |n: usize| -> Vec<String> { (1..=n).map(|i| i.to_string()).collect() };
        let (a, b) = (values(11), values(13));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        // 7 × 11 × 13 = 1,001.
        let err = refused(&spec(
            &[1, 2, 3, 4, 5, 6, 7],
            &[("BATCH", &a), ("STEPS", &b)],
            1,
        ));
        assert_eq!(err.field, "matrix.points");
        assert!(err.message.starts_with("1001 points"), "{}", err.message);
        // 8 × 125 = 1,000 (repetitions not counted), in arrays of at most 1,001 tasks.
        let c = values(25);
        let c: Vec<&str> = c.iter().map(String::as_str).collect();
        let ok = plan(
            &template(),
            &spec(
                &[1, 2, 3, 4, 5, 6, 7, 8],
                &[("BATCH", &c), ("STEPS", &["1", "2", "3", "4", "5"])],
                1,
            ),
            &Limits::new(8),
        )
        .expect("1000 points");
        assert_eq!(ok.points.len(), 1000);
        // Each array holds 125 × 10 = 1,250 tasks: more than Slurm's MaxArraySize.
        let too_many = plan(
            &template(),
            &spec(
                &[1, 2, 3, 4, 5, 6, 7, 8],
                &[("BATCH", &c), ("STEPS", &["1", "2", "3", "4", "5"])],
                10,
            ),
            &Limits::new(8),
        );
        assert_eq!(too_many.expect_err("array").field, "matrix.points");
    }

    #[test]
    fn points_fill_in_defaults_and_have_stable_keys() {
        let p = plan(
            &template(),
            &spec(
                &[4, 1],
                &[("PRECISION", &["fp32", "fp16"]), ("BATCH", &["64", "128"])],
                1,
            ),
            &Limits::new(8),
        )
        .expect("plan");
        let keys: Vec<String> = p.points.iter().map(Point::key).collect();
        assert_eq!(
            keys,
            [
                "gpus=1,BATCH=64,PRECISION=fp32,STEPS=100",
                "gpus=1,BATCH=64,PRECISION=fp16,STEPS=100",
                "gpus=1,BATCH=128,PRECISION=fp32,STEPS=100",
                "gpus=1,BATCH=128,PRECISION=fp16,STEPS=100",
                "gpus=4,BATCH=64,PRECISION=fp32,STEPS=100",
                "gpus=4,BATCH=64,PRECISION=fp16,STEPS=100",
                "gpus=4,BATCH=128,PRECISION=fp32,STEPS=100",
                "gpus=4,BATCH=128,PRECISION=fp16,STEPS=100",
            ]
        );
        assert!(p
            .points
            .iter()
            .enumerate()
            .all(|(i, pt)| pt.index as usize == i));
        assert_eq!(p.point(5).map(|pt| pt.gpus), Some(4));
        let odd = Point {
            index: 0,
            gpus: 0,
            params: [
                ("A".to_string(), "1,B=2".to_string()),
                ("B".into(), "%".into()),
            ]
            .into(),
        };
        assert_eq!(odd.key(), "gpus=0,A=1%2CB%3D2,B=%25");
        assert_eq!(
            Point {
                index: 0,
                gpus: 2,
                params: BTreeMap::new()
            }
            .key(),
            "gpus=2"
        );
    }

    #[test]
    fn without_gpus_the_template_says_how_many() {
        let p = plan(
            &template(),
            &spec(&[], &[("BATCH", &["32"])], 1),
            &Limits::new(8),
        )
        .expect("plan");
        assert_eq!(p.points[0].gpus, 1, "#SBATCH --gres=gpu:1");
        let cpu = Template::parse("cpu", "#!/bin/sh\n#CAMPAIGN --param N=1\necho $N\n")
            .expect("template");
        let p = plan(&cpu, &spec(&[], &[("N", &["2"])], 1), &Limits::new(8)).expect("plan");
        assert_eq!(p.points[0].gpus, 0);
    }

    #[test]
    fn the_spec_reads_from_json_and_refuses_unknown_fields() {
        let s: MatrixSpec = serde_json::from_str(r#"{"params": {"BATCH": ["64"]}}"#).expect("spec");
        assert_eq!((s.repetitions, s.gpus.len()), (1, 0));
        assert!(serde_json::from_str::<MatrixSpec>(r#"{"gpu": [1]}"#).is_err());
    }
}
