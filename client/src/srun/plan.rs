//! What a step is, from srun's options and the job's environment: how many tasks,
//! which GPUs the step and each task get, and each task's Slurm variables. Pure:
//! the job's variables come in through a lookup, nothing is started here.
//! Must not touch: processes, the portal.

use super::options::{GpuBind, SrunOptions};

/// A step ready to start (its number is the portal's, given to [`Plan::task_env`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub ntasks: u32,
    /// The step's name (`-J`, else the command's file name).
    pub name: String,
    pub node: String,
    /// The job's devices (`CUDA_VISIBLE_DEVICES` entries) given to the step.
    pub step_devices: Vec<String>,
    /// The same GPUs as `SLURM_JOB_GPUS` numbers them (physical indices).
    pub step_gpus: Vec<String>,
    /// For each task, the positions in `step_devices` it sees.
    pub task_devices: Vec<Vec<usize>>,
    pub cpus_per_task: Option<u32>,
}

fn list(value: Option<String>) -> Vec<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "NoDevFiles")
        .map(String::from)
        .collect()
}

/// The positions (in a step of `n` devices) task `t` of `ntasks` sees.
fn bind(bind: &GpuBind, per_task: Option<u32>, t: u32, ntasks: u32, n: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let all = || (0..n).collect();
    let take = |k: u32| -> Vec<usize> {
        (0..k as usize)
            .map(|i| (t as usize * k as usize + i) % n)
            .collect()
    };
    match bind {
        GpuBind::None => all(),
        GpuBind::Single(k) => vec![(t / k) as usize % n],
        GpuBind::PerTask(k) => take(*k),
        GpuBind::Map(m) => vec![m[t as usize % m.len()] as usize],
        GpuBind::Mask(m) => {
            let mask = m[t as usize % m.len()];
            (0..n.min(64)).filter(|i| mask & (1 << i) != 0).collect()
        }
        GpuBind::Default | GpuBind::Closest => match per_task {
            Some(k) => take(k),
            // Closest on one node without --gpus-per-task: split them evenly.
            None if *bind == GpuBind::Closest && ntasks as usize <= n => {
                let share = n / ntasks as usize;
                take(share as u32)
            }
            None => all(),
        },
    }
}

impl Plan {
    /// The step `o` asks for in the job whose variables `var` reads.
    pub fn new(o: &SrunOptions, var: &dyn Fn(&str) -> Option<String>) -> Result<Plan, String> {
        let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u32>().ok());
        if o.nodes.is_some_and(|n| n > 1) {
            return Err(
                "Unable to create step for job: Requested node configuration is not available (the job has one node)"
                    .into(),
            );
        }
        let ntasks = o
            .ntasks
            .or(o.ntasks_per_node)
            .or_else(|| number("SLURM_NTASKS"))
            .unwrap_or(1);
        if ntasks > MAX_TASKS {
            return Err(format!(
                "Unable to create step for job: more than {MAX_TASKS} tasks"
            ));
        }
        let cpus = number("SLURM_CPUS_ON_NODE");
        let cpus_per_task = o.cpus_per_task;
        if let Some(cpus) = cpus.filter(|_| !o.overcommit) {
            let wanted = u64::from(ntasks) * u64::from(cpus_per_task.unwrap_or(1));
            if wanted > u64::from(cpus) {
                return Err(format!(
                    "Unable to create step for job: More processors requested than permitted ({ntasks} tasks of {} CPUs, {cpus} CPUs in the job)",
                    cpus_per_task.unwrap_or(1)
                ));
            }
        }
        let devices = list(var("CUDA_VISIBLE_DEVICES"));
        let mut gpus = list(var("SLURM_JOB_GPUS"));
        if gpus.len() != devices.len() {
            gpus = devices.clone();
        }
        let (step_devices, step_gpus) = match o.gpus_per_task {
            Some(k) => {
                let want = k as usize * ntasks as usize;
                if want > devices.len() {
                    return Err(format!(
                        "Unable to create step for job: Requested node configuration is not available ({want} GPUs for {ntasks} tasks, {} in the job)",
                        devices.len()
                    ));
                }
                (devices[..want].to_vec(), gpus[..want].to_vec())
            }
            None => (devices, gpus),
        };
        if let GpuBind::Map(m) = &o.gpu_bind {
            if let Some(bad) = m.iter().find(|i| **i as usize >= step_devices.len()) {
                return Err(format!(
                    "--gpu-bind=map_gpu: GPU {bad} is not one of the step's {}",
                    step_devices.len()
                ));
            }
        }
        let task_devices = (0..ntasks)
            .map(|t| bind(&o.gpu_bind, o.gpus_per_task, t, ntasks, step_devices.len()))
            .collect();
        let name = o.job_name.clone().unwrap_or_else(|| {
            o.command
                .first()
                .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
                .unwrap_or_default()
        });
        Ok(Plan {
            ntasks,
            name: if name.is_empty() { "srun".into() } else { name },
            node: var("SLURMD_NODENAME")
                .or_else(|| var("SLURM_JOB_NODELIST"))
                .unwrap_or_else(|| "localhost".into()),
            step_devices,
            step_gpus,
            task_devices,
            cpus_per_task,
        })
    }

    /// The variables task `t` of step `step` gets over srun's own.
    pub fn task_env(&self, step: u32, t: u32) -> Vec<(String, String)> {
        let n = self.ntasks.to_string();
        let mut env: Vec<(String, String)> = [
            ("SLURM_STEP_ID", step.to_string()),
            ("SLURM_STEPID", step.to_string()),
            ("SLURM_PROCID", t.to_string()),
            ("SLURM_LOCALID", t.to_string()),
            ("SLURM_NODEID", "0".to_string()),
            ("SLURM_NTASKS", n.clone()),
            ("SLURM_NPROCS", n.clone()),
            ("SLURM_STEP_NUM_TASKS", n.clone()),
            ("SLURM_STEP_NUM_NODES", "1".to_string()),
            ("SLURM_STEP_NODELIST", self.node.clone()),
            ("SLURM_STEP_TASKS_PER_NODE", n.clone()),
            ("SLURM_TASKS_PER_NODE", n),
            (
                "SLURM_GTIDS",
                (0..self.ntasks)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(c) = self.cpus_per_task {
            env.push(("SLURM_CPUS_PER_TASK".into(), c.to_string()));
        }
        if !self.step_devices.is_empty() {
            env.push(("SLURM_STEP_GPUS".into(), self.step_gpus.join(",")));
            let mine: Vec<&str> = self.task_devices[t as usize]
                .iter()
                .map(|i| self.step_devices[*i].as_str())
                .collect();
            env.push(("CUDA_VISIBLE_DEVICES".into(), mine.join(",")));
            env.push(("GPU_DEVICE_ORDINAL".into(), mine.join(",")));
        }
        env
    }
}

/// The most tasks one step starts (the portal's bound too).
pub const MAX_TASKS: u32 = 512;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn job(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn options(words: &[&str]) -> SrunOptions {
        let args: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        SrunOptions::parse(&args).expect("options")
    }

    fn env_of(plan: &Plan, t: u32) -> BTreeMap<String, String> {
        plan.task_env(3, t).into_iter().collect()
    }

    const FOUR_GPUS: &[(&str, &str)] = &[
        ("SLURM_NTASKS", "4"),
        ("SLURM_CPUS_ON_NODE", "8"),
        ("CUDA_VISIBLE_DEVICES", "4,5,6,7"),
        ("SLURM_JOB_GPUS", "4,5,6,7"),
        ("SLURMD_NODENAME", "head"),
    ];

    #[test]
    fn each_task_gets_its_rank_and_by_default_every_gpu() {
        let plan = Plan::new(&options(&["python3", "x.py"]), &job(FOUR_GPUS)).expect("plan");
        assert_eq!(plan.ntasks, 4, "the job's SLURM_NTASKS");
        assert_eq!(plan.name, "python3");
        let env = env_of(&plan, 2);
        assert_eq!(env["SLURM_PROCID"], "2");
        assert_eq!(env["SLURM_LOCALID"], "2");
        assert_eq!(env["SLURM_NODEID"], "0");
        assert_eq!(env["SLURM_STEP_ID"], "3");
        assert_eq!(env["SLURM_NTASKS"], "4");
        assert_eq!(env["SLURM_STEP_NODELIST"], "head");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "4,5,6,7");
        assert_eq!(env["SLURM_STEP_GPUS"], "4,5,6,7");
    }

    #[test]
    fn gpus_per_task_gives_each_task_its_own() {
        let plan = Plan::new(
            &options(&["-n", "4", "--gpus-per-task=1", "x"]),
            &job(FOUR_GPUS),
        )
        .expect("plan");
        let seen: Vec<String> = (0..4)
            .map(|t| env_of(&plan, t)["CUDA_VISIBLE_DEVICES"].clone())
            .collect();
        assert_eq!(seen, ["4", "5", "6", "7"]);
        let plan = Plan::new(
            &options(&["-n", "2", "--gpus-per-task=1", "x"]),
            &job(FOUR_GPUS),
        )
        .expect("plan");
        assert_eq!(env_of(&plan, 1)["SLURM_STEP_GPUS"], "4,5");
        let plan = Plan::new(
            &options(&["-n", "2", "--gpus-per-task=2", "x"]),
            &job(FOUR_GPUS),
        )
        .expect("plan");
        assert_eq!(env_of(&plan, 1)["CUDA_VISIBLE_DEVICES"], "6,7");
        let err = Plan::new(
            &options(&["-n", "4", "--gpus-per-task=2", "x"]),
            &job(FOUR_GPUS),
        )
        .expect_err("8 GPUs of 4");
        assert!(
            err.contains("Requested node configuration is not available"),
            "{err}"
        );
    }

    #[test]
    fn gpu_bind_picks_positions_of_the_steps_gpus() {
        let per = |words: &[&str]| -> Vec<String> {
            let plan = Plan::new(&options(words), &job(FOUR_GPUS)).expect("plan");
            (0..plan.ntasks)
                .map(|t| env_of(&plan, t)["CUDA_VISIBLE_DEVICES"].clone())
                .collect()
        };
        assert_eq!(
            per(&["-n", "4", "--gpu-bind=none", "x"]),
            vec!["4,5,6,7"; 4]
        );
        assert_eq!(
            per(&["-n", "4", "--gpu-bind=single:2", "x"]),
            ["4", "4", "5", "5"]
        );
        assert_eq!(
            per(&["-n", "2", "--gpu-bind=per_task:2", "x"]),
            ["4,5", "6,7"]
        );
        assert_eq!(
            per(&["-n", "3", "--gpu-bind=map_gpu:3,1", "x"]),
            ["7", "5", "7"]
        );
        assert_eq!(
            per(&["-n", "2", "--gpu-bind=mask_gpu:0x3,0xc", "x"]),
            ["4,5", "6,7"]
        );
        assert_eq!(
            per(&["-n", "4", "--gpu-bind=closest", "x"]),
            ["4", "5", "6", "7"]
        );
        assert!(Plan::new(&options(&["--gpu-bind=map_gpu:9", "x"]), &job(FOUR_GPUS)).is_err());
    }

    #[test]
    fn a_step_stays_within_the_jobs_cpus_and_node() {
        let err = Plan::new(&options(&["-n", "9", "x"]), &job(FOUR_GPUS)).expect_err("9 of 8");
        assert!(
            err.contains("More processors requested than permitted"),
            "{err}"
        );
        assert!(Plan::new(&options(&["-n", "4", "-c", "3", "x"]), &job(FOUR_GPUS)).is_err());
        assert!(Plan::new(&options(&["-O", "-n", "9", "x"]), &job(FOUR_GPUS)).is_ok());
        assert!(Plan::new(&options(&["-N", "2", "x"]), &job(FOUR_GPUS)).is_err());
        assert!(Plan::new(&options(&["-n", "600", "-O", "x"]), &job(FOUR_GPUS)).is_err());
        let plan =
            Plan::new(&options(&["-J", "train", "/usr/bin/python3"]), &job(&[])).expect("plan");
        assert_eq!((plan.ntasks, plan.name.as_str()), (1, "train"));
        assert!(!env_of(&plan, 0).contains_key("CUDA_VISIBLE_DEVICES"));
    }
}
