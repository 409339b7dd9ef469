//! Background work's place among the server's threads: a thread that does long CPU work off
//! the request path (a reload's scan and compilation, an impact analysis) lowers its own
//! scheduling priority, so that on a busy machine requests go first.
//!
//! Owns one system call on the calling thread; nothing else.

/// How much background threads yield to the others (`nice(1)`'s scale, 0 to 19).
pub const BACKGROUND_NICENESS: i32 = 5;

/// Lowers the calling thread's priority to [`BACKGROUND_NICENESS`] (setpriority on its thread
/// id: that thread alone; the threads it starts afterwards inherit it).
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), BACKGROUND_NICENESS) {
        tracing::debug!(error = %e, "lowering a background thread's priority failed");
    }
}
