//! The `email` format: Go's `net/mail.ParseAddress` succeeds, as kube-openapi asks it. A port
//! of its address parser for one address: an addr-spec (`local@domain`, dot-atoms or a quoted
//! local part; no domain literals) optionally followed by a comment, or a display name (words,
//! quoted strings) and an angle-addr, or a group holding one address; spaces and tabs (not
//! other white space) and parenthesized comments between them. RFC 2047 encoded words are
//! taken as plain words.

/// Whether Go's `mail.ParseAddress(s)` succeeds.
pub fn is_email(s: &str) -> bool {
    let mut p = Parser { s };
    let Some(count) = p.address(true) else { return false };
    p.skip_cfws() && p.s.is_empty() && count == 1
}

struct Parser<'a> {
    s: &'a str,
}

/// RFC 5322 atext (with `.` when `dot`; with most specials when `permissive`), UTF-8 allowed.
fn is_atext(c: char, dot: bool, permissive: bool) -> bool {
    match c {
        '.' => dot,
        '(' | ')' | '[' | ']' | ';' | '@' | '\\' | ',' => permissive,
        '<' | '>' | '"' | ':' => false,
        c => is_vchar(c),
    }
}

fn is_vchar(c: char) -> bool {
    ('!'..='~').contains(&c) || !c.is_ascii()
}

fn is_wsp(c: char) -> bool {
    c == ' ' || c == '\t'
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        self.s = self.s.trim_start_matches([' ', '\t']);
    }

    fn consume(&mut self, c: char) -> bool {
        match self.s.strip_prefix(c) {
            Some(rest) => {
                self.s = rest;
                true
            }
            None => false,
        }
    }

    /// An address; the number of mailboxes it holds (a group may hold several or none).
    fn address(&mut self, handle_group: bool) -> Option<usize> {
        self.skip_space();
        if self.s.is_empty() {
            return None;
        }
        // An addr-spec is tried first, then a display name and an angle-addr.
        if self.addr_spec() {
            self.skip_space();
            if self.s.starts_with('(') && !self.display_name_comment() {
                return None;
            }
            return Some(1);
        }
        if !self.s.starts_with('<') {
            self.phrase()?;
        }
        self.skip_space();
        if handle_group && self.consume(':') {
            return self.group_list();
        }
        if !self.consume('<') || !self.addr_spec() || !self.consume('>') {
            return None;
        }
        Some(1)
    }

    fn group_list(&mut self) -> Option<usize> {
        self.skip_space();
        if self.consume(';') {
            self.skip_cfws();
            return Some(0);
        }
        let mut count = 0;
        loop {
            self.skip_space();
            count += self.address(false)?;
            if !self.skip_cfws() {
                return None;
            }
            if self.consume(';') {
                self.skip_cfws();
                return Some(count);
            }
            if !self.consume(',') {
                return None;
            }
        }
    }

    /// `local@domain`; on failure nothing is consumed.
    fn addr_spec(&mut self) -> bool {
        let orig = self.s;
        let ok = self.addr_spec_parts();
        if !ok {
            self.s = orig;
        }
        ok
    }

    fn addr_spec_parts(&mut self) -> bool {
        self.skip_space();
        if self.s.is_empty() {
            return false;
        }
        let local = if self.s.starts_with('"') {
            self.quoted_string().is_some_and(|q| !q.is_empty())
        } else {
            self.atom(true, false)
        };
        if !local || !self.consume('@') {
            return false;
        }
        self.skip_space();
        !self.s.is_empty() && self.atom(true, false)
    }

    /// A display name: one or more words; errors after the first word end it quietly.
    fn phrase(&mut self) -> Option<()> {
        let mut words = 0;
        loop {
            self.skip_space();
            if self.s.is_empty() {
                break;
            }
            let ok = if self.s.starts_with('"') { self.quoted_string().is_some() } else { self.atom(true, true) };
            if !ok {
                break;
            }
            words += 1;
        }
        (words > 0).then_some(())
    }

    /// A quoted string's content; `None` when it is unclosed or holds a bad character.
    fn quoted_string(&mut self) -> Option<String> {
        let mut content = String::new();
        let mut escaped = false;
        let mut chars = self.s.char_indices().skip(1);
        loop {
            let (i, c) = chars.next()?;
            if escaped {
                if !is_vchar(c) && !is_wsp(c) {
                    return None;
                }
                content.push(c);
                escaped = false;
            } else if c == '"' {
                self.s = self.s.get(i + 1..).unwrap_or_default();
                return Some(content);
            } else if c == '\\' {
                escaped = true;
            } else if is_vchar(c) || is_wsp(c) {
                content.push(c);
            } else {
                return None;
            }
        }
    }

    /// A (dot-)atom; strict atoms may not start or end with a dot or hold two in a row.
    fn atom(&mut self, dot: bool, permissive: bool) -> bool {
        let end = self.s.find(|c| !is_atext(c, dot, permissive)).unwrap_or(self.s.len());
        if end == 0 {
            return false;
        }
        let (atom, rest) = self.s.split_at(end);
        if !permissive && (atom.starts_with('.') || atom.contains("..") || atom.ends_with('.')) {
            return false;
        }
        self.s = rest;
        true
    }

    /// Spaces and comments; false for an unclosed comment.
    fn skip_cfws(&mut self) -> bool {
        self.skip_space();
        while self.consume('(') {
            if !self.comment() {
                return false;
            }
            self.skip_space();
        }
        true
    }

    fn display_name_comment(&mut self) -> bool {
        self.consume('(') && self.comment()
    }

    /// The rest of a comment whose `(` was consumed; nested comments and `\` escapes count.
    fn comment(&mut self) -> bool {
        let mut depth = 1;
        let mut bytes = self.s.as_bytes().iter().enumerate().peekable();
        let mut end = self.s.len();
        while depth > 0 {
            let Some((i, b)) = bytes.next() else { break };
            match b {
                b'\\' if bytes.peek().is_some() => {
                    bytes.next();
                }
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {}
            }
            end = i + 1;
        }
        if depth > 0 {
            return false;
        }
        self.s = self.s.get(end..).unwrap_or_default();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_go_parses_them() {
        for good in [
            "a@b.c",
            "a@b",
            "Jane <jane@example.com>",
            "\"Jane Doe\" <jane@example.com>",
            "<a@b.c>",
            "\"quoted local\"@b.c",
            "a@b.c (a comment)",
            "a@b.c (nested (comment))",
            "  a@b.c\t",
            "Ünï <u@b.c>",
            "group: a@b.c;",
            "a.b+tag@c.d",
        ] {
            assert!(is_email(good), "{good:?} is an address for Go");
        }
        for bad in [
            "",
            "nope",
            "a@",
            "a.@b.c",
            ".a@b.c",
            "a..b@c.d",
            "a@b.c.",
            "a@b.c\n",
            "\na@b.c",
            "Jane <jane@example.com>\u{a0}",
            "a@[1.2.3.4]",
            ":Jane <jane@example.com>",
            "\"Jane <jane@example.com>",
            "Jane <jane@example.com",
            "a@b.c (unclosed",
            "\"\"@b.c",
            "group:;",
            "group: a@b.c, d@e.f;",
            "a@b.c, d@e.f",
        ] {
            assert!(!is_email(bad), "{bad:?} is not an address for Go");
        }
    }
}
