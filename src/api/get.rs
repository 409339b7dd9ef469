//! GET of one object.

use http::{Response, StatusCode};

use super::Api;
use super::body::RespBody;
use super::call::{Call, Subresource};
use super::errors;
use super::negotiate::negotiate;
use super::present;
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
    let object = present::from_storage(call, &stored.value, stored.revision)?;
    present::object_response(call, output, StatusCode::OK, object)
}
