//! Name rules of Kubernetes (RFC 1123 subdomains and labels, RFC 1035 labels) with the exact
//! messages apimachinery prints, and `generateName` suffixes.

/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest DNS-1123 or DNS-1035 label.
pub const DNS_LABEL_MAX: usize = 63;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
// The double space after the first example is in Kubernetes' own message.
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_dns1123_label_shape(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_lower_alnum(first) && is_lower_alnum(last) && bytes.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// Problems with `s` as a DNS-1123 subdomain, worded as Kubernetes words them (empty: valid).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    if !s.split('.').all(is_dns1123_label_shape) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errs
}

/// Problems with `s` as a DNS-1123 label.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS_LABEL_MAX {
        errs.push(format!("must be no more than {DNS_LABEL_MAX} characters"));
    }
    if !is_dns1123_label_shape(s) {
        errs.push(DNS1123_LABEL_MSG.to_string());
    }
    errs
}

/// Problems with `s` as a DNS-1035 label (must start with a letter).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS_LABEL_MAX {
        errs.push(format!("must be no more than {DNS_LABEL_MAX} characters"));
    }
    let starts_with_letter = s.as_bytes().first().is_some_and(|c| c.is_ascii_lowercase());
    if !starts_with_letter || !is_dns1123_label_shape(s) {
        errs.push(DNS1035_LABEL_MSG.to_string());
    }
    errs
}

/// Object names of custom resources are DNS-1123 subdomains (`NameIsDNSSubdomain`); a
/// `generateName` prefix is checked with its trailing dash removed, as Kubernetes does.
pub fn object_name(name: &str, prefix: bool) -> Vec<String> {
    let name = if prefix { name.strip_suffix('-').unwrap_or(name) } else { name };
    dns1123_subdomain(name)
}

/// Characters of generated name suffixes: no vowels (no accidental words), no look-alikes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// `generateName` prefixes are cut so that prefix + suffix fit in a DNS label.
const MAX_GENERATED_PREFIX: usize = 58;
const SUFFIX_LEN: usize = 5;

/// `prefix` (cut to 58 bytes) followed by 5 random characters, as Kubernetes generates names.
pub fn generate_name(prefix: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut name = prefix.get(..cut).unwrap_or_default().to_string();
    let random = super::random::uuid_v4();
    for byte in random.as_bytes().iter().take(SUFFIX_LEN) {
        let index = usize::from(*byte) % SUFFIX_ALPHABET.len();
        name.push(char::from(SUFFIX_ALPHABET.get(index).copied().unwrap_or(b'x')));
    }
    name
}

// --- Label keys and values, qualified names, path segments (added with the schema engine). ---

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn is_label_shape(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn key_regex_message() -> String {
    format!(
        "{LABEL_KEY_MSG} (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{LABEL_KEY_FMT}')"
    )
}

/// Problems with `s` as a qualified name or label key (`example.com/MyName`), worded as
/// apimachinery's `IsQualifiedName` words them.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                key_regex_message()
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > DNS_LABEL_MAX {
        errs.push(format!("name part must be no more than {DNS_LABEL_MAX} bytes"));
    }
    if !is_label_shape(name) {
        errs.push(format!("name part {}", key_regex_message()));
    }
    errs
}

/// Problems with `s` as a label value (empty, or a label-key-shaped name of up to 63 bytes).
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS_LABEL_MAX {
        errs.push(format!("must be no more than {DNS_LABEL_MAX} bytes"));
    }
    if !s.is_empty() && !is_label_shape(s) {
        errs.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({LABEL_KEY_FMT})?')"
        ));
    }
    errs
}

/// Problems with `s` as a URL path segment (names of embedded objects): not `.` or `..`,
/// no `/` or `%`; a prefix may be anything but contain those.
pub fn path_segment(s: &str, prefix: bool) -> Vec<String> {
    if !prefix && (s == "." || s == "..") {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"].iter().filter(|c| s.contains(*c)).map(|c| format!("may not contain '{c}'")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains() {
        assert!(dns1123_subdomain("my-new-cron-object").is_empty());
        assert!(dns1123_subdomain("a.b.c").is_empty());
        assert_eq!(dns1123_subdomain("Foo"), vec![DNS1123_SUBDOMAIN_MSG.to_string()]);
        assert_eq!(dns1123_subdomain("a..b").len(), 1);
        assert_eq!(dns1123_subdomain("-a").len(), 1);
        assert_eq!(dns1123_subdomain(&"a".repeat(254)).len(), 1);
        assert_eq!(dns1123_subdomain("").len(), 1);
    }

    #[test]
    fn labels() {
        assert!(dns1035_label("crontabs").is_empty());
        assert_eq!(dns1035_label("1abc").len(), 1);
        assert!(dns1123_label("1abc").is_empty());
        assert_eq!(dns1123_label("a.b").len(), 1);
    }

    #[test]
    fn generated_names_keep_the_prefix_and_add_five_characters() {
        let name = generate_name("web-");
        assert!(name.starts_with("web-"));
        assert_eq!(name.len(), 9);
        assert!(name[4..].bytes().all(|c| SUFFIX_ALPHABET.contains(&c)));
        assert_eq!(generate_name(&"a".repeat(80)).len(), 63);
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(qualified_name("example.com/MyName").is_empty());
        assert!(qualified_name("my.name").is_empty());
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty".to_string()]);
        assert!(qualified_name("a/b/c")[0].starts_with("a valid label key must consist"));
        assert!(qualified_name("-x")[0].starts_with("name part must consist of alphanumeric"));
        assert!(label_value("").is_empty());
        assert_eq!(label_value("-x").len(), 1);
        assert_eq!(label_value(&"a".repeat(64)), vec!["must be no more than 63 bytes".to_string()]);
        assert_eq!(path_segment("..", false), vec!["may not be '..'".to_string()]);
        assert_eq!(path_segment("a/b%", true).len(), 2);
    }

    #[test]
    fn prefixes_may_end_with_a_dash() {
        assert!(object_name("web-", true).is_empty());
        assert_eq!(object_name("web-", false).len(), 1);
    }
}
