//! Object metadata: `metadata` decoded as the ObjectMeta type (unknown fields reported,
//! values normalized), apimachinery's ObjectMeta rules, and the embedded resources
//! (`x-kubernetes-embedded-resource`) whose metadata follows the same rules.

pub mod embedded;
pub mod rules;
pub mod typed;

pub use rules::{NameRule, finalizer_warnings};
pub use typed::{Coerced, coerce, is_normal};
