//! The observers: what the harness sees with its own eyes.
