//! What a reload serves, decided from what was served and what the files now say, as
//! Kubernetes decides a CustomResourceDefinition update: a new definition passes the create
//! checks; a changed one passes the update checks (`update`) too, or its previous form goes on
//! being served; a definition whose file cannot be read right now (half written, invalid YAML)
//! goes on as it was; a definition no file names any more stops being served. Of two
//! definitions whose names clash, the one served first keeps them, and a changed definition
//! whose new names clash keeps its previous form.
//!
//! Pure: no file, store or HTTP access; the caller brings the scan, the ages and the stored
//! versions, and swaps the result in.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::load::{Loaded, Problem, reason};
use super::registry::Registry;
use super::scan::Scan;

/// A set of names or pointers built at every reload: foldhash, as the names are the
/// definitions' own.
type Names<T> = HashSet<T, foldhash::fast::RandomState>;

/// A served definition and the file it came from.
#[derive(Debug, Clone)]
pub struct Served {
    pub loaded: Loaded,
    pub file: PathBuf,
}

impl Served {
    pub fn name(&self) -> &str {
        &self.loaded.definition.name
    }
}

/// What the reload decided.
#[derive(Debug, Default)]
pub struct Plan {
    /// What is served from now on, by definition name.
    pub served: HashMap<String, Served>,
    /// The registry of `served`.
    pub registry: Registry,
    /// Every problem found: invalid files and definitions, refused updates, clashes. A problem
    /// naming a definition that is in `served` means its previous form was kept.
    pub problems: Vec<Problem>,
    /// Definitions served before and now with another manifest.
    pub changed: Vec<String>,
    /// Definitions served for the first time.
    pub added: Vec<String>,
    /// Definitions served before and no longer.
    pub removed: Vec<String>,
}

impl Plan {
    /// Whether the served set is the previous one, definition for definition.
    pub fn is_unchanged(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

/// What the reload needs to know besides the files.
pub struct Context<'a> {
    /// When each definition was first served (smaller is older); `None` for newcomers.
    pub age: &'a dyn Fn(&str) -> Option<u64>,
    /// The versions the objects of a definition may be stored in (`status.storedVersions`).
    pub stored_versions: &'a dyn Fn(&str) -> Vec<String>,
    /// The manifest the server last accepted for a definition that is not served now (the
    /// store's record, `definitions::accepted`): its objects are still stored as that form
    /// says, so the files' form is checked as an update of it.
    pub accepted: &'a dyn Fn(&str) -> Option<Arc<CustomResourceDefinition>>,
}

/// For callers with no record of what was accepted before (`check`, a store-less tool).
pub fn nothing_accepted(_: &str) -> Option<Arc<CustomResourceDefinition>> {
    None
}

/// Decides what to serve after `scan`, given what `previous` served.
pub fn plan(previous: &HashMap<String, Served>, scan: &Scan, context: &Context<'_>) -> Plan {
    let files = match scan {
        Scan::Files(files) => files,
        Scan::Failed(problem) => return keep_everything(previous, problem.clone()),
    };
    let mut problems = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::with_capacity(previous.len() + 1);
    let mut named: Names<&str> = Names::with_capacity_and_hasher(previous.len() + 1, Default::default());
    for file in files {
        for document in &file.documents {
            match document {
                Ok(loaded) => {
                    named.insert(loaded.definition.name.as_str());
                    candidates.extend(candidate(previous, loaded, &file.path, context, &mut problems));
                }
                Err(problem) => {
                    problems.push(problem.clone());
                    let Some(name) = &problem.name else { continue };
                    named.insert(name.as_str());
                    if let Some(old) = previous.get(name) {
                        candidates.push(Candidate { served: old.clone(), previous: None, was_served: true });
                    }
                }
            }
        }
    }
    // A definition no file names is gone, unless its file could not be read through.
    let murky: HashSet<&Path> = files.iter().filter(|f| f.is_murky()).map(|f| f.path.as_path()).collect();
    let mut removed = Vec::new();
    for (name, old) in previous {
        if named.contains(name.as_str()) {
            continue;
        }
        if murky.contains(old.file.as_path()) {
            candidates.push(Candidate { served: old.clone(), previous: None, was_served: true });
        } else {
            removed.push(name.clone());
        }
    }
    removed.sort();
    let (registry, served) = accept_names(candidates, context, &mut problems);
    let mut plan = Plan { registry, problems, removed, ..Plan::default() };
    for (name, now) in &served {
        match previous.get(name) {
            None => plan.added.push(name.clone()),
            Some(old) if !Arc::ptr_eq(&old.loaded.definition, &now.loaded.definition) => {
                plan.changed.push(name.clone())
            }
            Some(_) => {}
        }
    }
    // A previous definition that lost its names to nobody stays out: only clashes do that.
    let lost: Vec<String> =
        previous.keys().filter(|n| !served.contains_key(*n) && !plan.removed.contains(n)).cloned().collect();
    plan.removed.extend(lost);
    plan.added.sort();
    plan.changed.sort();
    plan.removed.sort();
    plan.served = served;
    plan
}

/// The definitions of `scan` that [`plan`] checks as updates of what `previous` served (their
/// manifests changed): the ones whose stored versions it asks the context for.
pub fn updated_names(previous: &HashMap<String, Served>, scan: &Scan) -> Vec<String> {
    let Scan::Files(files) = scan else { return Vec::new() };
    let documents = files.iter().flat_map(|f| f.documents.iter().filter_map(|d| d.as_ref().ok()));
    let updated = documents.filter(|loaded| {
        previous.get(&loaded.definition.name).is_some_and(|old| {
            !Arc::ptr_eq(&old.loaded.definition, &loaded.definition) && !old.loaded.same_spec(loaded)
        })
    });
    let mut names: Vec<String> = updated.map(|loaded| loaded.definition.name.clone()).collect();
    names.sort();
    names.dedup();
    names
}

/// The definitions of `scan` that `previous` does not serve: [`plan`] checks each against its
/// last accepted form, if the store has one (`Context::accepted`), which the caller reads.
pub fn new_names(previous: &HashMap<String, Served>, scan: &Scan) -> Vec<String> {
    let Scan::Files(files) = scan else { return Vec::new() };
    let documents = files.iter().flat_map(|f| f.documents.iter().filter_map(|d| d.as_ref().ok()));
    let mut names: Vec<String> = documents
        .filter(|loaded| !previous.contains_key(&loaded.definition.name))
        .map(|loaded| loaded.definition.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A definition to serve, and the previous form to fall back to if its names clash.
struct Candidate {
    served: Served,
    previous: Option<Served>,
    /// Whether the definition was served before (in `served`'s form or `previous`').
    was_served: bool,
}

/// The candidate for a definition the files give: new, unchanged, or changed (and then
/// checked as an update); `None` for a definition not served now whose last accepted form
/// refuses it as an update (it stays unserved, its objects as they are).
fn candidate(
    previous: &HashMap<String, Served>,
    loaded: &Loaded,
    file: &Path,
    context: &Context<'_>,
    problems: &mut Vec<Problem>,
) -> Option<Candidate> {
    let new = || Served { loaded: loaded.clone(), file: file.to_path_buf() };
    let Some(old) = previous.get(&loaded.definition.name) else {
        if let Some(accepted) = (context.accepted)(&loaded.definition.name)
            && accepted.spec != loaded.manifest.spec
        {
            let errors = update_errors(&accepted, loaded, context);
            if !errors.is_empty() {
                problems.push(refused_update(loaded, errors));
                return None;
            }
        }
        return Some(Candidate { served: new(), previous: None, was_served: false });
    };
    let same = Arc::ptr_eq(&old.loaded.definition, &loaded.definition) || old.loaded.same_spec(loaded);
    if same {
        // Kubernetes ignores an update that leaves the spec as it was: the storage, and the
        // watches on it, go on.
        let served = Served { loaded: old.loaded.clone(), file: file.to_path_buf() };
        return Some(Candidate { served, previous: None, was_served: true });
    }
    let errors = update_errors(&old.loaded.manifest, loaded, context);
    if errors.is_empty() {
        return Some(Candidate { served: new(), previous: Some(old.clone()), was_served: true });
    }
    problems.push(refused_update(loaded, errors));
    Some(Candidate { served: old.clone(), previous: None, was_served: true })
}

/// A change refused by Kubernetes' update checks.
fn refused_update(loaded: &Loaded, errors: Vec<String>) -> Problem {
    let definition = &loaded.definition;
    Problem::new(&definition.source, Some(definition.name.clone()), errors).because(reason::UPDATE_REFUSED)
}

/// Kubernetes' update checks of `old` (the form served or last accepted) to `loaded`.
fn update_errors(old: &CustomResourceDefinition, loaded: &Loaded, context: &Context<'_>) -> Vec<String> {
    let mut stored = (context.stored_versions)(&loaded.definition.name);
    // The version served as storage until now has had objects written in it.
    if let Some(storage) = old.spec.versions.iter().find(|v| v.storage)
        && !stored.contains(&storage.name)
    {
        stored.push(storage.name.clone());
    }
    super::update::check(old, &loaded.manifest, &stored).iter().map(ToString::to_string).collect()
}

/// Builds the registry, oldest definitions first so that they keep their names; a changed
/// definition whose new names clash falls back to its previous form.
fn accept_names(
    mut candidates: Vec<Candidate>,
    context: &Context<'_>,
    problems: &mut Vec<Problem>,
) -> (Registry, HashMap<String, Served>) {
    refuse_names_in_use(&mut candidates, problems);
    // A stable sort: newcomers keep their file order after every older definition.
    candidates.sort_by_cached_key(|c| (context.age)(c.served.name()).unwrap_or(u64::MAX));
    loop {
        let definitions: Vec<_> = candidates.iter().map(|c| c.served.loaded.definition.clone()).collect();
        let (registry, clashes) = Registry::build_shared(definitions);
        let mut fell_back = false;
        for clash in clashes.iter() {
            let fallback = candidates.iter_mut().find(|c| {
                c.previous.is_some()
                    && clash.name.as_deref() == Some(c.served.name())
                    && c.served.loaded.definition.source == clash.source
            });
            if let Some(candidate) = fallback
                && let Some(previous) = candidate.previous.take()
            {
                candidate.served = previous;
                problems.push(clash.clone());
                fell_back = true;
            }
        }
        if fell_back {
            continue;
        }
        problems.extend(clashes);
        let accepted: Names<*const super::Definition> = registry.definitions().iter().map(Arc::as_ptr).collect();
        let mut served = HashMap::with_capacity(accepted.len());
        for c in candidates.into_iter().filter(|c| accepted.contains(&Arc::as_ptr(&c.served.loaded.definition))) {
            served.insert(c.served.name().to_string(), c.served);
        }
        return (registry, served);
    }
}

/// The names a definition takes in its group: resource names (plural, singular, short names)
/// and kinds (kind, list kind).
fn names_of(definition: &super::Definition) -> impl Iterator<Item = (bool, &str)> {
    let resources = [&definition.plural, &definition.singular].into_iter().chain(&definition.short_names);
    let kinds = [&definition.kind, &definition.list_kind].into_iter();
    resources.map(|n| (true, n.as_str())).chain(kinds.map(|n| (false, n.as_str())))
}

/// A changed definition may not take a name another served definition holds: as Kubernetes'
/// naming controller, the holder keeps it, and the change is refused.
fn refuse_names_in_use(candidates: &mut [Candidate], problems: &mut Vec<Problem>) {
    // The names held now: the served forms of definitions served before.
    let mut held: HashMap<(&str, bool, &str), &str, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(candidates.len() * 6, Default::default());
    for c in candidates.iter() {
        let before = c.previous.as_ref().unwrap_or(&c.served);
        if !c.was_served {
            continue;
        }
        let d = &before.loaded.definition;
        for (resource, name) in names_of(d) {
            held.insert((d.group.as_str(), resource, name), d.name.as_str());
        }
    }
    let mut refused = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        if c.previous.is_none() {
            continue;
        }
        let d = &c.served.loaded.definition;
        // The last clash in Kubernetes' order names the reason, as its naming controller's.
        let taken = names_of(d)
            .filter(|(resource, name)| {
                held.get(&(d.group.as_str(), *resource, *name)).is_some_and(|holder| *holder != d.name)
            })
            .last();
        if let Some((_, name)) = taken {
            refused.push((i, name.to_string()));
        }
    }
    for (i, name) in refused {
        if let Some(c) = candidates.get_mut(i)
            && let Some(previous) = c.previous.take()
        {
            problems.push(Problem::name_in_use(&c.served.loaded.definition, &name));
            c.served = previous;
        }
    }
}

/// A scan that said nothing usable: everything goes on as it was.
fn keep_everything(previous: &HashMap<String, Served>, problem: Problem) -> Plan {
    let mut definitions: Vec<_> = previous.values().collect();
    definitions.sort_by(|a, b| a.name().cmp(b.name()));
    let (registry, _) = Registry::build_shared(definitions.iter().map(|s| s.loaded.definition.clone()).collect());
    Plan { served: previous.clone(), registry, problems: vec![problem], ..Plan::default() }
}

/// The files as scanned, for callers that only want their definitions (start-up, `check`).
pub fn first_plan(scan: &Scan, context: &Context<'_>) -> Plan {
    plan(&HashMap::new(), scan, context)
}

#[cfg(test)]
mod tests;
