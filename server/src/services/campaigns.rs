//! Benchmark campaigns: a template and a matrix become job arrays submitted as the
//! caller (each task a benchmark job, recorded as a run linked to its point), and the
//! campaign's report: progress, each point against the published figures, scaling,
//! storage per GPU, sizing, and the change since the previous campaign of the template.
//!
//! Owns: which templates there are (the built-in starters, or a script of the
//! caller's), that nothing is submitted unless the whole matrix is valid, that a
//! campaign whose submission fails half-way leaves no job behind, who sees a campaign
//! (its owner and administrators; anyone else gets "not found"), which earlier
//! campaign a report compares with (the owner's latest earlier one of the template),
//! and the audit entry of a submission.
//! Must not touch: planning and judging (`benchmarks::campaign`, pure), SQL, HTTP.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::jobs::{JobAction, SubmitJob};
use super::reasons::is_whole_gpu;
use super::{Audit, Jobs, ServiceError};
use crate::auth::Principal;
use crate::benchmarks::campaign::{
    self, builtin, gpu_hours, plan, GpuHours, Limits, MatrixSpec, Plan, Point, PointRun, Report,
    ReportInput, Template,
};
use crate::benchmarks::reference;
use crate::store::{
    BenchmarkFilter, BenchmarkRun, CampaignJob, CampaignRecord, NewCampaign, Store,
};
use crate::util::{now_ms, rfc3339};

/// The most campaigns a list shows.
pub const MAX_LIST: i64 = 200;
/// A campaign's name: at most this many bytes.
const MAX_NAME: usize = 128;
/// Without a cluster to ask, the most GPUs a point may ask for.
const FALLBACK_MAX_GPUS: u32 = 64;

/// A campaign as asked for.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCampaignBody {
    /// A built-in template's name (`resnet50-synthetic`, `fio-seqread`, `nccl-allreduce`),
    /// or the name given to `script`.
    pub template: String,
    /// A template of the caller's own: a job script with `#CAMPAIGN --param NAME=DEFAULT`
    /// lines (and `--serial`, `--title=`); absent: the built-in `template`.
    pub script: Option<String>,
    /// What the campaign is called; default: the template's title and the date.
    pub name: Option<String>,
    #[schema(value_type = Object)]
    pub matrix: MatrixSpec,
    /// Environment given to every job (as `sbatch` exports the submitter's; `atrium
    /// campaign submit` sends its own), bounded as a job's.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
}

/// A template as offered.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TemplateInfo {
    pub name: String,
    pub title: String,
    /// `(name, default)` of each parameter.
    #[schema(value_type = Vec<Object>)]
    pub params: Vec<campaign::Param>,
    /// Its runs must not overlap.
    pub serial: bool,
    /// Its `#SBATCH` GPU count, the default of `matrix.gpus`.
    pub default_gpus: u32,
    /// Its `#SBATCH --time`, minutes.
    pub time_limit_minutes: Option<u32>,
}

impl From<&Template> for TemplateInfo {
    fn from(t: &Template) -> Self {
        TemplateInfo {
            name: t.name.clone(),
            title: t.title.clone(),
            params: t.params.clone(),
            serial: t.serial,
            default_gpus: t.default_gpus(),
            time_limit_minutes: t.time_limit_minutes(),
        }
    }
}

/// What a campaign would be, before it is submitted.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Estimate {
    pub points: usize,
    pub repetitions: u32,
    /// Jobs (array tasks) it submits.
    pub jobs: usize,
    /// Job arrays, one per GPU count.
    pub arrays: usize,
    #[schema(value_type = Object)]
    pub gpu_hours: GpuHours,
    /// The previous campaign of the template whose durations `gpu_hours.expected`
    /// uses.
    pub previous: Option<i64>,
}

/// A campaign, for lists.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CampaignInfo {
    pub id: i64,
    pub name: String,
    pub template: String,
    pub title: String,
    pub user: String,
    pub created_at: String,
    /// Jobs (array tasks) planned.
    pub tasks: i64,
    /// The job arrays, by id.
    pub jobs: Vec<i64>,
}

/// A campaign with its report.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CampaignReport {
    #[serde(flatten)]
    pub campaign: CampaignInfo,
    /// The matrix as asked.
    #[schema(value_type = Object)]
    pub matrix: serde_json::Value,
    /// The previous campaign of the template it is compared with.
    pub previous: Option<i64>,
    #[schema(value_type = Object)]
    pub report: Report,
}

/// The plan as stored with a campaign: its points.
#[derive(Debug, Serialize, Deserialize)]
struct StoredPlan {
    points: Vec<Point>,
    repetitions: u32,
}

/// The campaigns service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Campaigns {
    store: Store,
    jobs: Jobs,
    audit: Audit,
}

impl Campaigns {
    pub fn new(store: Store, jobs: Jobs, audit: Audit) -> Campaigns {
        Campaigns { store, jobs, audit }
    }

    /// The built-in templates.
    pub fn templates(&self) -> Vec<TemplateInfo> {
        builtin().iter().map(TemplateInfo::from).collect()
    }

    /// The template `body` names or gives.
    fn template(body: &NewCampaignBody) -> Result<Template, ServiceError> {
        match &body.script {
            Some(script) => Template::parse(&body.template, script).map_err(invalid),
            None => builtin()
                .into_iter()
                .find(|t| t.name == body.template)
                .ok_or_else(|| ServiceError::InvalidPath {
                    field: "template".into(),
                    message: format!(
                        "no template {:?}: the built-in ones are {}; or give your own as script",
                        cut(&body.template),
                        builtin()
                            .iter()
                            .map(|t| t.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }),
        }
    }

    /// The most GPUs one job can have here: the largest node's whole GPUs.
    async fn limits(&self) -> Limits {
        let max_gpus = match self.jobs.scheduler().nodes().await {
            Ok((nodes, _)) => nodes
                .iter()
                .map(|n| {
                    n.slices
                        .iter()
                        .filter(|s| is_whole_gpu(&s.r#type))
                        .map(|s| s.total)
                        .sum::<u32>()
                })
                .max()
                .unwrap_or(0),
            Err(_) => FALLBACK_MAX_GPUS,
        };
        Limits::new(max_gpus)
    }

    /// The template and plan of `body`, checked whole; nothing is submitted.
    async fn planned(&self, body: &NewCampaignBody) -> Result<(Template, Plan), ServiceError> {
        if let Some(name) = &body.name {
            if name.len() > MAX_NAME || name.chars().any(char::is_control) {
                return Err(ServiceError::InvalidPath {
                    field: "name".into(),
                    message: format!("at most {MAX_NAME} bytes, no control characters"),
                });
            }
        }
        let template = Self::template(body)?;
        let plan = plan(&template, &body.matrix, &self.limits().await).map_err(invalid)?;
        Ok((template, plan))
    }

    /// What `body` would submit and the GPU-hours it may take.
    pub async fn estimate(
        &self,
        caller: &Principal,
        body: &NewCampaignBody,
    ) -> Result<Estimate, ServiceError> {
        let (template, plan) = self.planned(body).await?;
        let previous = self
            .previous(&caller.username, &template.name, None)
            .await?;
        let measured = match &previous {
            Some(p) => Some(self.durations(p).await?),
            None => None,
        };
        Ok(Estimate {
            points: plan.points.len(),
            repetitions: plan.repetitions,
            jobs: plan.jobs.iter().map(|j| j.tasks.len()).sum(),
            arrays: plan.jobs.len(),
            gpu_hours: gpu_hours(
                &plan,
                template.time_limit_minutes().unwrap_or(60),
                measured.as_ref(),
            ),
            previous: previous.map(|p| p.id),
        })
    }

    /// Submit `body` as `caller`: every array or none (an array refused after others
    /// were queued cancels those).
    pub async fn submit(
        &self,
        caller: &Principal,
        client_addr: &str,
        body: &NewCampaignBody,
    ) -> Result<CampaignInfo, ServiceError> {
        let (template, plan) = self.planned(body).await?;
        let name = body.name.clone().unwrap_or_else(|| {
            format!(
                "{} ({})",
                template.title,
                rfc3339(now_ms()).get(..10).unwrap_or_default()
            )
        });
        let stored = serde_json::to_string(&StoredPlan {
            points: plan.points.clone(),
            repetitions: plan.repetitions,
        })
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
        let matrix = serde_json::to_string(&body.matrix)
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        let tasks: usize = plan.jobs.iter().map(|j| j.tasks.len()).sum();
        let id = self
            .store
            .create_campaign(
                &NewCampaign {
                    user_name: &caller.username,
                    name: &name,
                    template: &template.name,
                    title: &template.title,
                    template_script: &template.script,
                    matrix: &matrix,
                    plan: &stored,
                    tasks: tasks as i64,
                },
                now_ms(),
            )
            .await?;
        let mut submitted: Vec<i64> = Vec::new();
        for job in &plan.jobs {
            let result = self
                .submit_array(
                    caller,
                    id,
                    &template,
                    job,
                    &body.environment,
                    submitted.last(),
                )
                .await;
            match result {
                Ok(job_id) => submitted.push(job_id),
                Err(e) => {
                    self.withdraw(caller, client_addr, id, &submitted).await;
                    return Err(e);
                }
            }
        }
        let detail = serde_json::json!({
            "template": template.name,
            "points": plan.points.len(),
            "repetitions": plan.repetitions,
            "jobs": submitted,
        });
        if let Err(e) = self
            .audit
            .record(
                &caller.username,
                client_addr,
                "campaign.submit",
                &format!("campaign {id}"),
                detail,
            )
            .await
        {
            tracing::warn!(campaign = id, error = %e, "auditing a campaign failed");
        }
        Ok(CampaignInfo {
            id,
            name,
            template: template.name,
            title: template.title,
            user: caller.username.clone(),
            created_at: rfc3339(now_ms()),
            tasks: tasks as i64,
            jobs: submitted,
        })
    }

    /// Submit one array of a campaign and link it; its job id.
    async fn submit_array(
        &self,
        caller: &Principal,
        campaign: i64,
        template: &Template,
        job: &campaign::PlannedJob,
        environment: &BTreeMap<String, String>,
        previous: Option<&i64>,
    ) -> Result<i64, ServiceError> {
        let mut options = BTreeMap::new();
        options.insert("array".to_string(), serde_json::json!(job.array));
        options.insert(
            "job-name".to_string(),
            serde_json::json!(format!("campaign{campaign}-{}", template.name)),
        );
        // Over the template's own `#SBATCH --gres` (`none`: a point without GPUs).
        let gres = match job.gpus {
            0 => "none".to_string(),
            n => format!("gpu:{n}"),
        };
        options.insert("gres".to_string(), serde_json::json!(gres));
        if let (true, Some(before)) = (job.after_previous, previous) {
            options.insert(
                "dependency".to_string(),
                serde_json::json!(format!("afterany:{before}")),
            );
        }
        let mut environment = environment.clone();
        environment.insert("ATRIUM_CAMPAIGN".to_string(), campaign.to_string());
        let id = self
            .jobs
            .submit(
                caller,
                SubmitJob {
                    script: Some(job.script.clone()),
                    wrap: None,
                    options,
                    environment,
                    working_directory: None,
                    arguments: Vec::new(),
                    interactive: false,
                    raw_terminal: false,
                },
            )
            .await?;
        let job_id = id.job as i64;
        let tasks =
            serde_json::to_string(&job.tasks).map_err(|e| ServiceError::Internal(e.to_string()))?;
        self.store
            .add_campaign_job(&CampaignJob {
                job_id,
                campaign_id: campaign,
                gpus: i64::from(job.gpus),
                tasks,
            })
            .await?;
        Ok(job_id)
    }

    /// Undo a campaign whose submission failed: cancel what was queued, forget it.
    async fn withdraw(&self, caller: &Principal, client_addr: &str, id: i64, jobs: &[i64]) {
        for &job in jobs {
            let job = scheduler::JobId::new(job as u64);
            if let Err(e) = self
                .jobs
                .control(caller, client_addr, job, JobAction::Cancel)
                .await
            {
                tracing::warn!(campaign = id, job = %job, error = %e, "cancelling a campaign's job failed");
            }
        }
        if let Err(e) = self.store.delete_campaign(id).await {
            tracing::warn!(campaign = id, error = %e, "removing a campaign that was not submitted failed");
        }
    }

    /// `caller`'s campaigns (everyone's for an administrator), newest first.
    pub async fn list(&self, caller: &Principal) -> Result<Vec<CampaignInfo>, ServiceError> {
        let user = (!caller.acts_as_admin()).then_some(caller.username.as_str());
        let mut out = Vec::new();
        for c in self.store.campaigns(user, None, None, MAX_LIST).await? {
            out.push(self.info(c).await?);
        }
        Ok(out)
    }

    async fn info(&self, c: CampaignRecord) -> Result<CampaignInfo, ServiceError> {
        let jobs = self.job_ids(c.id).await?;
        Ok(info_of(c, jobs))
    }

    /// The job arrays of campaign `id`, by id.
    async fn job_ids(&self, id: i64) -> Result<Vec<i64>, ServiceError> {
        Ok(self
            .store
            .campaign_jobs(id)
            .await?
            .iter()
            .map(|j| j.job_id)
            .collect())
    }

    /// Campaign `id`, if `caller` may see it.
    async fn visible(&self, caller: &Principal, id: i64) -> Result<CampaignRecord, ServiceError> {
        self.store
            .campaign(id)
            .await?
            .filter(|c| caller.may_see(&c.user_name))
            .ok_or(ServiceError::NotFound)
    }

    /// The owner's latest campaign of `template` before `before` (or at all).
    async fn previous(
        &self,
        user: &str,
        template: &str,
        before: Option<i64>,
    ) -> Result<Option<CampaignRecord>, ServiceError> {
        Ok(self
            .store
            .campaigns(Some(user), Some(template), before, 1)
            .await?
            .pop())
    }

    /// The points of a stored campaign and its recorded runs, as the report takes them.
    async fn points_and_runs(
        &self,
        c: &CampaignRecord,
    ) -> Result<(Vec<Point>, Vec<PointRun>), ServiceError> {
        let plan: StoredPlan = serde_json::from_str(&c.plan)
            .map_err(|e| ServiceError::Internal(format!("campaign {}'s plan: {e}", c.id)))?;
        let runs = self
            .store
            .campaign_runs(c.id)
            .await?
            .into_iter()
            .map(|(link, record)| {
                let setup = &record.run.setup;
                PointRun {
                    point: u32::try_from(link.point).unwrap_or(u32::MAX),
                    repetition: u32::try_from(link.repetition).unwrap_or(0),
                    metrics: record.run.metrics.clone(),
                    gpu_model: setup.gpu_model.clone(),
                    read_mb_per_s: link.read_mb_per_s,
                    read_source: link.read_source.clone(),
                    duration_s: link.duration_s,
                    model: setup.model.clone(),
                    precision: setup.precision.clone(),
                    batch_size_per_gpu: setup
                        .batch_size_per_gpu
                        .and_then(|b| u32::try_from(b).ok()),
                }
            })
            .collect();
        Ok((plan.points, runs))
    }

    /// How long each point of campaign `c` took (the median of its runs), by key.
    async fn durations(&self, c: &CampaignRecord) -> Result<BTreeMap<String, f64>, ServiceError> {
        let (points, runs) = self.points_and_runs(c).await?;
        Ok(points
            .iter()
            .filter_map(|p| {
                let took: Vec<f64> = runs
                    .iter()
                    .filter(|r| r.point == p.index)
                    .filter_map(|r| r.duration_s)
                    .collect();
                Some((p.key(), campaign::report::median(&took)?))
            })
            .collect())
    }

    /// The report of campaign `c`, with the previous campaign it compares with.
    async fn report_of(
        &self,
        c: &CampaignRecord,
        jobs: &[i64],
    ) -> Result<(Report, Option<i64>), ServiceError> {
        let (points, runs) = self.points_and_runs(c).await?;
        let progress = self.store.campaign_progress(jobs).await?;
        let reference: Vec<BenchmarkRun> = self
            .store
            .benchmark_runs(&BenchmarkFilter {
                reference: Some(true),
                limit: 10_000,
                ..Default::default()
            })
            .await?
            .into_iter()
            .map(|r| r.run)
            .collect();
        let previous = self.previous(&c.user_name, &c.template, Some(c.id)).await?;
        let before = match &previous {
            Some(p) => Some(self.medians(p).await?),
            None => None,
        };
        let node_mb_per_s = self.measured_node_throughput(&c.user_name).await?;
        let report = campaign::report(&ReportInput {
            suite: suite_of(&c.template_script, &c.template),
            points: &points,
            runs: &runs,
            jobs: campaign::JobCounts {
                planned: u32::try_from(c.tasks).unwrap_or(u32::MAX),
                ended: u32::try_from(progress.ended).unwrap_or(0),
                failed: u32::try_from(progress.failed).unwrap_or(0),
            },
            reference: &reference,
            sizing: reference::sizing(),
            node_mb_per_s,
            previous: before.as_ref(),
        });
        Ok((report, previous.map(|p| p.id)))
    }

    /// Each point's median of campaign `c`'s headline metric, by point key.
    async fn medians(&self, c: &CampaignRecord) -> Result<BTreeMap<String, f64>, ServiceError> {
        let (points, runs) = self.points_and_runs(c).await?;
        let report = campaign::report(&ReportInput {
            suite: suite_of(&c.template_script, &c.template),
            points: &points,
            runs: &runs,
            jobs: Default::default(),
            reference: &[],
            sizing: &[],
            node_mb_per_s: None,
            previous: None,
        });
        Ok(report
            .points
            .into_iter()
            .filter_map(|p| Some((p.key, p.median?)))
            .collect())
    }

    /// The read throughput of one storage node measured by the owner's latest fio
    /// campaign (its best point's median), if there is one.
    async fn measured_node_throughput(&self, user: &str) -> Result<Option<f64>, ServiceError> {
        let Some(fio) = self
            .store
            .campaigns(Some(user), Some("fio-seqread"), None, 1)
            .await?
            .pop()
        else {
            return Ok(None);
        };
        Ok(self.medians(&fio).await?.into_values().reduce(f64::max))
    }

    /// Campaign `id` with its report.
    pub async fn show(&self, caller: &Principal, id: i64) -> Result<CampaignReport, ServiceError> {
        let c = self.visible(caller, id).await?;
        let jobs = self.job_ids(c.id).await?;
        let (report, previous) = self.report_of(&c, &jobs).await?;
        let matrix = serde_json::from_str(&c.matrix).unwrap_or(serde_json::Value::Null);
        Ok(CampaignReport {
            campaign: info_of(c, jobs),
            matrix,
            previous,
            report,
        })
    }

    /// The report as one self-contained HTML document.
    pub async fn report_html(&self, caller: &Principal, id: i64) -> Result<String, ServiceError> {
        let shown = self.show(caller, id).await?;
        campaign::html(
            &shown.report,
            &format!("{}: campaign {}", shown.campaign.name, shown.campaign.id),
            &rfc3339(now_ms()),
        )
        .map_err(|e| ServiceError::Internal(format!("rendering a campaign's report: {e}")))
    }

    /// The report as CSV, one row per point.
    pub async fn report_csv(&self, caller: &Principal, id: i64) -> Result<String, ServiceError> {
        Ok(campaign::csv(&self.show(caller, id).await?.report))
    }
}

/// A stored campaign as lists show it, with its job arrays.
fn info_of(c: CampaignRecord, jobs: Vec<i64>) -> CampaignInfo {
    CampaignInfo {
        id: c.id,
        name: c.name,
        template: c.template,
        title: c.title,
        user: c.user_name,
        created_at: rfc3339(c.created_at),
        tasks: c.tasks,
        jobs,
    }
}

/// The suite a stored template's script marks (`#ATRIUM --benchmark=`).
fn suite_of(script: &str, name: &str) -> Option<crate::benchmarks::Suite> {
    Template::parse(name, script).ok()?.suite()
}

/// `text`, cut for a message.
fn cut(text: &str) -> String {
    text.chars().take(40).collect()
}

fn invalid(e: campaign::FieldError) -> ServiceError {
    ServiceError::InvalidPath {
        field: e.field,
        message: e.message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_profiles_are_told_from_gpu_types() {
        assert!(!is_whole_gpu("1g.10gb"));
        assert!(!is_whole_gpu("3g.40gb"));
        assert!(is_whole_gpu("a100-80gb"));
        assert!(!is_whole_gpu("shard"));
    }
}
