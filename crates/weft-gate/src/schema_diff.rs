//! The built-in schema diff: `weft schema-diff BASE [HEAD]` and the completion check
//! `schemaDiff = true` (the protocol's "schema/contract changes pass `uap schema-diff`").
//!
//! It compares the contracts of a repository at two revisions (or a revision and the
//! working tree) and classifies every change as breaking or not:
//!
//! | contract | recognised by | breaking |
//! |---|---|---|
//! | JSON Schema (`.json`, `.yaml`, `.yml`) | a `$schema` key, a `*.schema.*` name, or top-level `properties` / `$defs` / `definitions` | a removed property, a changed `type` or `$ref`, a newly required property (also a new property that is required), a removed `enum` value, a removed definition |
//! | OpenAPI / Swagger | an `openapi` or `swagger` key | a removed path or method, a removed parameter, a new required parameter, and every JSON Schema break in request and response bodies and in `components.schemas` / `definitions` |
//! | SQL DDL (`.sql`) | every `.sql` file, applied in path order (`CREATE TABLE`, `DROP TABLE`, `ALTER TABLE … ADD / DROP / RENAME / ALTER COLUMN`, `RENAME TO`) | a removed table or column, a changed column type, a column made `NOT NULL`, a new `NOT NULL` column without a default on an existing table |
//!
//! A removed contract file is breaking; added tables, optional properties, new paths and
//! new enum values are not. The check passes when no change is breaking.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use serde_json::Value;

use crate::error::GateError;
use crate::process;

/// One difference between the two sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaChange {
    /// The file (repository-relative); for SQL, the table's file at the side that has it.
    pub file: String,
    /// Where in the contract: a JSON pointer-like path, `GET /pets`, `table.column`.
    pub location: String,
    /// Whether it breaks the contract's users.
    pub breaking: bool,
    /// What changed.
    pub message: String,
}

/// The result of a schema diff.
///
/// ```
/// let diff = weft_gate::SchemaDiff::default();
/// assert!(diff.passed());
/// assert_eq!(diff.summary(), "no schema or contract change");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaDiff {
    /// The contract files compared (changed between the sides).
    pub files: Vec<String>,
    /// Every change found, breaking ones first.
    pub changes: Vec<SchemaChange>,
}

impl SchemaDiff {
    /// Whether no change is breaking.
    pub fn passed(&self) -> bool {
        self.changes.iter().all(|c| !c.breaking)
    }

    /// One line per change, or a sentence when there is none.
    pub fn summary(&self) -> String {
        if self.changes.is_empty() {
            return if self.files.is_empty() {
                "no schema or contract change".into()
            } else {
                format!(
                    "{} contract file(s) changed, no breaking change",
                    self.files.len()
                )
            };
        }
        self.changes
            .iter()
            .map(|c| {
                format!(
                    "{} {}: {}: {}",
                    if c.breaking { "BREAKING" } else { "ok" },
                    c.file,
                    c.location,
                    c.message
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One side of the comparison.
enum Side<'a> {
    Rev(&'a str),
    WorkTree,
}

struct Repo {
    top: PathBuf,
}

impl Repo {
    fn git(&self, args: &[&str]) -> Result<String, GateError> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let done = process::run("git", &args, &self.top, &[], Duration::from_secs(60))
            .map_err(GateError::Operation)?;
        if done.code == Some(0) {
            Ok(done.stdout)
        } else {
            Err(GateError::Operation(format!(
                "git {}: {}",
                args.join(" "),
                done.stderr.trim()
            )))
        }
    }

    fn files(&self, side: &Side<'_>) -> Result<Vec<String>, GateError> {
        let listing = match side {
            Side::Rev(rev) => self.git(&["ls-tree", "-r", "--name-only", rev])?,
            Side::WorkTree => {
                self.git(&["ls-files", "--cached", "--others", "--exclude-standard"])?
            }
        };
        Ok(listing
            .lines()
            .filter(|p| is_candidate(p))
            .filter(|p| match side {
                // A tracked file deleted from the working tree is listed by ls-files.
                Side::WorkTree => self.top.join(p).is_file(),
                Side::Rev(_) => true,
            })
            .map(str::to_owned)
            .collect())
    }

    fn read(&self, side: &Side<'_>, path: &str) -> Option<String> {
        match side {
            Side::Rev(rev) => self.git(&["show", &format!("{rev}:{path}")]).ok(),
            Side::WorkTree => std::fs::read_to_string(self.top.join(path)).ok(),
        }
    }
}

fn is_candidate(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".json")
        || lower.ends_with(".yaml")
        || lower.ends_with(".yml")
        || lower.ends_with(".sql")
}

/// Compares the contracts of the repository holding `dir` at revision `base` with revision
/// `head`, or with the working tree (tracked and untracked, not ignored, files) when `head`
/// is `None`.
///
/// # Errors
/// [`GateError::Operation`] when `dir` is not in a git repository or a revision is unknown.
pub fn schema_diff(dir: &Path, base: &str, head: Option<&str>) -> Result<SchemaDiff, GateError> {
    let probe = Repo {
        top: dir.to_path_buf(),
    };
    let top = PathBuf::from(probe.git(&["rev-parse", "--show-toplevel"])?.trim());
    let repo = Repo { top };
    for rev in std::iter::once(base).chain(head) {
        repo.git(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ])
        .map_err(|_| GateError::Operation(format!("unknown revision {rev:?}")))?;
    }
    let old_side = Side::Rev(base);
    let new_side = head.map_or(Side::WorkTree, Side::Rev);
    // Only the files that differ are read (a `git show` each); SQL models need every `.sql`.
    let mut changed: Vec<String> = match head {
        Some(head) => repo.git(&["diff", "--name-only", "--no-renames", base, head])?,
        None => {
            let mut listing = repo.git(&["diff", "--name-only", "--no-renames", base])?;
            listing.push('\n');
            listing.push_str(&repo.git(&["ls-files", "--others", "--exclude-standard"])?);
            listing
        }
    }
    .lines()
    .filter(|p| is_candidate(p))
    .map(str::to_owned)
    .collect();
    changed.sort();
    changed.dedup();
    let mut diff = SchemaDiff::default();
    if changed.is_empty() {
        return Ok(diff);
    }
    let old_files = repo.files(&old_side)?;
    let new_files = repo.files(&new_side)?;
    let mut sql_changed = false;
    for path in &changed {
        let old = old_files
            .contains(path)
            .then(|| repo.read(&old_side, path))
            .flatten();
        let new = new_files
            .contains(path)
            .then(|| repo.read(&new_side, path))
            .flatten();
        if old == new {
            continue;
        }
        if path.to_ascii_lowercase().ends_with(".sql") {
            sql_changed = true;
            diff.files.push(path.clone());
            continue;
        }
        let old_doc = old.as_deref().and_then(|t| contract(path, t));
        let new_doc = new.as_deref().and_then(|t| contract(path, t));
        match (old_doc, new_doc) {
            (None, None) => {}
            (Some(_), None) if new.is_none() => {
                diff.files.push(path.clone());
                diff.changes.push(SchemaChange {
                    file: path.clone(),
                    location: "/".into(),
                    breaking: true,
                    message: "the contract file was removed".into(),
                });
            }
            (Some(_), None) => {
                diff.files.push(path.clone());
                diff.changes.push(SchemaChange {
                    file: path.clone(),
                    location: "/".into(),
                    breaking: true,
                    message: "the file is no longer a readable schema or API description".into(),
                });
            }
            (None, Some(_)) => {
                diff.files.push(path.clone());
                diff.changes.push(SchemaChange {
                    file: path.clone(),
                    location: "/".into(),
                    breaking: false,
                    message: "a new contract file".into(),
                });
            }
            (Some(old), Some(new)) => {
                diff.files.push(path.clone());
                let mut out = Changes::new(path);
                match (&old, &new) {
                    (Contract::OpenApi(o), Contract::OpenApi(n)) => openapi(o, n, &mut out),
                    (Contract::JsonSchema(o), Contract::JsonSchema(n)) => {
                        json_schema(o, n, "", &mut out);
                    }
                    _ => out.push(
                        "/",
                        true,
                        "the file changed kind (JSON Schema ↔ OpenAPI)".into(),
                    ),
                }
                diff.changes.extend(out.list);
            }
        }
    }
    if sql_changed {
        let old = sql_model(&repo, &old_side, &old_files);
        let new = sql_model(&repo, &new_side, &new_files);
        sql_diff(&old, &new, &mut diff.changes);
    }
    diff.changes.sort_by_key(|c| !c.breaking);
    Ok(diff)
}

enum Contract {
    OpenApi(Value),
    JsonSchema(Value),
}

fn contract(path: &str, text: &str) -> Option<Contract> {
    let lower = path.to_ascii_lowercase();
    let value: Value = if lower.ends_with(".json") {
        serde_json::from_str(text).ok()?
    } else {
        serde_norway::from_str(text).ok()?
    };
    let object = value.as_object()?;
    if object.contains_key("openapi") || object.contains_key("swagger") {
        return Some(Contract::OpenApi(value));
    }
    let named = lower.contains(".schema.");
    let shaped = object.contains_key("$schema")
        || object.contains_key("$defs")
        || object.contains_key("definitions")
        || (object.contains_key("properties") && object.contains_key("type"));
    (named || shaped).then_some(Contract::JsonSchema(value))
}

struct Changes<'a> {
    file: &'a str,
    list: Vec<SchemaChange>,
}

impl<'a> Changes<'a> {
    fn new(file: &'a str) -> Self {
        Changes {
            file,
            list: Vec::new(),
        }
    }

    fn push(&mut self, location: &str, breaking: bool, message: String) {
        self.list.push(SchemaChange {
            file: self.file.to_owned(),
            location: if location.is_empty() {
                "/".to_owned()
            } else {
                location.to_owned()
            },
            breaking,
            message,
        });
    }
}

fn types(schema: &Value) -> Option<Vec<String>> {
    let mut list: Vec<String> = match schema.get("type")? {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => return None,
    };
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        list.push("null".into());
    }
    list.sort();
    list.dedup();
    Some(list)
}

fn required(schema: &Value) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn object<'v>(schema: &'v Value, key: &str) -> Option<&'v serde_json::Map<String, Value>> {
    schema.get(key).and_then(Value::as_object)
}

/// Diffs two JSON Schemas at `at`.
fn json_schema(old: &Value, new: &Value, at: &str, out: &mut Changes<'_>) {
    if let (Some(o), Some(n)) = (types(old), types(new))
        && o != n
    {
        out.push(
            at,
            true,
            format!("type changed from {} to {}", o.join("|"), n.join("|")),
        );
    }
    let (old_ref, new_ref) = (old.get("$ref"), new.get("$ref"));
    if old_ref.is_some() && old_ref != new_ref {
        out.push(
            at,
            true,
            format!(
                "reference changed from {} to {}",
                old_ref.map_or_else(String::new, Value::to_string),
                new_ref.map_or_else(|| "none".to_owned(), Value::to_string)
            ),
        );
    }
    if let (Some(o), Some(n)) = (
        old.get("enum").and_then(Value::as_array),
        new.get("enum").and_then(Value::as_array),
    ) {
        for value in o.iter().filter(|v| !n.contains(v)) {
            out.push(at, true, format!("enum value {value} removed"));
        }
        for value in n.iter().filter(|v| !o.contains(v)) {
            out.push(at, false, format!("enum value {value} added"));
        }
    }
    let empty = serde_json::Map::new();
    let old_props = object(old, "properties").unwrap_or(&empty);
    let new_props = object(new, "properties").unwrap_or(&empty);
    let (old_required, new_required) = (required(old), required(new));
    for (name, old_prop) in old_props {
        let here = format!("{at}/properties/{name}");
        match new_props.get(name) {
            None => out.push(&here, true, format!("property {name:?} removed")),
            Some(new_prop) => json_schema(old_prop, new_prop, &here, out),
        }
    }
    for name in new_props.keys().filter(|k| !old_props.contains_key(*k)) {
        let here = format!("{at}/properties/{name}");
        if new_required.contains(name) {
            out.push(&here, true, format!("new required property {name:?}"));
        } else {
            out.push(&here, false, format!("new optional property {name:?}"));
        }
    }
    for name in new_required
        .iter()
        .filter(|r| !old_required.contains(r) && old_props.contains_key(*r))
    {
        out.push(
            &format!("{at}/required"),
            true,
            format!("property {name:?} is now required"),
        );
    }
    if let (Some(o), Some(n)) = (old.get("items"), new.get("items")) {
        json_schema(o, n, &format!("{at}/items"), out);
    }
    if let (Some(o @ Value::Object(_)), Some(n @ Value::Object(_))) = (
        old.get("additionalProperties"),
        new.get("additionalProperties"),
    ) {
        json_schema(o, n, &format!("{at}/additionalProperties"), out);
    }
    for key in ["$defs", "definitions"] {
        definitions(old, new, key, at, out);
    }
}

fn definitions(old: &Value, new: &Value, key: &str, at: &str, out: &mut Changes<'_>) {
    let empty = serde_json::Map::new();
    let Some(old_defs) = object(old, key) else {
        return;
    };
    let new_defs = object(new, key).unwrap_or(&empty);
    for (name, old_def) in old_defs {
        let here = format!("{at}/{key}/{name}");
        match new_defs.get(name) {
            None => out.push(&here, true, format!("definition {name:?} removed")),
            Some(new_def) => json_schema(old_def, new_def, &here, out),
        }
    }
}

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Diffs two OpenAPI (or Swagger) documents.
fn openapi(old: &Value, new: &Value, out: &mut Changes<'_>) {
    let empty = serde_json::Map::new();
    let old_paths = object(old, "paths").unwrap_or(&empty);
    let new_paths = object(new, "paths").unwrap_or(&empty);
    for (path, old_item) in old_paths {
        let Some(new_item) = new_paths.get(path) else {
            out.push(path, true, format!("path {path} removed"));
            continue;
        };
        for method in METHODS {
            let Some(old_op) = old_item.get(*method) else {
                continue;
            };
            let here = format!("{} {path}", method.to_ascii_uppercase());
            let Some(new_op) = new_item.get(*method) else {
                out.push(&here, true, format!("operation {here} removed"));
                continue;
            };
            operation(old_op, new_op, &here, out);
        }
        for method in METHODS
            .iter()
            .filter(|m| old_item.get(**m).is_none() && new_item.get(**m).is_some())
        {
            let here = format!("{} {path}", method.to_ascii_uppercase());
            out.push(&here, false, format!("new operation {here}"));
        }
    }
    for path in new_paths.keys().filter(|p| !old_paths.contains_key(*p)) {
        out.push(path, false, format!("new path {path}"));
    }
    // Swagger 2 keeps its schemas in `definitions`, OpenAPI 3 in `components.schemas`.
    definitions(old, new, "definitions", "", out);
    if let (Some(o), Some(n)) = (old.get("components"), new.get("components")) {
        definitions(o, n, "schemas", "/components", out);
    }
}

fn parameters(op: &Value) -> Vec<(String, String, bool, Value)> {
    op.get("parameters")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|p| {
                    Some((
                        p.get("name")?.as_str()?.to_owned(),
                        p.get("in").and_then(Value::as_str).unwrap_or("").to_owned(),
                        p.get("required") == Some(&Value::Bool(true)),
                        p.get("schema").cloned().unwrap_or(Value::Null),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn operation(old: &Value, new: &Value, at: &str, out: &mut Changes<'_>) {
    let (old_params, new_params) = (parameters(old), parameters(new));
    for (name, place, _, old_schema) in &old_params {
        match new_params.iter().find(|p| &p.0 == name && &p.1 == place) {
            None => out.push(at, true, format!("{place} parameter {name:?} removed")),
            Some((_, _, required, new_schema)) => {
                let was_required = old_params
                    .iter()
                    .any(|p| &p.0 == name && &p.1 == place && p.2);
                if *required && !was_required {
                    out.push(
                        at,
                        true,
                        format!("{place} parameter {name:?} is now required"),
                    );
                }
                json_schema(
                    old_schema,
                    new_schema,
                    &format!("{at} parameter {name}"),
                    out,
                );
            }
        }
    }
    for (name, place, required, _) in new_params
        .iter()
        .filter(|p| !old_params.iter().any(|o| o.0 == p.0 && o.1 == p.1))
    {
        out.push(
            at,
            *required,
            format!(
                "new {} {place} parameter {name:?}",
                if *required { "required" } else { "optional" }
            ),
        );
    }
    let bodies = |op: &Value, key: &str| -> Vec<(String, Value)> {
        let mut found = Vec::new();
        match key {
            "requestBody" => {
                if let Some(content) = op
                    .pointer("/requestBody/content")
                    .and_then(Value::as_object)
                {
                    for (media, body) in content {
                        if let Some(schema) = body.get("schema") {
                            found.push((format!("request {media}"), schema.clone()));
                        }
                    }
                }
            }
            _ => {
                if let Some(responses) = op.get("responses").and_then(Value::as_object) {
                    for (code, response) in responses {
                        if let Some(content) = response.get("content").and_then(Value::as_object) {
                            for (media, body) in content {
                                if let Some(schema) = body.get("schema") {
                                    found
                                        .push((format!("response {code} {media}"), schema.clone()));
                                }
                            }
                        } else if let Some(schema) = response.get("schema") {
                            found.push((format!("response {code}"), schema.clone()));
                        }
                    }
                }
            }
        }
        found
    };
    for key in ["requestBody", "responses"] {
        let new_bodies = bodies(new, key);
        for (label, old_schema) in bodies(old, key) {
            match new_bodies.iter().find(|(l, _)| *l == label) {
                Some((_, new_schema)) => {
                    json_schema(&old_schema, new_schema, &format!("{at} {label}"), out);
                }
                None if key == "responses" => {
                    out.push(at, true, format!("{label} removed"));
                }
                None => out.push(at, true, format!("{label} body no longer accepted")),
            }
        }
    }
}

/// A column of a table, as the DDL defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    ty: String,
    not_null: bool,
    default: bool,
    /// The file that last defined or changed it.
    file: String,
}

/// Tables → (the file that last changed the table, columns in order).
type SqlModel = BTreeMap<String, (String, Vec<(String, Column)>)>;

fn sql_model(repo: &Repo, side: &Side<'_>, files: &[String]) -> SqlModel {
    let mut model = SqlModel::new();
    let mut sql: Vec<&String> = files
        .iter()
        .filter(|f| f.to_ascii_lowercase().ends_with(".sql"))
        .collect();
    sql.sort();
    for file in sql {
        if let Some(text) = repo.read(side, file) {
            apply_sql(&mut model, file, &text);
        }
    }
    model
}

fn unquote(name: &str) -> String {
    name.split('.')
        .map(|part| {
            part.trim()
                .trim_matches(|c| matches!(c, '"' | '`' | '[' | ']'))
                .to_ascii_lowercase()
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The statements of a SQL text, comments removed (quotes respected).
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            current.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => {
                quote = Some(c);
                current.push(c);
            }
            '-' if chars.peek() == Some(&'-') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
                current.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
                current.push(' ');
            }
            ';' => {
                out.push(std::mem::take(&mut current));
            }
            _ => current.push(c),
        }
    }
    out.push(current);
    out.into_iter()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .collect()
}

/// Splits at commas outside parentheses and quotes.
fn top_level_items(body: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut current = String::new();
    for c in body.chars() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ',') if depth == 0 => {
                items.push(std::mem::take(&mut current).trim().to_owned());
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current.trim().to_owned());
    items.into_iter().filter(|s| !s.is_empty()).collect()
}

const COLUMN_KEYWORDS: &[&str] = &[
    "not",
    "null",
    "default",
    "primary",
    "references",
    "unique",
    "check",
    "constraint",
    "generated",
    "collate",
    "autoincrement",
    "auto_increment",
    "identity",
    "on",
    "comment",
];

fn column(def: &str, file: &str) -> Option<(String, Column)> {
    let mut words = def.split_whitespace();
    let name = words.next()?;
    let first = name.to_ascii_lowercase();
    if matches!(
        first.as_str(),
        "constraint" | "primary" | "unique" | "foreign" | "check" | "key" | "index" | "exclude"
    ) {
        return None;
    }
    let rest: Vec<&str> = words.collect();
    let cut = rest
        .iter()
        .position(|w| COLUMN_KEYWORDS.contains(&w.to_ascii_lowercase().as_str()))
        .unwrap_or(rest.len());
    let ty = rest[..cut].join(" ").to_ascii_lowercase();
    let lower = def.to_ascii_lowercase();
    Some((
        unquote(name),
        Column {
            ty,
            not_null: lower.contains("not null") || lower.contains("primary key"),
            default: lower.contains(" default ")
                || lower.contains("generated")
                || lower.contains("autoincrement")
                || lower.contains("auto_increment")
                || lower.contains("serial"),
            file: file.to_owned(),
        },
    ))
}

struct SqlPatterns {
    create: Regex,
    drop: Regex,
    alter: Regex,
    add: Regex,
    drop_column: Regex,
    rename_column: Regex,
    rename_table: Regex,
    alter_type: Regex,
    set_not_null: Regex,
}

fn patterns() -> Option<SqlPatterns> {
    let name = r#"((?:[`"\[]?[\w$]+[`"\]]?\.)?[`"\[]?[\w$]+[`"\]]?)"#;
    let re = |p: String| Regex::new(&format!("(?i){p}")).ok();
    Some(SqlPatterns {
        create: re(format!(
            r"^create\s+(?:(?:global\s+|local\s+)?(?:temporary|temp)\s+|unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?{name}\s*\((.*)\)[^)]*$"
        ))?,
        drop: re(format!(r"^drop\s+table\s+(?:if\s+exists\s+)?{name}"))?,
        alter: re(format!(
            r"^alter\s+table\s+(?:if\s+exists\s+)?(?:only\s+)?{name}\s+(.*)$"
        ))?,
        add: re(r"^add\s+(?:column\s+)?(?:if\s+not\s+exists\s+)?(.*)$".into())?,
        drop_column: re(format!(r"^drop\s+(?:column\s+)?(?:if\s+exists\s+)?{name}"))?,
        rename_column: re(format!(r"^rename\s+(?:column\s+)?{name}\s+to\s+{name}"))?,
        rename_table: re(format!(r"^rename\s+to\s+{name}"))?,
        alter_type: re(format!(
            r"^(?:alter|modify)\s+(?:column\s+)?{name}\s+(?:set\s+data\s+)?(?:type\s+)?([^,]+?)(?:\s+using\s+.*)?$"
        ))?,
        set_not_null: re(format!(r"^alter\s+(?:column\s+)?{name}\s+set\s+not\s+null"))?,
    })
}

fn apply_sql(model: &mut SqlModel, file: &str, text: &str) {
    let Some(p) = patterns() else {
        return;
    };
    for statement in statements(text) {
        if let Some(c) = p.create.captures(&statement) {
            let columns = top_level_items(&c[2])
                .iter()
                .filter_map(|d| column(d, file))
                .collect();
            model.insert(unquote(&c[1]), (file.to_owned(), columns));
        } else if let Some(c) = p.drop.captures(&statement) {
            model.remove(&unquote(&c[1]));
        } else if let Some(c) = p.alter.captures(&statement) {
            let table = unquote(&c[1]);
            for action in top_level_items(&c[2]) {
                alter(model, &p, &table, &action, file);
            }
        }
    }
}

fn alter(model: &mut SqlModel, p: &SqlPatterns, table: &str, action: &str, file: &str) {
    if let Some(c) = p.rename_table.captures(action) {
        if let Some(entry) = model.remove(table) {
            model.insert(unquote(&c[1]), entry);
        }
        return;
    }
    let Some((last, columns)) = model.get_mut(table) else {
        return;
    };
    file.clone_into(last);
    let lower = action.to_ascii_lowercase();
    if lower.starts_with("add constraint")
        || lower.starts_with("add primary")
        || lower.starts_with("add unique")
        || lower.starts_with("add foreign")
        || lower.starts_with("add check")
        || lower.starts_with("drop constraint")
    {
        return;
    }
    if let Some(c) = p.add.captures(action) {
        if let Some(col) = column(&c[1], file) {
            columns.retain(|(n, _)| *n != col.0);
            columns.push(col);
        }
    } else if let Some(c) = p.rename_column.captures(action) {
        let (from, to) = (unquote(&c[1]), unquote(&c[2]));
        for (name, _) in columns.iter_mut() {
            if *name == from {
                name.clone_from(&to);
            }
        }
    } else if let Some(c) = p.drop_column.captures(action) {
        let name = unquote(&c[1]);
        columns.retain(|(n, _)| *n != name);
    } else if let Some(c) = p.set_not_null.captures(action) {
        let name = unquote(&c[1]);
        for (n, col) in columns.iter_mut() {
            if *n == name {
                col.not_null = true;
                file.clone_into(&mut col.file);
            }
        }
    } else if let Some(c) = p.alter_type.captures(action) {
        let name = unquote(&c[1]);
        let rest = c[2].to_ascii_lowercase();
        if rest.starts_with("drop ") || rest.starts_with("set default") {
            return;
        }
        for (n, col) in columns.iter_mut() {
            if *n == name {
                col.ty = rest.trim().to_owned();
                file.clone_into(&mut col.file);
            }
        }
    }
}

fn sql_diff(old: &SqlModel, new: &SqlModel, out: &mut Vec<SchemaChange>) {
    let mut push = |file: &str, location: String, breaking: bool, message: String| {
        out.push(SchemaChange {
            file: file.to_owned(),
            location,
            breaking,
            message,
        });
    };
    for (table, (file, old_columns)) in old {
        let Some((new_file, new_columns)) = new.get(table) else {
            push(file, table.clone(), true, format!("table {table} removed"));
            continue;
        };
        for (name, old_col) in old_columns {
            let at = format!("{table}.{name}");
            match new_columns.iter().find(|(n, _)| n == name) {
                None => push(new_file, at, true, format!("column {name} removed")),
                Some((_, new_col)) => {
                    if new_col.ty != old_col.ty {
                        push(
                            &new_col.file,
                            at.clone(),
                            true,
                            format!("type changed from {} to {}", old_col.ty, new_col.ty),
                        );
                    }
                    if new_col.not_null && !old_col.not_null {
                        push(
                            &new_col.file,
                            at,
                            true,
                            format!("column {name} is now NOT NULL"),
                        );
                    }
                }
            }
        }
        for (name, col) in new_columns
            .iter()
            .filter(|(n, _)| !old_columns.iter().any(|(o, _)| o == n))
        {
            let at = format!("{table}.{name}");
            if col.not_null && !col.default {
                push(
                    &col.file,
                    at,
                    true,
                    format!("new NOT NULL column {name} without a default"),
                );
            } else {
                push(&col.file, at, false, format!("new column {name}"));
            }
        }
    }
    for (table, (file, _)) in new.iter().filter(|(t, _)| !old.contains_key(*t)) {
        push(file, table.clone(), false, format!("new table {table}"));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn schema_changes(old: Value, new: Value) -> Vec<(bool, String)> {
        let mut out = Changes::new("s.json");
        json_schema(&old, &new, "", &mut out);
        out.list
            .into_iter()
            .map(|c| (c.breaking, c.message))
            .collect()
    }

    #[test]
    fn json_schema_breaks_are_found_and_additions_are_not() {
        let old = json!({"type": "object", "required": ["id"],
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                           "kind": {"enum": ["a", "b"]}, "note": {"type": "string"}}});
        let new = json!({"type": "object", "required": ["id", "note", "owner"],
            "properties": {"id": {"type": "string"}, "kind": {"enum": ["a", "c"]},
                           "note": {"type": "string"}, "owner": {"type": "string"},
                           "tag": {"type": "string"}}});
        let changes = schema_changes(old, new);
        let breaking: Vec<&str> = changes
            .iter()
            .filter(|c| c.0)
            .map(|c| c.1.as_str())
            .collect();
        assert_eq!(
            breaking,
            [
                "type changed from integer to string",
                "property \"name\" removed",
                "enum value \"b\" removed",
                "new required property \"owner\"",
                "property \"note\" is now required",
            ]
        );
        assert!(changes.contains(&(false, "new optional property \"tag\"".into())));
    }

    #[test]
    fn sql_models_follow_creates_and_alters() {
        let mut model = SqlModel::new();
        apply_sql(
            &mut model,
            "m/001.sql",
            "-- users\nCREATE TABLE IF NOT EXISTS \"users\" (\n id INTEGER PRIMARY KEY,\n email TEXT NOT NULL, -- login\n age numeric(5, 2),\n CONSTRAINT u UNIQUE (email)\n);\nCREATE TABLE tmp (x int);",
        );
        apply_sql(
            &mut model,
            "m/002.sql",
            "ALTER TABLE users ADD COLUMN nick TEXT DEFAULT 'x' NOT NULL; ALTER TABLE users RENAME COLUMN age TO years; DROP TABLE tmp; /* done */",
        );
        let users = &model["users"].1;
        let names: Vec<&str> = users.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["id", "email", "years", "nick"]);
        assert_eq!(users[2].1.ty, "numeric(5, 2)");
        assert!(users[3].1.not_null && users[3].1.default);
        assert!(!model.contains_key("tmp"));
    }
}
