//! The label selector language as apimachinery's `labels.Parse` reads it: its lexer (keywords
//! `in`/`notin`, operator symbols scanned greedily, whitespace-delimited identifiers), its
//! recursive-descent parser with the same lookahead quirks, and `NewRequirement`'s checks, so
//! that every accepted and refused selector, and every error text, is Kubernetes' own.
//!
//! Quirks kept on purpose because clients see them: `in`/`notin` are plain words where a value
//! is expected (`a in (in)`), `()` and empty list items stand for the empty value
//! (`a notin ()` is valid), and a NUL byte ends the input as the end of the string does.

use super::LabelRequirement;
use crate::core::field::{FieldError, Path, aggregate};
use crate::core::names;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    End,
    ClosePar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The token a literal spells, when it spells one.
fn keyword(literal: &[u8]) -> Option<Token> {
    Some(match literal {
        b")" => Token::ClosePar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// The next byte, or 0 at the end (a NUL byte in the text reads the same).
    fn read(&mut self) -> u8 {
        match self.text.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn next(&mut self) -> (Token, String) {
        let mut b = self.read();
        while is_whitespace(b) {
            b = self.read();
        }
        if b == 0 {
            return (Token::End, String::new());
        }
        self.unread();
        if is_special(b) { self.symbol() } else { self.word() }
    }

    /// A run of non-special, non-blank bytes: a keyword or an identifier.
    fn word(&mut self) -> (Token, String) {
        let start = self.pos;
        let end = loop {
            let before = self.pos;
            let b = self.read();
            if b == 0 {
                // A NUL byte ends the word and is consumed; the end of the text just ends it.
                break before;
            }
            if is_special(b) || is_whitespace(b) {
                self.unread();
                break self.pos;
            }
        };
        let literal = self.text.get(start..end).unwrap_or_default();
        (keyword(literal).unwrap_or(Token::Identifier), String::from_utf8_lossy(literal).into_owned())
    }

    /// The longest operator symbol starting here (`!=` over `!`, `==` over `=`).
    fn symbol(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut found: Option<(Token, usize)> = None;
        loop {
            let b = self.read();
            if b == 0 {
                break;
            }
            if !is_special(b) {
                self.unread();
                break;
            }
            match keyword(self.text.get(start..self.pos).unwrap_or_default()) {
                Some(token) => found = Some((token, self.pos)),
                None if found.is_some() => {
                    self.unread();
                    break;
                }
                None => {}
            }
        }
        match found {
            Some((token, end)) => {
                (token, String::from_utf8_lossy(self.text.get(start..end).unwrap_or_default()).into_owned())
            }
            None => {
                let scanned = String::from_utf8_lossy(self.text.get(start..self.pos).unwrap_or_default()).into_owned();
                (Token::Error, format!("error expected: keyword found '{scanned}'"))
            }
        }
    }
}

/// Where a token is read: after a key an `in` is the operator; among values it is a word.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Operator {
    Exists,
    DoesNotExist,
    Equals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
}

impl Parser {
    fn new(text: &str) -> Parser {
        let mut lexer = Lexer { text: text.as_bytes(), pos: 0 };
        let mut items = Vec::new();
        loop {
            let item = lexer.next();
            let end = item.0 == Token::End;
            items.push(item);
            if end {
                return Parser { items, position: 0 };
            }
        }
    }

    fn in_context(token: Token, context: Context) -> Token {
        match token {
            Token::In | Token::NotIn if context == Context::Values => Token::Identifier,
            other => other,
        }
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        // The scan always ends with `End`, and no rule consumes past it.
        let (token, literal) = self.items.get(self.position).cloned().unwrap_or((Token::End, String::new()));
        (Parser::in_context(token, context), literal)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self.requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let (next, next_literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!("found '{next_literal}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{literal}', expected: ',' or 'end of string'")),
                    }
                }
                Token::End => return Ok(requirements),
                _ => return Err(format!("found '{literal}', expected: !, identifier, or 'end of string'")),
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, inferred) = self.key_and_inferred_operator()?;
        if let Some(operator) = inferred {
            return new_requirement(key, operator, Vec::new());
        }
        let operator = self.operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, operator, values)
    }

    /// The key, and the operator when none follows it (`key` exists, `!key` does not).
    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let (mut token, mut literal) = self.consume(Context::Values);
        let negated = token == Token::DoesNotExist;
        if negated {
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let problems = names::qualified_name(&literal);
        if !problems.is_empty() {
            return Err(FieldError::invalid(Path::nil(), literal.as_str(), problems.join("; ")).to_string());
        }
        let (next, _) = self.lookahead(Context::Values);
        let inferred = if negated {
            Some(Operator::DoesNotExist)
        } else if matches!(next, Token::End | Token::Comma) {
            Some(Operator::Exists)
        } else {
            None
        };
        Ok((literal, inferred))
    }

    fn operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            _ => return Err(format!("found '{literal}', expected: in, notin, =, ==, !=, gt, lt")),
        })
    }

    /// `(a,b)`; `()` and empty items are the empty value. Sorted and without repeats.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        let mut values = match token {
            Token::Identifier | Token::Comma => {
                let values = self.value_list()?;
                // Kubernetes names the token that opened the list here, not the one found.
                if self.consume(Context::Values).0 != Token::ClosePar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                values
            }
            Token::ClosePar => {
                self.consume(Context::Values);
                vec![String::new()]
            }
            _ => return Err(format!("found '{literal}', expected: ',', ')' or identifier")),
        };
        values.sort();
        values.dedup();
        Ok(values)
    }

    fn value_list(&mut self) -> Result<Vec<String>, String> {
        let mut values = Vec::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.push(literal);
                    let (next, next_literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => {}
                        Token::ClosePar => return Ok(values),
                        _ => return Err(format!("found '{next_literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosePar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.push(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.lookahead(Context::Values).0, Token::End | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.consume(Context::Values) {
            (Token::Identifier, value) => Ok(vec![value]),
            (_, literal) => Err(format!("found '{literal}', expected: identifier")),
        }
    }
}

/// `NewRequirement`'s checks of the values (the key was checked by the parser), reported as
/// its aggregated field errors.
fn new_requirement(key: String, operator: Operator, values: Vec<String>) -> Result<LabelRequirement, String> {
    let mut errors = Vec::new();
    let values_path = Path::new("values");
    let mut number = None;
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, value) in values.iter().enumerate() {
            match value.parse::<i64>() {
                Ok(n) => number = Some(n),
                Err(_) => errors.push(FieldError::invalid(
                    values_path.index(i),
                    value.as_str(),
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                )),
            }
        }
    }
    for (i, value) in values.iter().enumerate() {
        let problems = names::label_value(value);
        if !problems.is_empty() {
            errors.push(FieldError::invalid(values_path.index(i).key(&key), value.as_str(), problems.join("; ")));
        }
    }
    if !errors.is_empty() {
        return Err(aggregate(&errors));
    }
    let first = || values.first().cloned().unwrap_or_default();
    Ok(match operator {
        Operator::Exists => LabelRequirement::Exists(key),
        Operator::DoesNotExist => LabelRequirement::NotExists(key),
        Operator::Equals => LabelRequirement::Equals(key, first()),
        Operator::NotEquals => LabelRequirement::NotEquals(key, first()),
        Operator::In => LabelRequirement::In(key, values),
        Operator::NotIn => LabelRequirement::NotIn(key, values),
        Operator::GreaterThan => LabelRequirement::GreaterThan(key, number.unwrap_or_default()),
        Operator::LessThan => LabelRequirement::LessThan(key, number.unwrap_or_default()),
    })
}

/// Parses a label selector; the error is Kubernetes' text.
pub fn parse(text: &str) -> Result<Vec<LabelRequirement>, String> {
    Parser::new(text).parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(text).unwrap_err()
    }

    #[test]
    fn accepts_what_kubernetes_accepts() {
        use LabelRequirement::*;
        let ok = |text: &str| parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(ok(""), vec![]);
        assert_eq!(ok("  "), vec![]);
        assert_eq!(ok("a notin ()"), vec![NotIn("a".into(), vec![String::new()])]);
        assert_eq!(ok("a in ()"), vec![In("a".into(), vec![String::new()])]);
        assert_eq!(ok("x in (foo,,baz),y,z notin ()").len(), 3);
        assert_eq!(ok("x in (foo,,baz)")[0], In("x".into(), vec![String::new(), "baz".into(), "foo".into()]));
        assert_eq!(ok("x in (,a)")[0], In("x".into(), vec![String::new(), "a".into()]));
        assert_eq!(ok("x in (a,)")[0], In("x".into(), vec![String::new(), "a".into()]));
        assert_eq!(ok("value in (in, notin)")[0], In("value".into(), vec!["in".into(), "notin".into()]));
        assert_eq!(ok("a="), vec![Equals("a".into(), String::new())]);
        assert_eq!(ok("a=,b"), vec![Equals("a".into(), String::new()), Exists("b".into())]);
        assert_eq!(ok("a==b"), vec![Equals("a".into(), "b".into())]);
        assert_eq!(ok("a!=b"), vec![NotEquals("a".into(), "b".into())]);
        assert_eq!(ok("!a"), vec![NotExists("a".into())]);
        assert_eq!(ok("! a"), vec![NotExists("a".into())]);
        assert_eq!(ok("a>1,b<2"), vec![GreaterThan("a".into(), 1), LessThan("b".into(), 2)]);
        assert_eq!(ok("example.com/app=web"), vec![Equals("example.com/app".into(), "web".into())]);
        assert_eq!(ok("a\tin\n(b)"), vec![In("a".into(), vec!["b".into()])]);
        // A NUL byte where a token starts reads as the end of the string.
        assert_eq!(ok("a=b \0garbage ("), vec![Equals("a".into(), "b".into())]);
    }

    #[test]
    fn refuses_with_kubernetes_texts() {
        assert_eq!(error("env in gold"), "unable to parse requirement: found 'gold' expected: '('");
        assert_eq!(error("a in (b"), "unable to parse requirement: found '', expected: ',' or ')'");
        assert_eq!(error("a in (b c)"), "unable to parse requirement: found 'c', expected: ',' or ')'");
        assert_eq!(error("a in (=)"), "unable to parse requirement: found '=', expected: ',', ')' or identifier");
        assert_eq!(error("a in (,=)"), "unable to parse requirement: found '=', expected: ',', or identifier");
        assert_eq!(error("a in ("), "unable to parse requirement: found '', expected: ',', ')' or identifier");
        assert_eq!(error("a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
        assert_eq!(error("a=b c"), "found 'c', expected: ',' or 'end of string'");
        // Inside a word it only ends the word.
        assert_eq!(error("a=b\0c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(error("a=b,"), "found '', expected: identifier after ','");
        assert_eq!(error("a,,b"), "found ',', expected: identifier after ','");
        assert_eq!(error(",a"), "found ',', expected: !, identifier, or 'end of string'");
        assert_eq!(error("=a"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(error("!"), "unable to parse requirement: found '', expected: identifier");
        assert_eq!(error("!!a"), "unable to parse requirement: found '!', expected: identifier");
        assert_eq!(error("a=(b)"), "unable to parse requirement: found '(', expected: identifier");
        assert_eq!(
            error("a>b"),
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            error("a>-1"),
            "unable to parse requirement: values[0][a]: Invalid value: \"-1\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert_eq!(
            error("a>x-"),
            "unable to parse requirement: [values[0]: Invalid value: \"x-\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][a]: Invalid value: \"x-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]"
        );
        assert_eq!(
            error("-a"),
            "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert!(error(&format!("a={}", "v".repeat(64))).contains("must be no more than 63 bytes"));
    }
}
