//! `/ui`: the dashboard of `weir serve`, a page per served graph and one for the model-less
//! repository, drawn from the status feed ([`crate::http::StatusFeed`]).
//!
//! The assets are plain HTML, CSS and JavaScript compiled into the binary (`include_str!`): no
//! build step, no CDN, nothing fetched at run time but the status feed of the same origin. The
//! page lays the graph out itself (layered, in `assets/layout.js`) from the status document, so
//! the server sends data, never markup.
//!
//! The pages and the feed sit behind the server's token like every other endpoint. A browser
//! cannot add a bearer header to a page load or to an `EventSource`, so these routes also take
//! HTTP Basic credentials whose password is the token (any user name), and their 401 asks for
//! them (`WWW-Authenticate: Basic`): the browser prompts once and sends them on every request of
//! the origin after that. Serve over TLS when the token matters.

mod basic;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::http::{authorized, AuthToken};

const INDEX_HTML: &str = include_str!("assets/index.html");
const STYLE_CSS: &str = include_str!("assets/style.css");
const LAYOUT_JS: &str = include_str!("assets/layout.js");
const APP_JS: &str = include_str!("assets/app.js");

/// The pages' routes, behind `auth_token` when one is set.
pub(crate) fn routes(auth_token: Option<AuthToken>) -> Router {
    let asset = |body: &'static str, kind: &'static str| {
        let token = auth_token.clone();
        get(move |headers: HeaderMap| async move {
            if let Some(refused) = refuse(token.as_ref(), &headers) {
                return refused;
            }
            (
                StatusCode::OK,
                [
                    (header::CONTENT_TYPE, kind),
                    (header::CACHE_CONTROL, "no-cache"),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                ],
                body,
            )
                .into_response()
        })
    };
    let html = "text/html; charset=utf-8";
    Router::new()
        .route("/ui", asset(INDEX_HTML, html))
        .route("/ui/", asset(INDEX_HTML, html))
        .route("/ui/style.css", asset(STYLE_CSS, "text/css; charset=utf-8"))
        .route(
            "/ui/layout.js",
            asset(LAYOUT_JS, "text/javascript; charset=utf-8"),
        )
        .route(
            "/ui/app.js",
            asset(APP_JS, "text/javascript; charset=utf-8"),
        )
}

/// `None` when the request may see the dashboard and its feed (no token set, or the bearer
/// token, or Basic credentials whose password is the token); else the 401 to answer, asking a
/// browser for credentials.
pub(crate) fn refuse(token: Option<&AuthToken>, headers: &HeaderMap) -> Option<Response> {
    let t = token?;
    let basic_ok = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(basic::password)
        .is_some_and(|p| t.matches(&p));
    if basic_ok || authorized(Some(t), headers) {
        return None;
    }
    Some(
        (
            StatusCode::UNAUTHORIZED,
            [
                (header::CONTENT_TYPE, "application/json"),
                (
                    header::WWW_AUTHENTICATE,
                    "Basic realm=\"weir\", charset=\"UTF-8\"",
                ),
            ],
            serde_json::json!({"error": "missing or invalid credentials: the bearer token, or Basic with the token as password"})
                .to_string(),
        )
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, value.parse().expect("header"));
        h
    }

    #[test]
    fn the_pages_take_the_bearer_token_or_basic_with_it_as_password() {
        let t = AuthToken::new("s3cret").expect("token");
        assert!(refuse(None, &HeaderMap::new()).is_none());
        assert!(refuse(Some(&t), &with("Bearer s3cret")).is_none());
        // "anyone:s3cret"
        assert!(refuse(Some(&t), &with("Basic YW55b25lOnMzY3JldA==")).is_none());
        // "anyone:wrong"
        let refused = refuse(Some(&t), &with("Basic YW55b25lOndyb25n")).expect("refused");
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
        assert!(refused.headers().contains_key(header::WWW_AUTHENTICATE));
        assert!(refuse(Some(&t), &HeaderMap::new()).is_some());
    }

    #[test]
    fn the_assets_are_built_in_and_fetch_nothing_elsewhere() {
        for asset in [INDEX_HTML, STYLE_CSS, LAYOUT_JS, APP_JS] {
            // The SVG namespace is a name, not an address anything is fetched from.
            let asset = asset.replace("http://www.w3.org/2000/svg", "");
            assert!(!asset.contains("http://") && !asset.contains("https://"));
            assert!(!asset.contains("//cdn") && !asset.contains("import("));
        }
        assert!(INDEX_HTML.contains("/ui/app.js"));
    }
}
