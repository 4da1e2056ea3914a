//! The names serde gives an enum's variants, read from serde itself, so a list of wire names is never written out a second time beside the enum.
//!
//! serde's derived `Deserialize` hands its list of variant names to the
//! error type's `unknown_variant` when it meets a name it does not know.
//! [`variant_names`] feeds it a name no enum has, through an error type
//! that keeps that list.

use std::fmt;

use serde::de::value::{MapDeserializer, StrDeserializer};
use serde::de::{DeserializeOwned, Error};

/// The error of a probe: the variant names serde listed, if it listed any.
#[derive(Debug)]
struct Listed(Option<&'static [&'static str]>);

impl fmt::Display for Listed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("variant-name probe")
    }
}

impl std::error::Error for Listed {}

impl Error for Listed {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Listed(None)
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        Listed(Some(expected))
    }
}

/// A name no variant has: the control character cannot appear in a wire name.
const NO_SUCH_VARIANT: &str = "\u{0}";

/// The wire names of `T`'s variants, in declaration order, as serde reads
/// them: of an externally tagged enum when `tag` is `None` (a unit variant is
/// a string), of an adjacently or internally tagged one by its `tag` field.
///
/// # Panics
/// When `T` is not such an enum (a programming error, caught by the tests
/// of each caller).
pub fn variant_names<T: DeserializeOwned>(tag: Option<&'static str>) -> &'static [&'static str] {
    let probe = match tag {
        None => T::deserialize(StrDeserializer::<Listed>::new(NO_SUCH_VARIANT)),
        Some(tag) => T::deserialize(MapDeserializer::<_, Listed>::new(std::iter::once((
            tag,
            NO_SUCH_VARIANT,
        )))),
    };
    match probe {
        Err(Listed(Some(names))) => names,
        _ => panic!(
            "{} did not list its variant names to serde's probe (tag {tag:?})",
            std::any::type_name::<T>()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Action, DenyReason};

    #[test]
    fn serde_lists_the_variant_names_it_reads() {
        let reasons = variant_names::<DenyReason>(None);
        assert_eq!(reasons.len(), DenyReason::ALL.len());
        for (reason, name) in DenyReason::ALL.iter().zip(reasons) {
            let read: DenyReason = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(&read, reason, "{name}");
        }
        let methods = variant_names::<Action>(Some("method"));
        assert!(methods.contains(&"instance/delegate"), "{methods:?}");
        assert!(methods.contains(&"state/observe"), "{methods:?}");
        assert!(!methods.contains(&"initialize"), "{methods:?}");
    }

    #[test]
    #[should_panic(expected = "did not list its variant names")]
    fn a_type_that_is_not_an_enum_is_a_programming_error() {
        variant_names::<String>(Some("method"));
    }
}
