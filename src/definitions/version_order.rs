//! Kubernetes' version priority (`version.CompareKubeAwareVersionStrings`): GA versions first
//! (higher major first), then betas, then alphas (higher major, then higher pre-release number
//! first), then names that do not look like Kubernetes versions, alphabetically.

use std::cmp::Ordering;

#[derive(Debug, PartialEq, Eq)]
enum Parsed<'a> {
    Ga(u64),
    Beta(u64, u64),
    Alpha(u64, u64),
    Other(&'a str),
}

fn parse(v: &str) -> Parsed<'_> {
    let Some(rest) = v.strip_prefix('v') else {
        return Parsed::Other(v);
    };
    let digits_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let (major, tail) = rest.split_at(digits_end);
    let Ok(major) = major.parse::<u64>() else {
        return Parsed::Other(v);
    };
    if major == 0 || rest.starts_with('0') {
        return Parsed::Other(v);
    }
    if tail.is_empty() {
        return Parsed::Ga(major);
    }
    let (kind, number) = if let Some(n) = tail.strip_prefix("beta") {
        ("beta", n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        ("alpha", n)
    } else {
        return Parsed::Other(v);
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) || number.starts_with('0') {
        return Parsed::Other(v);
    }
    let Ok(n) = number.parse::<u64>() else {
        return Parsed::Other(v);
    };
    if kind == "beta" { Parsed::Beta(major, n) } else { Parsed::Alpha(major, n) }
}

fn rank(p: &Parsed<'_>) -> u8 {
    match p {
        Parsed::Ga(_) => 0,
        Parsed::Beta(..) => 1,
        Parsed::Alpha(..) => 2,
        Parsed::Other(_) => 3,
    }
}

/// Orders versions by priority: `Less` means `a` comes first (is preferred).
pub fn by_priority(a: &str, b: &str) -> Ordering {
    let (pa, pb) = (parse(a), parse(b));
    rank(&pa).cmp(&rank(&pb)).then_with(|| match (&pa, &pb) {
        (Parsed::Ga(x), Parsed::Ga(y)) => y.cmp(x),
        (Parsed::Beta(x1, x2), Parsed::Beta(y1, y2)) | (Parsed::Alpha(x1, x2), Parsed::Alpha(y1, y2)) => {
            y1.cmp(x1).then(y2.cmp(x2))
        }
        (Parsed::Other(x), Parsed::Other(y)) => x.cmp(y),
        _ => Ordering::Equal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_as_kubernetes_does() {
        let mut versions =
            vec!["v11alpha2", "foo10", "v10", "v12alpha1", "v3beta1", "v10beta3", "v11beta2", "foo1", "v1", "v2"];
        versions.sort_by(|a, b| by_priority(a, b));
        assert_eq!(
            versions,
            vec!["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "foo1", "foo10"]
        );
    }
}
