//! A small map from names to values, sorted by name in one exactly sized vector: the
//! `properties` of compiled schema nodes (schema, CEL). `BTreeMap` would hold room for eleven
//! (large) values per tree leaf whatever the count; with thousands of definitions that slack
//! was most of a compiled schema's memory. Lookups are binary searches; maps are built once.
//!
//! Owns lookup and ordered iteration only. No I/O.

/// Values by name, in ascending name order, names unique.
#[derive(Debug, Clone)]
pub struct SortedMap<V> {
    entries: Vec<(String, V)>,
}

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap { entries: Vec::new() }
    }
}

impl<V> SortedMap<V> {
    /// The schema of property `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.position(name).ok().and_then(|i| self.entries.get(i)).map(|(_, s)| s)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.position(name).ok().and_then(|i| self.entries.get_mut(i)).map(|(_, s)| s)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Adds or replaces property `name`.
    pub fn insert(&mut self, name: String, schema: V) {
        match self.position(&name) {
            Ok(i) => {
                if let Some(entry) = self.entries.get_mut(i) {
                    entry.1 = schema;
                }
            }
            Err(i) => self.entries.insert(i, (name, schema)),
        }
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(n, _)| n.as_str().cmp(name))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Properties in ascending name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.entries.iter().map(pair)
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(n, _)| n)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, s)| s)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, s)| s)
    }

    /// The entries, sorted by name.
    pub fn as_slice(&self) -> &[(String, V)] {
        &self.entries
    }
}

impl<V> FromIterator<(String, V)> for SortedMap<V> {
    /// Later entries replace earlier ones of the same name, as in a map.
    fn from_iter<I: IntoIterator<Item = (String, V)>>(items: I) -> SortedMap<V> {
        let mut entries: Vec<(String, V)> = items.into_iter().collect();
        // Stable: of equal names the last one written stays last, then wins the dedup below.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unique: Vec<(String, V)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match unique.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => unique.push(entry),
            }
        }
        unique.shrink_to_fit();
        SortedMap { entries: unique }
    }
}

fn pair<V>(entry: &(String, V)) -> (&String, &V) {
    (&entry.0, &entry.1)
}

impl<'a, V> IntoIterator for &'a SortedMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (String, V)>, fn(&(String, V)) -> (&String, &V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(pair)
    }
}

#[cfg(test)]
impl<V> std::ops::Index<&str> for SortedMap<V> {
    type Output = V;

    fn index(&self, name: &str) -> &V {
        self.get(name).expect("no such property")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> SortedMap<usize> {
        names.iter().enumerate().map(|(i, n)| (n.to_string(), i)).collect()
    }

    #[test]
    fn behaves_as_a_sorted_map() {
        let mut p = named(&["b", "a", "c", "a"]);
        assert_eq!(p.keys().map(String::as_str).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(p.get("a"), Some(&3), "the last of equal names wins");
        assert!(p.get("d").is_none() && p.contains_key("c") && p.len() == 3);
        p.insert("aa".into(), 7);
        p.insert("c".into(), 8);
        assert_eq!(p.keys().map(String::as_str).collect::<Vec<_>>(), ["a", "aa", "b", "c"]);
        assert_eq!(p.get("c"), Some(&8));
    }
}
