//! The subset read against serde-saphyr: manifests, what it gives back, depth, random documents
//! and this repository's own manifests, each compared with serde-saphyr's reading.

use super::*;
use crate::definitions::load::parse_documents_in_full;

/// Reads `text` both ways. Whenever the subset reads it, serde-saphyr reads exactly the same
/// documents; returns whether the subset read it.
fn read_alike(text: &str) -> bool {
    match documents(text) {
        Some(mine) => {
            assert_eq!(Ok(mine), parse_documents_in_full(text), "read differently:\n{text}");
            true
        }
        None => false,
    }
}

const MANIFEST: &str = r#"# controller-gen's header
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.16.3
  name: vpcs.ec2.aws.upbound.io
spec:
  group: ec2.aws.upbound.io
  names:
    categories:
    - crossplane
    - managed
    kind: VPC
    plural: vpcs
  scope: Cluster
  versions:
  - additionalPrinterColumns:
    - jsonPath: .status.conditions[?(@.type=='Ready')].status
      name: READY
      type: string
    name: v1beta1
    schema:
      openAPIV3Schema:
        description: |-
          VPC is the Schema for the VPCs API.

          Provides a VPC resource.
        properties:
          spec:
            description: >
              folded text
              on two lines
            properties:
              cidr:
                description: 'It''s a "CIDR": 10.0.0.0/16'
                pattern: ^[0-9./]+$
                type: string
              count:
                default: 3
                maximum: 18446744073709551615
                minimum: -9223372036854775808
                type: integer
              tags:
                additionalProperties: {type: string}
                type: object
                x-kubernetes-map-type: granular
              note:
                description: "escapes:\t\u00e9\x41 and a long
                  line folded"
                default: a plain scalar
                  over two lines
              empty: {}
              list: []
              nothing:
              tilde: ~
              nul: Null
              flags: [true, False, TRUE, null, 0, -12, "quoted", 'single', inf, nan, infinity]
            required:
            - cidr
            type: object
            x-kubernetes-validations:
            - message: cidr is immutable
              rule: self.cidr == oldSelf.cidr
        type: object
    served: true
    storage: true
    subresources:
      status: {}
...
---
# an empty document follows
---
---
apiVersion: v1
kind: List
items: []
"#;

#[test]
fn manifests_are_read_as_serde_saphyr_reads_them() {
    assert!(read_alike(MANIFEST), "the subset reads a generated manifest");
    let docs = documents(MANIFEST).unwrap();
    assert_eq!(docs.len(), 2, "empty documents are left out");
    let spec = docs[0].pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties").unwrap();
    assert_eq!(spec.pointer("/count/default"), Some(&serde_json::json!(3)));
    assert_eq!(spec.pointer("/nothing"), Some(&Value::Null));
    assert_eq!(spec.pointer("/flags/1"), Some(&Value::Bool(false)));
    assert_eq!(spec.pointer("/flags/8"), Some(&serde_json::json!("inf")));
    for text in [
        "a: 1\n",
        "- a\n- - b\n  - c\n",
        "{a: [1, {b: c}], d: 'e'}",
        "key: value # a comment\n# another\n",
        "\u{feff}a: b\n",
        "\ta: b\n",
        "a: b\r\nc: |\r\n  x\r\n  y\r\n",
        "a:\n- b\n- c\nd: e\n",
        "a: |+\n  kept\n\n",
        "a: >-\n  folded\n\n  paragraph\n",
        "'quoted key': 1\n\"another\": 2\n",
        "a: x:y\nb: http://example.com/#x\nc: -a\nd: /p\ne: $ref\nf: .status.x\ng: .\nh: -inf\n",
        "plain\n",
        "",
        "---\n",
        "a: 1\n---\nb: 2\n...\n",
    ] {
        assert!(read_alike(text), "the subset reads {text:?}");
    }
}

#[test]
fn what_it_does_not_read_is_given_back_to_serde_saphyr() {
    for text in [
        // Anchors, aliases, tags, merge keys.
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: !custom x\n",
        "base: {a: 1}\nother:\n  <<: {b: 2}\n",
        // Keys that are not strings, and twice the same key.
        "true: a\n",
        "1: a\n",
        ": a\n",
        "? [a]\n: b\n",
        "a: 1\na: 2\n",
        // YAML 1.1 booleans and numbers other than plain decimal integers.
        "a: yes\n",
        "a: Off\n",
        "a: 1.5\n",
        "a: .5\n",
        "a: 1e3\n",
        "a: .inf\n",
        "a: 0x1F\n",
        "a: 017\n",
        "a: +1\n",
        "a: 1_000\n",
        "a: -0\n",
        "a: 18446744073709551616\n",
        "a: -9223372036854775809\n",
        // Directives and errors.
        "%YAML 1.2\n---\na: 1\n",
        "a: [b\n",
        "a: b\n c: d\n",
    ] {
        assert_eq!(documents(text), None, "{text:?}");
    }
}

/// Mappings nested `depth` deep.
pub(in crate::definitions) fn nested(depth: usize) -> String {
    let mut text = String::new();
    for level in 0..depth {
        text.push_str(&"  ".repeat(level));
        text.push_str("k:\n");
    }
    text.push_str(&"  ".repeat(depth));
    text.push_str("leaf: 1\n");
    text
}

#[test]
fn deep_documents_are_read_alike_on_both_sides_of_serde_saphyrs_depth_budget() {
    assert!(read_alike(&nested(40)));
    for depth in 50..80 {
        read_alike(&nested(depth));
    }
    assert_eq!(documents(&nested(70)), None);
    assert!(parse_documents_in_full(&nested(70)).is_err(), "serde-saphyr refuses what is past its budget");
}

/// Scalars as they may be written, plain or quoted: words that YAML types, numbers of every
/// form, and strings that look like neither.
const WORDS: &[&str] = &[
    "a",
    "abc def",
    "true",
    "False",
    "TRUE",
    "null",
    "Null",
    "~",
    "yes",
    "No",
    "on",
    "y",
    "0",
    "12",
    "-3",
    "007",
    "1.5",
    ".inf",
    "-.inf",
    ".NaN",
    "1e3",
    "0x10",
    "0o17",
    "+1",
    "-0",
    "1_0",
    "inf",
    "nan",
    "x:y",
    "http://x/y",
    "-a",
    "é",
    "a#b",
    "<<",
    ".status.x",
    ".",
    "+a",
    "-",
    "+.",
    "-.5",
    "+.Inf",
    "-infinity",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
];

fn word(rng: &mut fastrand::Rng) -> &'static str {
    WORDS[rng.usize(..WORDS.len())]
}

/// A scalar in a random style (`flow`: one that may stand inside `[]` and `{}`).
fn scalar(rng: &mut fastrand::Rng, flow: bool) -> String {
    let text = word(rng);
    match rng.u8(..4) {
        0 => format!("'{}'", text.replace('\'', "''")),
        1 => format!("\"{text}\""),
        _ if flow && text.contains(['#', ':']) => format!("'{text}'"),
        _ => text.to_string(),
    }
}

fn flow_node(rng: &mut fastrand::Rng, depth: u32) -> String {
    match if depth == 0 { 0 } else { rng.u8(..3) } {
        0 => scalar(rng, true),
        1 => {
            let items: Vec<String> = (0..rng.usize(..4)).map(|_| flow_node(rng, depth - 1)).collect();
            format!("[{}]", items.join(", "))
        }
        _ => {
            let fields: Vec<String> =
                (0..rng.usize(..4)).map(|_| format!("{}: {}", scalar(rng, true), flow_node(rng, depth - 1))).collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

/// A node in block style at `indent`, after a key's `:` or a sequence's `-`.
fn block_value(rng: &mut fastrand::Rng, depth: u32, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match if depth == 0 { rng.u8(..2) } else { rng.u8(..5) } {
        0 => out.push_str(&format!(" {}\n", scalar(rng, false))),
        1 => out.push_str(&format!(" {}\n", flow_node(rng, depth.min(2)))),
        2 => {
            let chomp = ["", "-", "+"][rng.usize(..3)];
            let style = if rng.bool() { '|' } else { '>' };
            out.push_str(&format!(" {style}{chomp}\n{pad}  {}\n{pad}  {}\n", word(rng), word(rng)));
            if rng.bool() {
                out.push('\n');
            }
        }
        3 => {
            out.push('\n');
            for _ in 0..rng.usize(1..4) {
                out.push_str(&format!("{pad}  -"));
                block_value(rng, depth - 1, indent + 2, out);
            }
        }
        _ => {
            out.push('\n');
            for _ in 0..rng.usize(1..4) {
                out.push_str(&format!("{pad}  {}:", scalar(rng, false)));
                block_value(rng, depth - 1, indent + 2, out);
            }
        }
    }
}

#[test]
fn random_documents_are_read_alike() {
    let mut rng = fastrand::Rng::with_seed(32);
    let mut read = 0;
    const DOCUMENTS: usize = 3000;
    for _ in 0..DOCUMENTS {
        let mut text = String::new();
        for document in 0..rng.usize(1..3) {
            if document > 0 || rng.bool() {
                text.push_str("---\n");
            }
            for _ in 0..rng.usize(1..4) {
                text.push_str(&format!("{}:", scalar(&mut rng, false)));
                block_value(&mut rng, 3, 0, &mut text);
            }
        }
        if read_alike(&text) {
            read += 1;
        }
    }
    // Most draws hold some word the subset leaves to serde-saphyr; enough are read to matter.
    assert!(read >= DOCUMENTS / 20, "the subset read {read} of {DOCUMENTS}");
}

/// The text of every YAML manifest in this repository (its examples, test fixtures and fuzz
/// seeds): what both readers are checked on.
pub(in crate::definitions) fn repository_manifests() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = Vec::new();
    let mut pending = vec![root.join("manifests"), root.join("tests/fixtures"), root.join("fuzz/definitions")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                texts.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    texts
}

#[test]
fn the_manifests_of_this_repository_are_read_alike() {
    let read = repository_manifests().iter().filter(|text| read_alike(text)).count();
    assert!(read >= 5, "the subset read {read} manifests");
}
