//! The reference state machine: what a correct host decides, given every external input.
