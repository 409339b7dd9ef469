//! Continue tokens: ours read back, and crafted ones refused with the texts kube-apiserver
//! v1.36 answers for the same `continue` parameter (each checked against a real one).

use super::*;

fn token(json: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

#[test]
fn tokens_round_trip() {
    let decoded = decode(&encode(42, "default/x", None)).unwrap();
    assert_eq!(decoded, Continuation { start: "default/x".into(), revision: Some(42), remaining: None });
    assert_eq!(decode(&encode(42, "default/x", Some(7))).unwrap().remaining, Some(7));
}

#[test]
fn crafted_tokens_are_refused_in_kubernetes_words() {
    let v1 = r#""v":"meta.k8s.io/v1""#;
    let cases = [
        // Go's base64: the offset of the first byte it cannot take.
        ("a".to_string(), "illegal base64 data at input byte 0"),
        ("ab!".to_string(), "illegal base64 data at input byte 2"),
        ("abcde".to_string(), "illegal base64 data at input byte 4"),
        ("a=".to_string(), "illegal base64 data at input byte 1"),
        ("YQ==".to_string(), "illegal base64 data at input byte 2"),
        (" ".to_string(), "illegal base64 data at input byte 0"),
        // Left-over bits are ignored: `YR` is `a`, which is not JSON.
        ("YR".to_string(), "invalid character 'a' looking for beginning of value"),
        // Go's JSON syntax errors, then its type errors (the first, in the order written).
        (token(&format!("{{{v1},\"rv\":1,\"start\":\"a\"}} x")), "invalid character 'x' after top-level value"),
        (token("{"), "unexpected end of JSON input"),
        (token(r#"{"v":5}"#), "json: cannot unmarshal number into Go struct field continueToken.v of type string"),
        (token("[]"), "json: cannot unmarshal array into Go value of type storage.continueToken"),
        (
            token(&format!("{{{v1},\"rv\":\"x\"}}")),
            "json: cannot unmarshal string into Go struct field continueToken.rv of type int64",
        ),
        (
            token(&format!("{{{v1},\"rv\":1.5,\"start\":\"a\"}}")),
            "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64",
        ),
        (
            token(&format!("{{{v1},\"rv\":99999999999999999999,\"start\":\"a\"}}")),
            "json: cannot unmarshal number 99999999999999999999 into Go struct field continueToken.rv of type int64",
        ),
        (
            token(&format!("{{{v1},\"rv\":1,\"start\":5}}")),
            "json: cannot unmarshal number into Go struct field continueToken.start of type string",
        ),
        (
            token(&format!("{{{v1},\"rv\":1,\"start\":\"a\",\"v\":7}}")),
            "json: cannot unmarshal number into Go struct field continueToken.v of type string",
        ),
        (
            token(r#"{"v":[1],"rv":"x"}"#),
            "json: cannot unmarshal array into Go struct field continueToken.v of type string",
        ),
        // Decoded, then checked.
        (token("null"), "server does not recognize this encoded version "),
        (token(r#"{"v":"x"}"#), "server does not recognize this encoded version x"),
        (token(&format!("{{{v1},\"rv\":1}}")), "encoded start key empty (version meta.k8s.io/v1)"),
        (
            token(&format!("{{{v1},\"rv\":0,\"start\":\"a/x\"}}")),
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ),
        (token(&format!("{{{v1},\"rv\":1,\"start\":\"../x\"}}")), "../x"),
        (token(&format!("{{{v1},\"rv\":1,\"start\":\"a//x\"}}")), "a//x"),
    ];
    for (text, expected) in cases {
        let error = decode(&text).map(|c| panic!("{text} accepted: {c:?}")).unwrap_err();
        assert_eq!(error.code, 400, "{text}");
        assert_eq!(error.message, format!("invalid continue token: continue key is not valid: {expected}"), "{text}");
    }
}

#[test]
fn tokens_are_read_as_go_reads_them() {
    // Keys without regard to case, `null` leaving a field alone, fields Kubernetes does not
    // know ignored, line breaks in the base64 skipped.
    let read = decode(&token(r#"{"V":"meta.k8s.io/v1","RV":5,"Start":"a/x","rv":null,"other":{"deep":[1]}}"#)).unwrap();
    assert_eq!(read, Continuation { start: "a/x".into(), revision: Some(5), remaining: None });
    let broken = token(r#"{"v":"meta.k8s.io/v1","rv":5,"start":"a/x"}"#);
    let (head, tail) = broken.split_at(10);
    assert_eq!(decode(&format!("{head}\r\n{tail}")).unwrap(), read);
    // A negative revision reads the newest state.
    let newest = decode(&token(r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"/a/x"}"#)).unwrap();
    assert_eq!(newest, Continuation { start: "a/x".into(), revision: None, remaining: None });
}
