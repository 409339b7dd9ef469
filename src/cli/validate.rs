//! `crd-apiserver validate`: the server's write path, offline. Each object of the given files
//! goes through the very functions a create (or, with `--old`, an update) goes through —
//! decode, type checks, coercion and `fieldValidation`, system metadata, validation, storage
//! encoding — and is printed as the server would store it, or as the `Status` it would return.
//!
//! Exit code: 0 all valid, 1 some invalid, 2 unusable input.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde_json::Value;

use crate::api::objects::{self, Placement};
use crate::api::write::{self, FieldValidation};
use crate::api::{present, strict};
use crate::core::status::ApiError;
use crate::definitions::registry::Served;
use crate::definitions::{Registry, load_paths};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Definition manifests: a file or a directory (repeatable).
    #[arg(long = "definitions", required = true)]
    pub definitions: Vec<PathBuf>,
    /// Objects as currently stored: each input object with the same kind, namespace and name
    /// is validated as an update of it (ratcheting applies).
    #[arg(long)]
    pub old: Option<PathBuf>,
    /// How to print results.
    #[arg(short = 'o', long = "output", default_value = "yaml", value_parser = ["json", "yaml"])]
    pub output: String,
    /// Unknown and duplicate fields: Strict (an error), Warn (a warning) or Ignore.
    #[arg(long = "field-validation", default_value = "Warn", value_parser = ["Strict", "Warn", "Ignore"])]
    pub field_validation: String,
    /// Files of objects (YAML, multi-document, or JSON; `kind: List` is expanded).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// What validating one object came to.
pub enum Outcome {
    /// The object as it would be stored, and the warnings the server would send.
    Stored(Value, Vec<String>),
    /// The error the server would return, with the warnings sent before it.
    Refused(ApiError, Vec<String>),
}

/// Runs the command; returns the exit code.
pub fn run(args: &ValidateArgs) -> i32 {
    let report = load_paths(&args.definitions);
    for problem in &report.problems {
        eprintln!("{problem}");
    }
    let (registry, conflicts) = Registry::build(report.definitions);
    for problem in &conflicts {
        eprintln!("{problem}");
    }
    if registry.definitions().is_empty() {
        eprintln!("no usable definitions");
        return 2;
    }
    let mode = match args.field_validation.as_str() {
        "Strict" => FieldValidation::Strict,
        "Ignore" => FieldValidation::Ignore,
        _ => FieldValidation::Warn,
    };
    let old_objects = match &args.old {
        Some(path) => match read_objects(path) {
            Ok(objects) => objects.into_iter().map(|t| t.value).collect(),
            Err(e) => {
                eprintln!("{e}");
                return 2;
            }
        },
        None => Vec::new(),
    };
    let mut code = 0;
    for file in &args.files {
        let objects = match read_objects(file) {
            Ok(objects) => objects,
            Err(e) => {
                eprintln!("{e}");
                code = 2;
                continue;
            }
        };
        for tracked in objects {
            let Some(served) = served_for(&registry, &tracked.value) else {
                eprintln!("{}: no definition serves {}", file.display(), type_of(&tracked.value));
                code = 2;
                continue;
            };
            let old = old_objects.iter().find(|o| same_object(o, &tracked.value));
            match validate_one(&served, tracked, old, mode) {
                Outcome::Stored(object, warnings) => {
                    print_warnings(&warnings);
                    print_document(&object, &args.output);
                }
                Outcome::Refused(error, warnings) => {
                    print_warnings(&warnings);
                    eprintln!("{}: {}", file.display(), error.message);
                    print_document(&error.to_status(), &args.output);
                    if code == 0 {
                        code = 1;
                    }
                }
            }
        }
    }
    code
}

fn print_warnings(warnings: &[String]) {
    for warning in warnings {
        eprintln!("Warning: {warning}");
    }
}

fn print_document<T: serde::Serialize>(document: &T, output: &str) {
    if output == "json" {
        println!("{}", serde_json::to_string_pretty(document).unwrap_or_default());
    } else {
        println!("---\n{}", serde_saphyr::to_string(document).unwrap_or_default().trim_end());
    }
}

/// The create (or update) path of the API, for one decoded object.
pub fn validate_one(served: &Served, tracked: strict::Tracked, old: Option<&Value>, mode: FieldValidation) -> Outcome {
    let mut warnings = Vec::new();
    match write_path(served, tracked, old, mode, &mut warnings) {
        Ok(stored) => Outcome::Stored(stored, warnings),
        Err(e) => Outcome::Refused(e, warnings),
    }
}

fn write_path(
    served: &Served,
    tracked: strict::Tracked,
    old: Option<&Value>,
    mode: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<Value, ApiError> {
    let strict::Tracked { value: mut object, duplicates } = tracked;
    write::check_type_meta(served, &object)?;
    let unknown = write::coerce(served, &mut object)?;
    warnings.extend(write::field_validation(served, mode, &duplicates, &unknown)?);
    let namespace = served
        .definition
        .namespaced()
        .then(|| objects::namespace(&object).to_string())
        .map(|ns| if ns.is_empty() { "default".to_string() } else { ns });
    let placement = Placement {
        namespace: namespace.as_deref(),
        status_subresource: served.version.status_subresource,
        status_write: false,
    };
    let old = old.map(|o| {
        let mut stored = o.clone();
        present::read_coerce(&served.definition, &mut stored);
        stored
    });
    let errors = match &old {
        Some(old) => objects::prepare_update(&mut object, old, &placement)?,
        None => objects::prepare_create(&mut object, &placement)?,
    };
    warnings.extend(write::validate(served, false, &object, old.as_ref(), errors)?);
    Ok(write::to_storage(served, &object)?.0)
}

/// The definition and version an object's `apiVersion` and `kind` name.
fn served_for(registry: &Registry, object: &Value) -> Option<Served> {
    let api_version = object.get("apiVersion").and_then(Value::as_str)?;
    let kind = object.get("kind").and_then(Value::as_str)?;
    let (group, version) = api_version.rsplit_once('/')?;
    let definition = registry.definitions().iter().find(|d| d.group == group && d.kind == kind)?;
    let version = definition.version(version).filter(|v| v.served)?;
    Some(Served::new(Arc::clone(definition), Arc::clone(version)))
}

fn type_of(object: &Value) -> String {
    let field = |f: &str| object.get(f).and_then(Value::as_str).unwrap_or("?").to_string();
    format!("{} {}", field("apiVersion"), field("kind"))
}

fn same_object(a: &Value, b: &Value) -> bool {
    let group = |o: &Value| {
        o.get("apiVersion").and_then(Value::as_str).and_then(|v| v.rsplit_once('/')).map(|(g, _)| g.to_string())
    };
    group(a) == group(b)
        && a.get("kind") == b.get("kind")
        && objects::name(a) == objects::name(b)
        && objects::namespace(a) == objects::namespace(b)
}

/// The objects of a file, decoded as the server decodes bodies (duplicate fields noted).
fn read_objects(path: &Path) -> Result<Vec<strict::Tracked>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let trimmed = text.trim_start();
    let documents = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let parsed =
            strict::from_json(text.as_bytes()).map_err(|e| format!("{}: cannot parse: {e}", path.display()))?;
        if let Some(number) = parsed.overflowing_number {
            return Err(format!("{}: cannot parse: {}", path.display(), strict::number_error(&number)));
        }
        vec![parsed.tracked]
    } else {
        strict::from_yaml_documents(&text).map_err(|e| format!("{}: cannot parse: {e}", path.display()))?
    };
    let mut out = Vec::new();
    for document in documents.into_iter().filter(|d| !d.value.is_null()) {
        match document.value {
            Value::Object(mut map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                for item in map
                    .remove("items")
                    .and_then(|i| if let Value::Array(a) = i { Some(a) } else { None })
                    .unwrap_or_default()
                {
                    out.push(strict::Tracked { value: item, duplicates: Vec::new() });
                }
            }
            Value::Object(_) => out.push(document),
            _ => return Err(format!("{}: every document must be an object", path.display())),
        }
    }
    Ok(out)
}
