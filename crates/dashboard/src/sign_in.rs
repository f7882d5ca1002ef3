//! Signing in and out of the dashboard, and who is looking at a page.
//!
//! A session is a random token in an HttpOnly, SameSite=Lax cookie (only its hash is stored)
//! that expires 12 hours after sign-in. Every form carries the session's CSRF token and every
//! POST goes through [`Posted`], which refuses a missing or wrong one, so no form can forget
//! the check. The sign-in form itself, before any session exists, uses a double-submit token:
//! a cookie and a hidden field that must match.

use std::collections::HashMap;

use axum::Form;
use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use devicecloud_store::{sign_in_sessions, unix_now};
use maud::html;

use crate::error::PageError;
use crate::layout;
use crate::page::PageResult;
use crate::viewer::{CSRF_FIELD, Viewer};
use devicecloud_engine::auth::secrets::{random_token, same_hash, token_hash};
use devicecloud_web::caller::Caller;
use devicecloud_web::origin::Origin;
use devicecloud_web::service::ServiceError;
use devicecloud_web::service::sign_in::sign_in;
use devicecloud_web::state::AppState;

/// How long a session lasts after sign-in.
pub const SESSION_LIFETIME_S: i64 = 12 * 3600;
const SESSION_COOKIE: &str = "dc_session";
const LOGIN_COOKIE: &str = "dc_login";

/// A cookie of the request by name.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value; `Secure` when the client reached the service over HTTPS (the public
/// URL's scheme, or what a trusted proxy says: docs/operations.md, "Behind a reverse proxy").
fn set_cookie(origin: &Origin, name: &str, value: &str, max_age: i64, same_site: &str) -> HeaderValue {
    let secure = if origin.https { "; Secure" } else { "" };
    let text = format!("{name}={value}; Path=/; HttpOnly; SameSite={same_site}; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Only a local path is a place to go back to after sign-in (no open redirect): printable
/// ASCII only (browsers drop tabs and newlines, so `/\t/evil` would become `//evil`), and no
/// second `/` or `\` that would make it a network path.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && n.bytes().all(|b| b.is_ascii_graphic())
                && !matches!(n.as_bytes().get(1), Some(b'/' | b'\\')) =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Viewer, PageError> {
        // After signing in again, a form's target cannot be reopened with GET: the overview.
        let next = match parts.method {
            axum::http::Method::GET => parts
                .uri
                .path_and_query()
                .map_or_else(|| "/".to_string(), |pq| pq.as_str().to_string()),
            _ => "/".to_string(),
        };
        let sign_in = || PageError::SignIn { next: next.clone() };
        let token = cookie(&parts.headers, SESSION_COOKIE).ok_or_else(sign_in)?;
        let session_hash = token_hash(token);
        let session = sign_in_sessions::get(&state.db, &session_hash, unix_now())
            .await?
            .ok_or_else(sign_in)?;
        let caller = Caller::of_account(state, session.id_user, session.is_admin != 0).await?;
        Ok(Viewer {
            caller,
            username: session.username,
            csrf: session.csrf_token,
            session_hash,
        })
    }
}

/// A submitted form of a signed-in viewer whose CSRF token matched.
pub struct Posted {
    pub viewer: Viewer,
    pub fields: HashMap<String, String>,
}

impl Posted {
    /// A field's trimmed value, empty when absent.
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", |v| v.trim())
    }

    /// A field as typed, spaces included (passwords), empty when absent.
    pub fn raw_field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

impl FromRequest<AppState> for Posted {
    type Rejection = PageError;

    async fn from_request(req: Request, state: &AppState) -> Result<Posted, PageError> {
        let (mut parts, body) = req.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, state).await?;
        let req = Request::from_parts(parts, body);
        let Form(pairs) = Form::<Vec<(String, String)>>::from_request(req, state)
            .await
            .map_err(|e| PageError::Api(devicecloud_web::http::error::ApiError::BadRequest(e.body_text())))?;
        let fields: HashMap<String, String> = pairs.into_iter().collect();
        let sent = fields.get(CSRF_FIELD).map_or("", String::as_str);
        if !viewer.csrf_holds(sent) {
            return Err(PageError::Csrf);
        }
        Ok(Posted { viewer, fields })
    }
}

#[derive(serde::Deserialize)]
pub struct NextQuery {
    next: Option<String>,
    notice: Option<String>,
}

/// Why the sign-in form is shown after a change that ended the viewer's session. The URL
/// carries only its key (`/login?notice=password-changed`), so no link can put words of its own
/// on the form.
#[derive(Clone, Copy)]
pub enum SignInNotice {
    /// The account's own password changed: every session of the account has ended.
    PasswordChanged,
}

impl SignInNotice {
    const ALL: [SignInNotice; 1] = [SignInNotice::PasswordChanged];

    fn key(self) -> &'static str {
        match self {
            SignInNotice::PasswordChanged => "password-changed",
        }
    }

    fn text(self) -> &'static str {
        match self {
            SignInNotice::PasswordChanged => {
                "Your password was changed, which signed your account out everywhere. Sign in with the new password."
            }
        }
    }

    fn from_key(key: Option<&str>) -> Option<SignInNotice> {
        Self::ALL.into_iter().find(|n| Some(n.key()) == key)
    }
}

/// Back to the sign-in form with the session cookie cleared (sign-out, or a change that ended
/// the session in the store), `notice` saying why.
pub fn to_sign_in(origin: &Origin, notice: Option<SignInNotice>) -> Response {
    let target = notice.map_or_else(|| "/login".to_string(), |n| format!("/login?notice={}", n.key()));
    redirect(&target, Some(set_cookie(origin, SESSION_COOKIE, "", 0, "Lax")))
}

/// `GET /login`: the sign-in form (already signed in: straight on).
pub async fn login_form(
    State(state): State<AppState>,
    origin: Origin,
    headers: HeaderMap,
    Query(q): Query<NextQuery>,
) -> Response {
    let next = safe_next(q.next.as_deref());
    if let Some(token) = cookie(&headers, SESSION_COOKIE)
        && matches!(
            sign_in_sessions::get(&state.db, &token_hash(token), unix_now()).await,
            Ok(Some(_))
        )
    {
        return redirect(&next, None);
    }
    let message = SignInNotice::from_key(q.notice.as_deref()).map_or(Message::Nothing, |n| Message::Notice(n.text()));
    login_page(&origin, &next, "", message, StatusCode::OK)
}

/// What the sign-in form says above its fields.
enum Message<'a> {
    Nothing,
    Notice(&'a str),
    Error(&'a str),
}

/// The sign-in form with a fresh double-submit token.
fn login_page(origin: &Origin, next: &str, username: &str, message: Message<'_>, status: StatusCode) -> Response {
    let token = random_token();
    let body = layout::bare(
        "Sign in",
        html! {
            main.narrow {
                h1 { "devicecloud" }
                p.muted { "Sign in with your API account." }
                @match message {
                    Message::Nothing => {},
                    Message::Notice(notice) => p.notice role="status" { (notice) },
                    Message::Error(error) => p.error role="alert" { (error) },
                }
                form method="post" action="/login" {
                    input type="hidden" name=(CSRF_FIELD) value=(token);
                    input type="hidden" name="next" value=(next);
                    label { "Username" input name="username" type="text" autocomplete="username" required value=(username); }
                    label { "Password" input name="password" type="password" autocomplete="current-password" required; }
                    button type="submit" { "Sign in" }
                }
            }
        },
    );
    let cookie = set_cookie(origin, LOGIN_COOKIE, &token, 3600, "Strict");
    (status, [(SET_COOKIE, cookie)], Html(body.into_string())).into_response()
}

fn redirect(to: &str, cookie: Option<HeaderValue>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(LOCATION, location);
    }
    if let Some(cookie) = cookie {
        response.headers_mut().append(SET_COOKIE, cookie);
    }
    response
}

#[derive(serde::Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: Option<String>,
    #[serde(default, rename = "_csrf")]
    csrf: String,
}

/// `POST /login`: checks the form's token, then signs in (the failure limit and the password
/// check are the sign-in operation's, shared with the password grant); starts a session.
pub async fn login(State(state): State<AppState>, request: Request) -> PageResult<Response> {
    let origin = Origin::of(&state.settings, request.headers(), request.extensions());
    let headers = request.headers().clone();
    let Form(form) = Form::<LoginForm>::from_request(request, &state)
        .await
        .map_err(|e| PageError::Api(devicecloud_web::http::error::ApiError::BadRequest(e.body_text())))?;
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or("");
    if expected.is_empty() || !same_hash(&form.csrf, expected) {
        return Err(PageError::Csrf);
    }
    let next = safe_next(form.next.as_deref());
    let account = match sign_in(&state, &form.username, &form.password, origin.client).await {
        Ok(account) => account,
        Err(ServiceError::SignInRefused) => {
            metrics::counter!("devicecloud_dashboard_sign_in_total", "outcome" => "refused").increment(1);
            return Ok(login_page(
                &origin,
                &next,
                form.username.trim(),
                Message::Error("Invalid username or password."),
                StatusCode::UNAUTHORIZED,
            ));
        }
        Err(other) => return Err(other.into()),
    };
    metrics::counter!("devicecloud_dashboard_sign_in_total", "outcome" => "accepted").increment(1);
    let (token, csrf, now) = (random_token(), random_token(), unix_now());
    sign_in_sessions::create(
        &state.db,
        &token_hash(&token),
        &account.id_user,
        &csrf,
        now,
        now + SESSION_LIFETIME_S,
    )
    .await?;
    let mut response = redirect(
        &next,
        Some(set_cookie(&origin, SESSION_COOKIE, &token, SESSION_LIFETIME_S, "Lax")),
    );
    response
        .headers_mut()
        .append(SET_COOKIE, set_cookie(&origin, LOGIN_COOKIE, "", 0, "Strict"));
    Ok(response)
}

/// `POST /logout`: ends the session here and in the database.
pub async fn logout(State(state): State<AppState>, origin: Origin, posted: Posted) -> PageResult<Response> {
    sign_in_sessions::delete(&state.db, &posted.viewer.session_hash).await?;
    Ok(to_sign_in(&origin, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_sign_in() {
        assert_eq!(safe_next(Some("/devices/x?range=1d")), "/devices/x?range=1d");
        assert_eq!(safe_next(Some("//evil.example/")), "/");
        assert_eq!(safe_next(Some("https://evil.example/")), "/");
        assert_eq!(safe_next(Some("/\\evil.example")), "/");
        assert_eq!(safe_next(Some("/\t/evil.example")), "/");
        assert_eq!(safe_next(Some("/ok/\\path")), "/ok/\\path");
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn cookies_are_read_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_static("a=1; dc_session=abc; b=2"));
        assert_eq!(cookie(&headers, "dc_session"), Some("abc"));
        assert_eq!(cookie(&headers, "dc_login"), None);
    }
}
