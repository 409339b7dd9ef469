//! What the etcd backend's cache costs per object, for `hack/bench-etcd.sh`: N objects of B
//! bytes are written to etcd under a fresh prefix before the store opens (so that its history
//! window holds none of them), the process's resident memory is read, one get makes the store
//! cache the resource, and the memory is read again once every object is cached. Prints the
//! resident bytes per cached object beside its stored bytes (key and value) and beside what
//! the cache counts for it (`ENTRY_OVERHEAD` over the stored bytes).
//!
//! Usage: etcd_cache_memory --endpoint http://127.0.0.1:2379 [--objects N] [--value-bytes B]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::time::Duration;

use crd_apiserver::store::Store;
use crd_apiserver::store::etcd::{ENTRY_OVERHEAD, EtcdOptions, EtcdStore};
use etcd_client::{Client, Txn, TxnOp};

fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[tokio::main]
async fn main() {
    let (mut endpoint, mut objects, mut value_bytes) = ("http://127.0.0.1:2379".to_string(), 20_000usize, 1400usize);
    let argv: Vec<String> = std::env::args().collect();
    for pair in argv[1..].chunks(2) {
        match pair[0].as_str() {
            "--endpoint" => endpoint = pair[1].clone(),
            "--objects" => objects = pair[1].parse().unwrap(),
            "--value-bytes" => value_bytes = pair[1].parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    let prefix = format!("/cache-memory-{}", std::process::id());
    let key = |i: usize| format!("/stable.example.com/crontabs/default/object-{i:07}");
    let client = Client::connect([endpoint.as_str()], None).await.unwrap();
    let value = vec![b'x'; value_bytes];
    for chunk in (0..objects).collect::<Vec<_>>().chunks(100) {
        let ops: Vec<TxnOp> =
            chunk.iter().map(|i| TxnOp::put(format!("{prefix}{}", key(*i)), value.clone(), None)).collect();
        client.kv_client().txn(Txn::new().and_then(ops)).await.unwrap();
    }
    let options = EtcdOptions {
        servers: vec![endpoint],
        prefix: prefix.clone(),
        compaction_interval: Duration::ZERO,
        ..EtcdOptions::default()
    };
    let store = EtcdStore::open(options).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = resident_bytes();
    store.get(&key(0)).await.unwrap();
    while store.cache_stats().cache.objects < objects {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = resident_bytes();
    let stats = store.cache_stats().cache;
    let stored = key(0).len() - "/stable.example.com/crontabs/".len() + value_bytes;
    let per_object = after.saturating_sub(before) as f64 / objects as f64;
    println!(
        "cache    objects={objects} stored={stored}B/object resident={per_object:.0}B/object (stored+{:.0}) counted={}B/object (stored+{ENTRY_OVERHEAD})",
        per_object - stored as f64,
        stats.bytes / stats.objects.max(1),
    );
    store.close();
    client.kv_client().delete(prefix, Some(etcd_client::DeleteOptions::new().with_prefix())).await.unwrap();
}
