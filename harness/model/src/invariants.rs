//! Invariant checkers: one per catalogue id, the only place each invariant is defined.
