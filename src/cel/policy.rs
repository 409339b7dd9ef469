//! CEL for admission: the expressions of ValidatingAdmissionPolicies and of webhooks'
//! `matchConditions`, compiled once over named variables that are all `dyn` (as Kubernetes
//! declares `object`, `oldObject`, `request`, `params`, `namespaceObject`, `variables`) and
//! evaluated over unstructured JSON with Kubernetes' per-call cost limit.
//!
//! Owns this entry point into the engine; the engine itself (checking, cost, libraries) is the
//! same as for `x-kubernetes-validations`. Never sees HTTP or admission decisions.

use serde_json::Value as Json;

use super::compile::{self, Program};
use super::eval::Evaluator;
use super::types::Type;
use super::validator::PER_CALL_LIMIT;
use super::value::{Str, Value, from_json, from_untyped};

/// What an expression must evaluate to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Bool,
    String,
    Any,
    /// A MutatingAdmissionPolicy apply configuration: an `Object{...}` literal.
    ApplyConfiguration,
    /// A MutatingAdmissionPolicy JSON patch: a list of `JSONPatch{...}` literals.
    JsonPatch,
}

/// A compiled admission expression.
#[derive(Debug)]
pub struct Expression {
    program: Program,
    /// The slot of the `authorizer` variable, when the expression's environment has one.
    authorizer_slot: Option<usize>,
    /// The variable slots the program reads, one bit each: only those are bound to values
    /// when it is evaluated.
    reads: u64,
    /// Apply-configuration literals named against their field path (reported when the
    /// expression's result is used, as Kubernetes reports them).
    pub type_mismatches: Vec<String>,
}

pub use super::library::authz::{Authorize, Check, Verdict};

/// The result of an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Bool(bool),
    String(String),
    /// Anything else, as JSON when it has a JSON form (`null` otherwise).
    Other(Json),
}

impl Expression {
    /// Compiles `source` over `variables` (their order is the order of the values given to
    /// [`Expression::evaluate`]).
    pub fn compile(source: &str, variables: &[&str], want: Want) -> Result<Expression, String> {
        let authorizer_slot = variables.iter().position(|v| *v == "authorizer");
        let (want_ty, mutation) = match want {
            Want::Bool => (Some(Type::Bool), false),
            Want::String => (Some(Type::String), false),
            Want::Any => (None, false),
            Want::ApplyConfiguration | Want::JsonPatch => (None, true),
        };
        let compiled = compile::compile_admission(source, variables, want_ty, mutation)?;
        let expected = match want {
            Want::ApplyConfiguration => Some(super::mutation::LiteralKind::Object(super::mutation::OBJECT.into()).ty()),
            Want::JsonPatch => Some(Type::list(super::mutation::LiteralKind::JsonPatch.ty())),
            _ => None,
        };
        if let Some(expected) = expected.filter(|e| *e != compiled.ty) {
            return Err(format!("must evaluate to {expected} but got {}", compiled.ty));
        }
        let reads = compiled.program.ir.slots_read();
        Ok(Expression { program: compiled.program, authorizer_slot, reads, type_mismatches: compiled.type_mismatches })
    }

    /// Whether the program reads the variable at `index` of the `variables` it was compiled
    /// over (when it does not, evaluating it never looks at that variable's value).
    pub fn reads(&self, index: usize) -> bool {
        index < 64 && self.reads & (1 << index) != 0
    }

    /// The estimated maximum cost.
    pub fn max_cost(&self) -> u64 {
        self.program.max_cost
    }

    /// Evaluates over the JSON variables' values (`None`: null), the `authorizer` (bound in its
    /// slot; without one its calls fail) and, for `variables`-style composition, already
    /// computed values of earlier expressions (`extra`, one map value per name, in the last
    /// slot).
    pub fn evaluate(
        &self,
        values: &[Option<&Json>],
        authorizer: Option<&std::sync::Arc<dyn Authorize>>,
        extra: Option<&[(String, Outcome)]>,
    ) -> Result<Outcome, String> {
        let any = super::schema::any_node();
        // One allocation: the variables, the authorizer, `variables`, and room for the
        // bindings of a few nested comprehensions. Only the variables the program reads are
        // converted (and the authorizer built); the others are null, never looked at.
        let count = values.len() + usize::from(self.authorizer_slot.is_some());
        let mut slots: Vec<Value<'_>> = Vec::with_capacity(count + 7);
        slots.resize_with(count, || Value::Null);
        let mut read =
            self.reads & 1u64.checked_shl(u32::try_from(count).unwrap_or(u32::MAX)).map_or(u64::MAX, |b| b - 1);
        while read != 0 {
            let slot = read.trailing_zeros() as usize;
            read &= read - 1;
            let value = match self.authorizer_slot {
                Some(a) if a == slot => authorizer
                    .map(|a| Value::Authz(std::rc::Rc::new(super::library::authz::Authz::root(a.clone()))))
                    .unwrap_or(Value::Null),
                // The JSON values fill the slots around the authorizer's.
                a => {
                    let index = if a.is_some_and(|a| a < slot) { slot - 1 } else { slot };
                    values
                        .get(index)
                        .copied()
                        .flatten()
                        .map_or(Value::Null, |j| from_json(j, any).unwrap_or(Value::Null))
                }
            };
            if let Some(s) = slots.get_mut(slot) {
                *s = value;
            }
        }
        let read = self.reads(count);
        match extra {
            Some(_) if !read => slots.push(Value::Null),
            Some([]) => {
                // No variables were computed: an empty map, with nothing to allocate.
                static NONE: std::sync::LazyLock<serde_json::Map<String, Json>> =
                    std::sync::LazyLock::new(serde_json::Map::new);
                slots.push(Value::Map(super::value::MapData::Json(&NONE, any)));
            }
            Some(extra) => {
                let entries =
                    extra.iter().map(|(name, outcome)| (Value::Str(Str::Borrowed(name)), to_value(outcome))).collect();
                slots.push(Value::Map(super::value::MapData::Owned(std::rc::Rc::new(entries))));
            }
            None => {}
        }
        let mut evaluator = Evaluator::with_slots(slots, PER_CALL_LIMIT);
        let result = evaluator.eval(&self.program.ir).map_err(|e| e.message)?;
        Ok(match result {
            Value::Bool(b) => Outcome::Bool(b),
            Value::Str(s) => Outcome::String(s.as_str().to_string()),
            other => Outcome::Other(to_json(&other)),
        })
    }
}

fn to_value(outcome: &Outcome) -> Value<'_> {
    match outcome {
        Outcome::Bool(b) => Value::Bool(*b),
        Outcome::String(s) => Value::Str(Str::Borrowed(s)),
        Outcome::Other(json) => from_untyped(json),
    }
}

/// The JSON form of a value (lists, maps, scalars); `null` for what has none.
fn to_json(value: &Value<'_>) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Uint(u) => Json::from(*u),
        Value::Double(d) => serde_json::Number::from_f64(*d).map_or(Json::Null, Json::Number),
        Value::Str(s) => Json::String(s.as_str().to_string()),
        Value::List(l) => Json::Array(l.items().unwrap_or_default().iter().map(to_json).collect()),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for key in super::value::map_keys(m) {
                if let (Value::Str(k), Some(Ok(v))) = (&key, super::value::map_get(m, &key)) {
                    out.insert(k.as_str().to_string(), to_json(&v));
                }
            }
            Json::Object(out)
        }
        Value::Object(o) => Json::Object(o.fields.clone()),
        _ => Json::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Allows `get` of `crontabs` in `default` to the request's user, and nothing else.
    struct Table;

    impl Authorize for Table {
        fn check(&self, check: &Check) -> Verdict {
            let allowed = check.service_account.is_none()
                && check.resource == "crontabs"
                && check.namespace == "default"
                && check.verb == "get";
            Verdict { allowed, reason: if allowed { "" } else { "no rule" }.into(), error: String::new() }
        }

        fn request_resource(&self) -> Check {
            Check { resource: "crontabs".into(), namespace: "default".into(), ..Check::default() }
        }
    }

    #[test]
    fn the_authorizer_library() {
        let vars = ["object", "authorizer"];
        let authorizer: std::sync::Arc<dyn Authorize> = std::sync::Arc::new(Table);
        let run = |source: &str| {
            Expression::compile(source, &vars, Want::Any).unwrap().evaluate(&[None], Some(&authorizer), None).unwrap()
        };
        let crontabs = "authorizer.group('stable.example.com').resource('crontabs').namespace('default')";
        assert_eq!(run(&format!("{crontabs}.check('get').allowed()")), Outcome::Bool(true));
        assert_eq!(run(&format!("{crontabs}.check('delete').allowed()")), Outcome::Bool(false));
        assert_eq!(run(&format!("{crontabs}.check('delete').reason()")), Outcome::String("no rule".into()));
        assert_eq!(run(&format!("{crontabs}.name('x').check('get').errored()")), Outcome::Bool(false));
        assert_eq!(
            run(
                "authorizer.serviceAccount('ns', 'sa').group('').resource('crontabs').namespace('default').check('get').allowed()"
            ),
            Outcome::Bool(false)
        );
        assert_eq!(run("authorizer.path('/healthz').check('get').allowed()"), Outcome::Bool(false));
        assert_eq!(run("authorizer.requestResource.check('get').allowed()"), Outcome::Bool(true));
        assert_eq!(run("authorizer.requestResource.check('patch').allowed()"), Outcome::Bool(false));
        assert!(
            Expression::compile("authorizer.resource('x')", &vars, Want::Any).is_err(),
            "resource needs a group first"
        );
    }

    #[test]
    fn only_the_variables_read_are_bound() {
        let vars = ["object", "oldObject", "request", "authorizer", "variables"];
        let compiled = |source: &str| Expression::compile(source, &vars, Want::Bool).unwrap();
        let plain = compiled("object.spec.replicas <= 100 && [1].all(v, v > 0)");
        assert!(plain.reads(0));
        assert!(!plain.reads(1) && !plain.reads(2) && !plain.reads(3) && !plain.reads(4));
        let both = compiled("request.name == 'a' || variables.big");
        assert!(both.reads(2) && both.reads(4) && !both.reads(0));
        // A slot left unbound is never looked at: the values after it still land in theirs.
        let object = json!({"spec": {"replicas": 3}});
        let request = json!({"name": "a"});
        let outcome = compiled("request.name == 'a' && object.spec.replicas == 3")
            .evaluate(&[Some(&object), None, Some(&request)], None, Some(&[]))
            .unwrap();
        assert_eq!(outcome, Outcome::Bool(true));
    }

    #[test]
    fn policy_expressions_over_unstructured_objects() {
        let vars = ["object", "oldObject", "params"];
        let object = json!({"spec": {"replicas": 3, "image": "nginx", "tags": ["a", "b"]}});
        let params = json!({"maxReplicas": 2});
        let check = |source: &str| {
            Expression::compile(source, &vars, Want::Any).unwrap().evaluate(
                &[Some(&object), None, Some(&params)],
                None,
                None,
            )
        };
        assert_eq!(check("object.spec.replicas <= params.maxReplicas").unwrap(), Outcome::Bool(false));
        assert_eq!(check("oldObject == null").unwrap(), Outcome::Bool(true));
        assert_eq!(check("object.spec.tags.exists(t, t == 'b')").unwrap(), Outcome::Bool(true));
        assert_eq!(check("'image ' + object.spec.image").unwrap(), Outcome::String("image nginx".into()));
        assert_eq!(check("object.spec.missing").unwrap_err(), "no such key: missing");
        assert!(
            Expression::compile("object.spec.replicas +", &vars, Want::Bool)
                .unwrap_err()
                .starts_with("compilation failed: ")
        );
        assert!(
            Expression::compile("nope.x", &vars, Want::Bool).unwrap_err().contains("undeclared reference to 'nope'")
        );
        assert_eq!(
            Expression::compile("'a'", &vars, Want::Bool).unwrap_err(),
            "cel expression must evaluate to a bool"
        );
        let composed =
            Expression::compile("variables.big && object.spec.image == 'nginx'", &["object", "variables"], Want::Bool)
                .unwrap()
                .evaluate(&[Some(&object)], None, Some(&[("big".to_string(), Outcome::Bool(true))]))
                .unwrap();
        assert_eq!(composed, Outcome::Bool(true));
    }

    #[test]
    fn mutation_expressions_build_objects_and_patches() {
        let vars = ["object", "oldObject"];
        let object = json!({"metadata": {"name": "a"}, "spec": {"replicas": 3}});
        let run = |source: &str, want: Want| {
            Expression::compile(source, &vars, want).unwrap().evaluate(&[Some(&object), None], None, None).unwrap()
        };
        assert_eq!(
            run(
                "Object{spec: Object.spec{replicas: object.spec.replicas + 1, ?paused: optional.none()}}",
                Want::ApplyConfiguration
            ),
            Outcome::Other(json!({"spec": {"replicas": 4}}))
        );
        assert_eq!(
            run(
                "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('example.com/x'), value: 'y'}]",
                Want::JsonPatch
            ),
            Outcome::Other(json!([{"op": "add", "path": "/metadata/labels/example.com~1x", "value": "y"}]))
        );
        let refused = |source: &str, want: Want| Expression::compile(source, &vars, want).unwrap_err();
        assert_eq!(refused("object", Want::ApplyConfiguration), "must evaluate to Object but got dyn");
        assert_eq!(refused("[1]", Want::JsonPatch), "must evaluate to list(JSONPatch) but got list(int)");
        assert_eq!(refused("Object.spec{}", Want::ApplyConfiguration), "must evaluate to Object but got Object.spec");
        assert!(
            refused("[JSONPatch{op: 1, path: '/a'}]", Want::JsonPatch)
                .contains("expected type of field 'op' is 'string' but provided type is 'int'")
        );
        assert!(refused("[JSONPatch{verb: 'add'}]", Want::JsonPatch).contains("undefined field 'verb'"));
        // Object literals and jsonpatch belong to mutations only.
        assert!(refused("Object{} == Object{}", Want::Bool).contains("object creation is not supported"));
        assert!(refused("jsonpatch.escapeKey('a') == 'a'", Want::Bool).contains("undeclared reference to 'jsonpatch'"));
        let mismatched =
            Expression::compile("Object{spec: Object.spec{x: Object.spec.y{}}}", &vars, Want::ApplyConfiguration)
                .unwrap();
        assert_eq!(mismatched.type_mismatches.len(), 1);
    }
}
