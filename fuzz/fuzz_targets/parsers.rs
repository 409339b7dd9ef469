//! The parsers of request parts: label and field selectors, JSONPath templates (printer
//! columns) and their evaluation, request paths, Accept and Content-Type headers, FieldsV1
//! and managedFields, `pattern`s and formats, table cells. Each returns an error or a value;
//! none panics or hangs.
#![no_main]

use arbitrary::Arbitrary;
use crd_apiserver::api::jsonpath::{JsonPath, print_value};
use crd_apiserver::api::negotiate::{negotiate, parse_accept};
use crd_apiserver::api::patch::patch_type;
use crd_apiserver::api::selectors::{FieldSelector, LabelSelector, field_text};
use crd_apiserver::api::table::cell;
use crd_apiserver::core::request_info::{Query, RequestInfo};
use crd_apiserver::fieldmanager::{Managed, decode_fields, encode_fields};
use crd_apiserver::schema::formats::Format;
use crd_apiserver::schema::pattern;
use crd_apiserver_fuzz::json::Json;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Input {
    Labels(String, Vec<(String, String)>),
    Fields(String, String),
    JsonPath(String, Json),
    Request(u8, String, String),
    Accept(String, bool),
    ContentType(String),
    FieldsV1(Json),
    ManagedFields(Vec<Json>),
    Pattern(String, String),
    Format(String, String),
    Cell(u8, Json),
}

fuzz_target!(|input: Input| {
    match input {
        Input::Labels(text, labels) => {
            if let Ok(selector) = LabelSelector::parse(&text) {
                let map = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let _ = selector.matches(&map);
            }
        }
        Input::Fields(text, value) => {
            let supported =
                vec!["metadata.name".to_string(), "metadata.namespace".to_string(), "spec.color".to_string()];
            if let Ok(selector) = FieldSelector::parse(&text, &supported) {
                let _ = selector.matches(|_| value.clone());
                let _ = selector.exact_name();
            }
        }
        Input::JsonPath(text, json) => {
            if let Ok(path) = JsonPath::parse(&text) {
                let value = json.value();
                for found in path.find(&value) {
                    let _ = print_value(found);
                }
                let _ = field_text(&value, &text);
            }
        }
        Input::Request(method, path, query) => {
            let methods =
                [http::Method::GET, http::Method::POST, http::Method::PUT, http::Method::PATCH, http::Method::DELETE];
            let method = &methods[usize::from(method) % methods.len()];
            let _ = RequestInfo::parse(method, &path, &Query::parse(Some(&query)));
        }
        Input::Accept(text, list) => {
            let _ = parse_accept(&text);
            let _ = negotiate(Some(&text), list);
        }
        Input::ContentType(text) => {
            let _ = patch_type(Some(&text));
        }
        Input::FieldsV1(json) => {
            if let Ok(set) = decode_fields(&json.value()) {
                let encoded = encode_fields(&set);
                let again = decode_fields(&encoded).expect("an encoded set decodes");
                assert_eq!(encode_fields(&again), encoded);
            }
        }
        Input::ManagedFields(entries) => {
            let values: Vec<_> = entries.iter().map(Json::value).collect();
            if let Ok(managed) = Managed::decode(&values) {
                let _ = managed.encode();
            }
        }
        Input::Pattern(go, text) => {
            if let Ok(regex) = pattern::compile(&go) {
                let _ = regex.is_match(&text);
            }
        }
        Input::Format(name, text) => {
            if let Some(format) = Format::by_name(&name) {
                let _ = format.validates(&text);
            }
        }
        Input::Cell(kind, json) => {
            let kinds = ["string", "integer", "number", "boolean", "date", "other"];
            let _ = cell(kinds[usize::from(kind) % kinds.len()], &json.value(), jiff::Timestamp::UNIX_EPOCH);
        }
    }
});
