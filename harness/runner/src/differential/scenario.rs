//! Fuzzing entry point for the scenario parser: whatever a scenario file holds, parsing and validation answer without panicking, errors name the file, and a parsed scenario survives a round trip.
//!
//! Kept in the library, like the model's and the protocol's targets, so the
//! cargo-fuzz target `scenario_parser` is one line and the same body runs on stable over the
//! whole catalogue (`tests/scenario_format`).

use std::path::Path;

use crate::scenario::Scenario;

/// The file name errors must carry: a maintainer reading one must know which file it is about.
const FILE: &str = "fuzz/input-scenario.json";

/// Fuzz target body.
///
/// For any bytes: parsing and validating never panic; a refusal names the
/// file and a JSON path. For a scenario that parses: writing it back and
/// parsing that gives the same scenario, and validation gives the same
/// verdict for both (so nothing a file can say is lost or invented by the
/// format's own serialisation, which `fuzz` relies on to write findings).
pub fn fuzz_scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Path::new(FILE);
    let scenario = match Scenario::parse(text, file) {
        Ok(scenario) => scenario,
        Err(error) => {
            let message = error.to_string();
            assert!(
                message.starts_with(FILE) && message.contains(": at `"),
                "a parse error must name the file and the JSON path: {message}"
            );
            return;
        }
    };
    let validation = scenario.validate(file).map_err(|e| e.to_string());
    if let Err(message) = &validation {
        assert!(
            message.starts_with(FILE),
            "a validation error must name the file: {message}"
        );
    }
    let written = serde_json::to_string_pretty(&scenario).expect("a parsed scenario serialises");
    let reparsed = Scenario::parse(&written, file)
        .unwrap_or_else(|e| panic!("the scenario written back does not parse: {e}\n{written}"));
    assert_eq!(
        reparsed, scenario,
        "a scenario changed in a round trip through its own serialisation:\n{written}"
    );
    assert_eq!(
        reparsed.validate(file).map_err(|e| e.to_string()),
        validation,
        "validation changed in a round trip:\n{written}"
    );
}
