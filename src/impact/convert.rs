//! A page of objects converted by the candidate's conversion into its storage version and each
//! of its served versions, as reading them through those versions would. With a conversion
//! webhook this is a dry run of the webhook: it is called (never its results stored) in
//! batches at a bounded rate, each call with its own timeout; a batch that fails is tried
//! object by object, once, so that every failure is told per object and nothing is retried
//! without end.
//!
//! Owns the batching and pacing of webhook calls; the conversion itself is
//! `api::write::convert_all_to_within`'s.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::evaluate::Decoded;
use crate::api::write;
use crate::definitions::conversion::Conversion;
use crate::definitions::{Definition, Version};

/// How the candidate's conversion webhook is called.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WebhookPace {
    /// Objects sent per second at most (0: no limit).
    pub rate: u32,
    /// Objects per ConversionReview.
    pub batch: usize,
    /// How long one call may take.
    pub timeout: Duration,
}

impl Default for WebhookPace {
    fn default() -> Self {
        WebhookPace { rate: 200, batch: 50, timeout: crate::conversion::webhook::CALL_TIMEOUT }
    }
}

/// One object in one target version.
#[derive(Debug, Clone, PartialEq)]
pub enum Converted {
    /// Already in it: the object as read.
    Same,
    Value(Value),
    /// The conversion's error.
    Failed(String),
}

impl Converted {
    /// The object in the target version (`read`: the object as read, for [`Converted::Same`]).
    pub fn value<'a>(&'a self, read: &'a Value) -> Option<&'a Value> {
        match self {
            Converted::Same => Some(read),
            Converted::Value(value) => Some(value),
            Converted::Failed(_) => None,
        }
    }
}

/// The page's objects in the candidate's storage version and in each served version.
#[derive(Debug, Default)]
pub struct PageConversions {
    pub storage: Vec<Converted>,
    /// By served version (in the scan's order), then by object.
    pub served: Vec<Vec<Converted>>,
}

/// Converts the objects of a page into the storage version and every served version.
pub fn page(
    definition: &Definition,
    storage: &Version,
    served: &[std::sync::Arc<Version>],
    objects: &[Decoded],
    pacer: &mut Pacer,
) -> PageConversions {
    PageConversions {
        storage: into_version(definition, storage, objects, pacer),
        served: served.iter().map(|v| into_version(definition, v, objects, pacer)).collect(),
    }
}

fn into_version(definition: &Definition, target: &Version, objects: &[Decoded], pacer: &mut Pacer) -> Vec<Converted> {
    let mut out: Vec<Converted> = objects
        .iter()
        .map(|o| if o.stored_version == target.name { Converted::Same } else { Converted::Failed(String::new()) })
        .collect();
    let pending: Vec<usize> = (0..objects.len()).filter(|i| out.get(*i) != Some(&Converted::Same)).collect();
    if pending.is_empty() {
        return out;
    }
    let webhook = matches!(definition.conversion, Conversion::Webhook(_));
    let batch = if webhook { pacer.pace.batch.max(1) } else { pending.len() };
    for chunk in pending.chunks(batch) {
        let values: Vec<Value> = chunk.iter().filter_map(|i| objects.get(*i)).map(|o| o.read.clone()).collect();
        if webhook {
            pacer.wait(values.len());
        }
        match write::convert_all_to_within(definition, values, target, pacer.pace.timeout) {
            Ok(converted) => {
                for (i, value) in chunk.iter().zip(converted) {
                    if let Some(slot) = out.get_mut(*i) {
                        *slot = Converted::Value(value);
                    }
                }
            }
            Err(e) if chunk.len() == 1 || !webhook => {
                for i in chunk {
                    if let Some(slot) = out.get_mut(*i) {
                        *slot = Converted::Failed(e.message.clone());
                    }
                }
            }
            Err(_) => {
                // Which objects the webhook fails on: each once more, alone.
                for i in chunk {
                    let Some(object) = objects.get(*i) else { continue };
                    pacer.wait(1);
                    let alone =
                        write::convert_all_to_within(definition, vec![object.read.clone()], target, pacer.pace.timeout);
                    let converted = match alone.map(|mut v| v.pop()) {
                        Ok(Some(value)) => Converted::Value(value),
                        Ok(None) => Converted::Failed("the conversion returned no object".into()),
                        Err(e) => Converted::Failed(e.message),
                    };
                    if let Some(slot) = out.get_mut(*i) {
                        *slot = converted;
                    }
                }
            }
        }
    }
    out
}

/// Keeps the objects sent to a webhook at or under a rate.
pub struct Pacer {
    pub pace: WebhookPace,
    started: Option<Instant>,
    sent: u64,
}

impl Pacer {
    pub fn new(pace: WebhookPace) -> Pacer {
        Pacer { pace, started: None, sent: 0 }
    }

    /// Waits until `objects` more may be sent.
    fn wait(&mut self, objects: usize) {
        let started = *self.started.get_or_insert_with(Instant::now);
        if self.pace.rate > 0 {
            let due = Duration::from_secs_f64(self.sent as f64 / f64::from(self.pace.rate));
            if let Some(ahead) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(ahead);
            }
        }
        self.sent += objects as u64;
    }
}
