//! Sets of field paths (structured-merge-diff's `fieldpath.Set`): a tree whose nodes list the
//! path elements that are members at that level and the children that lead further down.
//! Being a child does not make an element a member: `.spec.a` in a set does not put `.spec`
//! in it.
//!
//! Both levels are kept sorted by [`PathElement`]'s order, so every walk visits paths in the
//! order Kubernetes serializes and reports them.

use std::collections::{BTreeMap, BTreeSet};

use super::path::{Path, PathElement};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    pub fn new() -> Set {
        Set::default()
    }

    /// A set of the given paths.
    pub fn of(paths: &[Path]) -> Set {
        let mut set = Set::new();
        for path in paths {
            set.insert(path);
        }
        set
    }

    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// Adds a path (its parents are not added). The empty path names the whole object, which
    /// nobody owns: it is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        self.insert_below(parents, last);
    }

    /// Adds `last` below `parents`, cloning only the elements not there yet.
    fn insert_below(&mut self, parents: &[PathElement], last: &PathElement) {
        let Some((first, rest)) = parents.split_first() else {
            if !self.members.contains(last) {
                self.members.insert(last.clone());
            }
            return;
        };
        if let Some(child) = self.children.get_mut(first) {
            child.insert_below(rest, last);
            return;
        }
        let mut child = Set::new();
        child.insert_below(rest, last);
        self.children.insert(first.clone(), child);
    }

    /// Adds `child`'s paths below `element` (moved, not copied).
    pub fn add_child(&mut self, element: PathElement, child: Set) {
        match self.children.get_mut(&element) {
            Some(mine) => mine.merge(child),
            None => {
                self.children.insert(element, child);
            }
        }
    }

    /// Adds every path of `other`, as [`Set::union_with`], moving them.
    pub fn merge(&mut self, other: Set) {
        // An element already there stays: BTreeSet keeps the first of equal elements.
        self.members.extend(other.members);
        for (element, set) in other.children {
            self.add_child(element, set);
        }
    }

    /// Adds one member at this level.
    pub fn insert_member(&mut self, element: PathElement) {
        self.members.insert(element);
    }

    /// The child set under `element`, created when missing.
    pub fn descend(&mut self, element: &PathElement) -> &mut Set {
        self.children.entry(element.clone()).or_default()
    }

    pub fn has_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    /// The child set under `element`, if any.
    pub fn child(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element)
    }

    /// Whether the path is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut node = self;
        for element in parents {
            match node.child(element) {
                Some(next) => node = next,
                None => return false,
            }
        }
        node.has_member(last)
    }

    /// The paths under `element`, without the prefix (empty when there are none).
    pub fn with_prefix(&self, element: &PathElement) -> Set {
        self.child(element).cloned().unwrap_or_default()
    }

    /// Whether no path is a member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds every path of `other`.
    pub fn union_with(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (element, set) in &other.children {
            match self.children.get_mut(element) {
                Some(mine) => mine.union_with(set),
                None => {
                    self.children.insert(element.clone(), set.clone());
                }
            }
        }
    }

    /// Leaf paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, set) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                let both = set.intersection(theirs);
                if !both.is_empty() {
                    children.insert(element.clone(), both);
                }
            }
        }
        Set { members, children }
    }

    /// Paths of this set that are not members of `other` (a parent minus a child is still the
    /// parent).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, set) in &self.children {
            match other.children.get(element) {
                Some(theirs) => {
                    let rest = set.difference(theirs);
                    if !rest.is_empty() {
                        children.insert(element.clone(), rest);
                    }
                }
                None => {
                    children.insert(element.clone(), set.clone());
                }
            }
        }
        Set { members, children }
    }

    /// [`Set::difference`] in place.
    pub fn difference_with(&mut self, other: &Set) {
        self.members.retain(|m| !other.members.contains(m));
        self.children.retain(|element, set| match other.children.get(element) {
            Some(theirs) => {
                set.difference_with(theirs);
                !set.is_empty()
            }
            None => true,
        });
    }

    /// [`Set::recursive_difference`] in place.
    pub fn recursive_difference_with(&mut self, other: &Set) {
        self.members.retain(|m| !other.members.contains(m));
        self.children.retain(|element, set| {
            if other.has_member(element) {
                return false;
            }
            match other.child(element) {
                Some(theirs) => {
                    set.recursive_difference_with(theirs);
                    !set.is_empty()
                }
                None => true,
            }
        });
    }

    /// Like [`Set::difference`], but a member of `other` also removes everything below it.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, set) in &self.children {
            if other.has_member(element) {
                continue;
            }
            match other.child(element) {
                Some(theirs) => {
                    let rest = set.recursive_difference(theirs);
                    if !rest.is_empty() {
                        children.insert(element.clone(), rest);
                    }
                }
                None => {
                    children.insert(element.clone(), set.clone());
                }
            }
        }
        Set { members, children }
    }

    /// Every member path, depth first: the members of a level before the paths below it.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for member in &self.members {
            let mut path = prefix.clone();
            path.push(member.clone());
            out.push(path);
        }
        for (element, set) in &self.children {
            prefix.push(element.clone());
            set.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The members that are not also parents of other members.
    pub fn leaves(&self) -> Set {
        Set {
            members: self.members.iter().filter(|m| !self.children.contains_key(*m)).cloned().collect(),
            children: self.children.iter().map(|(pe, s)| (pe.clone(), s.leaves())).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::path::path_string;
    use super::*;

    fn p(parts: &[&str]) -> Path {
        parts.iter().map(|s| PathElement::field(s)).collect()
    }

    fn rendered(set: &Set) -> Vec<String> {
        set.paths().iter().map(|p| path_string(p)).collect()
    }

    #[test]
    fn insert_has_and_walk_order() {
        let set = Set::of(&[p(&["spec", "b", "c"]), p(&["spec", "a"]), p(&["metadata", "labels", "x"]), p(&["spec"])]);
        assert!(set.has(&p(&["spec", "a"])));
        assert!(set.has(&p(&["spec"])));
        assert!(!set.has(&p(&["spec", "b"])));
        assert!(!set.has(&[]));
        assert_eq!(rendered(&set), [".spec", ".metadata.labels.x", ".spec.a", ".spec.b.c"]);
    }

    #[test]
    fn algebra_matches_structured_merge_diff() {
        let a = Set::of(&[p(&["a"]), p(&["b", "c"]), p(&["b", "d"])]);
        let b = Set::of(&[p(&["b", "c"]), p(&["e"])]);
        assert_eq!(rendered(&a.union(&b)), [".a", ".e", ".b.c", ".b.d"]);
        assert_eq!(rendered(&a.intersection(&b)), [".b.c"]);
        assert_eq!(rendered(&a.difference(&b)), [".a", ".b.d"]);
        // A parent minus a child is the parent; a child minus its parent stays.
        let parent = Set::of(&[p(&["b"])]);
        assert_eq!(rendered(&a.difference(&parent)), [".a", ".b.c", ".b.d"]);
        assert_eq!(rendered(&a.recursive_difference(&parent)), [".a"]);
        assert!(a.difference(&a).is_empty());
    }

    /// Sets of up to six paths over a three-letter alphabet, up to three deep, from `seed`.
    fn generated(seed: &mut u64) -> Set {
        let mut next = |n: u64| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed % n
        };
        let mut set = Set::new();
        for _ in 0..next(7) {
            let path: Vec<String> = (0..=next(3)).map(|_| ["a", "b", "c"][next(3) as usize].to_string()).collect();
            set.insert(&p(&path.iter().map(String::as_str).collect::<Vec<_>>()));
        }
        set
    }

    #[test]
    fn in_place_operations_match_the_copying_ones() {
        let mut seed = 0x2545_f491_4f6c_dd1d;
        for _ in 0..2000 {
            let (a, b) = (generated(&mut seed), generated(&mut seed));
            let mut x = a.clone();
            x.difference_with(&b);
            assert_eq!(x, a.difference(&b));
            let mut x = a.clone();
            x.recursive_difference_with(&b);
            assert_eq!(x, a.recursive_difference(&b));
            let mut x = a.clone();
            x.merge(b.clone());
            assert_eq!(x, a.union(&b));
        }
    }

    #[test]
    fn leaves_drop_members_that_are_parents() {
        let set = Set::of(&[p(&["a"]), p(&["a", "b"]), p(&["c"])]);
        assert_eq!(rendered(&set.leaves()), [".c", ".a.b"]);
    }
}
