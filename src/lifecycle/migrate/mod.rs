//! Storage-version migration: a pass over a definition's objects, page by page, rewriting
//! every object stored in another version than the storage version into it (`rewrite`), with
//! its progress in the store after every page (`progress`) so that a restarted server resumes
//! where it stopped. A version leaves `storedVersions` only after a complete pass found no
//! object in it; a pass that had to rewrite objects is followed by another that checks so.
//!
//! Owns the order of a pass and its pacing; never serves HTTP, never changes a definition.

pub mod progress;
pub mod rewrite;

use std::time::{Duration, Instant};

use progress::{Progress, State};

use super::stored_versions;
use crate::definitions::Definition;
use crate::store::{Backend, ListOptions, Store, key};

/// Objects read per page: memory stays bounded by two pages (one written while the next is
/// read) whatever the number of objects.
pub const PAGE_SIZE: usize = 500;

/// How often a pass under way writes its progress record (to resume from after a crash): every
/// page would cost a commit of its own per page.
const SAVE_EVERY: Duration = Duration::from_millis(200);

/// How a migration is paced.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Objects rewritten per second at most; 0 for no limit.
    pub rate: u32,
    pub page_size: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { rate: 0, page_size: PAGE_SIZE }
    }
}

impl Options {
    /// Objects read per page: with a rate limit, at most a tenth of a second's worth, so that
    /// pacing (after each page, whose writes go as one batch) keeps the rate rather than
    /// letting a whole page through at once.
    fn page_limit(&self) -> usize {
        let page = self.page_size.max(1);
        match self.rate {
            0 => page,
            rate => page.min(usize::try_from(rate / 10).unwrap_or(usize::MAX).max(1)),
        }
    }
}

/// Why a pass stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    /// The definition's storage version changed (or it stopped being served): a new pass starts
    /// for the new storage version.
    #[error("the definition changed during the pass")]
    Superseded,
    #[error("{0}")]
    Failed(String),
}

impl From<crate::store::Error> for Stop {
    fn from(e: crate::store::Error) -> Self {
        Stop::Failed(e.to_string())
    }
}

/// Whether `definition` needs a pass: none ever ran for its storage version, one was under way,
/// or versions other than the storage version are still in storedVersions.
pub async fn needs_pass(store: &Backend, definition: &Definition) -> Result<bool, crate::store::Error> {
    let storage = &definition.storage.name;
    let Some(progress) = progress::read(store, &definition.name).await? else { return Ok(true) };
    if &progress.storage_version != storage || progress.state == State::Running {
        return Ok(true);
    }
    let stored = stored_versions::read(store, &definition.name).await?;
    Ok(stored.iter().any(|v| v != storage))
}

/// Runs passes over `definition`'s objects until one finds every object in the storage
/// version (resuming the pass a stopped server left), then drops the other versions from
/// storedVersions. `still_current` says whether the definition is still served as it was;
/// `report` sees the progress after every page.
pub async fn migrate(
    store: &Backend,
    definition: &Definition,
    options: Options,
    still_current: &(dyn Fn() -> bool + Send + Sync),
    report: &mut (dyn FnMut(&Progress) + Send),
) -> Result<Progress, Stop> {
    let storage = definition.storage.name.as_str();
    // Objects are written in the storage version from now on: it must be a stored version.
    stored_versions::add(store, &definition.name, storage).await?;
    let previous = progress::read(store, &definition.name).await?;
    let mut progress = match previous {
        Some(p) if p.storage_version == storage && p.state == State::Running => {
            if let Some(after) = &p.continue_after {
                tracing::info!(definition = %definition.name, migrated = p.migrated, "storage-version migration: resuming after {after}");
            }
            p
        }
        other => {
            // Recorded at once: the status shows this migration, not the last one, from now on.
            let fresh = Progress::start(storage, other.as_ref());
            progress::write(store, &definition.name, &fresh).await?;
            fresh
        }
    };
    let mut pacer = Pacer::new(options.rate);
    // A pass that rewrote objects is followed by one that proves none is left; a few at most.
    for _ in 0..4 {
        match one_pass(store, definition, &options, &mut progress, &mut pacer, still_current, report).await {
            Ok(()) => {}
            Err(stop) => {
                if let Stop::Failed(message) = &stop {
                    progress.last_error = Some(message.clone());
                    progress::write(store, &definition.name, &progress).await?;
                    report(&progress);
                }
                return Err(stop);
            }
        }
        if progress.state == State::Done {
            for version in stored_versions::read(store, &definition.name).await? {
                if version != storage {
                    stored_versions::remove(store, definition, &version).await?;
                    tracing::info!(definition = %definition.name, version = %version, "no object is stored in this version any more: it left status.storedVersions");
                }
            }
            progress::write(store, &definition.name, &progress).await?;
            report(&progress);
            return Ok(progress);
        }
        // The next pass counts afresh; what this migration rewrote so far still shows.
        let counted = std::mem::take(&mut progress.objects_per_version);
        progress = Progress {
            last_objects_per_version: Some(counted),
            migrated: progress.migrated,
            yielded_to_writers: progress.yielded_to_writers,
            started_at: std::mem::take(&mut progress.started_at),
            ..Progress::start(storage, None)
        };
    }
    progress::write(store, &definition.name, &progress).await?;
    Ok(progress)
}

/// One pass from `progress.continue_after` to the last object. Marks the progress `Done` when
/// the whole pass found no object in another version. While a page's writes are on their way
/// to the disk, the next page is read and converted; a page counts as done (and the progress
/// moves past it) once every write of it is answered. The progress is reported after every
/// page, and written to the store at most every `SAVE_EVERY` and when the pass stops.
async fn one_pass(
    store: &Backend,
    definition: &Definition,
    options: &Options,
    progress: &mut Progress,
    pacer: &mut Pacer,
    still_current: &(dyn Fn() -> bool + Send + Sync),
    report: &mut (dyn FnMut(&Progress) + Send),
) -> Result<(), Stop> {
    let prefix = key::resource_prefix(&definition.group, &definition.plural);
    let desired = format!("{}/{}", definition.group, definition.storage.name);
    let group_prefix = format!("{}/", definition.group);
    // Where the next page starts (the progress record moves only past finished pages).
    let mut read_after = progress.continue_after.clone();
    // The page being written, and its last key.
    let mut writing: Option<(Option<rewrite::PageWrite<'_>>, Option<String>)> = None;
    let mut saved = Instant::now();
    loop {
        if !still_current() {
            // What is under way is finished and recorded: a new pass resumes after it.
            if let Some((previous, previous_last)) = writing.take() {
                finish_page(store, definition, progress, pacer, previous, previous_last).await?;
            }
            progress::write(store, &definition.name, progress).await?;
            return Err(Stop::Superseded);
        }
        let page_options = ListOptions {
            revision: None,
            start_after: read_after.clone(),
            limit: Some(options.page_limit()),
            count_remaining: false,
            ..ListOptions::default()
        };
        let page = store.list(&prefix, page_options).await?;
        let last = page.items.last().map(|kv| kv.key.clone());
        let mut old = Vec::new();
        for kv in page.items {
            let api_version = rewrite::stored_api_version(&kv.value).unwrap_or_default();
            let version = api_version.strip_prefix(&group_prefix).unwrap_or(&api_version);
            match progress.objects_per_version.get_mut(version) {
                Some(count) => *count += 1,
                None => {
                    progress.objects_per_version.insert(version.to_string(), 1);
                }
            }
            if api_version != desired.as_str() {
                old.push(kv);
            }
        }
        progress.found_old += old.len() as u64;
        let converted = match old.is_empty() {
            true => None,
            false => Some(rewrite::Converted::new(definition, old).map_err(Stop::Failed)?),
        };
        let finished = match writing.take() {
            Some((previous, previous_last)) => {
                finish_page(store, definition, progress, pacer, previous, previous_last).await?;
                true
            }
            None => false,
        };
        let started = match converted {
            Some(converted) => Some(converted.start(store).await),
            None => None,
        };
        writing = Some((started, last.clone()));
        if finished {
            progress.last_error = None;
            if saved.elapsed() >= SAVE_EVERY {
                progress::write(store, &definition.name, progress).await?;
                saved = Instant::now();
            }
            report(progress);
        }
        if last.is_some() {
            read_after = last;
        }
        if !page.more {
            break;
        }
    }
    if let Some((previous, previous_last)) = writing.take() {
        finish_page(store, definition, progress, pacer, previous, previous_last).await?;
    }
    progress.continue_after = None;
    progress.last_error = None;
    progress.finished_at = Some(crate::core::time::now_rfc3339());
    if progress.found_old == 0 {
        progress.state = State::Done;
    }
    Ok(())
}

/// Waits for a page's writes (and retries), counts them and paces the next page.
async fn finish_page(
    store: &Backend,
    definition: &Definition,
    progress: &mut Progress,
    pacer: &mut Pacer,
    write: Option<rewrite::PageWrite<'_>>,
    last: Option<String>,
) -> Result<(), Stop> {
    if let Some(write) = write {
        let outcome = write.finish(store, definition).await.map_err(Stop::Failed)?;
        progress.migrated += outcome.migrated;
        progress.yielded_to_writers += outcome.yielded;
        pacer.wait(outcome.migrated).await;
    }
    if last.is_some() {
        progress.continue_after = last;
    }
    Ok(())
}

/// Keeps the rewrite rate at or under `rate` objects per second.
struct Pacer {
    rate: u32,
    started: Instant,
    done: u64,
}

impl Pacer {
    fn new(rate: u32) -> Pacer {
        Pacer { rate, started: Instant::now(), done: 0 }
    }

    async fn wait(&mut self, rewritten: u64) {
        self.done += rewritten;
        if self.rate == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.done as f64 / f64::from(self.rate));
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(ahead).await;
        }
    }
}

#[cfg(test)]
mod tests;
