//! Content negotiation: which representation a client asked for in `Accept` (JSON or YAML;
//! a plain object, a `Table`, or `PartialObjectMetadata`), and what a request body is.

use crate::core::status::ApiError;

/// Serialization of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Yaml,
}

/// Version of a `meta.k8s.io` wrapper kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVersion {
    V1,
    V1beta1,
}

impl MetaVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// What a resource endpoint should return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The objects themselves.
    Object,
    Table(MetaVersion),
    /// `PartialObjectMetadata` for single objects, `PartialObjectMetadataList` for lists.
    Metadata(MetaVersion),
}

/// The negotiated output of a resource endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    pub view: View,
    pub encoding: Encoding,
}

impl Output {
    pub const JSON: Output = Output { view: View::Object, encoding: Encoding::Json };
}

/// One media range of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange {
    pub essence: String,
    pub params: Vec<(String, String)>,
    pub q: f32,
}

impl MediaRange {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Parses `Accept` into media ranges, most preferred first (by `q`, then as written).
pub fn parse_accept(accept: &str) -> Vec<MediaRange> {
    let mut ranges: Vec<MediaRange> = accept
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';').map(str::trim);
            let essence = pieces.next()?.to_ascii_lowercase();
            if essence.is_empty() {
                return None;
            }
            let mut params = Vec::new();
            let mut q = 1.0;
            for p in pieces {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let k = k.trim().to_ascii_lowercase();
                let v = v.trim().trim_matches('"').to_string();
                if k == "q" {
                    q = v.parse().unwrap_or(1.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(MediaRange { essence, params, q })
        })
        .collect();
    ranges.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    ranges
}

fn encoding_of(essence: &str) -> Option<Encoding> {
    match essence {
        "application/json" | "*/*" | "application/*" | "application/json;stream=watch" => Some(Encoding::Json),
        "application/yaml" => Some(Encoding::Yaml),
        _ => None,
    }
}

fn meta_version(range: &MediaRange) -> Option<MetaVersion> {
    if range.param("g") != Some("meta.k8s.io") {
        return None;
    }
    match range.param("v") {
        Some("v1") => Some(MetaVersion::V1),
        Some("v1beta1") => Some(MetaVersion::V1beta1),
        _ => None,
    }
}

/// Negotiates the output of a resource endpoint. `list` says whether the endpoint returns a
/// collection (only `PartialObjectMetadataList` fits it) or one object.
pub fn negotiate(accept: Option<&str>, list: bool) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::JSON);
    };
    for range in parse_accept(accept) {
        let Some(encoding) = encoding_of(&range.essence) else {
            continue;
        };
        let view = match range.param("as") {
            None => View::Object,
            Some("Table") => match meta_version(&range) {
                Some(v) => View::Table(v),
                None => continue,
            },
            Some("PartialObjectMetadata") if !list => match meta_version(&range) {
                Some(v) => View::Metadata(v),
                None => continue,
            },
            Some("PartialObjectMetadataList") if list => match meta_version(&range) {
                Some(v) => View::Metadata(v),
                None => continue,
            },
            Some(_) => continue,
        };
        return Ok(Output { view, encoding });
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: {}",
        super::codec::OBJECT_MEDIA_TYPES
    )))
}

/// The encoding for plain documents (discovery, `Status` errors): JSON unless YAML is the
/// first acceptable choice.
pub fn plain_encoding(accept: Option<&str>) -> Encoding {
    let Some(accept) = accept else {
        return Encoding::Json;
    };
    parse_accept(accept)
        .iter()
        .find_map(|r| if r.param("as").is_none() { encoding_of(&r.essence) } else { None })
        .unwrap_or(Encoding::Json)
}

/// The essence of a `Content-Type` (`application/json`), lower-cased, parameters dropped.
pub fn content_type_essence(content_type: Option<&str>) -> String {
    content_type.and_then(|c| c.split(';').next()).map(|e| e.trim().to_ascii_lowercase()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_GET: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const METADATA_CLIENT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

    #[test]
    fn kubectl_asks_for_tables() {
        let out = negotiate(Some(KUBECTL_GET), true).unwrap();
        assert_eq!(out, Output { view: View::Table(MetaVersion::V1), encoding: Encoding::Json });
    }

    #[test]
    fn metadata_client_gets_json_lists() {
        let out = negotiate(Some(METADATA_CLIENT), true).unwrap();
        assert_eq!(out.view, View::Metadata(MetaVersion::V1));
        // The same Accept on a single object falls through to plain JSON.
        assert_eq!(negotiate(Some(METADATA_CLIENT), false).unwrap(), Output::JSON);
    }

    #[test]
    fn yaml_and_refusals() {
        assert_eq!(negotiate(Some("application/yaml"), false).unwrap().encoding, Encoding::Yaml);
        assert_eq!(negotiate(None, false).unwrap(), Output::JSON);
        assert_eq!(negotiate(Some("*/*"), false).unwrap(), Output::JSON);
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf"), false).unwrap_err().code, 406);
        assert_eq!(negotiate(Some("text/html;q=0.5, application/yaml;q=0.9"), false).unwrap().encoding, Encoding::Yaml);
    }
}
