//! A plan's points as job arrays, one per GPU count: the template's script with a
//! prologue that sets each array task's parameters, Slurm's `--array` value, and
//! which task runs which point's which repetition; and the GPU-hours they may take.
//!
//! The prologue goes right after the script's header block, so that the `#!` line
//! stays first and `#SBATCH` lines still count:
//!
//! ```text
//! export STEPS='100'
//! case "${SLURM_ARRAY_TASK_ID:-0}" in
//! 0) export ATRIUM_CAMPAIGN_POINT=0 ATRIUM_CAMPAIGN_REPETITION=1 BATCH='64' PRECISION='fp16' ;;
//! …
//! esac
//! ```
//!
//! Tasks run repetition after repetition (every point once, then every point again),
//! so that a drift of the cluster over the campaign spreads over all points. Must
//! not touch: submitting (the caller adds `--gres=gpu:N`, `--array` and, for a
//! serial template, `--dependency=afterany:` the previous array).

use std::collections::BTreeMap;

use serde::Serialize;

use super::matrix::{points, Limits, MatrixSpec, Point};
use super::template::{header, Template};
use super::{bad, FieldError};

/// A matrix expanded: its points, and the job arrays that run them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub points: Vec<Point>,
    pub repetitions: u32,
    /// One array per GPU count, fewest GPUs first.
    pub jobs: Vec<PlannedJob>,
}

impl Plan {
    /// The point of `index`.
    pub fn point(&self, index: u32) -> Option<&Point> {
        self.points.get(usize::try_from(index).ok()?)
    }
}

/// Check `spec` against `template` and `limits` and plan it: its points
/// ([`super::matrix`]) and the job arrays that run them, each point `repetitions` times.
pub fn plan(template: &Template, spec: &MatrixSpec, limits: &Limits) -> Result<Plan, FieldError> {
    let (points, varying) = points(template, spec, limits)?;
    let varying: Vec<&str> = varying.iter().map(String::as_str).collect();
    let jobs = arrays(template, &points, spec.repetitions, &varying, limits)?;
    Ok(Plan {
        points,
        repetitions: spec.repetitions,
        jobs,
    })
}

/// One job array: the points of one GPU count, each repetition a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedJob {
    /// `--gres=gpu:N` (0: no GPU).
    pub gpus: u32,
    /// The template's script with the prologue.
    pub script: String,
    /// Slurm's `--array` value: `0-11`, with `%1` when the template is serial.
    pub array: String,
    /// `(task id, point index, repetition from 1)`, by task id.
    pub tasks: Vec<(u32, u32, u32)>,
    /// The template is serial and an array comes before this one: submit it with
    /// `--dependency=afterany:` that array's id.
    pub after_previous: bool,
}

impl PlannedJob {
    /// The point and repetition of array task `task`.
    pub fn task(&self, task: u32) -> Option<(u32, u32)> {
        self.tasks
            .iter()
            .find(|(t, _, _)| *t == task)
            .map(|&(_, point, repetition)| (point, repetition))
    }
}

/// `name='value' …`: values are checked to hold no quote
/// (`template::value_problem`).
fn assignments<'a>(pairs: impl Iterator<Item = (&'a String, &'a String)>) -> String {
    pairs
        .map(|(name, value)| format!(" {name}='{value}'"))
        .collect()
}

/// The prologue of the tasks `tasks` of `points`, `varying` the parameters the
/// matrix gives (each task exports them; the others are exported once).
fn prologue(
    template: &Template,
    points: &[&Point],
    tasks: &[(u32, u32, u32)],
    varying: &[&str],
) -> String {
    let mut text = format!(
        "# atrium: campaign of the template {}: each array task's point and parameters.\n",
        template.name
    );
    if let Some(first) = points.first() {
        let fixed = assignments(
            first
                .params
                .iter()
                .filter(|(name, _)| !varying.contains(&name.as_str())),
        );
        if !fixed.is_empty() {
            text.push_str(&format!("export{fixed}\n"));
        }
    }
    text.push_str("case \"${SLURM_ARRAY_TASK_ID:-0}\" in\n");
    for &(task, index, repetition) in tasks {
        let Some(point) = points.iter().find(|p| p.index == index) else {
            continue;
        };
        let params = assignments(
            point
                .params
                .iter()
                .filter(|(name, _)| varying.contains(&name.as_str())),
        );
        text.push_str(&format!(
            "{task}) export ATRIUM_CAMPAIGN_POINT={index} ATRIUM_CAMPAIGN_REPETITION={repetition}{params} ;;\n"
        ));
    }
    text.push_str(
        "*) echo \"atrium: array task ${SLURM_ARRAY_TASK_ID:-0} is not one of this campaign's\" >&2; exit 1 ;;\nesac\n",
    );
    text
}

/// The template's script with `prologue` after its header block.
fn with_prologue(script: &str, prologue: &str) -> String {
    let at = header(script).1;
    let (head, body) = script.split_at(at);
    let mut out = String::with_capacity(script.len() + prologue.len() + 1);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(prologue);
    out.push_str(body);
    out
}

/// One array per GPU count of `points` (which are in GPU order).
pub(super) fn arrays(
    template: &Template,
    points: &[Point],
    repetitions: u32,
    varying: &[&str],
    limits: &Limits,
) -> Result<Vec<PlannedJob>, FieldError> {
    let mut gpus: Vec<u32> = points.iter().map(|p| p.gpus).collect();
    gpus.dedup();
    let mut jobs = Vec::new();
    for g in gpus {
        let mine: Vec<&Point> = points.iter().filter(|p| p.gpus == g).collect();
        let count = mine.len() as u64 * u64::from(repetitions);
        if count > u64::from(limits.max_array_size.get()) {
            return Err(bad(
                "matrix.points",
                format!(
                    "{} points × {repetitions} repetitions on {g} GPUs make {count} jobs: one job array holds at most {} here",
                    mine.len(),
                    limits.max_array_size
                ),
            ));
        }
        let tasks: Vec<(u32, u32, u32)> = (1..=repetitions)
            .flat_map(|r| mine.iter().map(move |p| (p.index, r)))
            .enumerate()
            .map(|(task, (point, r))| (task as u32, point, r))
            .collect();
        let script = with_prologue(
            &template.script,
            &prologue(template, &mine, &tasks, varying),
        );
        if script.len() > limits.max_script_bytes {
            return Err(bad(
                "matrix.points",
                format!(
                    "the job script of the {g}-GPU points would be {} bytes: at most {} here (fewer values or repetitions)",
                    script.len(),
                    limits.max_script_bytes
                ),
            ));
        }
        let last = tasks.len().saturating_sub(1);
        let mut array = if last == 0 {
            "0".to_string()
        } else {
            format!("0-{last}")
        };
        if template.serial {
            array.push_str("%1");
        }
        jobs.push(PlannedJob {
            gpus: g,
            script,
            array,
            tasks,
            after_previous: template.serial && !jobs.is_empty(),
        });
    }
    Ok(jobs)
}

/// The GPU-hours a plan may take, shown before it is submitted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuHours {
    /// Every task running to its time limit: Σ GPUs × time limit.
    pub limit: f64,
    /// Every task taking what its point took in an earlier campaign (its time limit
    /// where that campaign did not measure it); absent without an earlier campaign.
    pub expected: Option<f64>,
    /// How many of the points the earlier campaign measured.
    pub measured_points: usize,
    /// Hours of all tasks at their time limit, GPUs or not (a serial template's
    /// runs follow one another: its campaign's longest wall time).
    pub task_hours: f64,
}

/// The GPU-hours of `plan`, each task's time limit `time_limit_minutes` (the
/// template's `#SBATCH --time`), and with `measured`, the seconds each point (by
/// [`Point::key`]) took in an earlier campaign, what to expect.
pub fn gpu_hours(
    plan: &Plan,
    time_limit_minutes: u32,
    measured: Option<&BTreeMap<String, f64>>,
) -> GpuHours {
    let limit_hours = f64::from(time_limit_minutes) / 60.0;
    let tasks = f64::from(plan.repetitions);
    let mut hours = GpuHours {
        limit: 0.0,
        expected: measured.map(|_| 0.0),
        measured_points: 0,
        task_hours: 0.0,
    };
    for point in &plan.points {
        let gpus = f64::from(point.gpus);
        hours.limit += gpus * limit_hours * tasks;
        hours.task_hours += limit_hours * tasks;
        if let Some(measured) = measured {
            let took = measured
                .get(&point.key())
                .filter(|s| s.is_finite() && **s >= 0.0)
                .map(|s| (s / 3600.0).min(limit_hours));
            hours.measured_points += usize::from(took.is_some());
            let each = took.unwrap_or(limit_hours);
            hours.expected = hours.expected.map(|e| e + gpus * each * tasks);
        }
    }
    hours
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::benchmarks::campaign::jobs::plan;
    use crate::benchmarks::campaign::matrix::tests::{spec, template};
    use crate::benchmarks::campaign::matrix::Limits;

    /// What the script prints as array task `task`: `point repetition BATCH
    /// PRECISION STEPS`.
    fn run(script: &str, task: Option<u32>) -> (bool, String) {
        let mut bash = Command::new("bash");
        bash.arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        if let Some(task) = task {
            bash.env("SLURM_ARRAY_TASK_ID", task.to_string());
        }
        let out = bash.output().expect("bash runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    }

    #[test]
    fn a_2x2_matrix_of_3_repetitions_is_12_tasks_in_2_arrays() {
        let p = plan(
            &template(),
            &spec(&[1, 2], &[("BATCH", &["64", "128"])], 3),
            &Limits::new(8),
        )
        .expect("plan");
        assert_eq!(p.points.len(), 4);
        assert_eq!(p.jobs.len(), 2);
        assert_eq!(p.jobs.iter().map(|j| j.tasks.len()).sum::<usize>(), 12);
        let one = &p.jobs[0];
        assert_eq!(
            (one.gpus, one.array.as_str(), one.after_previous),
            (1, "0-5", false)
        );
        assert_eq!(
            one.tasks,
            [
                (0, 0, 1),
                (1, 1, 1),
                (2, 0, 2),
                (3, 1, 2),
                (4, 0, 3),
                (5, 1, 3)
            ]
        );
        let two = &p.jobs[1];
        assert_eq!(two.gpus, 2);
        assert_eq!(two.task(3), Some((3, 2)));
        assert_eq!(two.task(6), None);
        // The header stays first and whole; the prologue comes before the body.
        assert!(one
            .script
            .starts_with("#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --time=00:30:00\n"));
        let directives = scheduler::read_submission::<&str>(&one.script, &[], &Default::default())
            .expect("directives");
        assert_eq!(directives.gpus.map(|g| g.count), Some(1));
        assert!(directives.time_limit.is_some());
        assert!(
            one.script.contains("export PRECISION='fp16' STEPS='100'\n"),
            "{}",
            one.script
        );
        assert!(
            one.script.contains(
                "3) export ATRIUM_CAMPAIGN_POINT=1 ATRIUM_CAMPAIGN_REPETITION=2 BATCH='128' ;;"
            ),
            "{}",
            one.script
        );
        // The prologue as bash runs it.
        for (job, task, expected) in [
            (one, 0, "0 1 64 fp16 100"),
            (one, 3, "1 2 128 fp16 100"),
            (one, 5, "1 3 128 fp16 100"),
            (two, 4, "2 3 64 fp16 100"),
        ] {
            assert_eq!(
                run(&job.script, Some(task)),
                (true, expected.to_string()),
                "task {task}"
            );
        }
        assert_eq!(
            run(&one.script, None),
            (true, "0 1 64 fp16 100".to_string())
        );
        let (ok, out) = run(&one.script, Some(6));
        assert!(!ok && out.is_empty(), "task 6 does not exist: {out}");
    }

    #[test]
    fn serial_templates_run_one_task_at_a_time_and_arrays_one_after_another() {
        let serial = Template::parse(
            "s",
            "#!/bin/bash\n#CAMPAIGN --param BS=1M\n#CAMPAIGN --serial\necho \"$BS\"",
        )
        .expect("template");
        let p = plan(
            &serial,
            &spec(&[0, 1, 2], &[("BS", &["4k", "1M"])], 2),
            &Limits::new(8),
        )
        .expect("plan");
        let arrays: Vec<(&str, bool)> = p
            .jobs
            .iter()
            .map(|j| (j.array.as_str(), j.after_previous))
            .collect();
        assert_eq!(arrays, [("0-3%1", false), ("0-3%1", true), ("0-3%1", true)]);
        assert_eq!(run(&p.jobs[0].script, Some(1)), (true, "1M".to_string()));
        let single = plan(&serial, &spec(&[1], &[], 1), &Limits::new(8)).expect("plan");
        assert_eq!(single.jobs[0].array, "0%1");
        // A script without a body gets the prologue at its end.
        assert!(
            single.jobs[0].script.ends_with("esac\n") || single.jobs[0].script.contains("echo")
        );
        let parallel = plan(&template(), &spec(&[1, 2], &[], 1), &Limits::new(8)).expect("plan");
        assert!(parallel
            .jobs
            .iter()
            .all(|j| !j.after_previous && !j.array.contains('%')));
    }

    #[test]
    fn scripts_over_the_size_limit_are_refused() {
        let long: Vec<String> = (0..64).map(|i| format!("{i:0>200}")).collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let limits = Limits {
            max_script_bytes: 8 * 1024,
            ..Limits::new(8)
        };
        let err =
            plan(&template(), &spec(&[1], &[("BATCH", &long)], 1), &limits).expect_err("too long");
        assert_eq!(err.field, "matrix.points");
        assert!(err.message.contains("bytes"), "{}", err.message);
    }

    #[test]
    fn gpu_hours_at_the_limit_and_as_measured_before() {
        let p = plan(
            &template(),
            &spec(&[1, 4], &[("BATCH", &["64", "128"])], 2),
            &Limits::new(8),
        )
        .expect("plan");
        // (1 + 1 + 4 + 4) GPUs × 2 repetitions × 0.5 h.
        let hours = gpu_hours(&p, 30, None);
        assert_eq!(
            (hours.limit, hours.expected, hours.task_hours),
            (10.0, None, 4.0)
        );
        let measured: BTreeMap<String, f64> = [
            (p.points[0].key(), 360.0),
            (p.points[2].key(), 720.0),
            // Longer than the limit: the job is stopped at it.
            (p.points[3].key(), 7200.0),
        ]
        .into();
        let hours = gpu_hours(&p, 30, Some(&measured));
        // 1 × 0.1 + 1 × 0.5 (not measured) + 4 × 0.2 + 4 × 0.5, twice each.
        let expected = hours.expected.expect("expected");
        assert!(
            (expected - 2.0 * (0.1 + 0.5 + 0.8 + 2.0)).abs() < 1e-9,
            "{expected}"
        );
        assert_eq!(hours.measured_points, 3);
    }
}
