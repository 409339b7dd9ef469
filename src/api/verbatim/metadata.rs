//! The proof for `metadata`: that the ObjectMeta round trip of a read
//! (`schema::objectmeta::coerce`, dropping ill-typed fields) and the generation repair keep it
//! as it is, and where `resourceVersion` goes.
//!
//! Kept: known fields only, with the JSON types ObjectMeta gives them, none empty or null
//! (those vanish), times already in `metav1.Time`'s form, owner references with their four
//! strings, a non-zero generation.

use super::Splice;
use super::scan::{Kind, Number, Reader, Refused, Scan};
use crate::core::time::{days_in_month, format_rfc3339, parse_rfc3339};

const RESOURCE_VERSION: &str = "resourceVersion";

/// Checks the `metadata` object that starts here; returns where `resourceVersion` goes.
pub(super) fn check(reader: &mut Reader<'_>) -> Scan<Splice> {
    let mut members = reader.begin_object()?;
    let mut splice = None;
    let mut generation = false;
    let mut first = true;
    loop {
        let before = reader.pos();
        let Some(key) = reader.next_key(&mut members)? else {
            // `before` is the closing brace.
            splice = splice.or(Some(Splice::Insert { at: before, comma_before: !first }));
            break;
        };
        if splice.is_none() && key > RESOURCE_VERSION {
            // `before` is the comma after the previous member, or this key's quote.
            splice = Some(Splice::Insert { at: before, comma_before: !first });
        }
        first = false;
        match key {
            RESOURCE_VERSION => {
                let start = reader.pos();
                non_empty_string(reader)?;
                splice = Some(Splice::Replace { start, end: reader.pos() });
            }
            "name" | "generateName" | "namespace" | "selfLink" | "uid" => non_empty_string(reader)?,
            "generation" => match reader.number()? {
                Number::Signed(0) => return Err(Refused),
                Number::Signed(_) => generation = true,
                _ => return Err(Refused),
            },
            "deletionGracePeriodSeconds" => match reader.number()? {
                Number::Signed(_) => {}
                _ => return Err(Refused),
            },
            "creationTimestamp" | "deletionTimestamp" => time(reader)?,
            "labels" | "annotations" => string_map(reader)?,
            "finalizers" => string_list(reader)?,
            "ownerReferences" => non_empty_list(reader, owner_reference)?,
            "managedFields" => non_empty_list(reader, managed_fields_entry)?,
            _ => return Err(Refused),
        }
    }
    // A missing or zero generation is repaired to 1 on read.
    match splice {
        Some(splice) if generation => Ok(splice),
        _ => Err(Refused),
    }
}

fn non_empty_string(reader: &mut Reader<'_>) -> Scan<()> {
    if reader.string()?.raw.is_empty() { Err(Refused) } else { Ok(()) }
}

/// A `metav1.Time`, already as it encodes: UTC, whole seconds.
fn time(reader: &mut Reader<'_>) -> Scan<()> {
    let text = reader.string()?.plain().ok_or(Refused)?;
    if plainly_encoded_time(text) {
        return Ok(());
    }
    match parse_rfc3339(text) {
        Some(ts) if format_rfc3339(ts) == text => Ok(()),
        _ => Err(Refused),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` naming a real second of the years 1000 to 9998: a time that
/// parses and formats back to itself (checked without the general parser; anything else
/// takes it).
fn plainly_encoded_time(text: &str) -> bool {
    let b = text.as_bytes();
    let [y1, y2, y3, y4, b'-', m1, m2, b'-', d1, d2, b'T', h1, h2, b':', i1, i2, b':', s1, s2, b'Z'] = *b else {
        return false;
    };
    let digits = [y1, y2, y3, y4, m1, m2, d1, d2, h1, h2, i1, i2, s1, s2];
    if !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let number = |ds: &[u8]| ds.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
    let (year, month, day) = (number(&[y1, y2, y3, y4]), number(&[m1, m2]), number(&[d1, d2]));
    let (hour, minute, second) = (number(&[h1, h2]), number(&[i1, i2]), number(&[s1, s2]));
    let Some(days) = days_in_month(year, month) else { return false };
    (1000..=9998).contains(&year) && (1..=days).contains(&day) && hour < 24 && minute < 60 && second < 60
}

/// `map[string]string`, not empty.
fn string_map(reader: &mut Reader<'_>) -> Scan<()> {
    let mut members = reader.begin_object()?;
    let mut empty = true;
    while reader.next_key(&mut members)?.is_some() {
        reader.string()?;
        empty = false;
    }
    if empty { Err(Refused) } else { Ok(()) }
}

/// `[]string`, not empty.
fn string_list(reader: &mut Reader<'_>) -> Scan<()> {
    let mut items = reader.begin_array()?;
    let mut empty = true;
    while reader.next_item(&mut items)? {
        reader.string()?;
        empty = false;
    }
    if empty { Err(Refused) } else { Ok(()) }
}

fn non_empty_list(reader: &mut Reader<'_>, each: fn(&mut Reader<'_>) -> Scan<()>) -> Scan<()> {
    let mut items = reader.begin_array()?;
    let mut empty = true;
    while reader.next_item(&mut items)? {
        each(reader)?;
        empty = false;
    }
    if empty { Err(Refused) } else { Ok(()) }
}

/// An `OwnerReference`: its four strings present (they would be added empty), its booleans
/// booleans, nothing else.
fn owner_reference(reader: &mut Reader<'_>) -> Scan<()> {
    let mut members = reader.begin_object()?;
    let mut strings = 0;
    while let Some(key) = reader.next_key(&mut members)? {
        match key {
            "apiVersion" | "kind" | "name" | "uid" => {
                reader.string()?;
                strings += 1;
            }
            "blockOwnerDeletion" | "controller" => {
                reader.boolean()?;
            }
            _ => return Err(Refused),
        }
    }
    if strings == 4 { Ok(()) } else { Err(Refused) }
}

/// A `ManagedFieldsEntry`: non-empty strings, a time, and `fieldsV1` kept as it is.
fn managed_fields_entry(reader: &mut Reader<'_>) -> Scan<()> {
    let mut members = reader.begin_object()?;
    while let Some(key) = reader.next_key(&mut members)? {
        match key {
            "apiVersion" | "fieldsType" | "manager" | "operation" | "subresource" => non_empty_string(reader)?,
            "time" => time(reader)?,
            "fieldsV1" if reader.kind()? != Kind::Null => reader.any(4)?,
            _ => return Err(Refused),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_times_are_exactly_those_that_format_back_to_themselves() {
        // Every day of a leap year and of a common one, every hour, and the invalid neighbours.
        let mut checked = 0;
        for year in [1000, 1999, 2000, 2023, 2024, 2100, 9998] {
            for month in 0..=13 {
                for day in 0..=32 {
                    for (hour, minute, second) in [(0, 0, 0), (23, 59, 59), (24, 0, 0), (12, 60, 0), (1, 2, 60)] {
                        let text = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z");
                        let general = parse_rfc3339(&text).is_some_and(|ts| format_rfc3339(ts) == text);
                        assert_eq!(plainly_encoded_time(&text), general, "{text}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000);
        for text in
            ["2024-01-02T03:04:05.1Z", "2024-01-02 03:04:05Z", "2024-01-02T03:04:05+00:00", "0999-01-01T00:00:00Z"]
        {
            assert!(!plainly_encoded_time(text), "{text}");
        }
    }
}
