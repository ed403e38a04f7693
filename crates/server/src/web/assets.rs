//! The web console's files (web/static), embedded in the binary at build time so that
//! `rialto serve` is all a user runs.

use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use include_dir::{Dir, include_dir};

static CONSOLE: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../web/static");

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// Serves a console file; `/` is index.html.
pub async fn serve(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    match CONSOLE.get_file(path) {
        Some(file) => (
            [
                (header::CONTENT_TYPE, content_type(path)),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            file.contents(),
        )
            .into_response(),
        None => super::ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no file /{path}"),
        )
        .into_response(),
    }
}
