//! Reading definition manifests from files and directories: multi-document YAML or JSON,
//! checked one by one, so that a broken definition is reported and the others still load.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use super::model::Definition;
use super::validate;

/// A definition that could not be served, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// File (and document number, for multi-document files).
    pub source: String,
    /// The definition's name, when it has one.
    pub name: Option<String>,
    pub errors: Vec<String>,
}

impl Problem {
    pub fn new(source: impl Into<String>, name: Option<String>, errors: Vec<String>) -> Problem {
        Problem { source: source.into(), name, errors }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let subject = match &self.name {
            Some(name) => format!("CustomResourceDefinition \"{name}\" is invalid"),
            None => "not a usable CustomResourceDefinition".to_string(),
        };
        match self.errors.as_slice() {
            [one] => write!(f, "{}: {subject}: {one}", self.source),
            many => {
                write!(f, "{}: {subject}:", self.source)?;
                for e in many {
                    write!(f, "\n* {e}")?;
                }
                Ok(())
            }
        }
    }
}

/// What loading found.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub definitions: Vec<Definition>,
    pub problems: Vec<Problem>,
}

/// Files of a definitions directory: YAML and JSON, not hidden (Kubernetes ConfigMap volumes
/// keep their real files in hidden `..data` directories, reached through these names).
fn is_manifest(path: &Path) -> bool {
    let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
    !hidden && matches!(ext, "yaml" | "yml" | "json")
}

/// The manifest files named by `paths`: files as given, directories' manifests sorted by name.
pub fn manifest_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Problem> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path)
            .map_err(|e| Problem::new(path.display().to_string(), None, vec![format!("cannot read: {e}")]))?;
        if meta.is_dir() {
            let entries = std::fs::read_dir(path)
                .map_err(|e| Problem::new(path.display().to_string(), None, vec![format!("cannot list: {e}")]))?;
            // The entry's type is known without a look at the file, but for a symbolic link (a
            // ConfigMap volume's files are links into `..data`), which is followed.
            let regular = |entry: &std::fs::DirEntry, path: &Path| match entry.file_type() {
                Ok(kind) if !kind.is_symlink() => kind.is_file(),
                _ => path.is_file(),
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .filter_map(|entry| {
                    let path = entry.path();
                    (is_manifest(&path) && regular(&entry, &path)).then_some(path)
                })
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Parses a manifest file's text into its documents (empty documents skipped).
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // JSON: one object, or a List's items handled by the caller.
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            return Ok(vec![v]);
        }
    }
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// A definition that passed the create checks, with the (defaulted) manifest it was built from:
/// what a later version of the file is compared with.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub manifest: Arc<CustomResourceDefinition>,
    pub definition: Arc<Definition>,
}

/// Checks one manifest document and builds its served model.
pub fn definition_from_value(raw: Value, source: &str) -> Result<Definition, Problem> {
    let loaded = loaded_from_value(raw, source)?;
    Ok(Arc::unwrap_or_clone(loaded.definition))
}

/// [`definition_from_value`], keeping the manifest.
pub fn loaded_from_value(raw: Value, source: &str) -> Result<Loaded, Problem> {
    let name = raw.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
    checked_from_value(raw, source).map_err(|refusal| match refusal {
        Refusal::NotADefinition(why) => Problem::new(source, None, vec![why]),
        refusal => Problem::new(source, name, refusal.messages()),
    })
}

/// Why a manifest is not a definition that can be served.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Another kind, or not `apiextensions.k8s.io/v1`.
    NotADefinition(String),
    /// It does not decode as a CustomResourceDefinition (`why`: unknown fields, a document that
    /// is not an object...), besides the fields of the wrong JSON type (`misfits`, by path).
    Undecodable { misfits: Vec<crate::core::field::FieldError>, why: String },
    /// It decodes, and Kubernetes' create checks refuse it (or some fields are of the wrong JSON
    /// type): the errors with their field paths.
    Invalid(Vec<crate::core::field::FieldError>),
}

impl Refusal {
    /// A manifest that cannot be decoded, for `why`.
    pub fn undecodable(why: impl Into<String>) -> Refusal {
        Refusal::Undecodable { misfits: Vec::new(), why: why.into() }
    }

    /// Every reason, one a line, field errors with their paths first.
    pub fn messages(&self) -> Vec<String> {
        match self {
            Refusal::NotADefinition(why) => vec![why.clone()],
            Refusal::Undecodable { misfits, why } => {
                misfits.iter().map(ToString::to_string).chain(std::iter::once(why.clone())).collect()
            }
            Refusal::Invalid(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Checks one manifest document as Kubernetes checks a created CustomResourceDefinition (after
/// defaulting it) and builds its served model, or says why not with structured errors (for a
/// 422 with field paths).
pub fn checked_from_value(raw: Value, source: &str) -> Result<Loaded, Refusal> {
    let api_version = raw.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = raw.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api_version != "apiextensions.k8s.io/v1" || kind != "CustomResourceDefinition" {
        return Err(Refusal::NotADefinition(format!(
            "expected apiextensions.k8s.io/v1 CustomResourceDefinition, found {api_version} {kind}"
        )));
    }
    // Fields of the wrong type are named (all of them) and left out, so that the rest is
    // decoded and checked too.
    let (misfits, raw) = super::shape::check(&raw);
    let mut crd: CustomResourceDefinition = match serde_json::from_value(raw.clone()) {
        Ok(crd) => crd,
        Err(e) => return Err(Refusal::Undecodable { misfits, why: e.to_string() }),
    };
    let decoded = match serde_json::to_value(&crd) {
        Ok(decoded) => decoded,
        Err(e) => return Err(Refusal::Undecodable { misfits, why: e.to_string() }),
    };
    let unknown = super::strict::unknown_fields(&raw, &decoded);
    if !unknown.is_empty() {
        return Err(Refusal::Undecodable { misfits, why: super::strict::message(&unknown) });
    }
    validate::apply_defaults(&mut crd);
    let (invalid, rules) = validate::check_and_compile(&crd, &raw);
    let mut errors = misfits;
    errors.extend(invalid);
    if !errors.is_empty() {
        return Err(Refusal::Invalid(errors));
    }
    let mut definition = super::build::build_compiled(crd.clone(), source.to_string(), rules);
    let schemas = raw.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten();
    definition.warnings =
        schemas.filter_map(|v| v.pointer("/schema/openAPIV3Schema")).flat_map(crate::schema::check::warnings).collect();
    Ok(Loaded { manifest: Arc::new(crd), definition: Arc::new(definition) })
}

/// Loads every definition from files and directories. Problems are collected, not fatal.
/// Files are loaded on every core (checking and compiling a definition is CPU work); the
/// report lists them in file order whatever the order they finished in.
pub fn load_paths(paths: &[PathBuf]) -> LoadReport {
    let mut report = LoadReport::default();
    let files = match manifest_files(paths) {
        Ok(f) => f,
        Err(p) => {
            report.problems.push(p);
            return report;
        }
    };
    for outcome in crate::core::parallel::map(&files, |file| load_file(file)).into_iter().flatten() {
        match outcome {
            Ok(d) => report.definitions.push(Arc::unwrap_or_clone(d.definition)),
            Err(p) => report.problems.push(p),
        }
    }
    report
}

/// The definitions of one file, and its problems, in document order.
fn load_file(file: &Path) -> Vec<Result<Loaded, Problem>> {
    match std::fs::read(file) {
        Ok(bytes) => load_text(file, &bytes),
        Err(e) => vec![Err(Problem::new(file.display().to_string(), None, vec![format!("cannot read: {e}")]))],
    }
}

/// The definitions of a file's contents, and its problems, in document order. Loaded on one
/// thread with the stack CEL compilation needs, shared by every rule of the file.
pub fn load_text(file: &Path, bytes: &[u8]) -> Vec<Result<Loaded, Problem>> {
    crate::cel::on_compile_stack(|| load_text_here(file, bytes)).unwrap_or_else(|| {
        let problem = "cannot load: the definitions could not be compiled".to_string();
        vec![Err(Problem::new(file.display().to_string(), None, vec![problem]))]
    })
}

fn load_text_here(file: &Path, bytes: &[u8]) -> Vec<Result<Loaded, Problem>> {
    let shown = file.display().to_string();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return vec![Err(Problem::new(shown, None, vec![format!("cannot read: {e}")]))],
    };
    let docs = match parse_documents(text) {
        Ok(d) => d,
        Err(e) => return vec![Err(Problem::new(shown, None, vec![format!("cannot parse: {e}")]))],
    };
    let many = docs.len() > 1;
    expand_lists(docs)
        .into_iter()
        .enumerate()
        .map(|(i, doc)| {
            let source = if many { format!("{shown} (document {})", i + 1) } else { shown.clone() };
            loaded_from_value(doc, &source)
        })
        .collect()
}

/// `kind: List` documents (as `kubectl get -o yaml` writes) contribute their items.
fn expand_lists(docs: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for doc in docs {
        let is_list =
            doc.get("kind").and_then(Value::as_str).is_some_and(|k| k == "List" || k == "CustomResourceDefinitionList");
        match (is_list, doc) {
            (true, Value::Object(mut map)) => {
                if let Some(Value::Array(items)) = map.remove("items") {
                    out.extend(items);
                }
            }
            (_, doc) => out.push(doc),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
";

    #[test]
    fn loads_good_and_reports_bad_documents() {
        let dir = tempfile::tempdir().unwrap();
        let bad = GOOD.replace("crontabs.stable.example.com", "wrong.stable.example.com");
        std::fs::write(dir.path().join("a.yaml"), format!("{GOOD}---\n{bad}")).unwrap();
        std::fs::write(dir.path().join(".hidden.yaml"), "not: [valid").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let report = load_paths(&[dir.path().to_path_buf()]);
        assert_eq!(report.definitions.len(), 1);
        assert_eq!(report.definitions[0].name, "crontabs.stable.example.com");
        assert_eq!(report.problems.len(), 1);
        let text = report.problems[0].to_string();
        assert!(text.contains("a.yaml (document 2)"), "{text}");
        assert!(
            text.contains(
                r#"metadata.name: Invalid value: "wrong.stable.example.com": must be spec.names.plural+"."+spec.group"#
            ),
            "{text}"
        );
    }

    #[test]
    fn json_and_lists() {
        let value: Value = serde_saphyr::from_str(GOOD).unwrap();
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [value]});
        let docs = expand_lists(parse_documents(&list.to_string()).unwrap());
        assert_eq!(docs.len(), 1);
        assert!(definition_from_value(docs.into_iter().next().unwrap(), "x").is_ok());
    }

    #[test]
    fn every_decoding_error_is_named_with_the_validation_errors_after_it() {
        let text = GOOD.replace(
            "openAPIV3Schema: {type: object}",
            "openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              size: {type: integer, minimum: \"a\"}\n              name: {type: strng}",
        );
        let value: Value = serde_saphyr::from_str(&text).unwrap();
        let problem = definition_from_value(value, "bad.yaml").unwrap_err();
        let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties";
        assert_eq!(
            problem.errors,
            [
                format!("{at}[size].minimum: Invalid value: \"a\": must be of type number"),
                format!(
                    "{at}[name].type: Unsupported value: \"strng\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
                ),
            ]
        );
    }

    #[test]
    fn other_kinds_are_problems() {
        let err =
            definition_from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"}), "cm.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cm.yaml: not a usable CustomResourceDefinition: expected apiextensions.k8s.io/v1 CustomResourceDefinition, found v1 ConfigMap"
        );
    }
}
