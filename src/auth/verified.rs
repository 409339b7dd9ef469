//! A memory of verified certificate chains. Verifying a chain costs about 90 µs (a signature
//! check), and the aggregator sends every request over the same connection with the same
//! certificate; so the outcome is remembered per chain for a minute (never past the leaf's
//! expiry), and forgotten whole when the trusted configuration is swapped (a rotated CA takes
//! effect at once).
//!
//! A remembered outcome is found by a cheap hash of the chain (lengths and signature bytes)
//! and used only when the stored chain is byte for byte the presented one: no digest is
//! computed per request, and a hash collision costs a verification, never a wrong answer.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustls_pki_types::CertificateDer;

/// How long a verified chain is trusted without checking again.
const VERIFIED_TTL: Duration = Duration::from_secs(60);
/// How long a refused chain stays refused without checking again.
const REFUSED_TTL: Duration = Duration::from_secs(10);
const CAPACITY: usize = 1024;
/// Bytes of each certificate's end (its signature) that the lookup hash reads.
const HASHED_TAIL: usize = 64;

/// The subject of a verified leaf: CN and every O.
pub type Subject = (String, Vec<String>);

struct Entry<S> {
    chain: Vec<CertificateDer<'static>>,
    expires: Instant,
    outcome: Result<S, String>,
}

struct State<T, S> {
    /// The configuration the entries were verified against. Held weakly: while it is held,
    /// a new configuration cannot be allocated at the same address.
    anchor: Weak<T>,
    entries: HashMap<u64, Entry<S>>,
}

/// Outcomes of verifying chains under an anchor of type `T`; `S` is what a success yields.
pub struct VerifiedChains<T, S = Subject> {
    state: Mutex<State<T, S>>,
}

impl<T, S> Default for VerifiedChains<T, S> {
    fn default() -> Self {
        VerifiedChains { state: Mutex::new(State { anchor: Weak::new(), entries: HashMap::new() }) }
    }
}

/// Where a chain is looked up: its shape and signatures, not a digest of every byte.
fn lookup_hash(chain: &[CertificateDer<'_>]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for cert in chain {
        let bytes: &[u8] = cert;
        bytes.len().hash(&mut hasher);
        bytes.get(bytes.len().saturating_sub(HASHED_TAIL)..).unwrap_or_default().hash(&mut hasher);
    }
    hasher.finish()
}

/// Seconds until the leaf's notAfter (zero when unreadable or past).
fn remaining_validity(leaf: &CertificateDer<'_>) -> Duration {
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(leaf) else {
        return Duration::ZERO;
    };
    let not_after = parsed.validity().not_after.timestamp();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default();
    Duration::from_secs(u64::try_from(not_after - now).unwrap_or_default())
}

impl<T, S: Clone> VerifiedChains<T, S> {
    /// The outcome of `verify` for `chain` under `anchor`, from memory when it is there.
    /// `verify` checks the chain and returns what a verified chain yields (the leaf's subject).
    pub fn check(
        &self,
        anchor: &Arc<T>,
        chain: &[CertificateDer<'static>],
        verify: impl FnOnce() -> Result<S, String>,
    ) -> Result<S, String> {
        let key = lookup_hash(chain);
        let now = Instant::now();
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if !std::ptr::eq(state.anchor.as_ptr(), Arc::as_ptr(anchor)) {
                state.anchor = Arc::downgrade(anchor);
                state.entries.clear();
            }
            if let Some(entry) = state.entries.get(&key).filter(|e| e.expires > now && e.chain == chain) {
                return entry.outcome.clone();
            }
        }
        let outcome = verify();
        let ttl = match (&outcome, chain.first()) {
            (Ok(_), Some(leaf)) => VERIFIED_TTL.min(remaining_validity(leaf)),
            _ => REFUSED_TTL,
        };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if std::ptr::eq(state.anchor.as_ptr(), Arc::as_ptr(anchor)) && !ttl.is_zero() {
            if state.entries.len() >= CAPACITY {
                state.entries.retain(|_, e| e.expires > now);
                if state.entries.len() >= CAPACITY {
                    state.entries.clear();
                }
            }
            let entry = Entry { chain: chain.to_vec(), expires: now + ttl, outcome: outcome.clone() };
            state.entries.insert(key, entry);
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn remembers_per_chain_and_forgets_on_a_new_anchor() {
        let cache: VerifiedChains<u8> = VerifiedChains::default();
        let first = Arc::new(1u8);
        let chain = [CertificateDer::from(vec![1, 2, 3])];
        let calls = Cell::new(0);
        let verify = || {
            calls.set(calls.get() + 1);
            Err::<Subject, _>("x509: certificate signed by unknown authority".to_string())
        };
        assert!(cache.check(&first, &chain, verify).is_err());
        assert!(cache.check(&first, &chain, verify).is_err());
        assert_eq!(calls.get(), 1, "the refusal is remembered");
        let other = [CertificateDer::from(vec![4])];
        assert!(cache.check(&first, &other, verify).is_err());
        assert_eq!(calls.get(), 2, "another chain is checked");
        let second = Arc::new(1u8);
        assert!(cache.check(&second, &chain, verify).is_err());
        assert_eq!(calls.get(), 3, "a new configuration checks again");
        // Same length and signature bytes, another certificate: never taken for the first.
        let mut forged = vec![9u8; 200];
        forged.extend_from_slice(&[7u8; HASHED_TAIL]);
        let mut genuine = vec![8u8; 200];
        genuine.extend_from_slice(&[7u8; HASHED_TAIL]);
        let (forged, genuine) = ([CertificateDer::from(forged)], [CertificateDer::from(genuine)]);
        assert_eq!(lookup_hash(&forged), lookup_hash(&genuine));
        let subject = |name: &str| ("cn".to_string(), vec![name.to_string()]);
        let named: VerifiedChains<u8> = VerifiedChains::default();
        assert_eq!(named.check(&second, &genuine, || Ok(subject("genuine"))).unwrap(), subject("genuine"));
        assert_eq!(named.check(&second, &forged, || Err("refused".into())), Err("refused".to_string()));
        assert_eq!(named.check(&second, &genuine, || Ok(subject("again"))).unwrap(), subject("again"));
    }
}
