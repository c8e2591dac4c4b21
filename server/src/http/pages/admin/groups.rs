//! `GET /admin/groups`: every group with its gid, source and members.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;

use super::AdminUser;
use crate::http::pages::{render, Nav};
use crate::http::{ApiError, AppState};
use crate::services::accounts::GroupInfo;

#[derive(Template)]
#[template(path = "admin/groups.html")]
struct GroupsPage {
    nav: Nav,
    groups: Vec<GroupInfo>,
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    let page = GroupsPage {
        nav: Nav::of(&admin.0).at(crate::http::pages::Section::Admin),
        groups: state.accounts.groups().await?,
    };
    render(&page, StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    #[test]
    fn groups_list_their_members_escaped() {
        let html = GroupsPage {
            nav: nav(),
            groups: vec![GroupInfo {
                name: "vision".into(),
                gid: Some(5001),
                source: "ldap".into(),
                members: vec!["ann".into(), "<bob>".into()],
            }],
        }
        .render()
        .expect("render");
        assert!(html.contains("5001"), "{html}");
        assert!(html.contains("ann, &#60;bob&#62;"), "{html}");
        assert!(html.contains("href=\"/admin/users\""), "{html}");
    }
}
