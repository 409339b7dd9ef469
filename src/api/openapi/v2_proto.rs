//! The protobuf form of an OpenAPI v2 document, as kube-openapi serves `/openapi/v2` to
//! clients that ask for `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` (kubectl up
//! to 1.2x reads nothing else): gnostic's `openapi.v2.Document` message, written from the JSON
//! document. Field numbers are gnostic's (`openapiv2/OpenAPIv2.proto`); vendor extensions,
//! defaults, enums and examples are `Any { yaml }` (JSON is YAML). What kube-apiserver's documents
//! never hold (security, tags, XML, file schemas) is left out.

use serde_json::Value;

/// A protobuf message under construction.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.0.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        self.0.push(n as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn message(&mut self, field: u32, message: Message) {
        self.bytes(field, &message.0);
    }

    fn string(&mut self, field: u32, value: Option<&Value>) {
        if let Some(text) = value.and_then(Value::as_str) {
            self.bytes(field, text.as_bytes());
        }
    }

    fn strings(&mut self, field: u32, value: Option<&Value>) {
        for text in value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            self.bytes(field, text.as_bytes());
        }
    }

    fn boolean(&mut self, field: u32, value: Option<&Value>) {
        if let Some(b) = value.and_then(Value::as_bool) {
            self.key(field, 0);
            self.varint(u64::from(b));
        }
    }

    fn int64(&mut self, field: u32, value: Option<&Value>) {
        if let Some(n) = value.and_then(Value::as_i64) {
            self.key(field, 0);
            self.varint(n as u64);
        }
    }

    fn double(&mut self, field: u32, value: Option<&Value>) {
        if let Some(n) = value.and_then(Value::as_f64) {
            self.key(field, 1);
            self.0.extend_from_slice(&n.to_le_bytes());
        }
    }

    /// gnostic's `Any`: the value as YAML text (field 2).
    fn any(&mut self, field: u32, value: Option<&Value>) {
        if let Some(value) = value {
            let mut any = Message::default();
            any.bytes(2, serde_json::to_string(value).unwrap_or_default().as_bytes());
            self.message(field, any);
        }
    }

    fn anys(&mut self, field: u32, value: Option<&Value>) {
        for item in value.and_then(Value::as_array).into_iter().flatten() {
            self.any(field, Some(item));
        }
    }

    /// `repeated NamedAny vendor_extension`: every `x-` key.
    fn extensions(&mut self, field: u32, object: &Value) {
        for (name, value) in object.as_object().into_iter().flatten().filter(|(k, _)| k.starts_with("x-")) {
            let mut named = Message::default();
            named.bytes(1, name.as_bytes());
            named.any(2, Some(value));
            self.message(field, named);
        }
    }

    /// A map as `repeated Named<T> { name = 1; value = 2; }` under `field`.
    fn named(&mut self, field: u32, map: Option<&Value>, encode: fn(&Value) -> Message, skip_extensions: bool) {
        for (name, value) in map.and_then(Value::as_object).into_iter().flatten() {
            if skip_extensions && name.starts_with("x-") {
                continue;
            }
            let mut named = Message::default();
            named.bytes(1, name.as_bytes());
            named.message(2, encode(value));
            self.message(field, named);
        }
    }
}

/// The document as protobuf bytes.
pub fn encode(document: &Value) -> Vec<u8> {
    let d = document;
    let mut m = Message::default();
    m.string(1, d.get("swagger"));
    if let Some(info) = d.get("info") {
        let mut i = Message::default();
        for (field, key) in [(1, "title"), (2, "version"), (3, "description"), (4, "termsOfService")] {
            i.string(field, info.get(key));
        }
        i.extensions(7, info);
        m.message(2, i);
    }
    m.string(3, d.get("host"));
    m.string(4, d.get("basePath"));
    m.strings(5, d.get("schemes"));
    m.strings(6, d.get("consumes"));
    m.strings(7, d.get("produces"));
    if let Some(paths) = d.get("paths") {
        let mut p = Message::default();
        p.extensions(1, paths);
        p.named(2, Some(paths), path_item, true);
        m.message(8, p);
    }
    m.message(9, wrapped(d.get("definitions"), schema));
    if d.get("parameters").is_some() {
        m.message(10, wrapped(d.get("parameters"), parameter));
    }
    if d.get("responses").is_some() {
        m.message(11, wrapped(d.get("responses"), response));
    }
    m.extensions(16, d);
    m.0
}

/// `{ repeated Named<T> additional_properties = 1; }`.
fn wrapped(map: Option<&Value>, encode: fn(&Value) -> Message) -> Message {
    let mut m = Message::default();
    m.named(1, map, encode, false);
    m
}

fn path_item(item: &Value) -> Message {
    let mut m = Message::default();
    m.string(1, item.get("$ref"));
    for (field, method) in
        [(2, "get"), (3, "put"), (4, "post"), (5, "delete"), (6, "options"), (7, "head"), (8, "patch")]
    {
        if let Some(operation) = item.get(method) {
            m.message(field, self::operation(operation));
        }
    }
    parameters(&mut m, 9, item.get("parameters"));
    m.extensions(10, item);
    m
}

fn operation(op: &Value) -> Message {
    let mut m = Message::default();
    m.strings(1, op.get("tags"));
    m.string(2, op.get("summary"));
    m.string(3, op.get("description"));
    m.string(5, op.get("operationId"));
    m.strings(6, op.get("produces"));
    m.strings(7, op.get("consumes"));
    parameters(&mut m, 8, op.get("parameters"));
    if let Some(responses) = op.get("responses") {
        let mut r = Message::default();
        r.named(1, Some(responses), response_value, true);
        r.extensions(2, responses);
        m.message(9, r);
    }
    m.strings(10, op.get("schemes"));
    m.boolean(11, op.get("deprecated"));
    m.extensions(13, op);
    m
}

fn json_reference(value: &Value) -> Message {
    let mut m = Message::default();
    m.string(1, value.get("$ref"));
    m.string(2, value.get("description"));
    m
}

/// `repeated ParametersItem` (a parameter or a reference to one).
fn parameters(m: &mut Message, field: u32, list: Option<&Value>) {
    for item in list.and_then(Value::as_array).into_iter().flatten() {
        let mut p = Message::default();
        if item.get("$ref").is_some() {
            p.message(2, json_reference(item));
        } else {
            p.message(1, parameter(item));
        }
        m.message(field, p);
    }
}

/// `Parameter`: a body parameter, or a header, formData, query or path one (numbered alike
/// but for `allowEmptyValue`, which formData and query have).
fn parameter(p: &Value) -> Message {
    let mut m = Message::default();
    let location = p.get("in").and_then(Value::as_str).unwrap_or_default();
    if location == "body" {
        let mut body = Message::default();
        body.string(1, p.get("description"));
        body.string(2, p.get("name"));
        body.string(3, p.get("in"));
        body.boolean(4, p.get("required"));
        if let Some(s) = p.get("schema") {
            body.message(5, schema(s));
        }
        body.extensions(6, p);
        m.message(1, body);
        return m;
    }
    let (variant, empty_value) = match location {
        "header" => (1, false),
        "formData" => (2, true),
        "query" => (3, true),
        _ => (4, false),
    };
    // After `name`, formData and query have one more field than header and path.
    let shift = u32::from(empty_value);
    let mut sub = Message::default();
    sub.boolean(1, p.get("required"));
    sub.string(2, p.get("in"));
    sub.string(3, p.get("description"));
    sub.string(4, p.get("name"));
    if empty_value {
        sub.boolean(5, p.get("allowEmptyValue"));
    }
    sub.string(5 + shift, p.get("type"));
    sub.string(6 + shift, p.get("format"));
    sub.string(8 + shift, p.get("collectionFormat"));
    sub.any(9 + shift, p.get("default"));
    sub.boolean(19 + shift, p.get("uniqueItems"));
    sub.anys(20 + shift, p.get("enum"));
    sub.extensions(22 + shift, p);
    let mut non_body = Message::default();
    non_body.message(variant, sub);
    m.message(2, non_body);
    m
}

fn response_value(value: &Value) -> Message {
    let mut m = Message::default();
    if value.get("$ref").is_some() {
        m.message(2, json_reference(value));
    } else {
        m.message(1, response(value));
    }
    m
}

fn response(r: &Value) -> Message {
    let mut m = Message::default();
    m.string(1, r.get("description"));
    if let Some(s) = r.get("schema") {
        let mut item = Message::default();
        item.message(1, schema(s));
        m.message(2, item);
    }
    m.extensions(5, r);
    m
}

fn schema(s: &Value) -> Message {
    let mut m = Message::default();
    m.string(1, s.get("$ref"));
    m.string(2, s.get("format"));
    m.string(3, s.get("title"));
    m.string(4, s.get("description"));
    m.any(5, s.get("default"));
    for (field, key) in [(6, "multipleOf"), (7, "maximum"), (9, "minimum")] {
        m.double(field, s.get(key));
    }
    m.boolean(8, s.get("exclusiveMaximum"));
    m.boolean(10, s.get("exclusiveMinimum"));
    for (field, key) in [
        (11, "maxLength"),
        (12, "minLength"),
        (14, "maxItems"),
        (15, "minItems"),
        (17, "maxProperties"),
        (18, "minProperties"),
    ] {
        m.int64(field, s.get(key));
    }
    m.string(13, s.get("pattern"));
    m.boolean(16, s.get("uniqueItems"));
    m.strings(19, s.get("required"));
    m.anys(20, s.get("enum"));
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut a = Message::default();
            a.boolean(2, Some(&Value::Bool(*b)));
            m.message(21, a);
        }
        Some(other) => {
            let mut a = Message::default();
            a.message(1, schema(other));
            m.message(21, a);
        }
        None => {}
    }
    match s.get("type") {
        Some(Value::String(_)) => {
            let mut t = Message::default();
            t.string(1, s.get("type"));
            m.message(22, t);
        }
        Some(list @ Value::Array(_)) => {
            let mut t = Message::default();
            t.strings(1, Some(list));
            m.message(22, t);
        }
        _ => {}
    }
    if let Some(items) = s.get("items") {
        let mut i = Message::default();
        match items {
            Value::Array(list) => list.iter().for_each(|item| i.message(1, schema(item))),
            single => i.message(1, schema(single)),
        }
        m.message(23, i);
    }
    for item in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        m.message(24, schema(item));
    }
    if s.get("properties").is_some() {
        m.message(25, wrapped(s.get("properties"), schema));
    }
    m.string(26, s.get("discriminator"));
    m.boolean(27, s.get("readOnly"));
    m.any(30, s.get("example"));
    m.extensions(31, s);
    m
}
