//! MCP tool input schemas → what the Gemini API accepts.
//!
//! MCP servers describe their arguments with whatever JSON Schema their SDK writes:
//! draft-07 from zod, 2020-12 with `$defs`/`$ref` from pydantic, type arrays, `const`,
//! `propertyNames`, `exclusiveMinimum`, OpenAPI-derived `oneOf` trees. Gemini rejects
//! many of these (400 or `MALFORMED_FUNCTION_CALL`). [`normalize`] turns any such schema
//! into the subset Gemini accepts as `parametersJsonSchema`, keeping what matters to the
//! model (descriptions, enums, required fields) and folding what it cannot keep into
//! descriptions where that helps (defaults, non-string allowed values, formats):
//!
//! - local `$ref`s (`#/$defs/X`, `#/definitions/X`, any JSON pointer, `#anchor`) are
//!   inlined; a `$ref` that is already open [`MAX_REF_REPEAT`] times on the current path
//!   (recursion) becomes a bare `{"type": "object"}` keeping the description;
//! - `type: [T, "null"]` and `anyOf: [X, {"type": "null"}]` become `T`/`X` with
//!   `nullable: true`; several non-null types become an `anyOf` of typed schemas;
//! - `oneOf` is read as `anyOf`, `allOf` is merged, `const` becomes a one-value `enum`;
//! - property names outside `[A-Za-z0-9_]{1,64}` are renamed; [`Normalized::restore_args`]
//!   maps the model's arguments back to the server's names;
//! - the top level is always `{"type": "object", ...}`.
//!
//! [`to_openapi`] converts a normalized schema to the OpenAPI 3.0 subset used by the
//! `parameters` field. What the real API would reject is checked by
//! `switchboard_model`'s declaration rules (`validate_for_gemini`, …), the one copy the
//! fake Gemini server and the schema corpus test use too.
//!
//! The argument check before a call ([`crate::args`]) always uses the server's original
//! schema, so lossy steps here never let a bad argument through. Written by hand: no
//! crate maps JSON Schema to Gemini's subset.
//!
//! Where each part lives:
//!
//! - this file: the public API ([`normalize`], [`Normalized`], the limits);
//! - `node.rs`: the walker (`Ctx`), one step per keyword group (types, strings, numbers,
//!   arrays, objects and their properties) and the object-at-the-top rule;
//! - `refs.rs`: local `$ref` resolution (JSON pointers, `#anchor`s) and the recursion cut;
//! - `merge.rs`: combining schemas: `allOf` merging, `anyOf`/`oneOf` unions with their
//!   parent's constraints, union flattening, string-enum collapsing;
//! - `names.rs`: property names Gemini accepts, and [`Renames`] to map arguments back;
//! - `keywords.rs`: which type a keyword or value belongs to, and copying kept keywords;
//! - `text.rs`: what is folded into descriptions and how notes name a place;
//! - `openapi.rs`: [`to_openapi`].

mod keywords;
mod merge;
mod names;
mod node;
mod openapi;
mod refs;
mod text;

use serde_json::{Map, Value};

pub use names::Renames;
use node::Ctx;
pub use openapi::to_openapi;

/// How many times the same `$ref` may be open on one path before it is cut to a bare schema.
/// `2` unrolls a recursive structure once (a tree node shows its children as nodes whose
/// own children are bare schemas).
pub const MAX_REF_REPEAT: usize = 2;

/// Nesting depth beyond which sub-schemas are cut to bare schemas.
pub const MAX_DEPTH: usize = 32;

/// Upper bound on schema nodes produced for one tool (guards against exponential
/// inlining of shared `$ref`s); nodes past it are cut to bare schemas.
pub const MAX_NODES: usize = 4_000;

/// The result of [`normalize`].
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The schema to send as `parametersJsonSchema`; always `{"type":"object", ...}`.
    pub schema: Value,
    /// Property renames (model-facing name → the server's name), nested.
    pub renames: Renames,
    /// What was changed in a lossy way (sorted, deduplicated), for logs and debugging.
    pub notes: Vec<String>,
}

/// A JSON Schema object, as read and as written.
type Obj = Map<String, Value>;

/// Normalizes a tool's `inputSchema` to what Gemini accepts as `parametersJsonSchema`
/// (see the module docs for the rules). Never fails: anything unusable becomes a looser
/// schema, and the change is listed in [`Normalized::notes`].
pub fn normalize(schema: &Value) -> Normalized {
    let mut cx = Ctx::new(schema);
    let (mut out, renames) = cx.node(schema, 0, "");
    out = cx.force_object_root(out);
    Normalized {
        schema: Value::Object(out),
        renames,
        notes: cx.notes.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests;
