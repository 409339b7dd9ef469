//! Work spread over the machine's cores: a parallel map that keeps item order, for the
//! CPU-heavy steps of start-up (loading definitions, building documents).
//!
//! Owns threads for the duration of one call only; no I/O.

/// `work` applied to every item on as many threads as there are cores; results in item order.
pub fn map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len());
    if threads <= 1 {
        return items.iter().map(work).collect();
    }
    on_threads(items, threads, None, work)
}

/// [`map`] on threads of their own (at least one, even for one item) with `stack_bytes` of
/// stack each: a worker takes item after item, so that work needing a deep stack starts one
/// thread per core, not one per item. `None` when no thread could be started.
pub fn map_with_stack<T: Sync, R: Send>(
    items: &[T],
    stack_bytes: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Option<Vec<R>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len()).max(1);
    let done = on_threads(items, threads, Some(stack_bytes), work);
    (done.len() == items.len()).then_some(done)
}

fn on_threads<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    stack_bytes: Option<usize>,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .filter_map(|_| {
                let mut builder = std::thread::Builder::new();
                if let Some(bytes) = stack_bytes {
                    builder = builder.stack_size(bytes);
                }
                builder
                    .spawn_scoped(scope, || {
                        let mut out = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(item) = items.get(i) else { break };
                            out.push((i, work(item)));
                        }
                        out
                    })
                    .ok()
            })
            .collect();
        // A worker's panic is the caller's, as it would be without threads.
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_item_order() {
        let items: Vec<u64> = (0..1000).collect();
        assert_eq!(super::map(&items, |i| i * 2), items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(super::map(&Vec::<u8>::new(), |_| 0).is_empty());
        assert_eq!(super::map_with_stack(&items, 1 << 20, |i| i + 1).unwrap(), (1..1001).collect::<Vec<_>>());
        assert_eq!(super::map_with_stack(&[7u8], 1 << 20, |i| *i).unwrap(), [7]);
    }
}
