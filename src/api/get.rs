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
use crate::store::Store;

pub async fn get(api: &Api, call: &Call) -> Result<Response<RespBody>, ApiError> {
    if call.subresource == Subresource::Scale {
        return super::scale::get(api, call).await;
    }
    let output = negotiate(call.accept(), false)?;
    let stored = api
        .store()
        .get(&call.key())
        .await
        .map_err(|e| errors::storage(e, call, &call.name))?
        .ok_or_else(|| ApiError::not_found(&call.resource(), &call.name))?;
    request_scope::end(Phase::Store);
    let response = present::stored_response(call, output, &stored.value, stored.revision);
    request_scope::end(Phase::Encode);
    response
}
