//! `GET /api/v1/admin/groups`: every group with its gid, source and members.
//! Administrators only.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

/// A group.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupInfo {
    pub name: String,
    /// The POSIX gid, where known.
    pub gid: Option<i64>,
    /// `local` or `ldap`.
    pub source: String,
    /// Usernames, sorted.
    pub members: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<GroupInfo>,
}

/// Every group by name, with its members (two queries whatever their number).
pub async fn group_infos(state: &AppState) -> Result<Vec<GroupInfo>, ApiError> {
    let mut groups: Vec<GroupInfo> = state
        .store
        .list_groups()
        .await?
        .into_iter()
        .map(|g| GroupInfo {
            name: g.name,
            gid: g.gid_number,
            source: g.source,
            members: Vec::new(),
        })
        .collect();
    let index: HashMap<String, usize> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.name.clone(), i))
        .collect();
    for (group, user) in state.store.memberships().await? {
        if let Some(&i) = index.get(&group) {
            groups[i].members.push(user);
        }
    }
    Ok(groups)
}

/// Every group.
#[utoipa::path(get, path = "/api/v1/admin/groups", responses((status = 200, body = GroupList)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    Ok(HttpResponse::Ok().json(GroupList {
        groups: group_infos(&state).await?,
    }))
}
