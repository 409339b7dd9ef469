//! A handback: the resource served by the main apiserver again. Writes are frozen (the same
//! policy, with a match condition that lets this server's own user through, so that it can
//! write the objects back), the APIServices are given back to kube-aggregator (local, with the
//! automanaged label), our objects are written into the main apiserver by name (an update of
//! its old copy, which keeps the uid, or a create, which cannot: those are reported), its
//! copies we no longer hold are deleted, and the freeze is lifted. Until the objects are
//! written, reads through the main apiserver show its old copies (writes stay refused).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cluster::{Answer, Cluster, object_path};
use super::record::{self, Phase};
use super::{Error, Progress, Report, copy, freeze, json, say, switch};
use crate::definitions::Definition;
use crate::store::{Backend, ListOptions, Store, key};

/// This server's user name at the main apiserver (a SelfSubjectReview).
async fn own_user(cluster: &Cluster) -> Result<String, Error> {
    let path = object_path("authentication.k8s.io", "v1", None, "selfsubjectreviews", "");
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    match cluster.create("asking the main apiserver who this server is", &path, &review).await? {
        Answer::Ok(v) => json::at(&v, "/status/userInfo/username")
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Error::Cluster("the SelfSubjectReview has no user name".into())),
        other => {
            Err(Cluster::failure("asking the main apiserver who this server is (SelfSubjectReview)", &path, other))
        }
    }
}

fn path_of(definition: &Definition, object: &Value, subresource: &str) -> String {
    let namespace = json::at(object, "/metadata/namespace").as_str();
    let name = json::at(object, "/metadata/name").as_str().unwrap_or_default();
    let path = object_path(&definition.group, &definition.storage.name, namespace, &definition.plural, name);
    if subresource.is_empty() { path } else { format!("{path}/{subresource}") }
}

/// Writes one of our objects over the main apiserver's copy (or creates it); returns a note
/// when its uid could not be kept.
async fn write_back(cluster: &Cluster, definition: &Definition, mut object: Value) -> Result<Option<String>, Error> {
    let name = format!(
        "{}/{}",
        json::at(&object, "/metadata/namespace").as_str().unwrap_or_default(),
        json::at(&object, "/metadata/name").as_str().unwrap_or_default()
    );
    let path = path_of(definition, &object, "");
    let mut note = None;
    let written = match cluster.get("reading the main apiserver's copy", &path).await? {
        Some(theirs) if json::at(&theirs, "/metadata/uid") == json::at(&object, "/metadata/uid") => {
            json::set(
                &mut object,
                &["metadata", "resourceVersion"],
                json::at(&theirs, "/metadata/resourceVersion").clone(),
            );
            cluster.update("writing an object back", &path, &object).await?
        }
        Some(theirs) => {
            // A different object of that name: it goes, ours comes back under a new uid.
            delete_copy(cluster, definition, &theirs).await?;
            note = Some(format!("{name}: written back with a new uid (another object had its name)"));
            create(cluster, definition, &object).await?
        }
        None => {
            note = Some(format!("{name}: written back with a new uid"));
            create(cluster, definition, &object).await?
        }
    };
    if object.get("status").is_some() && written.get("status") != object.get("status") {
        let mut status = written;
        json::set(&mut status, &["status"], json::at(&object, "/status").clone());
        cluster.update("writing an object's status back", &path_of(definition, &object, "status"), &status).await?;
    }
    Ok(note)
}

async fn create(cluster: &Cluster, definition: &Definition, object: &Value) -> Result<Value, Error> {
    let mut body = object.clone();
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"] {
            meta.remove(field);
        }
    }
    let namespace = json::at(object, "/metadata/namespace").as_str();
    let path = object_path(&definition.group, &definition.storage.name, namespace, &definition.plural, "");
    match cluster.create("creating an object in the main apiserver", &path, &body).await? {
        Answer::Ok(v) => Ok(v),
        other => Err(Cluster::failure("creating an object in the main apiserver", &path, other)),
    }
}

/// Deletes a copy of the main apiserver's, its finalizers cleared first.
async fn delete_copy(cluster: &Cluster, definition: &Definition, theirs: &Value) -> Result<(), Error> {
    let path = path_of(definition, theirs, "");
    if json::at(theirs, "/metadata/finalizers").as_array().is_some_and(|f| !f.is_empty()) {
        let mut cleared = theirs.clone();
        json::set(&mut cleared, &["metadata", "finalizers"], json!([]));
        cluster.update("clearing the finalizers of a stale copy", &path, &cleared).await?;
    }
    cluster.delete("deleting a stale copy", &path).await
}

pub async fn run(
    store: &Backend,
    cluster: &Cluster,
    definition: &Definition,
    wait: Duration,
    progress: &Progress,
) -> Result<Report, Error> {
    let name = &definition.name;
    let Some((mut record, _)) = record::read(store, name).await? else {
        return Err(Error::Refused(format!("{name} was not taken over by this server")));
    };
    if !matches!(record.phase, Phase::Done | Phase::Switched) {
        return Err(Error::Refused(format!("{name} is not taken over (its takeover is in phase {:?})", record.phase)));
    }
    let started = Instant::now();
    let user = own_user(cluster).await?;
    say(progress, format!("{name}: freezing writes (except this server's, as {user})")).await;
    freeze::freeze_except(cluster, definition, &user).await?;
    say(progress, format!("{name}: giving the APIServices back to kube-aggregator")).await;
    switch::give_back(cluster, definition).await?;
    switch::wait_reached(cluster, definition, record.floor, false, wait).await?;
    say(progress, format!("{name}: writing the objects back")).await;
    let prefix = key::resource_prefix(&definition.group, &definition.plural);
    let mut notes = Vec::new();
    let mut ours = std::collections::HashSet::new();
    let (mut objects, mut bytes) = (0u64, 0u64);
    let mut start_after = None;
    let mut revision = None;
    loop {
        let options = ListOptions {
            revision,
            start_after: start_after.clone(),
            limit: Some(copy::PAGE),
            ..ListOptions::default()
        };
        let page = store.list(&prefix, options).await.map_err(|e| Error::Store(e.to_string()))?;
        revision = Some(page.revision);
        let mut decoded = Vec::with_capacity(page.items.len());
        for kv in &page.items {
            let mut object: Value =
                crate::core::nesting::from_slice(&kv.value).map_err(|e| Error::Store(format!("{}: {e}", kv.key)))?;
            json::set(&mut object, &["apiVersion"], json!(format!("{}/{}", definition.group, definition.storage.name)));
            bytes += kv.value.len() as u64;
            ours.insert(key::relative_to_resource(&kv.key).to_string());
            decoded.push(object);
        }
        let writes = decoded.into_iter().map(|o| write_back(cluster, definition, o));
        for note in futures_util::future::join_all(writes).await {
            objects += 1;
            notes.extend(note?);
        }
        match page.items.last() {
            Some(last) if page.more => start_after = Some(last.key.clone()),
            _ => break,
        }
    }
    // The main apiserver's copies of objects deleted while we served them go too.
    let collection = object_path(&definition.group, &definition.storage.name, None, &definition.plural, "");
    let mut token: Option<String> = None;
    loop {
        let page =
            cluster.list_page("listing the main apiserver's copies", &collection, copy::PAGE, token.as_deref()).await?;
        for theirs in json::at(&page, "/items").as_array().into_iter().flatten() {
            let namespace = json::at(theirs, "/metadata/namespace").as_str();
            let name = json::at(theirs, "/metadata/name").as_str().unwrap_or_default();
            let key = key::object_key(&definition.group, &definition.plural, namespace, name);
            if !ours.contains(key::relative_to_resource(&key)) {
                delete_copy(cluster, definition, theirs).await?;
            }
        }
        token = json::at(&page, "/metadata/continue").as_str().filter(|c| !c.is_empty()).map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    say(progress, format!("{name}: lifting the freeze")).await;
    freeze::lift(cluster, definition).await?;
    copy::clear(store, definition).await?;
    record.phase = Phase::HandedBack;
    record::write(store, name, &record).await?;
    let freeze_seconds = started.elapsed().as_secs_f64();
    Ok(Report {
        name: name.clone(),
        dry_run: false,
        objects,
        bytes,
        freeze_seconds,
        objects_per_second: objects as f64 / freeze_seconds.max(0.001),
        main_revision: 0,
        api_services: switch::names(definition),
        notes,
    })
}
