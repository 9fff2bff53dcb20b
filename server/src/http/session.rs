//! `GET /.well-known/jmap`: the Session object (RFC 8620 §2).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::Value;

use super::AppState;
use super::auth::{AuthenticatedWith, FreshlyAuthenticated};
use super::error::HttpError;
use super::push_access::{CredentialTag, PUSH_ACCESS_TTL, PushAccess};
use crate::jmap::session::{push_access_day, session};

/// Returns the authenticated user's session, its `eventSourceUrl` carrying
/// a push access for the credential it was fetched with
/// ([`super::push_access`]), checked against the store now: a password
/// changed within the credential cache's minute is verified again, so the
/// access handed out is one that works.
pub async fn get_session(
    State(state): State<Arc<AppState>>,
    AuthenticatedWith(account, credential): FreshlyAuthenticated,
    headers: HeaderMap,
) -> Result<Json<Value>, HttpError> {
    // Issued per day, so the session object is the same all day
    // (its state names the day); valid the TTL after that day ends.
    let day = push_access_day(chrono::Utc::now().timestamp());
    let access = PushAccess {
        account: account.id,
        expires_at: (day + 1) * 86_400 + PUSH_ACCESS_TTL.as_secs() as i64,
        credential: CredentialTag::of(&credential),
    };
    let tag = access.credential.state_tag();
    let access = access.sign(state.auth.push_key().await?);
    Ok(Json(session(
        &account,
        &state.jmap.limits,
        &state.base_url(&headers),
        &access,
        &tag,
        state.jmap.route.offers_submission(),
    )))
}
