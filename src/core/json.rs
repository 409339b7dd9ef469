//! JSON as Kubernetes writes it: the one place that renders numbers. Kubernetes decodes
//! custom resources into Go's unstructured form, where a number that is not an int64 is a
//! float64, and writes floats with Go's encoding/json: the shortest form that reads back the
//! same, without a fraction when there is none (`1.0` is written `1`, `-0.0` is `-0`), and
//! with an exponent only below 1e-6 or from 1e21 up (`1e-7`, `1e+21`).
//!
//! Owns float rendering for objects and responses; everything else is serde_json's.

use std::io;

use serde::Serialize;

/// serde_json's formatter with Go's float rendering.
#[derive(Debug, Clone, Copy, Default)]
pub struct GoFloats;

/// A float as Go's encoding/json writes a float64.
pub fn go_float(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude) {
        // Rust's shortest exponent form is `1.5e-7` / `1e21`; Go writes `1.5e-7` / `1e+21`.
        let text = format!("{value:e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => format!("{mantissa}e+{exponent}"),
            _ => text,
        }
    } else {
        // Rust's shortest plain form: `1`, `0.1`, `-0`, `100000000000000000000`.
        format!("{value}")
    }
}

impl serde_json::ser::Formatter for GoFloats {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(go_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(go_float(f64::from(value)).as_bytes())
    }
}

/// Writes `value` as compact JSON with Go's numbers.
pub fn to_writer<W: io::Write, T: Serialize + ?Sized>(writer: W, value: &T) -> serde_json::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(writer, GoFloats);
    value.serialize(&mut serializer)
}

/// `value` as compact JSON with Go's numbers.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    to_writer(&mut out, value)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_are_written_as_go_writes_them() {
        let cases = [
            (1.0, "1"),
            (-0.0, "-0"),
            (0.0, "0"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (1e-6, "0.000001"),
            (1.5e-7, "1.5e-7"),
            (2.5e-10, "2.5e-10"),
            (-123456.789, "-123456.789"),
            (0.30000000000000004, "0.30000000000000004"),
        ];
        for (value, written) in cases {
            assert_eq!(go_float(value), written, "{value:?}");
        }
    }

    #[test]
    fn only_floats_change() {
        let value: serde_json::Value =
            serde_json::from_str(r#"{"a":1.0,"b":[2,-3,4.50],"c":"1.0","d":9007199254740993,"e":-0.0}"#).unwrap();
        assert_eq!(
            String::from_utf8(to_vec(&value).unwrap()).unwrap(),
            r#"{"a":1,"b":[2,-3,4.5],"c":"1.0","d":9007199254740993,"e":-0}"#
        );
        assert_eq!(to_vec(&json!({"x": 1})).unwrap(), serde_json::to_vec(&json!({"x": 1})).unwrap());
    }
}
