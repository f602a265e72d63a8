//! Unit tests for the tool registry.
