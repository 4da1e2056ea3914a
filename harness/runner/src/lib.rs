//! Runs scenarios against any host and reports verdicts.
