//! The web page served at `/`: the built files of `crates/weft-server/web/` (Vite + React + the
//! AI SDK's `useChat`), embedded in the binary so building Weft needs no Node and the page
//! needs no network at run time.
//!
//! The files are `web/dist/index.html`, `web/dist/assets/index.js` and
//! `web/dist/assets/index.css` (the build names them without a hash; `web/build.sh` rebuilds
//! them). Their names do not change between versions, so they are served with
//! `cache-control: no-cache` and an `ETag` (the content's hash): a browser revalidates and gets
//! `304 Not Modified` until the binary changes.

use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file.
#[derive(Debug)]
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const INDEX: Asset = Asset {
    path: "index.html",
    content_type: "text/html; charset=utf-8",
    bytes: include_bytes!("../web/dist/index.html"),
};

const FAVICON: Asset = Asset {
    path: "favicon.svg",
    content_type: "image/svg+xml",
    bytes: include_bytes!("../web/dist/favicon.svg"),
};

const ASSETS: [Asset; 2] = [
    Asset {
        path: "index.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../web/dist/assets/index.js"),
    },
    Asset {
        path: "index.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../web/dist/assets/index.css"),
    },
];

/// The page's routes: `GET /` (and `/index.html`), `/favicon.svg` and `/assets/{file}`. The
/// guard lets them through without a token: the page holds no data, everything it shows comes
/// from the authenticated API.
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/favicon.svg", get(favicon))
        .route("/assets/{file}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

async fn favicon(headers: HeaderMap) -> Response {
    serve(&FAVICON, &headers)
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.path == file) {
        Some(found) => serve(found, &headers),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

fn serve(asset: &'static Asset, request: &HeaderMap) -> Response {
    let etag = etag(asset);
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let mut builder = Response::builder()
        .header(header::CACHE_CONTROL, "no-cache")
        .header(header::ETAG, etag)
        .header("x-content-type-options", "nosniff");
    if asset.path == INDEX.path {
        // The page loads only its own files and talks only to its own origin.
        builder = builder
            .header(
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                 connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
            )
            .header("referrer-policy", "no-referrer");
    }
    let response = if fresh {
        builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
    } else {
        builder
            .status(StatusCode::OK)
            .header(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )
            .body(Body::from(asset.bytes))
    };
    response.unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A strong ETag: FNV-1a of the file's bytes, computed once per file.
fn etag(asset: &'static Asset) -> &'static str {
    static TAGS: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        [&INDEX, &FAVICON]
            .into_iter()
            .chain(ASSETS.iter())
            .map(|a| (a.path, format!("\"{:016x}\"", fnv1a(a.bytes))))
            .collect()
    });
    tags.iter()
        .find(|(path, _)| *path == asset.path)
        .map_or("\"0\"", |(_, tag)| tag.as_str())
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn the_page_loads_only_embedded_files() {
        let response = index(HeaderMap::new()).await;
        assert_eq!(response.status(), StatusCode::OK);
        let html = body(response).await;
        // Every file the built page names is one this module embeds (a rebuild that renamed
        // them would fail here), and nothing comes from another origin.
        for asset in ASSETS.iter() {
            assert!(html.contains(&format!("/assets/{}", asset.path)), "{html}");
        }
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "{html}"
        );
    }

    #[tokio::test]
    async fn assets_have_their_content_type_and_revalidate_by_etag() {
        let js = asset(Path("index.js".into()), HeaderMap::new()).await;
        assert_eq!(js.status(), StatusCode::OK);
        assert_eq!(
            js.headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        assert_eq!(js.headers()[header::CACHE_CONTROL], "no-cache");
        let tag = js.headers()[header::ETAG].clone();
        let css = asset(Path("index.css".into()), HeaderMap::new()).await;
        assert_eq!(
            css.headers()[header::CONTENT_TYPE],
            "text/css; charset=utf-8"
        );
        assert_ne!(css.headers()[header::ETAG], tag);

        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, tag);
        let cached = asset(Path("index.js".into()), again).await;
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        assert!(body(cached).await.is_empty());

        let missing = asset(Path("other.js".into()), HeaderMap::new()).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn the_page_forbids_other_origins() {
        let response = index(HeaderMap::new()).await;
        let policy = response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap_or_default()
            .to_owned();
        assert!(policy.contains("default-src 'self'") && policy.contains("connect-src 'self'"));
        let icon = favicon(HeaderMap::new()).await;
        assert_eq!(icon.headers()[header::CONTENT_TYPE], "image/svg+xml");
    }
}
