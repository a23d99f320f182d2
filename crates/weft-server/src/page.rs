//! The web page served at `/` (placeholder until the built page is embedded).

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

/// `GET /`.
pub(crate) async fn index() -> Response {
    (
        [(header::CACHE_CONTROL, "no-cache")],
        Html("<!doctype html><meta charset=utf-8><title>Weft</title><p>Weft is serving this project. The API is at /api/info.</p>"),
    )
        .into_response()
}
