//! Tests of the CEL module: the docs examples, compile errors, cost, libraries.
