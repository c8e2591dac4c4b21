//! Liveness, readiness and metrics endpoints.

use actix_web::{web, HttpResponse};

use super::authn::MaybeUser;
use super::{ApiError, AppState};
use crate::auth::Scope;

/// The process answers.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// The process can serve: its database answers.
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state
        .ready()
        .await
        .map_err(|e| ApiError::Unavailable(format!("database: {e}")))?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain")
        .body("ready\n"))
}

/// Prometheus text format. Administrators only unless `http.public_metrics`.
pub async fn metrics(
    state: web::Data<AppState>,
    caller: MaybeUser,
) -> Result<HttpResponse, ApiError> {
    if !state.config.http.public_metrics {
        caller
            .0
            .ok_or(ApiError::Unauthorized)?
            .require(Scope::Admin)?;
    }
    // The queue, the GPUs and the sessions now; while the scheduler is still being
    // restored the last values stay.
    let (queue, nodes, sessions) = tokio::join!(
        state.cluster.queue_counts(),
        state.cluster.nodes(),
        state.sessions.counts(),
    );
    match (queue, nodes, sessions) {
        (Ok(queue), Ok((nodes, _)), Ok(sessions)) => {
            state.metrics.set_state(&queue, &nodes, &sessions)
        }
        (queue, nodes, sessions) => tracing::debug!(
            queue = queue.is_ok(),
            nodes = nodes.is_ok(),
            sessions = sessions.is_ok(),
            "metrics without the scheduler's or the sessions' state"
        ),
    }
    match crate::util::file_system_space(&state.config.data_dir) {
        Ok((free, size)) => state.metrics.set_data_dir(free, size),
        Err(e) => tracing::debug!(error = %e, "the data directory's file system unread"),
    }
    let text = state.metrics.render().map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(text))
}
