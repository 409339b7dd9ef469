//! `anyOf`, `oneOf`, `allOf` and `not`, as kube-openapi's `schemaPropsValidator` evaluates
//! them: a failing `anyOf`/`oneOf` reports the failures of its closest branch (highest match
//! count, first on ties) after its own message; `allOf` reports every branch's failures.
//!
//! Branches validate the same value at the same path, without ratcheting of their own.

use serde_json::Value;

use super::result::{Loc, OaError, Outcome};
use super::value;
use crate::core::field::go_quote;
use crate::schema::node::Schema;

pub(super) fn validate(s: &Schema, data: &Value, loc: &Loc<'_>) -> Outcome {
    let mut main = Outcome::default();
    if !s.any_of.is_empty() {
        any_of(&s.any_of, data, loc, &mut main);
    }
    if !s.one_of.is_empty() {
        one_of(&s.one_of, data, loc, &mut main);
    }
    if !s.all_of.is_empty() {
        let mut validated = 0;
        for branch in &s.all_of {
            let result = value::validate(branch, data, loc, None);
            if result.is_valid() {
                validated += 1;
            }
            main.merge(result);
        }
        if validated != s.all_of.len() {
            let more = if validated == 0 { ". None validated" } else { "" };
            main.add(OaError::Plain(format!("{} must validate all the schemas (allOf){more}", quoted(loc))));
        }
    }
    if let Some(not) = &s.not
        && value::validate(not, data, loc, None).is_valid()
    {
        main.add(OaError::Plain(format!("{} must not validate the schema (not)", quoted(loc))));
    }
    main.inc();
    main
}

fn quoted(loc: &Loc<'_>) -> String {
    go_quote(&loc.render())
}

fn any_of(branches: &[Schema], data: &Value, loc: &Loc<'_>, main: &mut Outcome) {
    let mut best: Option<Outcome> = None;
    let mut success: Option<Outcome> = None;
    for branch in branches {
        let result = value::validate(branch, data, loc, None);
        if result.is_valid() {
            best = None;
            success = Some(result);
            break;
        }
        if best.as_ref().is_none_or(|b| result.matches > b.matches) {
            best = Some(result);
        }
    }
    if success.is_none() {
        main.add(OaError::Plain(format!("{} must validate at least one schema (anyOf)", quoted(loc))));
    }
    if let Some(chosen) = best.or(success) {
        main.merge(chosen);
    }
}

fn one_of(branches: &[Schema], data: &Value, loc: &Loc<'_>, main: &mut Outcome) {
    let mut best: Option<Outcome> = None;
    let mut success: Option<Outcome> = None;
    let mut validated = 0;
    for branch in branches {
        let result = value::validate(branch, data, loc, None);
        if result.is_valid() {
            validated += 1;
            best = None;
            if success.is_none() {
                success = Some(result);
            }
            continue;
        }
        if validated == 0 && best.as_ref().is_none_or(|b| result.matches > b.matches) {
            best = Some(result);
        }
    }
    if validated != 1 {
        let more = if validated == 0 {
            "Found none valid".to_string()
        } else {
            format!("Found {validated} valid alternatives")
        };
        main.add(OaError::Plain(format!("{} must validate one and only one schema (oneOf). {more}", quoted(loc))));
        if let Some(best) = best {
            main.merge(best);
        }
    } else if let Some(success) = success {
        main.merge(success);
    }
}
