//! The line reader against serde-saphyr: a generated manifest, what it gives back, random
//! block documents and this repository's own manifests, each compared with serde-saphyr's
//! reading.

use super::*;
use crate::definitions::load::parse_documents_in_full;
use crate::definitions::yaml_subset::tests::{nested, repository_manifests};

/// Reads `text` both ways. Whenever the line reader reads it, serde-saphyr reads exactly the
/// same documents; returns whether the line reader read it.
fn read_alike(text: &str) -> bool {
    match documents(text) {
        Some(mine) => {
            assert_eq!(Ok(mine), parse_documents_in_full(text), "read differently:\n{text}");
            true
        }
        None => false,
    }
}

/// controller-gen's output, with every form the reader reads.
const MANIFEST: &str = r#"---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.20.1
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
    - jsonPath: .metadata.annotations.crossplane\.io/external-name
      name: EXTERNAL-NAME
      type: string
    name: v1beta1
    schema:
      openAPIV3Schema:
        description: VPC is the Schema for the VPCs API. Provides a VPC
          resource, over two lines.
        properties:
          apiVersion:
            description: |-
              APIVersion defines the versioned schema of this representation of an object.

              More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources
                indented further
            type: string
          spec:
            description: |
              kept line break
            properties:
              cidr:
                description: 'It''s a "CIDR": 10.0.0.0/16, over
                  two lines,

                  and a paragraph.'
                pattern: ^[0-9./]+$
                type: string
              count:
                default: 3
                maximum: 18446744073709551615
                minimum: -9223372036854775808
                type: integer
              note:
                default: "plain 'double' quotes"
                description: a plain scalar

                  with a paragraph
              empty: {}
              list: []
              nothing:
              tilde: ~
              nul: Null
              flag: True
              x-kubernetes-preserve-unknown-fields: true
            required:
            - cidr
            type: object
            x-kubernetes-validations:
            - message: cidr is immutable
              rule: self.cidr == oldSelf.cidr
            - rule: '!(''*'' in self.managementPolicies || ''Create'' in self.managementPolicies)
                || has(self.forProvider.cidrBlock)'
        type: object
    served: true
    storage: true
    subresources:
      status: {}
---
# helm's header between documents
---
apiVersion: v1
kind: List
items:
-
- a
-   spaced: entry
    more: 1
"#;

#[test]
fn generated_manifests_are_read_as_serde_saphyr_reads_them() {
    assert!(read_alike(MANIFEST), "the line reader reads a generated manifest");
    let docs = documents(MANIFEST).unwrap();
    assert_eq!(docs.len(), 2, "empty documents are left out");
    let schema = docs[0].pointer("/spec/versions/0/schema/openAPIV3Schema").unwrap();
    assert_eq!(
        schema.pointer("/properties/spec/properties/cidr/description"),
        Some(&Value::from("It's a \"CIDR\": 10.0.0.0/16, over two lines,\nand a paragraph."))
    );
    assert_eq!(schema.pointer("/properties/spec/description"), Some(&Value::from("kept line break\n")));
    assert_eq!(schema.pointer("/properties/spec/properties/nothing"), Some(&Value::Null));
    assert_eq!(docs[1].pointer("/items/0"), Some(&Value::Null));
    for text in [
        "a: 1\n",
        "",
        "---\n",
        "a:\n- b\n- c\nd: e\n",
        "- a\n- b: c\n  d: e\n-\n  f: g\n",
        "a: |\n\n  leading blank\n\n\n  trailing blanks\n\n\nb: |-\n\n\nc: |\nd: x\n",
        "a: 'x'\nb: \"y\"\nc: ''\nd: \"\"\n",
        "a: x:y\nb: http://example.com/#x\nc: -a\nd: /p\ne: $ref\nf: .status.x\ng: .\n",
        "a: b\n---\nc: d\n",
        "# header\na: 1\n",
        "a:\n  b:\n    c: d\n  e: f\n",
        "a: é ü 中文 🙂\n",
        "key  : spaced before its colon\nother:   spaced after\n",
    ] {
        assert!(read_alike(text), "the line reader reads {text:?}");
    }
    // Lines past the 1,024 characters a simple key may take: values are read, keys given back.
    let long = "word ".repeat(600);
    let long = long.trim_end();
    for text in [format!("a: {long}\n"), format!("a: '{long}'\n"), format!("- {long}\n- b: {long}\n")] {
        assert!(read_alike(&text), "the line reader reads a long line");
    }
    assert_eq!(documents(&format!("{}: a\n", "k".repeat(1025))), None);
}

#[test]
fn what_it_does_not_read_is_given_back() {
    for text in [
        // Flow collections, folded and kept scalars, indentation indicators, escapes.
        "a: {b: c}\n",
        "a: [b]\n",
        "a: >\n  folded\n",
        "a: |+\n  kept\n\n",
        "a: |2\n   indented\n",
        "a: \"escape\\n\"\n",
        // Comments, tabs, carriage returns, characters YAML does not print.
        "a: b # comment\n",
        "a: 1\n# comment\nb: 2\n",
        "a:\tb\n",
        "a: b\r\n",
        "\u{feff}a: b\n",
        "a: \u{85}\n",
        // Tags, anchors, aliases, keys that are not strings, duplicate keys, merge keys.
        "a: !!str 1\n",
        "a: &x 1\nb: *x\n",
        "true: a\n",
        "1: a\n",
        "'quoted': a\n",
        "a: 1\na: 2\n",
        "<<: {}\n",
        // Numbers other than plain decimal integers, YAML 1.1 booleans.
        "a: 1.5\n",
        "a: 0x1F\n",
        "a: yes\n",
        // Directives, document ends, scalars and collections where the reader does not read them.
        "%YAML 1.2\n---\na: 1\n",
        "a: 1\n...\n",
        "plain\n",
        "  a: 1\n",
        "a:\n  text on the next line\n",
        "- - a\n",
        "? a\n: b\n",
        // What YAML refuses.
        "a: b: c\n",
        "a: b\n c: d\n",
        "a: 1\n- b\n",
        "a: 'open\n",
        "a:\n    b: 1\n  c: 2\n",
    ] {
        assert_eq!(documents(text), None, "{text:?}");
    }
}

#[test]
fn deep_documents_are_given_back_before_serde_saphyrs_depth_budget() {
    assert!(read_alike(&nested(40)));
    for depth in 50..80 {
        read_alike(&nested(depth));
    }
    assert_eq!(documents(&nested(70)), None);
}

/// Words for scalars and their lines: what YAML types, what looks like an indicator, what
/// looks like a key or a comment.
const WORDS: &[&str] = &[
    "a",
    "abc def",
    "true",
    "False",
    "null",
    "~",
    "yes",
    "0",
    "12",
    "-3",
    "007",
    "1.5",
    ".inf",
    "x:y",
    "x: y",
    "x:",
    "http://x/y",
    "-a",
    "- a",
    "-",
    "é",
    "a#b",
    "a #b",
    "#a",
    "<<",
    ".status.x",
    "[x",
    "{y",
    "*z",
    "&a",
    "!b",
    "|c",
    ">d",
    "'e",
    "\"f",
    "%g",
    "@h",
    "`i",
    "?j",
    "k?",
    ":l",
    "---",
    "...",
    "it''s",
    "a\\b",
    "''",
    "  spaced  ",
];

/// Words as most descriptions hold them.
const ORDINARY: &[&str] = &["alpha", "beta gamma", "v1beta1", "x.y/z", "Name", "e.g.", "(see below)", "end."];

/// A word, tricky one time in eight: most documents are then read whole, and each tricky word
/// is still met in every place many times.
fn word(rng: &mut fastrand::Rng) -> &'static str {
    if rng.u8(..8) == 0 { WORDS[rng.usize(..WORDS.len())] } else { ORDINARY[rng.usize(..ORDINARY.len())] }
}

/// Up to three lines of words, as a scalar's lines.
fn lines(rng: &mut fastrand::Rng) -> Vec<String> {
    (0..rng.usize(1..4)).map(|_| (0..rng.usize(1..3)).map(|_| word(rng)).collect::<Vec<_>>().join(" ")).collect()
}

/// A scalar's text after `key:` or `-`, continued on lines indented by `pad` and blank lines.
fn scalar(rng: &mut fastrand::Rng, pad: &str) -> String {
    let lines = lines(rng);
    let join = |rng: &mut fastrand::Rng, lines: &[String]| {
        let mut text = lines[0].clone();
        for line in &lines[1..] {
            text.push('\n');
            if rng.u8(..4) == 0 {
                text.push('\n');
            }
            text.push_str(pad);
            text.push_str(line);
        }
        text
    };
    match rng.u8(..5) {
        0 => format!(" '{}'", join(rng, &lines)),
        1 => format!(" \"{}\"", join(rng, &lines)),
        2 => {
            let header = ["|", "|-"][rng.usize(..2)];
            let mut text = format!(" {header}\n");
            if rng.u8(..4) == 0 {
                text.push('\n');
            }
            for line in &lines {
                text.push_str(pad);
                if rng.u8(..4) == 0 {
                    text.push_str("  ");
                }
                text.push_str(line);
                text.push('\n');
                if rng.u8(..4) == 0 {
                    text.push('\n');
                }
            }
            text.pop();
            text
        }
        _ => format!(" {}", join(rng, &lines)),
    }
}

/// A node in block style at `indent`, after a key's `:` or a sequence's `-`.
fn block_value(rng: &mut fastrand::Rng, depth: u32, indent: usize, out: &mut String) {
    let step = rng.usize(1..4);
    let pad = " ".repeat(indent + step);
    match if depth == 0 { 0 } else { rng.u8(..4) } {
        0 => {
            out.push_str(&scalar(rng, &pad));
            out.push('\n');
        }
        1 => {
            // A sequence, at the key's column or further in.
            let at = if rng.bool() { " ".repeat(indent) } else { pad.clone() };
            out.push('\n');
            for _ in 0..rng.usize(1..4) {
                out.push_str(&at);
                out.push('-');
                block_value(rng, depth - 1, at.len(), out);
            }
        }
        2 => {
            // A compact mapping in a sequence.
            out.push('\n');
            for _ in 0..rng.usize(1..3) {
                out.push_str(&format!("{pad}- "));
                for field in 0..rng.usize(1..3) {
                    if field > 0 {
                        out.push_str(&format!("{pad}  "));
                    }
                    out.push_str(&format!("{}:", word(rng)));
                    block_value(rng, depth - 1, pad.len() + 2, out);
                }
            }
        }
        _ => {
            out.push('\n');
            for _ in 0..rng.usize(1..4) {
                out.push_str(&format!("{pad}{}:", word(rng)));
                block_value(rng, depth - 1, pad.len(), out);
            }
        }
    }
}

#[test]
fn random_block_documents_are_read_alike() {
    let mut rng = fastrand::Rng::with_seed(32);
    let mut read = 0;
    const DOCUMENTS: usize = 5000;
    for _ in 0..DOCUMENTS {
        let mut text = String::new();
        for document in 0..rng.usize(1..3) {
            if document > 0 || rng.bool() {
                text.push_str("---\n");
            }
            for _ in 0..rng.usize(1..4) {
                text.push_str(&format!("{}:", word(&mut rng)));
                block_value(&mut rng, 3, 0, &mut text);
            }
        }
        if read_alike(&text) {
            read += 1;
        }
    }
    // Many draws hold some word or form the reader leaves to the others; enough are read.
    assert!(read >= DOCUMENTS / 20, "the line reader read {read} of {DOCUMENTS}");
}

#[test]
fn the_manifests_of_this_repository_are_read_alike() {
    let read = repository_manifests().iter().filter(|text| read_alike(text)).count();
    assert!(read >= 5, "the line reader read {read} manifests");
}
