//! String formats (`format`) as Kubernetes checks them: which formats a node keeps (the rest
//! are dropped before validation and merely warned about), and the checks of the formats
//! kube-openapi's registry knows (go-openapi's `strfmt` and its govalidator checks).

mod mail;
mod net;
mod text;

/// A string format Kubernetes checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    BsonObjectId,
    Uri,
    Email,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Mac,
    Uuid,
    Uuid3,
    Uuid4,
    Uuid5,
    Isbn,
    Isbn10,
    Isbn13,
    CreditCard,
    Ssn,
    HexColor,
    RgbColor,
    Byte,
    Password,
    Date,
    Duration,
    DateTime,
    K8sShortName,
    K8sLongName,
}

impl Format {
    /// The format of a name, compared as go-openapi compares them (dashes removed).
    pub fn by_name(name: &str) -> Option<Format> {
        let normalized = name.replace('-', "");
        Some(match normalized.as_str() {
            "bsonobjectid" => Format::BsonObjectId,
            "uri" => Format::Uri,
            "email" => Format::Email,
            "hostname" => Format::Hostname,
            "ipv4" => Format::Ipv4,
            "ipv6" => Format::Ipv6,
            "cidr" => Format::Cidr,
            "mac" => Format::Mac,
            "uuid" => Format::Uuid,
            "uuid3" => Format::Uuid3,
            "uuid4" => Format::Uuid4,
            "uuid5" => Format::Uuid5,
            "isbn" => Format::Isbn,
            "isbn10" => Format::Isbn10,
            "isbn13" => Format::Isbn13,
            "creditcard" => Format::CreditCard,
            "ssn" => Format::Ssn,
            "hexcolor" => Format::HexColor,
            "rgbcolor" => Format::RgbColor,
            "byte" => Format::Byte,
            "password" => Format::Password,
            "date" => Format::Date,
            "duration" => Format::Duration,
            "datetime" => Format::DateTime,
            "k8sshortname" => Format::K8sShortName,
            "k8slongname" => Format::K8sLongName,
            _ => return None,
        })
    }

    /// Whether `s` is in this format.
    pub fn validates(self, s: &str) -> bool {
        match self {
            Format::BsonObjectId => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
            Format::Uri => net::is_request_uri(s),
            Format::Email => mail::is_email(s),
            Format::Hostname => net::is_hostname(s),
            Format::Ipv4 => net::parse_ip_sloppy(s).is_some() && s.contains('.'),
            Format::Ipv6 => s.parse::<std::net::Ipv6Addr>().is_ok() && s.contains(':'),
            Format::Cidr => net::is_cidr(s),
            Format::Mac => net::is_mac(s),
            Format::Uuid => text::matches(text::Rx::Uuid, s),
            Format::Uuid3 => text::matches(text::Rx::Uuid3, s),
            Format::Uuid4 => text::matches(text::Rx::Uuid4, s),
            Format::Uuid5 => text::matches(text::Rx::Uuid5, s),
            Format::Isbn => text::is_isbn10(s) || text::is_isbn13(s),
            Format::Isbn10 => text::is_isbn10(s),
            Format::Isbn13 => text::is_isbn13(s),
            Format::CreditCard => text::is_credit_card(s),
            Format::Ssn => s.len() == 11 && text::matches(text::Rx::Ssn, s),
            Format::HexColor => text::matches(text::Rx::HexColor, s),
            Format::RgbColor => text::matches(text::Rx::RgbColor, s),
            Format::Byte => text::matches(text::Rx::Base64, s),
            Format::Password => true,
            Format::Date => text::is_date(s),
            Format::Duration => text::is_duration(s),
            Format::DateTime => text::is_date_time(s),
            Format::K8sShortName => s.len() <= 63 && text::matches(text::Rx::ShortName, s),
            Format::K8sLongName => s.len() <= 253 && text::matches(text::Rx::LongName, s),
        }
    }
}

/// The `format` a node keeps for validation, given its `type`: string formats Kubernetes
/// supports for strings (and untyped nodes), `int32`/`int64` for integers, `float`/`double`
/// for numbers. Anything else is dropped (and only warned about when the definition loads).
pub fn supported(type_name: &str, format: &str) -> Option<String> {
    if format.is_empty() {
        return None;
    }
    let keep = match type_name {
        "" | "string" => Format::by_name(format).is_some(),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    keep.then(|| format.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(format: &str, good: &[&str], bad: &[&str]) {
        let f = Format::by_name(format).unwrap();
        for s in good {
            assert!(f.validates(s), "{format} should accept {s:?}");
        }
        for s in bad {
            assert!(!f.validates(s), "{format} should refuse {s:?}");
        }
    }

    #[test]
    fn kubernetes_keeps_only_the_formats_it_knows_for_the_type() {
        assert_eq!(supported("string", "date-time").as_deref(), Some("date-time"));
        assert_eq!(supported("", "uuid"), Some("uuid".into()));
        assert_eq!(supported("string", "int32"), None);
        assert_eq!(supported("integer", "int32"), Some("int32".into()));
        assert_eq!(supported("integer", "uint8"), None);
        assert_eq!(supported("number", "double"), Some("double".into()));
        assert_eq!(supported("boolean", "date"), None);
    }

    #[test]
    fn formats() {
        check("uuid", &["123e4567-e89b-12d3-a456-426614174000", "123E4567E89B12D3A456426614174000"], &["x"]);
        check("date", &["2024-02-29"], &["2023-02-29", "2024-13-01", "24-01-01"]);
        check(
            "date-time",
            &["2014-12-15T19:30:20.000Z", "2014-12-15t19:30:20+01:00"],
            &["2014-12-15", "2014-12-15T25:00:00Z"],
        );
        check("duration", &["1h30m", "3 days", "5s"], &["forever", ""]);
        check("ipv4", &["10.0.0.1", "010.0.0.1"], &["10.0.0", "::1", "256.0.0.1"]);
        check("ipv6", &["::1", "2001:db8::1"], &["10.0.0.1", "::g"]);
        check("cidr", &["10.0.0.0/8", "2001:db8::/32"], &["10.0.0.0/33", "10.0.0.0"]);
        check("mac", &["00:00:5e:00:53:01", "00-00-5e-00-53-01", "0000.5e00.5301"], &["00:00:5e:00:53"]);
        check("hostname", &["example.com", "localhost"], &["-bad-.com", "a..b"]);
        check("email", &["a@b.c", "Jane <jane@example.com>"], &["nope", "a@"]);
        check(
            "uri",
            &["https://example.com/x?y=1", "/path", "mailto:a@b", "http://ex%C3%A4mple.com/"],
            &["relative/path", "", "http://a b", "http://ex%41mple.com/"],
        );
        check("byte", &["aGVsbG8="], &["not base64!", ""]);
        check("isbn10", &["0-306-40615-2"], &["0-306-40615-3"]);
        check("isbn13", &["978-0-306-40615-7"], &["978-0-306-40615-8"]);
        check("creditcard", &["4111 1111 1111 1111"], &["4111 1111 1111 1112"]);
        check("ssn", &["123-45-6789"], &["123456789"]);
        check("hexcolor", &["#fff", "a0b0c0"], &["#ffff"]);
        check("rgbcolor", &["rgb(255, 0, 10)"], &["rgb(256,0,0)"]);
        check("bsonobjectid", &["507f1f77bcf86cd799439011"], &["507f1f77bcf86cd79943901"]);
        check("k8s-short-name", &["a-b"], &["a-", "A"]);
        check("k8s-long-name", &["a.b-c"], &["a..b"]);
    }
}
