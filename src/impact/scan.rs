//! The pass over a definition's stored objects: page by page from the store (memory stays
//! that of a page and the bounded totals, whatever the number of objects), each page decoded,
//! converted and evaluated (`evaluate`, `convert`), progress reported after every page, a stop
//! asked for (`cancel`) honoured between pages. Runs on the caller's thread, which waits for
//! the store on `runtime`: a thread of its own, below the requests' priority.
//!
//! Reads only: nothing is ever written to the store.

use std::sync::atomic::{AtomicBool, Ordering};

use super::convert::{self, Pacer, WebhookPace};
use super::evaluate::{self, Forms, Totals, VersionPlan};
use super::tally::Limits;
use crate::store::{Backend, ListOptions, Store, key};

/// Objects read per page.
pub const PAGE_SIZE: usize = 500;

/// How a scan goes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub page_size: usize,
    pub limits: Limits,
    pub webhook: WebhookPace,
}

impl Default for Options {
    fn default() -> Self {
        Options { page_size: PAGE_SIZE, limits: Limits::default(), webhook: WebhookPace::default() }
    }
}

/// Why a scan did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    #[error("the impact analysis was cancelled")]
    Cancelled,
    #[error("reading the stored objects failed: {0}")]
    Store(String),
}

/// Scans every stored object of the definition `forms` name. `progress` sees the number of
/// objects looked at after every page.
pub fn run(
    store: &Backend,
    runtime: &tokio::runtime::Handle,
    forms: &Forms,
    options: &Options,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Totals, Stop> {
    let plans = VersionPlan::of(forms);
    let mut totals = Totals::new(&plans);
    let (storage, served) = evaluate::targets(forms, &plans);
    let prefix = key::resource_prefix(&forms.candidate.group, &forms.candidate.plural);
    let mut pacer = Pacer::new(options.webhook);
    let mut after: Option<String> = None;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Stop::Cancelled);
        }
        let page_options =
            ListOptions { start_after: after.take(), limit: Some(options.page_size.max(1)), ..ListOptions::default() };
        let page = runtime.block_on(store.list(&prefix, page_options)).map_err(|e| Stop::Store(e.to_string()))?;
        after = page.items.last().map(|kv| kv.key.clone());
        let decoded = evaluate::decode(forms, &page.items, &mut totals, &options.limits);
        drop(page.items);
        let conversions = convert::page(&forms.candidate, &storage, &served, &decoded, &mut pacer);
        evaluate::evaluate(forms, &plans, &decoded, &conversions, &mut totals, &options.limits);
        progress(totals.objects);
        if !page.more || after.is_none() {
            return Ok(totals);
        }
    }
}
