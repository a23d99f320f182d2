//! The web tools the runtime spec's roles name (§7): `read_url` (an HTTP GET, size-capped,
//! HTML turned into text) and `search_web` (a web search through the Brave Search API's wire
//! format, or any server that speaks it).
//!
//! Both obey the workspace's network policy, the one `run_command` has: with the sandbox
//! `workspace` (the default) the network is denied unless the project sets `sandboxNetwork =
//! true`; `strict` never has it; `none` always does. A denied call says so to the model.
//!
//! `search_web` sends `GET {endpoint}?q=QUERY&count=N` with the headers `Accept:
//! application/json` and `X-Subscription-Token: KEY`, and reads `web.results[]` (`title`,
//! `url`, `description`) of the answer. The endpoint is `WEFT_SEARCH_WEB_URL` (default
//! [`BRAVE_SEARCH_URL`]); the key is `BRAVE_SEARCH_API_KEY`, from the variables the session
//! declares for its tools or from Weft's environment.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use weft_provider::{Tool, ToolContext, ToolError};

use crate::parse_args;
use crate::workspace::{Mode, Workspace};

/// The Brave Search API's web search endpoint (`search_web`'s default).
pub const BRAVE_SEARCH_URL: &str = "https://api.search.brave.com/res/v1/web/search";

/// The variable holding `search_web`'s endpoint.
pub const SEARCH_URL_VARIABLE: &str = "WEFT_SEARCH_WEB_URL";

/// The variable holding `search_web`'s API key.
pub const SEARCH_KEY_VARIABLE: &str = "BRAVE_SEARCH_API_KEY";

/// The most bytes `read_url` downloads of one page (default and ceiling of `max_bytes`).
pub const MAX_DOWNLOAD_BYTES: usize = 2 * 1024 * 1024;

/// The most bytes of text `read_url` returns.
pub const MAX_TEXT_BYTES: usize = 100 * 1024;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Why the network may not be used under `workspace`'s sandbox, if it may not.
fn network_denied(tool: &str, workspace: &Workspace) -> Option<String> {
    let sandbox = &workspace.confinement().sandbox;
    match sandbox.mode {
        Mode::None => None,
        Mode::Strict => Some(format!(
            "{tool} cannot reach the network: the sandbox is \"strict\" (no filesystem, no network)"
        )),
        Mode::Workspace if sandbox.network => None,
        Mode::Workspace => Some(format!(
            "{tool} cannot reach the network: the project's sandbox denies network access \
             (a project allows it with sandboxNetwork = true in weft.toml)"
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    url: String,
    #[serde(default)]
    max_bytes: Option<usize>,
}

/// `read_url {url, max_bytes?}` → `{url, status, content_type, text, truncated}`: an HTTP(S)
/// GET of at most `max_bytes` (default and ceiling [`MAX_DOWNLOAD_BYTES`]); an HTML page is
/// turned into text (scripts and styles dropped, blocks on their own lines, entities
/// decoded), and the text is capped at [`MAX_TEXT_BYTES`]. A status other than 2xx is an
/// error (transient for 429 and 5xx).
pub fn read_url(workspace: &Workspace) -> Tool {
    let workspace = workspace.clone();
    Tool::new(
        "read_url",
        "Fetch a web page (HTTP GET) and return its text (HTML is converted to plain text; the size is capped).",
        json!({"type": "object", "properties": {
            "url": {"type": "string", "description": "An http:// or https:// URL"},
            "max_bytes": {"type": "integer", "minimum": 1, "description": "Most bytes to download"}},
            "required": ["url"], "additionalProperties": false}),
        move |arguments: Value, _ctx: ToolContext| {
            let workspace = workspace.clone();
            async move {
                let args: ReadArgs = parse_args("read_url", arguments)?;
                if let Some(denied) = network_denied("read_url", &workspace) {
                    return Err(ToolError::new(denied));
                }
                fetch(&args.url, args.max_bytes.unwrap_or(MAX_DOWNLOAD_BYTES)).await
            }
        },
    )
    .with_idempotent(true)
}

fn http_url(raw: &str) -> Result<reqwest::Url, ToolError> {
    let url = reqwest::Url::parse(raw)
        .map_err(|e| ToolError::new(format!("{raw:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::new(format!(
            "{raw:?}: only http:// and https:// URLs can be read"
        )));
    }
    Ok(url)
}

fn status_error(tool: &str, status: reqwest::StatusCode, body: &str) -> ToolError {
    let snippet: String = body.chars().take(300).collect();
    let message = format!("{tool}: the server answered HTTP {status}: {snippet}");
    if status.as_u16() == 429 || status.is_server_error() {
        ToolError::transient(message)
    } else {
        ToolError::new(message)
    }
}

fn send_error(tool: &str, error: &reqwest::Error) -> ToolError {
    ToolError::transient(format!("{tool}: the request failed: {error}"))
}

async fn fetch(raw: &str, max_bytes: usize) -> Result<Value, ToolError> {
    let url = http_url(raw)?;
    let max_bytes = max_bytes.clamp(1, MAX_DOWNLOAD_BYTES);
    let mut response = weft_provider::http::default_client()
        .get(url.clone())
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|e| send_error("read_url", &e))?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut body: Vec<u8> = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| send_error("read_url", &e))?
    {
        let room = max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let raw_text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(status_error("read_url", status, &raw_text));
    }
    let html = content_type.contains("html")
        || (content_type.is_empty() && raw_text.trim_start().starts_with('<'));
    let text = if html {
        html_to_text(&raw_text)
    } else {
        raw_text.into_owned()
    };
    truncated |= text.len() > MAX_TEXT_BYTES;
    let text = crate::cap::truncate_text(&text, MAX_TEXT_BYTES, None, "");
    Ok(json!({
        "url": url.as_str(),
        "status": status.as_u16(),
        "content_type": content_type,
        "text": text,
        "truncated": truncated,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    count: Option<u32>,
}

/// `search_web {query, count?}` → `{query, results: [{title, url, description}]}` through
/// the Brave Search API (see the module's documentation; `count` 1–20, default 5).
pub fn search_web(workspace: &Workspace) -> Tool {
    let workspace = workspace.clone();
    Tool::new(
        "search_web",
        "Search the web. Returns the results' titles, URLs and descriptions.",
        json!({"type": "object", "properties": {
            "query": {"type": "string"},
            "count": {"type": "integer", "minimum": 1, "maximum": 20}},
            "required": ["query"], "additionalProperties": false}),
        move |arguments: Value, ctx: ToolContext| {
            let workspace = workspace.clone();
            async move {
                let args: SearchArgs = parse_args("search_web", arguments)?;
                if args.query.trim().is_empty() {
                    return Err(ToolError::new("search_web: the query is empty"));
                }
                if let Some(denied) = network_denied("search_web", &workspace) {
                    return Err(ToolError::new(denied));
                }
                let variable = |name: &str| {
                    ctx.extensions
                        .get::<crate::ToolEnv>()
                        .and_then(|env| env.get(name).map(str::to_owned))
                        .or_else(|| std::env::var(name).ok())
                        .filter(|v| !v.trim().is_empty())
                };
                let Some(key) = variable(SEARCH_KEY_VARIABLE) else {
                    return Err(ToolError::new(format!(
                        "search_web is not configured: set {SEARCH_KEY_VARIABLE} (a Brave Search API key)"
                    )));
                };
                let endpoint =
                    variable(SEARCH_URL_VARIABLE).unwrap_or_else(|| BRAVE_SEARCH_URL.to_owned());
                search(&endpoint, &key, &args.query, args.count.unwrap_or(5)).await
            }
        },
    )
    .with_idempotent(true)
}

async fn search(endpoint: &str, key: &str, query: &str, count: u32) -> Result<Value, ToolError> {
    let mut url = http_url(endpoint)?;
    let count = count.clamp(1, 20);
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("count", &count.to_string());
    let response = weft_provider::http::default_client()
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .header("X-Subscription-Token", key)
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|e| send_error("search_web", &e))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| send_error("search_web", &e))?;
    if !status.is_success() {
        return Err(status_error("search_web", status, &text));
    }
    let answer: Value = serde_json::from_str(&text).map_err(|e| {
        ToolError::new(format!(
            "search_web: the search API's answer is not JSON: {e}"
        ))
    })?;
    let results: Vec<Value> = answer
        .pointer("/web/results")
        .and_then(Value::as_array)
        .map(|results| {
            results
                .iter()
                .take(count as usize)
                .map(|r| {
                    let field = |name: &str| {
                        r.get(name)
                            .and_then(Value::as_str)
                            .map(html_to_text)
                            .unwrap_or_default()
                    };
                    json!({
                        "title": field("title"),
                        "url": r.get("url").and_then(Value::as_str).unwrap_or_default(),
                        "description": field("description"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({"query": query, "results": results}))
}

/// The text of an HTML document: `script`, `style`, `head`-only and `noscript` content
/// dropped, block elements on their own lines, entities decoded, runs of blanks collapsed.
///
/// ```
/// let text = weft_tools::html_to_text(
///     "<html><head><title>T</title><style>p{}</style></head><body><h1>Hi &amp; bye</h1><p>a<br>b</p><script>x()</script></body></html>",
/// );
/// assert_eq!(text, "T\nHi & bye\na\nb");
/// ```
pub fn html_to_text(html: &str) -> String {
    const BLOCKS: [&str; 24] = [
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "tr",
        "table",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "section",
        "article",
        "header",
        "footer",
        "pre",
        "blockquote",
        "title",
        "hr",
        "dd",
        "dt",
    ];
    const HIDDEN: [&str; 4] = ["script", "style", "noscript", "template"];
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&decode_entities(&rest[..open]));
        rest = &rest[open..];
        if rest.starts_with("<!--") {
            rest = rest.find("-->").map_or("", |end| &rest[end + 3..]);
            continue;
        }
        let Some(close) = rest.find('>') else {
            rest = "";
            break;
        };
        let tag = &rest[1..close];
        rest = &rest[close + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if !tag.starts_with('/') && HIDDEN.contains(&name.as_str()) {
            let end = format!("</{name}");
            let lower = rest.to_ascii_lowercase();
            rest = match lower.find(&end) {
                Some(at) => rest[at..].find('>').map_or("", |gt| &rest[at + gt + 1..]),
                None => "",
            };
            continue;
        }
        if BLOCKS.contains(&name.as_str()) {
            out.push('\n');
        }
    }
    out.push_str(&decode_entities(rest));
    let mut lines: Vec<String> = Vec::new();
    for line in out.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !line.is_empty() {
            lines.push(line);
        }
    }
    lines.join("\n")
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest.find(';').filter(|&end| end <= 10).and_then(|end| {
            let entity = &rest[1..end];
            let c = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some(' '),
                _ => entity
                    .strip_prefix("#x")
                    .or_else(|| entity.strip_prefix("#X"))
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entities_and_comments() {
        assert_eq!(
            html_to_text("a &lt;b&gt; &#65;&#x42; &unknown; <!-- c --> d"),
            "a <b> AB &unknown; d"
        );
        assert_eq!(html_to_text("<SCRIPT>x</SCRIPT>ok"), "ok");
    }

    #[tokio::test]
    async fn the_network_policy_holds() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let ctx = ToolContext {
            tool_call_id: "c".into(),
            signal: Default::default(),
            extensions: Default::default(),
        };
        let denied = read_url(&workspace)
            .run(json!({"url": "http://127.0.0.1:9/"}), ctx.clone())
            .await
            .unwrap_err();
        assert!(denied.message.contains("sandboxNetwork"), "{denied:?}");
        let denied = search_web(&workspace)
            .run(json!({"query": "x"}), ctx)
            .await
            .unwrap_err();
        assert!(denied.message.contains("network"), "{denied:?}");
    }
}
