//! Reading definition manifests from files and directories: multi-document YAML or JSON,
//! checked one by one, so that a broken definition is reported and the others still load.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::Value;

use super::model::Definition;
use super::validate;

/// Why a definition source was refused, in a word: the reason of the `SourceRefused`
/// condition of the definition's status (`serveddefinitions`). Name clashes take Kubernetes'
/// naming controller's reasons.
pub mod reason {
    /// A file or directory that cannot be read or listed.
    pub const UNREADABLE: &str = "Unreadable";
    /// A file that is neither YAML nor JSON.
    pub const UNPARSABLE: &str = "Unparsable";
    /// A document that is not an `apiextensions.k8s.io/v1` CustomResourceDefinition.
    pub const NOT_A_DEFINITION: &str = "NotADefinition";
    /// A definition that fails Kubernetes' create checks (decoding included).
    pub const INVALID: &str = "Invalid";
    /// A change that fails Kubernetes' update checks: the previous form stays served.
    pub const UPDATE_REFUSED: &str = "UpdateRefused";
    /// A definition defined twice (two files, or a file and the cluster): the first is served.
    pub const DUPLICATE: &str = "Duplicate";
    pub const PLURAL_CONFLICT: &str = "PluralConflict";
    pub const SINGULAR_CONFLICT: &str = "SingularConflict";
    pub const SHORT_NAMES_CONFLICT: &str = "ShortNamesConflict";
    pub const KIND_CONFLICT: &str = "KindConflict";
    pub const LIST_KIND_CONFLICT: &str = "ListKindConflict";
    /// The reload itself failed (the store could not record what it needed).
    pub const RELOAD_FAILED: &str = "ReloadFailed";

    /// Whether `reason` is a clash over a name (the `NamesAccepted` condition's reasons).
    pub fn is_name_conflict(reason: &str) -> bool {
        reason.ends_with("Conflict")
    }
}

/// A definition that could not be served, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// File (and document number, for multi-document files).
    pub source: String,
    /// The definition's name, when it has one.
    pub name: Option<String>,
    pub errors: Vec<String>,
    /// Why, in a word (`reason`): `Invalid` unless said otherwise.
    pub reason: &'static str,
}

impl Problem {
    pub fn new(source: impl Into<String>, name: Option<String>, errors: Vec<String>) -> Problem {
        Problem { source: source.into(), name, errors, reason: reason::INVALID }
    }

    /// The same problem, for another reason (`reason`'s constants).
    pub fn because(self, reason: &'static str) -> Problem {
        Problem { reason, ..self }
    }

    /// The file (or directory, or `cluster:customresourcedefinitions/<name>`) it comes from,
    /// without the document number.
    pub fn file(&self) -> &Path {
        source_file(&self.source)
    }

    /// A clash over a name `definition` takes (`taken`): Kubernetes' naming controller's
    /// reason, and its message after ours.
    pub fn name_in_use(definition: &Definition, taken: &str) -> Problem {
        let why = if taken == definition.plural {
            reason::PLURAL_CONFLICT
        } else if taken == definition.singular {
            reason::SINGULAR_CONFLICT
        } else if taken == definition.kind {
            reason::KIND_CONFLICT
        } else if taken == definition.list_kind {
            reason::LIST_KIND_CONFLICT
        } else {
            reason::SHORT_NAMES_CONFLICT
        };
        let message = format!("names not accepted: \"{taken}\" is already in use");
        Problem::new(&definition.source, Some(definition.name.clone()), vec![message]).because(why)
    }
}

/// The file of a problem's source (`<file>` or `<file> (document <n>)`).
pub fn source_file(source: &str) -> &Path {
    let file = match source.rsplit_once(" (document ") {
        Some((file, rest)) if rest.ends_with(')') => file,
        _ => source,
    };
    Path::new(file)
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
        let meta = std::fs::metadata(path).map_err(|e| {
            Problem::new(path.display().to_string(), None, vec![format!("cannot read: {e}")])
                .because(reason::UNREADABLE)
        })?;
        if meta.is_dir() {
            let entries = std::fs::read_dir(path).map_err(|e| {
                Problem::new(path.display().to_string(), None, vec![format!("cannot list: {e}")])
                    .because(reason::UNREADABLE)
            })?;
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
            // By name (the same parent for all: its bytes sort as its components would).
            found.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// What this loader makes of a file's bytes, as a record of where a definition came from names
/// it (`scan::Origin`): the crate's version, and a number to raise whenever parsing, decoding or
/// defaulting would give the same bytes another form, so that a start reads files again rather
/// than trust a record of what an earlier build made of them.
pub const FORM: &str = concat!(env!("CARGO_PKG_VERSION"), "/1");

/// A definition as a record keeps it (the defaulted manifest without schemas, the schemas'
/// texts, its source and its schemas' warnings): what the file it came from gave.
pub fn loaded_from_record(
    manifest: Arc<CustomResourceDefinition>,
    schemas: Vec<Option<Arc<str>>>,
    source: String,
    warnings: Vec<String>,
) -> Loaded {
    let mut definition = super::build::build_with_schemas(&manifest, source, schemas);
    definition.warnings = warnings;
    Loaded { manifest, definition: Arc::new(definition) }
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
    // What generators write is read line by line; what manifests are written in, from the
    // parser's events; anything else, and every error, by serde-saphyr, whose reading both match.
    if let Some(docs) = super::yaml_lines::documents(text) {
        return Ok(docs);
    }
    match super::yaml_subset::documents(text) {
        Some(docs) => Ok(docs),
        None => parse_documents_in_full(text),
    }
}

/// [`parse_documents`] of any YAML, with serde-saphyr.
pub fn parse_documents_in_full(text: &str) -> Result<Vec<Value>, String> {
    // Comments are read past, not kept: a manifest's are of no use here, and keeping them is a
    // fifth of the parser's work on large commented files (issue 32: 102 MB of upjet YAML).
    let options = serde_saphyr::options! { emit_comments: false };
    let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, options).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// A definition that passed the create checks, with the (defaulted) manifest it was built from:
/// what a later version of the file is compared with.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The manifest, defaulted, without its versions' schemas: those are the definition's
    /// versions' schema texts (a decoded schema takes several times the memory of its text).
    pub manifest: Arc<CustomResourceDefinition>,
    pub definition: Arc<Definition>,
}

impl Loaded {
    /// Whether `other` has the same spec: its manifest and every version's schema the same.
    pub fn same_spec(&self, other: &Loaded) -> bool {
        let (mine, theirs) = (&self.definition.versions, &other.definition.versions);
        self.manifest.spec == other.manifest.spec
            && mine.len() == theirs.len()
            && mine.iter().zip(theirs).all(|(a, b)| a.openapi_schema == b.openapi_schema)
    }

    /// Each version's schema text, in the manifest's version order.
    pub fn schema_texts(&self) -> Vec<Option<Arc<str>>> {
        let versions = &self.definition.versions;
        let text = |name: &str| versions.iter().find(|v| v.name == name).and_then(|v| v.openapi_schema.clone());
        self.manifest.spec.versions.iter().map(|v| text(&v.name)).collect()
    }

    /// The manifest with its versions' schemas, as it was accepted: what the store records.
    pub fn full_manifest(&self) -> CustomResourceDefinition {
        with_schema_texts(&self.manifest, &self.schema_texts())
    }
}

/// Takes each version's `openAPIV3Schema` out of a manifest, as the compact JSON text a loaded
/// definition keeps (in version order), leaving the manifest as [`Loaded::manifest`] is.
pub fn take_schema_texts(crd: &mut CustomResourceDefinition) -> Vec<Option<Arc<str>>> {
    let text = |schema: Option<_>| {
        let value = serde_json::to_value(schema?).ok()?;
        serde_json::to_string(&value).ok().map(Arc::from)
    };
    crd.spec.versions.iter_mut().map(|v| text(v.schema.take().and_then(|s| s.open_api_v3_schema))).collect()
}

/// `manifest` (without schemas) with each version's schema put back from its text.
pub fn with_schema_texts(manifest: &CustomResourceDefinition, texts: &[Option<Arc<str>>]) -> CustomResourceDefinition {
    let mut full = manifest.clone();
    for (version, text) in full.spec.versions.iter_mut().zip(texts) {
        // Read past serde_json's 128-level limit, as the schema's value is (`Version::openapi_schema_value`).
        version.schema = text.as_deref().and_then(|t| crate::core::nesting::from_str(t).ok()).map(|schema| {
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceValidation {
                open_api_v3_schema: Some(schema),
            }
        });
    }
    full
}

/// Checks one manifest document and builds its served model.
pub fn definition_from_value(raw: Value, source: &str) -> Result<Definition, Problem> {
    let loaded = loaded_from_value(raw, source)?;
    Ok(Arc::unwrap_or_clone(loaded.definition))
}

/// Whether a decoded, defaulted manifest (without its versions' schemas) and its schemas' texts
/// are a form the server already accepted: the store's record of the definition says the same.
/// Such a definition is not checked again, as kube-apiserver does not check a stored
/// CustomResourceDefinition again when it starts: only a change is checked.
pub type Trusted<'a> = dyn Fn(&CustomResourceDefinition, &[Option<Arc<str>>]) -> bool + Sync + 'a;

/// Trusts nothing: every definition is checked.
pub fn trust_none(_: &CustomResourceDefinition, _: &[Option<Arc<str>>]) -> bool {
    false
}

/// [`definition_from_value`], keeping the manifest.
pub fn loaded_from_value(raw: Value, source: &str) -> Result<Loaded, Problem> {
    loaded_from_value_trusting(raw, source, &trust_none)
}

/// [`loaded_from_value`], not checking again a form `trusted` vouches for.
pub fn loaded_from_value_trusting(raw: Value, source: &str, trusted: &Trusted) -> Result<Loaded, Problem> {
    let name = raw.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
    checked_from_value_trusting(raw, source, trusted).map_err(|refusal| match refusal {
        Refusal::NotADefinition(why) => Problem::new(source, None, vec![why]).because(reason::NOT_A_DEFINITION),
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
    checked_from_value_trusting(raw, source, &trust_none)
}

/// [`checked_from_value`], without the create checks for a form `trusted` vouches for (it was
/// accepted before; decoding, the fields of the wrong type and unknown fields are still checked).
pub fn checked_from_value_trusting(raw: Value, source: &str, trusted: &Trusted) -> Result<Loaded, Refusal> {
    let api_version = raw.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = raw.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api_version != "apiextensions.k8s.io/v1" || kind != "CustomResourceDefinition" {
        return Err(Refusal::NotADefinition(format!(
            "expected apiextensions.k8s.io/v1 CustomResourceDefinition, found {api_version} {kind}"
        )));
    }
    // Fields of the wrong type are named (all of them) and left out, so that the rest is
    // decoded and checked too.
    let (misfits, raw) = super::shape::check(raw);
    let mut crd = match CustomResourceDefinition::deserialize(&raw) {
        Ok(crd) => crd,
        Err(e) => return Err(Refusal::Undecodable { misfits, why: e.to_string() }),
    };
    let mut decoded = match serde_json::to_value(&crd) {
        Ok(decoded) => decoded,
        Err(e) => return Err(Refusal::Undecodable { misfits, why: e.to_string() }),
    };
    let unknown = super::strict::unknown_fields(&raw, &decoded);
    if !unknown.is_empty() {
        return Err(Refusal::Undecodable { misfits, why: super::strict::message(&unknown) });
    }
    validate::apply_defaults(&mut crd);
    // Each version's schema as a value once, for the checks and the schema text (defaulting
    // leaves schemas alone).
    let schemas = take_version_schemas(&mut decoded, crd.spec.versions.len());
    let texts: Vec<Option<Arc<str>>> =
        schemas.iter().map(|s| s.as_ref().and_then(|s| serde_json::to_string(s).ok()).map(Arc::from)).collect();
    // The manifest as it is kept (without schemas), to ask whether it was accepted before; the
    // checks see it whole.
    let typed_schemas: Vec<_> = crd.spec.versions.iter_mut().map(|v| v.schema.take()).collect();
    if !(misfits.is_empty() && trusted(&crd, &texts)) {
        for (version, schema) in crd.spec.versions.iter_mut().zip(typed_schemas) {
            version.schema = schema;
        }
        let invalid = validate::check_with_schemas(&crd, &raw, &schemas);
        let mut errors = misfits;
        errors.extend(invalid);
        if !errors.is_empty() {
            return Err(Refusal::Invalid(errors));
        }
        for version in &mut crd.spec.versions {
            version.schema = None;
        }
    }
    drop(schemas);
    let mut definition = super::build::build_with_schemas(&crd, source.to_string(), texts);
    let raw_schemas = raw.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten();
    definition.warnings = raw_schemas
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .flat_map(crate::schema::check::warnings)
        .collect();
    Ok(Loaded { manifest: Arc::new(crd), definition: Arc::new(definition) })
}

/// The versions' `openAPIV3Schema`s taken out of a decoded manifest, in version order.
fn take_version_schemas(decoded: &mut Value, count: usize) -> Vec<Option<Value>> {
    let mut versions = decoded.pointer_mut("/spec/versions").and_then(Value::as_array_mut);
    (0..count)
        .map(|i| {
            let version = versions.as_mut().and_then(|v| v.get_mut(i));
            version.and_then(|v| v.pointer_mut("/schema/openAPIV3Schema")).map(Value::take).filter(|s| !s.is_null())
        })
        .collect()
}

/// Loads every definition from files and directories. Problems are collected, not fatal.
/// Files are loaded on every core, on threads with CEL's compile stack (checking a definition
/// is CPU work); the report lists them in file order whatever the order they finished in.
pub fn load_paths(paths: &[PathBuf]) -> LoadReport {
    let mut report = LoadReport::default();
    let files = match manifest_files(paths) {
        Ok(f) => f,
        Err(p) => {
            report.problems.push(p);
            return report;
        }
    };
    let loaded = crate::cel::map_on_compile_stack(&files, |file| load_file(file));
    for outcome in
        files.iter().zip(loaded).flat_map(|(file, documents)| documents.unwrap_or_else(|| not_compiled(file)))
    {
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
        Err(e) => {
            let problem = Problem::new(file.display().to_string(), None, vec![format!("cannot read: {e}")]);
            vec![Err(problem.because(reason::UNREADABLE))]
        }
    }
}

/// The definitions of a file's contents, and its problems, in document order. Loaded on one
/// thread with the stack CEL compilation needs, shared by every rule of the file.
pub fn load_text(file: &Path, bytes: &[u8]) -> Vec<Result<Loaded, Problem>> {
    crate::cel::on_compile_stack(|| load_text_here(file, bytes, &trust_none)).unwrap_or_else(|| not_compiled(file))
}

/// [`load_text`] on this thread (which has the compile stack), not checking again the forms
/// `trusted` vouches for.
pub fn load_text_trusting(file: &Path, bytes: &[u8], trusted: &Trusted) -> Vec<Result<Loaded, Problem>> {
    crate::cel::on_compile_stack(|| load_text_here(file, bytes, trusted)).unwrap_or_else(|| not_compiled(file))
}

/// What a file whose loading failed on its compile thread gave.
pub fn not_compiled(file: &Path) -> Vec<Result<Loaded, Problem>> {
    let problem = "cannot load: the definitions could not be compiled".to_string();
    vec![Err(Problem::new(file.display().to_string(), None, vec![problem]))]
}

fn load_text_here(file: &Path, bytes: &[u8], trusted: &Trusted) -> Vec<Result<Loaded, Problem>> {
    let shown = file.display().to_string();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return vec![Err(Problem::new(shown, None, vec![format!("cannot read: {e}")]).because(reason::UNREADABLE))];
        }
    };
    let docs = match parse_documents(text) {
        Ok(d) => d,
        Err(e) => {
            return vec![
                Err(Problem::new(shown, None, vec![format!("cannot parse: {e}")]).because(reason::UNPARSABLE)),
            ];
        }
    };
    let many = docs.len() > 1;
    expand_lists(docs)
        .into_iter()
        .enumerate()
        .map(|(i, doc)| {
            let source = if many { format!("{shown} (document {})", i + 1) } else { shown.clone() };
            loaded_from_value_trusting(doc, &source, trusted)
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
    fn a_schema_deeper_than_serde_jsons_limit_is_put_back_whole() {
        // Deep values are read on a large stack, as the server reads them.
        let checked = std::thread::Builder::new().stack_size(crate::core::nesting::THREAD_STACK_BYTES).spawn(|| {
            let mut schema = serde_json::json!({"type": "string"});
            for _ in 0..150 {
                schema = serde_json::json!({"type": "object", "properties": {"next": schema}});
            }
            let mut crd: CustomResourceDefinition = serde_saphyr::from_str(GOOD).unwrap();
            crd.spec.versions[0].schema =
                Some(serde_json::from_value(serde_json::json!({"openAPIV3Schema": {"type": "object"}})).unwrap());
            let texts = vec![Some(Arc::from(serde_json::to_string(&schema).unwrap()))];
            let full = with_schema_texts(&crd, &texts);
            let put_back = full.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
            assert_eq!(serde_json::to_value(put_back).unwrap(), schema);
        });
        checked.unwrap().join().unwrap();
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
    fn comments_are_read_past_and_change_nothing() {
        let commented = GOOD
            .replace("kind: CustomResourceDefinition\n", "kind: CustomResourceDefinition # the kind\n# a whole line\n")
            .replace("scope: Namespaced", "scope: Namespaced   # trailing")
            .replace("  versions:\n", "  versions:\n  # before an item\n");
        let text = format!("# leading\n{commented}# after\n---\n# an empty document\n");
        let docs = parse_documents(&text).unwrap();
        assert_eq!(docs, parse_documents(GOOD).unwrap());
        // A `#` inside a scalar is no comment.
        let quoted = GOOD.replace("kind: CronTab,", "kind: CronTab, categories: [\"a #b\"],");
        let docs = parse_documents(&quoted).unwrap();
        assert_eq!(docs[0].pointer("/spec/names/categories/0"), Some(&serde_json::json!("a #b")));
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
