//! GET of one object.

use http::Response;

use super::Api;
use super::body::RespBody;
use super::call::{Call, Subresource};
use super::errors;
use super::negotiate::negotiate;
use super::present;
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;
use crate::store::{Freshness, Store};

pub async fn get(api: &Api, call: &Call) -> Result<Response<RespBody>, ApiError> {
    if call.subresource == Subresource::Scale {
        return super::scale::get(api, call).await;
    }
    let output = negotiate(call.accept(), false)?;
    let freshness = freshness(api, call).await?;
    let stored = api
        .store()
        .get_fresh(&call.key(), freshness)
        .await
        .map_err(|e| errors::storage(e, call, &call.name))?
        .ok_or_else(|| ApiError::not_found(&call.resource(), &call.name))?;
    request_scope::end(Phase::Store);
    let response = present::stored_response(call, output, &stored.value, stored.revision);
    request_scope::end(Phase::Encode);
    response
}

/// How fresh the object must be, from `resourceVersion` as Kubernetes reads it for a get: none
/// is a consistent read, "0" any state, "N" a state not older than N (waiting for it briefly,
/// then 504 "Too large resource version"). A value that is not a revision is the 500 without a
/// reason kube-apiserver's watch cache answers.
async fn freshness(api: &Api, call: &Call) -> Result<Freshness, ApiError> {
    let Some(rv) = call.query.get("resourceVersion").filter(|rv| !rv.is_empty()) else {
        return Ok(Freshness::Consistent);
    };
    let revision = crate::core::strconv::parse_uint(rv)
        .map_err(|e| ApiError::unknown(super::list::invalid_resource_version(rv, &e)))?;
    if revision > 0 {
        super::list::wait_for_revision(api, call, revision).await?;
    }
    Ok(Freshness::NotOlderThan(revision))
}
