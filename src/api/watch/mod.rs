//! WATCH of a collection: initial state (when asked for), then every change as
//! newline-delimited `{"type","object"}` events, filtered by the call's selectors, until the
//! timeout or the client goes away.
//!
//! What a watch holds while its client is slow is bounded and mostly shared: the initial state
//! is the list's stored bytes (the store's own, not copies), each object rendered only when the
//! connection has taken the lines before it (`pipe`); live events wait in the store's bounded
//! queue as shared events. A watcher whose queue fills (its client stopped reading while
//! changes came) is ended at once, as Kubernetes' cacher terminates an unresponsive watcher:
//! the stream ends cleanly after what was already handed to the connection, and the client
//! watches again from the last resourceVersion it saw.

pub(crate) mod initial;
pub(crate) mod pipe;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use serde_json::{Value, json};

use super::Api;
use super::body::RespBody;
use super::call::Call;
use super::errors;
use super::list::{Filter, list_options_kind, wait_for_revision};
use super::negotiate::{Output, View, negotiate};
use super::objects;
use super::present;
use super::table::{self, Columns, IncludeObject};
use super::verbatim;
use crate::core::field::{FieldError, Path};
use crate::core::status::ApiError;
use crate::core::strconv;
use crate::definitions::registry::Served;
use crate::store::{self, EventType, ListOptions, Revision, Store};
use initial::InitialState;

/// How often a watch that allows bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// Where a watch's deadline stops when its timeout reaches past what an instant can hold
/// (`timeoutSeconds=9223372036854775807`): a hundred years.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

fn deadline_after(timeout: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(timeout).unwrap_or(now + FAR_FUTURE)
}

struct Params {
    timeout: Duration,
    bookmarks: bool,
    /// Send the current state first, as ADDED events.
    initial_events: bool,
    /// End the initial events with a bookmark annotated `k8s.io/initial-events-end`.
    initial_events_end: bool,
    /// Start after this revision (when not sending initial events).
    from: Option<Revision>,
}

fn params(api: &Api, call: &Call) -> Result<Params, ApiError> {
    let q = &call.query;
    // Booleans and integers as Kubernetes converts the query into its ListOptions.
    let bool_param = |name: &str| -> Result<Option<bool>, ApiError> { Ok(q.get(name).map(strconv::query_bool)) };
    super::list::list_options(call)?;
    let seconds = match q.get("timeoutSeconds") {
        Some(t) => strconv::parse_int(t).map_err(ApiError::bad_request)?,
        None => 0,
    };
    let timeout = if seconds == 0 {
        // A random time in [min, 2*min) spreads reconnects, as Kubernetes does.
        let min = api.options().min_request_timeout.as_secs_f64();
        let jitter = f64::from(uuid::Uuid::new_v4().as_bytes().first().copied().unwrap_or(0)) / 256.0;
        Duration::from_secs_f64(min * (1.0 + jitter))
    } else {
        // A negative timeout ends the watch at once, as Kubernetes' timer does.
        Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    };
    let bookmarks = bool_param("allowWatchBookmarks")?.unwrap_or(false);
    let mut send_initial = bool_param("sendInitialEvents")?;
    let rv = q.get("resourceVersion").unwrap_or_default();
    let mut rvm = q.get("resourceVersionMatch").unwrap_or_default();
    // `SetListOptionsDefaults` (WatchList is on in 1.36): a watch from no or any revision, with
    // neither option, is a watch that sends the initial state "not older than" it.
    if send_initial.is_none() && rvm.is_empty() && (rv.is_empty() || rv == "0") {
        send_initial = Some(true);
        rvm = "NotOlderThan";
    }
    validate_watch_options(send_initial, rvm, q.get("continue").unwrap_or_default())?;
    let (initial_events, from) = match send_initial {
        Some(true) => (true, None),
        Some(false) => (false, if rv.is_empty() { None } else { Some(watch_revision(rv)?) }),
        None => (false, Some(watch_revision(rv)?)),
    };
    // The state's end is marked by a bookmark, which only a watch that allows them gets.
    let initial_events_end = initial_events && bookmarks;
    Ok(Params { timeout, bookmarks, initial_events, initial_events_end, from })
}

/// `validateWatchOptions`: every problem in one 422, after the defaults are set.
fn validate_watch_options(send_initial: Option<bool>, rvm: &str, continue_token: &str) -> Result<(), ApiError> {
    let match_path = || Path::new("resourceVersionMatch");
    let mut errors = Vec::new();
    if send_initial.is_some() && rvm != "NotOlderThan" {
        errors.push(FieldError::forbidden(
            match_path(),
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !rvm.is_empty() {
        if send_initial.is_none() {
            errors.push(FieldError::forbidden(
                match_path(),
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if rvm != "NotOlderThan" {
            errors.push(FieldError::not_supported(match_path(), rvm, &["NotOlderThan"]));
        }
        if !continue_token.is_empty() {
            errors.push(FieldError::forbidden(
                match_path(),
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::invalid(&list_options_kind(), "", &errors)) }
}

/// A watch's `resourceVersion`, refused as kube-apiserver's watch cache refuses it: a 500
/// without a reason.
fn watch_revision(text: &str) -> Result<Revision, ApiError> {
    strconv::parse_uint(text).map_err(|e| ApiError::unknown(super::list::invalid_resource_version(text, &e)))
}

pub async fn watch(api: &Api, call: &Call) -> Result<Response<RespBody>, ApiError> {
    let output = negotiate(call.accept(), false)?;
    let filter = Filter::of(call)?;
    let params = params(api, call)?;
    let prefix = call.prefix();
    // The initial state as the store holds it: each object's bytes (shared with the store)
    // and revision, rendered only as the connection drains; shared with the watches that
    // started from the same list (`initial`).
    let mut initial = None;
    let start = if params.initial_events {
        let mut options = ListOptions::default();
        if let Some(rv) = call.query.get("resourceVersion").filter(|rv| !rv.is_empty()) {
            let revision = watch_revision(rv)?;
            if revision > 0 {
                wait_for_revision(api, call, revision).await?;
            }
            // "0" starts from any state, "N" from one not older than N: a cache may answer.
            options.freshness = store::Freshness::NotOlderThan(revision);
        }
        let page = api.store().list(&prefix, options).await.map_err(|e| errors::storage(e, call, ""))?;
        let objects = page.items.into_iter().map(|kv| (kv.revision, kv.value)).collect();
        let state = api.initial_states().share(&prefix, InitialState { revision: page.revision, objects });
        let start = state.revision;
        initial = Some(state);
        start
    } else {
        let from = params.from.unwrap_or_else(|| api.store().current_revision());
        if from > api.store().current_revision() {
            wait_for_revision(api, call, from).await?;
        }
        from
    };
    let (sink, body) = pipe::channel();
    // A resource taken over from the main apiserver expires what clients hold from there.
    let floor = if params.initial_events { None } else { api.below_floor(call, start) };
    let watched = match floor {
        Some(expired) => Err(expired),
        None => api.store().watch(&prefix, start).await,
    };
    let events = match watched {
        Ok(w) => Some(w),
        Err(store::Error::Expired { requested, oldest }) => {
            // Kubernetes answers 200 and sends the error as the first event.
            let status = ApiError::expired(format!("too old resource version: {requested} ({oldest})")).to_status();
            sink.try_send_now(encode_event("ERROR", &serde_json::to_value(status).unwrap_or_default()));
            None
        }
        Err(e) => return Err(errors::storage(e, call, "")),
    };
    if let Some(events) = events {
        // Of the request, the watch keeps what it serves and its table options, no more: a
        // watch lasts as long as its client likes (the headers would even keep the
        // connection's read buffer they were parsed from alive).
        let served = call.served.clone();
        let watcher = served.series.watcher();
        let stream = Stream {
            columns: None,
            include_object: IncludeObject::parse(call.query.get("includeObject")).unwrap_or(IncludeObject::Metadata),
            no_headers: call.query.get("noHeaders").is_some_and(|v| v == "true"),
            served,
            output,
            filter,
            sink,
            last: start,
            deadline: deadline_after(params.timeout),
            store: api.store().clone(),
            headers_sent: false,
            catalog: api.catalog_changes(),
            _watcher: watcher,
        };
        tokio::spawn(stream.run(events, initial, params));
    }
    let mut response = Response::new(body);
    response.extensions_mut().insert(super::body::Streamed);
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    Ok(response)
}

/// An event's line: rendered whole, or in pieces that share the stored object's bytes.
enum Line {
    Rendered(Vec<u8>),
    Pieces(Vec<Bytes>),
}

impl Line {
    fn len(&self) -> usize {
        match self {
            Line::Rendered(line) => line.len(),
            Line::Pieces(pieces) => pieces.iter().map(Bytes::len).sum(),
        }
    }
}

/// Stored objects at least this long are sent as slices of their stored bytes (a stalled
/// watch then holds references to the store's copy, not one of its own); shorter ones are
/// copied into one line, which costs less than the frames of its pieces.
const SHARED_FROM_BYTES: usize = 4 << 10;

/// The line of an unfiltered plain-object event written from the stored bytes, when they
/// read back unchanged (`verbatim`): what `encode_event` writes for the object read from them.
fn verbatim_line(served: &Served, event: &store::Event) -> Option<Line> {
    let (kind, opening): (&str, &'static [u8]) = match event.kind {
        EventType::Added => ("ADDED", b"{\"type\":\"ADDED\",\"object\":"),
        EventType::Modified => ("MODIFIED", b"{\"type\":\"MODIFIED\",\"object\":"),
        EventType::Deleted => ("DELETED", b"{\"type\":\"DELETED\",\"object\":"),
    };
    const CLOSING: &[u8] = b"}\n";
    let (definition, version) = (&served.definition, &served.version);
    if event.value.len() >= SHARED_FROM_BYTES {
        let object = verbatim::render_shared(definition, version, &event.value, event.revision)?;
        let pieces = [opening.into(), object.head, object.splice.into(), object.tail, CLOSING.into()];
        return Some(Line::Pieces(pieces.into_iter().filter(|piece: &Bytes| !piece.is_empty()).collect()));
    }
    // Room for the framing and the spliced resourceVersion up front: a stalled watch holds
    // its line, which must not have grown past its first reservation (and doubled).
    let mut line = Vec::with_capacity(event.value.len() + VERBATIM_FRAMING_BYTES);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    if !verbatim::render(definition, version, &event.value, event.revision, &mut line) {
        return None;
    }
    line.extend_from_slice(CLOSING);
    Some(Line::Rendered(line))
}

/// What a verbatim event line adds to the stored bytes, at most: `{"type":"MODIFIED","object":`,
/// what `verbatim::render` reserves beyond the stored bytes (48: a spliced
/// `,"resourceVersion":"N"` takes at most 42) and `}` with its newline.
const VERBATIM_FRAMING_BYTES: usize = 28 + 48 + 2;

/// `{"type":…,"object":…}` in the order of Go's `WatchEvent` fields, as kube-apiserver writes it.
fn encode_event(kind: &str, object: &Value) -> Vec<u8> {
    let mut line = b"{\"type\":".to_vec();
    line.extend_from_slice(&crate::core::json::to_vec(&json!(kind)).unwrap_or_default());
    line.extend_from_slice(b",\"object\":");
    line.extend_from_slice(&crate::core::json::to_vec(object).unwrap_or_default());
    line.extend_from_slice(b"}\n");
    line
}

/// One running watch.
struct Stream {
    /// The resource and version watched.
    served: Served,
    /// A table watch's `includeObject` and `noHeaders`.
    include_object: IncludeObject,
    no_headers: bool,
    output: Output,
    filter: Filter,
    /// The version's printer columns, built for the first event of a table watch (1.3 KiB that
    /// every other watch, open for as long as its client likes, would keep for nothing).
    columns: Option<Columns>,
    sink: pipe::Sink,
    /// The revision the watcher is known to have seen everything up to.
    last: Revision,
    /// When the watch ends, whatever it is doing.
    deadline: tokio::time::Instant,
    store: crate::store::Backend,
    /// Table watches carry the column definitions in their first event only, as Kubernetes'
    /// watch encoder does.
    headers_sent: bool,
    /// The served definitions: the watch ends when its own is no longer served as it was.
    catalog: tokio::sync::watch::Receiver<std::sync::Arc<super::Catalog>>,
    /// Counts the watch in `apiserver_registered_watchers` while it runs.
    _watcher: crate::metrics::requests::Watcher,
}

impl Stream {
    async fn run(mut self, mut events: store::Watch, initial: Option<Arc<InitialState>>, params: Params) {
        let deadline = tokio::time::sleep_until(self.deadline);
        tokio::pin!(deadline);
        // The shared state is let go once written (by its last watch).
        if let Some(initial) = initial {
            for (revision, value) in &initial.objects {
                let (revision, value) = (*revision, value.clone());
                let event = store::Event { kind: EventType::Added, key: String::new(), revision, value, prev: None };
                if !self.deliver(&event, &events).await {
                    return;
                }
            }
        }
        if params.initial_events_end {
            let bookmark = self.bookmark(true);
            if !self.send_raw("BOOKMARK", &bookmark, &events).await {
                return;
            }
        }
        let mut ticker = tokio::time::interval(BOOKMARK_INTERVAL);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = self.sink.closed() => return,
                Ok(()) = self.catalog.changed() => {
                    if !self.still_served() { return; }
                }
                _ = ticker.tick(), if params.bookmarks => {
                    // Read the revision first: if the watch is idle after that, it has seen
                    // every event up to it.
                    let current = self.store.current_revision();
                    if events.is_idle() {
                        self.last = self.last.max(current);
                    }
                    let bookmark = self.bookmark(false);
                    if !self.send_raw("BOOKMARK", &bookmark, &events).await { return; }
                }
                event = events.next() => {
                    let Some(event) = event else { return };
                    self.last = event.revision;
                    if !self.deliver(&event, &events).await { return; }
                }
            }
        }
    }

    /// Whether the watched resource is served by the very definition it was when the watch
    /// began. When not, the watch ends cleanly, as Kubernetes ends every watch of a
    /// definition whose spec changed (its storage is torn down): clients start again, and
    /// see the resource as it is now served, or a 404.
    fn still_served(&mut self) -> bool {
        let catalog = self.catalog.borrow_and_update();
        let (definition, version) = (&self.served.definition, &self.served.version);
        catalog
            .registry
            .lookup(&definition.group, &version.name, &definition.plural)
            .is_some_and(|now| std::sync::Arc::ptr_eq(&now.definition, definition))
    }

    /// Sends an event if it concerns the watcher's selection. An object that enters the
    /// selection is reported as added; one that leaves it as deleted, carrying its previous
    /// content (the last the watcher was entitled to see) at the event's resourceVersion, as
    /// k8s.io/apiserver's cache watcher and etcd3 watcher both send it.
    async fn deliver(&mut self, event: &store::Event, events: &store::Watch) -> bool {
        // Room in the budget before the line is rendered: a watch whose connection takes
        // nothing holds no line beyond its budget (the event stays shared until then).
        let expected = event.value.len() + VERBATIM_FRAMING_BYTES;
        let Some(room) = self.unless_ended(self.sink.room(expected), events).await else { return false };
        // Rendering and handing over the line, on the heap: a watch whose client stopped
        // reading waits above, and its task keeps room only for that wait (~1.4 KiB less
        // for each such watch, at one allocation per event sent).
        Box::pin(self.deliver_in(room, event, events)).await
    }

    /// [`Stream::deliver`], once the connection has `room` for the event's line.
    async fn deliver_in(&mut self, room: pipe::Room, event: &store::Event, events: &store::Watch) -> bool {
        if self.filter.is_empty()
            && self.output.view == View::Object
            && let Some(line) = verbatim_line(&self.served, event)
        {
            return self.send_line(Some(room), line, events).await;
        }
        // An event that cannot be shown (its conversion webhook failed) ends the watch, as in
        // Kubernetes: skipping it would leave the watcher's cache silently stale, while a
        // closed watch makes it resume from its last resourceVersion.
        let object = match present::from_storage_as(&self.served, &event.value, event.revision) {
            Ok(object) => object,
            Err(e) => return self.give_up(&e),
        };
        let now = self.filter.matches(&object);
        let previous = match (&event.prev, event.kind) {
            (Some(prev), EventType::Modified) if !self.filter.is_empty() => {
                match present::from_storage_as(&self.served, prev, event.revision) {
                    Ok(previous) => Some(previous),
                    Err(e) => return self.give_up(&e),
                }
            }
            _ => None,
        };
        let before = previous.as_ref().map_or(now, |previous| self.filter.matches(previous));
        let (kind, object) = match (event.kind, before, now) {
            (EventType::Added, _, true) => ("ADDED", &object),
            (EventType::Deleted, _, true) => ("DELETED", &object),
            (EventType::Modified, true, true) => ("MODIFIED", &object),
            (EventType::Modified, false, true) => ("ADDED", &object),
            (EventType::Modified, true, false) => ("DELETED", previous.as_ref().unwrap_or(&object)),
            _ => return true,
        };
        self.send(Some(room), kind, object, events).await
    }

    /// Logs why an event could not be shown; the watch ends.
    fn give_up(&self, error: &ApiError) -> bool {
        let d = &self.served.definition;
        tracing::warn!(resource = %d.name, error = %error.message, "watch ended: an event could not be encoded");
        false
    }

    fn bookmark(&self, initial_events_end: bool) -> Value {
        // An empty object of the resource with only its resourceVersion set: since Kubernetes
        // 1.34 a zero creationTimestamp is omitted (omitzero), not written as null.
        let mut metadata = json!({"resourceVersion": self.last.to_string()});
        if initial_events_end {
            crate::api::objects::put(&mut metadata, "annotations", json!({"k8s.io/initial-events-end": "true"}));
        }
        let d = &self.served.definition;
        let api_version = crate::core::gvr::join_api_version(&d.group, &self.served.version.name);
        json!({"kind": d.kind, "apiVersion": api_version, "metadata": metadata})
    }

    async fn send(&mut self, room: Option<pipe::Room>, kind: &str, object: &Value, events: &store::Watch) -> bool {
        let rendered = match self.output.view {
            View::Object => object.clone(),
            View::Metadata(v) => table::partial_metadata(object, v),
            View::Table(v) => {
                let include = self.include_object;
                let rv = objects::resource_version(object).to_string();
                let no_headers = std::mem::replace(&mut self.headers_sent, true) || self.no_headers;
                let version = &self.served.version;
                let columns = self.columns.get_or_insert_with(|| Columns::for_version(version));
                table::build(
                    v,
                    columns,
                    std::slice::from_ref(object),
                    json!({"resourceVersion": rv}),
                    include,
                    no_headers,
                )
            }
        };
        self.send_line(room, Line::Rendered(encode_event(kind, &rendered)), events).await
    }

    /// Sends a bookmark or the like, waiting for room: on the heap, as `deliver` renders (a
    /// watch holds room for its wait for the next event, not for this).
    async fn send_raw(&self, kind: &str, object: &Value, events: &store::Watch) -> bool {
        Box::pin(self.send_line(None, Line::Rendered(encode_event(kind, object)), events)).await
    }

    /// Hands an event to the connection once it has room (`pipe`): in `room` taken before it
    /// was rendered, or in room waited for now.
    async fn send_line(&self, room: Option<pipe::Room>, line: Line, events: &store::Watch) -> bool {
        self.served.series.watch_event(line.len());
        let sent = async {
            let room = match room {
                Some(room) => room,
                None => self.sink.room(line.len()).await?,
            };
            let sent = match line {
                Line::Rendered(line) => self.sink.send_in(room, line).await,
                Line::Pieces(pieces) => self.sink.send_pieces_in(room, pieces).await,
            };
            sent.then_some(())
        };
        self.unless_ended(sent, events).await.is_some()
    }

    /// Waits for `work` (room in the budget, or a line handed over). A client that stops
    /// reading blocks only this task: until the watch's deadline, or until the store dropped
    /// the watcher because events kept coming meanwhile (its queue filled), which ends the
    /// watch at once (`None`).
    async fn unless_ended<T>(&self, work: impl Future<Output = Option<T>>, events: &store::Watch) -> Option<T> {
        tokio::select! {
            // What the connection has room for goes without polling the rest.
            biased;
            done = work => done,
            () = tokio::time::sleep_until(self.deadline) => None,
            () = events.fell_behind() => {
                let d = &self.served.definition;
                tracing::info!(group = %d.group, resource = %d.plural, "forcing watcher close due to unresponsiveness");
                self.served.series.watcher_terminated();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
