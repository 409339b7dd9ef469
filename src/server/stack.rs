//! The request path as one ordered chain of filters. Order matters; each layer says why it
//! sits where it does.

use std::sync::Arc;
use std::time::Duration;

use tower::ServiceBuilder;

use crate::auth::impersonation::Impersonation;

use super::filters::authn::Authentication;
use super::filters::authz::Authorization;
use super::filters::impersonation::ImpersonationFilter;
use super::filters::inflight::MaxInFlight;
use super::filters::log::RequestLog;
use super::filters::metrics::RequestMetrics;
use super::filters::panic::PanicGuard;
use super::filters::pretty::PrettyPrint;
use super::filters::request_info::RequestInfoFilter;
use super::filters::termination::Termination;
use super::filters::timeout::Timeout;
use super::filters::{FilterLayer, Next, endpoint};
use super::router::Router;

/// Settings of the chain.
pub struct StackConfig {
    pub authentication: Authentication,
    pub authorization: Authorization,
    pub max_read_only_in_flight: usize,
    pub max_mutating_in_flight: usize,
    pub request_timeout: Duration,
    /// Resource requests at least this slow are logged with their phases; zero: none.
    pub slow_request_threshold: Duration,
    pub lifecycle: super::shutdown::Lifecycle,
}

/// Builds the whole request path in front of the router.
pub fn build(config: StackConfig, router: Arc<Router>) -> Next {
    let routed = endpoint(move |request| {
        let router = router.clone();
        async move { router.route(request).await }
    });
    ServiceBuilder::new()
        // Outermost: gives every request its audit ID and logs it, whatever answers it below
        // (a panic's 500 included), as WithAuditInit and WithHTTPLogging wrap the chain.
        .layer(FilterLayer(RequestLog::new(config.slow_request_threshold)))
        // Indents the JSON documents of requests that ask for it, every error's included.
        .layer(FilterLayer(PrettyPrint))
        // Whatever goes wrong below becomes a 500, never a dropped connection.
        .layer(FilterLayer(PanicGuard))
        // Parse the path once; limits, authorization and routing read the result.
        .layer(FilterLayer(RequestInfoFilter))
        // Counts requests for the drain at shutdown (and refuses new ones then, when asked to)
        // before any work is spent on them.
        .layer(FilterLayer(Termination(config.lifecycle)))
        // Counts what reaches a handler, 429s and timeouts included; needs the request info.
        .layer(FilterLayer(RequestMetrics))
        // Shed load before spending work on identity.
        .layer(FilterLayer(MaxInFlight::new(config.max_read_only_in_flight, config.max_mutating_in_flight)))
        // Identity next: it also strips credential headers for everything after it.
        .layer(FilterLayer(config.authentication))
        // Who the request acts as, decided by the authorizer for the authenticated user.
        .layer(FilterLayer(ImpersonationFilter(Arc::new(Impersonation::new(config.authorization.chain.clone())))))
        // Decide with identity and request info in hand.
        .layer(FilterLayer(config.authorization))
        // Only admitted work is timed.
        .layer(FilterLayer(Timeout { limit: config.request_timeout }))
        .service(routed)
}
