//! The JSON API under `/api/v1`, one file per resource.

pub mod accounting;
pub mod announcements;
pub mod audit;
pub mod benchmark_charts;
pub mod benchmarks;
pub mod campaigns;
mod cluster;
pub mod fairshare;
pub mod files;
pub mod groups;
pub mod job_steps;
pub mod jobs;
mod login;
mod me;
pub mod nodes;
pub mod output;
pub mod quotas;
pub mod sessions;
pub mod sizing;
pub mod tokens;
pub mod users;

use actix_web::web;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/login", web::post().to(login::post))
        .route("/me", web::get().to(me::get))
        .route("/me/usage", web::get().to(quotas::me_usage))
        .route("/announcements", web::get().to(announcements::current))
        .route("/admin/announcements", web::get().to(announcements::list))
        .route(
            "/admin/announcements",
            web::post().to(announcements::create),
        )
        .route(
            "/admin/announcements/{id}",
            web::delete().to(announcements::delete),
        )
        .route("/admin/audit", web::get().to(audit::list))
        .route("/admin/users", web::get().to(users::list))
        .route("/admin/users/{name}/{action}", web::post().to(users::act))
        .route("/admin/groups", web::get().to(groups::list))
        .route("/admin/idle-gpus", web::get().to(jobs::idle_gpus))
        .route("/admin/sessions", web::get().to(sessions::list_running))
        .route("/admin/nodes/{name}/{action}", web::post().to(nodes::act))
        .route("/admin/quotas", web::get().to(quotas::list))
        .route("/admin/quotas", web::post().to(quotas::create))
        .route("/admin/quotas/{id}", web::get().to(quotas::get))
        .route("/admin/quotas/{id}", web::put().to(quotas::update))
        .route("/admin/quotas/{id}", web::delete().to(quotas::delete))
        .route("/tokens", web::get().to(tokens::list))
        .route("/tokens", web::post().to(tokens::create))
        .route("/tokens/{id}", web::delete().to(tokens::revoke))
        .route("/jobs", web::post().to(jobs::submit))
        .route("/jobs", web::get().to(jobs::list))
        .route("/jobs/{id}", web::get().to(jobs::get))
        .route("/jobs/{id}", web::delete().to(jobs::cancel))
        .route("/jobs/{id}", web::patch().to(jobs::update))
        .route("/jobs/{id}/output", web::get().to(output::get))
        .route("/jobs/{id}/efficiency", web::get().to(jobs::efficiency))
        .route("/jobs/{id}/steps", web::post().to(job_steps::start))
        .route("/jobs/{id}/steps/{step}", web::put().to(job_steps::end))
        .route(
            "/jobs/{id}/self/requeue",
            web::post().to(job_steps::requeue_itself),
        )
        .route("/jobs/{id}/signal", web::post().to(jobs::signal))
        .route("/jobs/{id}/attach", web::get().to(jobs::attach))
        .route("/jobs/{id}/{action}", web::post().to(jobs::act))
        .route("/files", web::get().to(files::list))
        .route("/files", web::delete().to(files::delete))
        .route("/files/mkdir", web::post().to(files::mkdir))
        .route("/files/rename", web::post().to(files::rename))
        .route("/files/download", web::get().to(files::download))
        .route("/files/download", web::head().to(files::download))
        .route("/files/upload", web::get().to(files::upload_status))
        .route("/files/upload", web::head().to(files::upload_status))
        .route("/files/upload", web::put().to(files::upload_piece))
        .route(
            "/files/upload/complete",
            web::post().to(files::complete_upload),
        )
        .route("/sessions", web::post().to(sessions::start))
        .route("/sessions", web::get().to(sessions::list))
        .route("/sessions/{id}", web::get().to(sessions::get))
        .route("/sessions/{id}", web::delete().to(sessions::stop))
        .route("/sessions/{id}/progress", web::get().to(sessions::progress))
        .route("/environments", web::get().to(sessions::environments))
        .route("/apps", web::get().to(sessions::apps))
        .route("/partitions", web::get().to(cluster::partitions))
        .route("/nodes", web::get().to(cluster::nodes))
        .route("/config", web::get().to(cluster::config))
        .route("/cluster/gpus", web::get().to(cluster::gpu_map))
        .route("/priority", web::get().to(fairshare::priority))
        .route("/shares", web::get().to(fairshare::shares))
        .route("/accounting", web::get().to(accounting::get))
        .route("/accounting/chart.svg", web::get().to(accounting::chart))
        .route("/benchmarks", web::post().to(benchmarks::create))
        .route("/benchmarks", web::get().to(benchmarks::list))
        .route(
            "/benchmarks/reference/sizing",
            web::get().to(sizing::reference_rows),
        )
        .route(
            "/benchmarks/chart/scaling.svg",
            web::get().to(benchmark_charts::scaling),
        )
        .route(
            "/benchmarks/chart/storage.svg",
            web::get().to(benchmark_charts::storage),
        )
        .route("/benchmarks/{id}", web::get().to(benchmarks::get))
        .route("/benchmarks/{id}", web::delete().to(benchmarks::delete))
        .route("/campaigns", web::get().to(campaigns::list))
        .route("/campaigns", web::post().to(campaigns::create))
        .route("/campaigns/templates", web::get().to(campaigns::templates))
        .route("/campaigns/estimate", web::post().to(campaigns::estimate))
        .route("/campaigns/{id}", web::get().to(campaigns::get))
        .route(
            "/campaigns/{id}/report.html",
            web::get().to(campaigns::report_html),
        )
        .route(
            "/campaigns/{id}/report.csv",
            web::get().to(campaigns::report_csv),
        )
        .route("/sizing", web::get().to(sizing::get))
        .route("/openapi.json", web::get().to(openapi))
        .default_service(web::to(|| async {
            Err::<(), _>(super::ApiError::NotFound)
        }));
}

pub use crate::util::rfc3339;

/// The API's OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "atrium", description = "Batch jobs, interactive sessions, partitions, nodes, usage accounting, benchmark runs and sizing advice of an atrium portal."),
    paths(jobs::submit, jobs::list, jobs::get, jobs::cancel, jobs::act, jobs::signal, jobs::attach, jobs::update, output::get,
          jobs::efficiency, jobs::idle_gpus,
          fairshare::priority, fairshare::shares,
          job_steps::start, job_steps::end, job_steps::requeue_itself,
          sessions::start, sessions::list, sessions::get, sessions::stop, sessions::progress,
          sessions::environments, sessions::apps, cluster::partitions, cluster::nodes, cluster::config, quotas::me_usage,
          quotas::list, quotas::get, quotas::create, quotas::update, quotas::delete,
          announcements::current, announcements::list, announcements::create, announcements::delete,
          audit::list, nodes::act, users::list, users::act, groups::list,
          files::list, files::mkdir, files::rename, files::delete, files::download,
          files::upload_status, files::upload_piece, files::complete_upload,
          sessions::list_running, accounting::get, accounting::chart, benchmarks::create,
          benchmarks::list, benchmarks::get, benchmarks::delete, benchmark_charts::scaling,
          benchmark_charts::storage, sizing::get, sizing::reference_rows,
          campaigns::templates, campaigns::estimate, campaigns::create, campaigns::list,
          campaigns::get, campaigns::report_html, campaigns::report_csv),
    components(schemas(jobs::SubmitJob, jobs::Submitted, jobs::DryRun, jobs::JobInfo, jobs::JobList, jobs::Done, jobs::SignalJob, jobs::UpdateJob,
                       jobs::Efficiency, jobs::GpuEfficiency, jobs::Series, jobs::SeriesPoint, jobs::IdleGpus,
                       fairshare::PriorityAnswer, fairshare::PriorityWeights, fairshare::JobPriority,
                       fairshare::FactorValues, fairshare::SharesAnswer, fairshare::ShareLine,
                       job_steps::StartStep, job_steps::EndStep, job_steps::StepInfo,
                       sessions::StartSession, sessions::SessionInfo, sessions::SessionList,
                       sessions::EnvironmentList, sessions::EnvironmentInfo,
                       sessions::AppList, crate::sessions::AppSummary,
                       files::FilesAnswer, files::Changed, files::NewFolder, files::Rename,
                       files::CompleteUpload, files::PieceWritten, files::Listing, files::EntryInfo,
                       files::Crumb, files::RootInfo, files::UploadStatus,
                       cluster::Partitions, cluster::Nodes, quotas::QuotaInfo, quotas::QuotaList,
                       quotas::NewQuota, quotas::QuotaUpdate, quotas::MyUsage,
                       quotas::QuotaUsage, crate::domain::quota::QuotaLimits, audit::AuditInfo,
                       audit::AuditList, announcements::Announcement, announcements::AnnouncementList,
                       announcements::NewAnnouncement, nodes::NodeAction, nodes::NodeChanged,
                       users::UserInfo, users::UserList, users::UserChanged,
                       groups::GroupInfo, groups::GroupList,
                       crate::accounting::answer::Accounting, crate::accounting::answer::Totals,
                       crate::accounting::answer::JobUsage, crate::accounting::answer::KeyUsage,
                       crate::benchmarks::run::NewRun, crate::benchmarks::Metric,
                       crate::benchmarks::RunSetup, benchmarks::RunInfo,
                       benchmarks::RunList, sizing::SizingRows, crate::benchmarks::reference::SizingRow,
                       crate::benchmarks::sizing::Advice, crate::benchmarks::sizing::Figure,
                       crate::benchmarks::sizing::NodesNeeded, crate::benchmarks::sizing::GpusFed,
                       campaigns::TemplateList, campaigns::CampaignList, campaigns::TemplateInfo,
                       campaigns::Estimate, campaigns::NewCampaignBody, campaigns::CampaignInfo,
                       campaigns::CampaignReport)),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "token",
            Vec::<String>::new(),
        )]);
    }
}

async fn openapi() -> actix_web::HttpResponse {
    use utoipa::OpenApi;
    actix_web::HttpResponse::Ok().json(ApiDoc::openapi())
}
