//! The scanner against Go: every case below is what Go 1.26's `json.Unmarshal` (into a
//! `json.RawMessage`, which only checks the text) answers for the input, taken from running it.

use super::*;

/// (input, Go's verdict: "ok" or its error text)
const GO_VERDICTS: &[(&[u8], &str)] = &[
    (b"", "unexpected end of JSON input"),
    (b"   ", "unexpected end of JSON input"),
    (b"{", "unexpected end of JSON input"),
    (b"{\"apiVersion\":", "unexpected end of JSON input"),
    (b"{\"a\":1,}", "invalid character '}' looking for beginning of object key string"),
    (b"[1,]", "invalid character ']' looking for beginning of value"),
    (b"[1 2]", "invalid character '2' after array element"),
    (b"{\"a\" 1}", "invalid character '1' after object key"),
    (b"{\"a\":1 \"b\":2}", "invalid character '\"' after object key:value pair"),
    (b"nul", "invalid character ' ' in literal null (expecting 'l')"),
    (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
    (b"fals", "invalid character ' ' in literal false (expecting 'e')"),
    (b"falsy", "invalid character 'y' in literal false (expecting 'e')"),
    (b"nulL", "invalid character 'L' in literal null (expecting 'l')"),
    (b"{\"a\":tru}", "invalid character '}' in literal true (expecting 'e')"),
    (b"{\"a\":01}", "invalid character '1' after object key:value pair"),
    (b"-", "invalid character ' ' in numeric literal"),
    (b"-a", "invalid character 'a' in numeric literal"),
    (b"1.", "invalid character ' ' after decimal point in numeric literal"),
    (b"1.e5", "invalid character 'e' after decimal point in numeric literal"),
    (b"1e", "invalid character ' ' in exponent of numeric literal"),
    (b"1e+", "invalid character ' ' in exponent of numeric literal"),
    (b"1ex", "invalid character 'x' in exponent of numeric literal"),
    (b"01", "invalid character '1' after top-level value"),
    (b"1 2", "invalid character '2' after top-level value"),
    (b"{} x", "invalid character 'x' after top-level value"),
    (b"{}}", "invalid character '}' after top-level value"),
    (b"]", "invalid character ']' looking for beginning of value"),
    (b"}", "invalid character '}' looking for beginning of value"),
    (b"{'a':1}", "invalid character '\\'' looking for beginning of object key string"),
    (b"{\"a\":\"\x01\"}", "invalid character '\\x01' in string literal"),
    (b"{\"a\":\"\x1f\"}", "invalid character '\\x1f' in string literal"),
    (b"{\"a\":\"\x09\"}", "invalid character '\\t' in string literal"),
    (b"{\"a\":\"\\x\"}", "invalid character 'x' in string escape code"),
    (b"{\"a\":\"\\u12\"}", "invalid character '\"' in \\u hexadecimal character escape"),
    (b"{\"a\":\"\\u12g4\"}", "invalid character 'g' in \\u hexadecimal character escape"),
    (b"{\"a\":\"\\", "invalid character ' ' in string escape code"),
    (b"{\"a\":\"\\u", "invalid character ' ' in \\u hexadecimal character escape"),
    (b"\"abc", "unexpected end of JSON input"),
    (b"\xef\xbb\xbf{}", "invalid character 'ï' looking for beginning of value"),
    (b"\xff", "invalid character 'ÿ' looking for beginning of value"),
    (b"{\"a\":\"\xff\"}", "ok"),
    (b"{\"a\":\"\\ud800\"}", "ok"),
    (b"\xa0", "invalid character '\\u00a0' looking for beginning of value"),
    (b"\xad", "invalid character '\\u00ad' looking for beginning of value"),
    (b"\x80", "invalid character '\\u0080' looking for beginning of value"),
    (b"\x7f", "invalid character '\\x7f' looking for beginning of value"),
    (b"\x00", "invalid character '\\x00' looking for beginning of value"),
    (b"{\"a\":1}\x00", "invalid character '\\x00' after top-level value"),
    (b"[\"a\",{\"b\":[true,false,null,-0.5e-3,1E+2]}]", "ok"),
    (b"{\"a\":{\"b\":[1,{\"c\":x}]}}", "invalid character 'x' looking for beginning of value"),
    (b"{\"a\"}", "invalid character '}' after object key"),
    (b"{\"a\":}", "invalid character '}' looking for beginning of value"),
    (b"[,1]", "invalid character ',' looking for beginning of value"),
    (b"{,}", "invalid character ',' looking for beginning of object key string"),
    (b"{\"a\":1,\"b\"}", "invalid character '}' after object key"),
    (b"\x0a\x0d\x09 {}\x0a", "ok"),
    (b"\x0b{}", "invalid character '\\v' looking for beginning of value"),
    (b"[1,2", "unexpected end of JSON input"),
    (b"[1,2,", "unexpected end of JSON input"),
    (b"{\"a\":[1,2}", "invalid character '}' after array element"),
    (b"@", "invalid character '@' looking for beginning of value"),
    (b"\xc3\xa9", "invalid character 'Ã' looking for beginning of value"),
];

#[test]
fn syntax_errors_are_gos() {
    for (input, expected) in GO_VERDICTS {
        let got = match check(input) {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        };
        assert_eq!(&got, expected, "input {:?}", String::from_utf8_lossy(input));
    }
}

fn nested(depth: usize) -> Vec<u8> {
    let mut text = "[".repeat(depth).into_bytes();
    text.extend("]".repeat(depth).bytes());
    text
}

#[test]
fn nesting_stops_past_ten_thousand_levels() {
    assert_eq!(check(&nested(MAX_NESTING_DEPTH)), Ok(Checked::default()));
    let too_deep = check(&nested(MAX_NESTING_DEPTH + 1)).unwrap_err();
    assert_eq!(too_deep.to_string(), "invalid character '[' exceeded max depth");
    // A million levels are refused after ten thousand bytes of scanner state.
    assert!(check(&nested(1_000_000)).is_err());
    let objects = format!("{}1{}", "{\"a\":".repeat(MAX_NESTING_DEPTH + 1), "}".repeat(MAX_NESTING_DEPTH + 1));
    assert_eq!(check(objects.as_bytes()).unwrap_err().to_string(), "invalid character '{' exceeded max depth");
}

#[test]
fn strings_go_repairs_are_marked_and_repaired_as_go_decodes_them() {
    let clean: &[&[u8]] = &[br#"{"a":"\ud83d\ude00 \u00e9 \n"}"#, "{\"a\":\"é😀\"}".as_bytes(), br#"["\\ud800"]"#];
    for text in clean {
        assert_eq!(check(text), Ok(Checked::default()), "{}", String::from_utf8_lossy(text));
        assert_eq!(&repair(text, &Checked::default()), text);
    }
    // (text, repaired) as Go's decoder reads the strings: each byte that starts no whole
    // character is one U+FFFD; an unpaired surrogate escape is one U+FFFD.
    let cases: &[(&[u8], &str)] = &[
        (b"{\"a\":\"\xff\"}", "{\"a\":\"\u{fffd}\"}"),
        (b"[\"x\xf0\x9f\x98y\"]", "[\"x\u{fffd}\u{fffd}\u{fffd}y\"]"),
        (b"[\"\xed\xa0\x80\"]", "[\"\u{fffd}\u{fffd}\u{fffd}\"]"),
        (br#"["\ud800"]"#, r#"["\ufffd"]"#),
        (br#"["\udc00\ud800"]"#, r#"["\ufffd\ufffd"]"#),
        (br#"["\ud800\u0041"]"#, r#"["\ufffd\u0041"]"#),
        (br#"["\ud800\ud800\udc00"]"#, r#"["\ufffd\ud800\udc00"]"#),
        (br#"{"\ud800":"\"\ud800"}"#, r#"{"\ufffd":"\"\ufffd"}"#),
    ];
    for (text, repaired) in cases {
        let checked = check(text).unwrap();
        assert!(checked.needs_repair, "{}", String::from_utf8_lossy(text));
        let fixed = repair(text, &checked);
        assert_eq!(String::from_utf8(fixed.clone()).unwrap(), *repaired);
        let value: serde_json::Value = serde_json::from_slice(&fixed).unwrap();
        assert!(value.is_object() || value.is_array());
    }
}

#[test]
fn numbers_past_a_float64_are_found_and_zeroed() {
    let text = br#"{"a":1e999,"b":[-1E+400,1e-999,18446744073709551616,9223372036854775807],"c":"1e999"}"#;
    let checked = check(text).unwrap();
    let found: Vec<&[u8]> = checked.overflowing_numbers.iter().map(|r| &text[r.clone()]).collect();
    assert_eq!(found, [&b"1e999"[..], b"-1E+400"]);
    assert_eq!(
        String::from_utf8(repair(text, &checked)).unwrap(),
        r#"{"a":0,"b":[0,1e-999,18446744073709551616,9223372036854775807],"c":"1e999"}"#
    );
    // A number that ends the text is checked too.
    let last = check(b"1e400").unwrap();
    assert_eq!(last.overflowing_numbers, vec![std::ops::Range { start: 0, end: 5 }]);
    let huge = format!("[1{}]", "0".repeat(400));
    assert_eq!(check(huge.as_bytes()).unwrap().overflowing_numbers, vec![std::ops::Range { start: 1, end: 402 }]);
}
