//! Query values read as Kubernetes reads them into its option structs (`metav1.ListOptions`,
//! `DeleteOptions`, ...), which is Go's `strconv` with Go's error texts
//! (`strconv.ParseInt: parsing "abc": invalid syntax`), and booleans as its query conversion
//! reads them (`Convert_Slice_string_To_bool`: only `0` and `false` are false).
//!
//! Owns the parsing and the words; callers decide the status code each refusal gets.

use super::field::go_quote;

/// A query boolean: `0` and `false` in any case are false; anything else, even an empty value
/// or `maybe`, is true.
pub fn query_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

/// Go's `strconv.ParseInt(text, 10, 64)`: an optional sign and decimal digits.
pub fn parse_int(text: &str) -> Result<i64, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error("ParseInt", text, "invalid syntax"));
    }
    text.parse::<i64>().map_err(|_| error("ParseInt", text, "value out of range"))
}

/// Go's `strconv.ParseUint(text, 10, 64)`: decimal digits, no sign.
pub fn parse_uint(text: &str) -> Result<u64, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error("ParseUint", text, "invalid syntax"));
    }
    text.parse::<u64>().map_err(|_| error("ParseUint", text, "value out of range"))
}

/// `*strconv.NumError`'s text.
fn error(function: &str, text: &str, why: &str) -> String {
    format!("strconv.{function}: parsing {}: {why}", go_quote(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_go_parses_them() {
        assert_eq!(parse_int("+2"), Ok(2));
        assert_eq!(parse_int("-7"), Ok(-7));
        assert_eq!(parse_int("007"), Ok(7));
        assert_eq!(parse_int("abc"), Err(r#"strconv.ParseInt: parsing "abc": invalid syntax"#.to_string()));
        assert_eq!(parse_int(""), Err(r#"strconv.ParseInt: parsing "": invalid syntax"#.to_string()));
        assert_eq!(parse_int("1.5"), Err(r#"strconv.ParseInt: parsing "1.5": invalid syntax"#.to_string()));
        assert_eq!(
            parse_int("99999999999999999999"),
            Err(r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#.to_string())
        );
        assert_eq!(parse_uint("12"), Ok(12));
        assert_eq!(parse_uint("+5"), Err(r#"strconv.ParseUint: parsing "+5": invalid syntax"#.to_string()));
        assert_eq!(parse_uint("-1"), Err(r#"strconv.ParseUint: parsing "-1": invalid syntax"#.to_string()));
        assert_eq!(
            parse_uint("99999999999999999999"),
            Err(r#"strconv.ParseUint: parsing "99999999999999999999": value out of range"#.to_string())
        );
    }

    #[test]
    fn booleans_are_false_only_when_they_say_so() {
        for falsy in ["0", "false", "FALSE", "False"] {
            assert!(!query_bool(falsy), "{falsy}");
        }
        for truthy in ["1", "true", "", "f", "F", "no", "maybe"] {
            assert!(query_bool(truthy), "{truthy}");
        }
    }
}
