//! Unit tests for result mapping.
