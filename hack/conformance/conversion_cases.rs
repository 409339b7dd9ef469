//! Conversion webhook cases: which objects a review carries, how a response is checked, and
//! how metadata is restored, through `crd_apiserver::conversion::review`.

use serde_json::Value;

use crate::Verdict;
use crd_apiserver::conversion::review;

pub fn conversion_webhook(case: &Value, _: &Value) -> Verdict {
    let expect = &case["expect"];
    match case["test"].as_str().unwrap_or_default() {
        "TestRestoreObjectMeta" => {
            let mut converted = case["converted"].clone();
            let result = review::restore_metadata(&case["original"], &mut converted);
            if result.is_err() != expect["error"].as_bool().unwrap_or(false) {
                return Verdict::Fail(format!("error expected: {}, got {result:?}", expect["error"]));
            }
            if result.is_ok() && converted != expect["converted_after"] {
                return Verdict::Fail(format!("converted {converted}"));
            }
            Verdict::Pass
        }
        "TestGetObjectsToConvert" => {
            let desired = case["desired_api_version"].as_str().unwrap_or_default();
            let object = &case["object"];
            let objects: Vec<Value> = match object.get("items") {
                Some(Value::Array(items)) => items.clone(),
                _ => vec![object.clone()],
            };
            let sent: Vec<Value> = review::to_convert(&objects, desired).iter().map(|i| objects[*i].clone()).collect();
            let expected = expect["objects_sent_to_webhook"].as_array().cloned().unwrap_or_default();
            if sent == expected { Verdict::Pass } else { Verdict::Fail(format!("sent {sent:?}")) }
        }
        "TestGetConvertedObjectsFromResponse" => {
            let response = &case["response"];
            // The Go test decodes into a typed review; untyped inputs have no review to check.
            let review_version = match response.get("__go_type__").and_then(Value::as_str) {
                Some("v1.ConversionReview") => "v1",
                Some("v1beta1.ConversionReview") => "v1beta1",
                _ => {
                    return if expect["error_contains"].as_str() == Some("unrecognized response type") {
                        Verdict::Pass
                    } else {
                        Verdict::Fail("untyped response".into())
                    };
                }
            };
            let mut response = response.clone();
            if let Value::Object(map) = &mut response {
                map.remove("__go_type__");
            }
            let uid = case["request_uid"].as_str().unwrap_or_default();
            match (review::converted_objects(review_version, uid, &response), expect["error_contains"].as_str()) {
                (Ok(objects), None) => {
                    let expected = expect["converted_objects"].as_array().cloned().unwrap_or_default();
                    if objects == expected { Verdict::Pass } else { Verdict::Fail(format!("objects {objects:?}")) }
                }
                (Err(e), Some(fragment)) if e.contains(fragment) => Verdict::Pass,
                (got, want) => Verdict::Fail(format!("got {got:?}, expected error {want:?}")),
            }
        }
        _ => Verdict::Skip("unknown test"),
    }
}
