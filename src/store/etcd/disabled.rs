//! The etcd backend of a build without the `etcd` feature: a type with no values, so that
//! `Backend::Etcd` exists in every build, and an `open` that explains how to get the backend.

use bytes::Bytes;

use super::EtcdOptions;
use crate::store::{Error, ListOptions, ListResult, Result, Revision, Store, Versioned, Watch};

const NO_ETCD: &str = "this build of crd-apiserver has no etcd backend: build it with `--features etcd` \
     (needs protoc), or use the sled backend";

/// Restoring into etcd fails in this build.
pub async fn restore(
    _options: &EtcdOptions,
    _header: &crate::store::backup::Header,
    _objects: impl Iterator<Item = std::result::Result<crate::store::backup::Entry, crate::store::backup::Error>>,
    _restore: crate::store::backup::RestoreOptions,
) -> std::result::Result<crate::store::backup::Restored, crate::store::backup::Error> {
    Err(Error::Backend(NO_ETCD.into()).into())
}

/// Never built: `open` always fails in this build.
#[derive(Clone)]
pub enum EtcdStore {}

impl EtcdStore {
    pub async fn open(_options: EtcdOptions) -> Result<EtcdStore> {
        Err(Error::Backend(NO_ETCD.into()))
    }

    pub fn close(&self) {
        match *self {}
    }

    pub async fn committed_revision(&self) -> Result<Revision> {
        match *self {}
    }

    pub fn leadership(&self) -> crate::store::leadership::Leadership {
        match *self {}
    }

    pub async fn advance_revision(&self, _at_least: Revision) -> Result<Revision> {
        match *self {}
    }
}

impl Store for EtcdStore {
    fn current_revision(&self) -> Revision {
        match *self {}
    }

    async fn wait_for_revision(&self, _revision: Revision, _limit: std::time::Duration) -> bool {
        match *self {}
    }

    async fn get(&self, _key: &str) -> Result<Option<Versioned>> {
        match *self {}
    }

    async fn list(&self, _prefix: &str, _options: ListOptions) -> Result<ListResult> {
        match *self {}
    }

    async fn create(&self, _key: &str, _value: Bytes) -> Result<Revision> {
        match *self {}
    }

    async fn update(&self, _key: &str, _expected: Revision, _value: Bytes) -> Result<Revision> {
        match *self {}
    }

    async fn delete(&self, _key: &str, _expected: Option<Revision>) -> Result<(Revision, Bytes)> {
        match *self {}
    }

    async fn watch(&self, _prefix: &str, _from: Revision) -> Result<Watch> {
        match *self {}
    }

    fn health(&self) -> Result<()> {
        match *self {}
    }

    async fn count(&self, _prefix: &str) -> Result<u64> {
        match *self {}
    }

    fn size_on_disk(&self) -> Option<u64> {
        match *self {}
    }
}
