//! `GET /.well-known/jmap`: the Session object (RFC 8620 §2).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::Value;

use super::AppState;
use super::auth::Authenticated;
use super::error::HttpError;
use crate::jmap::session::session;

/// Returns the authenticated user's session.
pub async fn get_session(
    State(state): State<Arc<AppState>>,
    Authenticated(account): Authenticated,
    headers: HeaderMap,
) -> Result<Json<Value>, HttpError> {
    Ok(Json(session(
        &account,
        &state.jmap.limits,
        &state.base_url(&headers),
    )))
}
