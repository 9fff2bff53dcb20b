//! Parsing method arguments: typed structs from the `arguments` object, with
//! serde errors turned into `invalidArguments`, and the `accountId` check.

use std::sync::LazyLock;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::MethodError;
use super::ids;
use crate::store::Account;

/// Deserializes a method's arguments; a type or shape error is `invalidArguments`.
pub fn parse<T: DeserializeOwned>(arguments: Map<String, Value>) -> Result<T, MethodError> {
    serde_json::from_value(Value::Object(arguments))
        .map_err(|error| MethodError::InvalidArguments(error.to_string()))
}

/// A method's arguments that name the account the call acts on (all but
/// Core/echo's).
pub trait AccountArguments: DeserializeOwned {
    /// The `accountId` argument.
    fn account_id(&self) -> &str;
}

/// Implements [`AccountArguments`] for a request type whose `accountId` is
/// its field `account_id` (or the field path given after the type).
macro_rules! account_arguments {
    ($request:ty) => {
        $crate::jmap::args::account_arguments!($request, account_id);
    };
    ($request:ty, $($field:ident).+) => {
        impl $crate::jmap::args::AccountArguments for $request {
            fn account_id(&self) -> &str {
                &self.$($field).+
            }
        }
    };
}
pub(crate) use account_arguments;

/// A method's arguments parsed ([`parse`]), then their `accountId` checked
/// ([`check_account`]): malformed arguments are `invalidArguments` whatever
/// account they name.
pub fn parse_for<T: AccountArguments>(
    account: &Account,
    arguments: Map<String, Value>,
) -> Result<T, MethodError> {
    let request: T = parse(arguments)?;
    check_account(account, request.account_id())?;
    Ok(request)
}

/// Checks that `accountId` names the authenticated account: `accountNotFound`
/// otherwise (another user's account is not visible to this one).
pub fn check_account(account: &Account, account_id: &str) -> Result<(), MethodError> {
    if ids::parse_account_id(account_id) == Some(account.id) {
        Ok(())
    } else {
        Err(MethodError::AccountNotFound)
    }
}

/// `ifInState` (RFC 8620 §5.3): `stateMismatch` when it is given and is not
/// the type's current state.
pub fn check_if_in_state(if_in_state: Option<&str>, current: i64) -> Result<(), MethodError> {
    match if_in_state {
        Some(state) if state != current.to_string() => Err(MethodError::StateMismatch),
        _ => Ok(()),
    }
}

/// `requestTooLarge` when a /set or /import names more objects than `limit`
/// (`maxObjectsInSet`, RFC 8620 §2).
pub fn check_set_size(count: usize, limit: u64) -> Result<(), MethodError> {
    if count as u64 > limit {
        Err(MethodError::RequestTooLarge(limit as usize))
    } else {
        Ok(())
    }
}

/// The format of [`utc_date`], parsed once: parsing it again for every
/// date was 1.5 % of a list view's CPU (ADR 0003).
static UTC_DATE_ITEMS: LazyLock<Vec<chrono::format::Item<'static>>> = LazyLock::new(|| {
    chrono::format::StrftimeItems::new("%Y-%m-%dT%H:%M:%SZ")
        .parse_to_owned()
        .unwrap_or_default()
});

/// A UTCDate (RFC 8620 §1.4) of Unix seconds: `2024-01-02T03:04:05Z`.
pub fn utc_date(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .format_with_items(UTC_DATE_ITEMS.iter())
        .to_string()
}

/// The Unix seconds of a UTCDate or other RFC 3339 date-time; `None` for
/// anything else.
pub fn parse_utc_date(value: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(value)
        .ok()
        .map(|date| date.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_are_rfc8620_and_as_chrono_formats_them() {
        assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_date(1_704_164_645), "2024-01-02T03:04:05Z");
        for seconds in [
            -62_135_596_800,
            -1,
            253_402_300_799,
            253_402_300_800,
            i64::MAX,
        ] {
            let by_string = chrono::DateTime::from_timestamp(seconds, 0)
                .unwrap_or_default()
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            assert_eq!(utc_date(seconds), by_string, "{seconds}");
        }
    }
}
